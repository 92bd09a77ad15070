"""The ``trace`` workload: a Mooncake-style request trace (:mod:`bench.measure.run.trace`)
replayed on its timestamps.

Request *i* of the trace is sent ``timestamp / --speedup`` after the level began, with its own
prompt length, output length (with fixed output, asked for exactly) and prompt built from its
hash ids, so requests that share leading hash ids share that prefix of their prompts, block by
block. At most ``--max-in-flight`` are in flight; a request that waits for a slot keeps its
scheduled time, and the wait is recorded as client queue time, as in the open loop of ``rate``.
The whole trace is one level (``--requests`` does not apply): its label is the trace's mean
arrival rate after the speed-up, and its input and output targets are the trace's longest.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from bench.errors import ConfigError
from bench.measure.run.loops import LevelRun, LevelSpec, extra_body, measured, together
from bench.measure.run.trace import Trace, TracePrompts, TraceRequest, TraceSource, read_trace
from bench.measure.run.workloads import Driver, Option, RunOptions, Workload, register


def trace_of(options: RunOptions) -> Trace:
    """The trace ``--trace`` names, read and checked (a ConfigError naming the flag and line)."""
    name = options.text("trace")
    if not name:
        raise ConfigError("--trace: the trace workload needs the JSONL file to replay")
    return read_trace(Path(name), options.integer("trace_block_size"), options.output_tokens)


def trace_source(options: RunOptions) -> TraceSource:
    """The trace a run of the trace workload replayed, for its result file."""
    return trace_of(options).source(speedup_of(options), options.integer("trace_block_size"))


def speedup_of(options: RunOptions) -> float:
    (speedup,) = options.floats("speedup")
    if speedup <= 0:
        raise ConfigError(f"--speedup: must be above 0, got {speedup:g}")
    return speedup


def offset_ns(request: TraceRequest, speedup: float) -> int:
    """When ``request`` is sent, in nanoseconds after the level began."""
    return round(request.timestamp_ms * 1_000_000 / speedup)


@register
class TraceWorkload(Workload):
    name = "trace"
    summary = "a Mooncake-style JSONL trace replayed on its timestamps"
    options = (
        Option("trace", "--trace", str, "", "trace: JSONL file (timestamp, input_length, output_length, hash_ids)"),
        Option("speedup", "--speedup", float, 1.0, "trace: its timestamps are divided by this"),
        Option("trace_block_size", "--trace-block-size", int, 512, "trace: prompt tokens each hash id stands for"),
        Option("max_in_flight", "--max-in-flight", int, 256, "cap on requests in flight"),
    )

    def check(self, options: RunOptions) -> None:
        speedup_of(options)
        trace_of(options)

    def levels(self, options: RunOptions) -> list[LevelSpec]:
        speedup, trace = speedup_of(options), trace_of(options)
        requests = trace.requests
        cap = options.integer("max_in_flight")
        if cap < 1:
            raise ConfigError(f"--max-in-flight: must be at least 1, got {cap}")
        span_s = (offset_ns(requests[-1], speedup) - offset_ns(requests[0], speedup)) / 1e9
        rate = (len(requests) - 1) / span_s if span_s > 0 else float(len(requests))
        return [
            LevelSpec(
                requests=len(requests),
                input_tokens=max(r.input_length for r in requests),
                output_tokens=max(r.output_length for r in requests),
                fixed_output=options.fixed_output,
                temperature=options.temperature,
                seed=options.seed,
                rate=round(rate, 6),
                max_in_flight=cap,
                targets=tuple((r.input_length, r.output_length) for r in requests),
            )
        ]

    async def drive(self, level: LevelRun, driver: Driver) -> None:
        options = driver.options
        trace, speedup = trace_of(options), speedup_of(options)
        builder = TracePrompts(driver.prompts, driver.calibration, options.integer("trace_block_size"))
        for request in trace.requests:
            builder.check(request)
        await replay(level, driver, builder, trace, speedup)


async def replay(level: LevelRun, driver: Driver, builder: TracePrompts, trace: Trace, speedup: float) -> None:
    """Send every request of ``trace`` at its time, filling ``level`` as they finish; request
    *i* (from 0, in file order) is numbered ``i``, the index of its lengths in ``level.spec.targets``."""
    spec, client = level.spec, driver.client
    slots = asyncio.Semaphore(spec.in_flight)
    messages = [builder.messages(request, index) for index, request in enumerate(trace.requests)]

    async def one(index: int, request: TraceRequest, start: int) -> None:
        at_ns = start + offset_ns(request, speedup)
        await asyncio.sleep(max(0.0, (at_ns - time.perf_counter_ns()) / 1e9))
        body = extra_body(spec)
        if spec.fixed_output:
            body["min_tokens"] = request.output_length
        async with slots:
            record = await client.chat(index, messages[index], request.output_length, extra_body=body, t_sched_ns=at_ns)
        level.records.append(record)
        if driver.on_done is not None:
            driver.on_done(record)

    async with measured(level, client.http, driver.metrics_url, sample=True):
        start = level.started_ns
        await together([one(index, request, start) for index, request in enumerate(trace.requests)])
