"""Drives a measurement: calibrate the prompt length, then run levels.

- Closed loop at concurrency *c*: *c* workers each send their next request as soon as their
  last one finished, so exactly *c* requests are in flight until the last dispatch.
- Open loop at a rate: Poisson arrivals from a seeded generator; each request keeps its
  scheduled time, and waiting for a free slot is recorded as client queue time.
- Agent sessions: :mod:`bench.measure.run.agent`, on the same measuring frame (:func:`measured`).

The server's /metrics is scraped before and after each level and every second during it.
Records are appended to the level as they complete, so an interrupted run keeps what it measured.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import itertools
import random
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any

import httpx

from bench.codec import JsonObject
from bench.errors import EndpointProtocolError
from bench.measure.metrics import RequestRecord
from bench.measure.run import saturation
from bench.measure.run.prompts import Calibration, PromptFactory
from bench.measure.stream.client import ChatClient
from bench.measure.telemetry import server
from bench.measure.telemetry.server import Counters, ServerReport

CALIBRATION_WORDS = (16, 80)


@dataclass(frozen=True, slots=True)
class LevelSpec:
    """One level and the shape of its requests. How many are in flight has one name per kind of
    level: ``streams`` for a closed loop, ``max_in_flight`` for an open loop at ``rate``, and
    ``sessions_at_once`` for agent sessions; :attr:`in_flight` is whichever applies."""

    requests: int
    input_tokens: int
    output_tokens: int
    fixed_output: bool = True  # ask for exactly output_tokens (min_tokens + ignore_eos)
    temperature: float = 0.0
    seed: int = 0
    streams: int = 1  # closed loop: requests kept in flight, each sent when the last one finished
    rate: float | None = None  # open loop: Poisson arrivals, requests per second
    max_in_flight: int | None = None  # open loop: cap on requests in flight (the rest wait as client queue)
    sessions_at_once: int | None = None  # agent: sessions run at a time, each one request in flight
    cold_prefix: bool = False  # agent: a fresh salt at the head of every request (no shared prefix)
    targets: tuple[tuple[int, int], ...] = ()  # trace: (input, output) tokens of each request, by its index

    @property
    def in_flight(self) -> int:
        """The most requests this level keeps in flight (the ``concurrency`` of its result)."""
        if self.rate is not None:
            return self.max_in_flight or 1
        return self.sessions_at_once or self.streams

    @property
    def label(self) -> str:
        if self.rate is not None:
            return f"{self.rate:g} req/s"
        return f"c={self.in_flight} cold" if self.cold_prefix else f"c={self.in_flight}"


@dataclass(slots=True)
class LevelRun:
    """What one level produced: its requests and the server's view of the same interval."""

    spec: LevelSpec
    records: list[RequestRecord] = field(default_factory=list)
    started_ns: int = 0
    ended_ns: int = 0
    server: ServerReport | None = None  # set when the level's closing scrape is done
    complete: bool = False
    per_request_server: dict[int, Counters] = field(default_factory=dict)
    tool_result_tokens: list[int] = field(default_factory=list)  # agent: the size of each tool result sent
    saturated: str | None = None  # open loop: why it was stopped as over-saturated (bench.measure.run.saturation)


async def calibrate(client: ChatClient, prompts: PromptFactory) -> Calibration:
    """Measure the prompt overhead and tokens per word with two one-token requests."""
    points = []
    for offset, words in enumerate(CALIBRATION_WORDS):
        record = await client.chat(-1 - offset, prompts.messages(10_000_000 + offset, words), 1)
        if record.error is not None:
            raise EndpointProtocolError(f"prompt calibration: a one-token request failed ({record.error})")
        if record.prompt_tokens is None:
            raise EndpointProtocolError(
                "prompt calibration: the endpoint sent no usage.prompt_tokens; bench needs stream_options.include_usage"
            )
        points.append((words, record.prompt_tokens))
    return Calibration.from_probes(points[0], points[1])


def extra_body(spec: LevelSpec) -> JsonObject:
    body: JsonObject = {"temperature": spec.temperature}
    if spec.fixed_output:
        # vLLM and llama.cpp honour these; servers that do not are caught by the length check.
        body.update({"min_tokens": spec.output_tokens, "ignore_eos": True})
    return body


async def run_level(
    client: ChatClient,
    prompts: PromptFactory,
    calibration: Calibration,
    level: LevelRun,
    *,
    metrics_url: str | None,
    first_index: int = 0,
    on_done: Callable[[RequestRecord], None] | None = None,
) -> None:
    """Run one level, filling ``level`` as requests finish."""
    spec = level.spec
    words = calibration.words_for(spec.input_tokens)
    body = extra_body(spec)

    async def one(index: int, t_sched_ns: int | None = None) -> None:
        messages = prompts.messages(index, words)
        record = await client.chat(index, messages, spec.output_tokens, extra_body=body, t_sched_ns=t_sched_ns)
        level.records.append(record)
        if on_done is not None:
            on_done(record)

    async with measured(level, client.http, metrics_url, sample=True):
        if spec.rate is None:
            await _closed_loop(spec, first_index, one)
        else:
            await _open_loop(spec, first_index, one, level)


@contextlib.asynccontextmanager
async def measured(
    level: LevelRun, http: httpx.AsyncClient, metrics_url: str | None, *, sample: bool
) -> AsyncIterator[None]:
    """Time the level and read the server's /metrics before, after and (with ``sample``) every
    second during it; ``level.complete`` is set only when the body finished."""
    sampler = server.Sampler(http, metrics_url) if metrics_url and sample else None
    before = await server.scrape(http, metrics_url) if metrics_url else None
    if sampler:
        sampler.start()
    # No cyclic garbage collection while the level runs: one pauses the event loop, and so delays
    # the stamp of every event waiting to be read, by up to tens of milliseconds. Reference
    # counting still frees nearly everything; the cycles are collected when the level ends.
    collecting = gc.isenabled()
    gc.collect()
    gc.disable()
    level.started_ns = time.perf_counter_ns()
    try:
        yield
        level.complete = True
    finally:
        level.ended_ns = time.perf_counter_ns()
        if collecting:
            gc.enable()
        if sampler:
            await sampler.stop()
        after = await server.scrape(http, metrics_url) if metrics_url else None
        level.server = server.server_report(before, after, sampler.samples if sampler else [])


async def together(coroutines: list[Coroutine[Any, Any, None]]) -> None:
    """Run ``coroutines`` concurrently; when one raises, cancel the others and raise its error
    (what ``asyncio.gather`` does not do: it leaves the rest running)."""
    tasks = [asyncio.ensure_future(coroutine) for coroutine in coroutines]
    try:
        await asyncio.gather(*tasks)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


async def _closed_loop(spec: LevelSpec, first: int, one: Callable[[int], Awaitable[None]]) -> None:
    """``streams`` workers, each sending its next request when its last one finished."""
    counter = itertools.count(first)
    last = first + spec.requests

    async def worker() -> None:
        while (index := next(counter)) < last:
            await one(index)

    await together([worker() for _ in range(spec.streams)])


async def _open_loop(spec: LevelSpec, first: int, one: Callable[[int, int], Awaitable[None]], level: LevelRun) -> None:
    """Poisson arrivals at ``rate``: each request is sent at its scheduled time (or as soon as one
    of ``max_in_flight`` slots frees up; the wait is recorded as client queue time). Twice a second
    the level is tested for over-saturation; when it is, the requests not yet sent are dropped
    and those in flight finish."""
    assert spec.rate is not None
    generator = random.Random(spec.seed)
    slots = asyncio.Semaphore(spec.in_flight)
    start = time.perf_counter_ns()
    offset = 0.0
    schedule: list[int] = []
    stop = asyncio.Event()  # set when the level is found over-saturated: send nothing more

    async def scheduled(index: int, at_ns: int) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), max(0.0, (at_ns - time.perf_counter_ns()) / 1e9))
        if stop.is_set():
            return
        async with slots:
            if not stop.is_set():
                await one(index, at_ns)

    arrivals = []
    for index in range(first, first + spec.requests):
        schedule.append(start + int(offset * 1e9))
        arrivals.append(scheduled(index, schedule[-1]))
        offset += generator.expovariate(spec.rate)
    watch = asyncio.ensure_future(_watch_saturation(level, start, schedule, stop))
    try:
        await together(arrivals)
    finally:
        watch.cancel()
        await asyncio.gather(watch, return_exceptions=True)


async def _watch_saturation(level: LevelRun, start: int, schedule: list[int], stop: asyncio.Event) -> None:
    """Mark the level over-saturated once :func:`saturation.watch` finds it so, and stop the sends."""
    level.saturated = await saturation.watch(level.records, start, schedule)
    stop.set()
