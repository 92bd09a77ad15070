"""``bench capacity``: how many users at once the tag serves at a reading speed, and how long a
prompt one user may send and keep it. Two searches (:mod:`bench.measure.capacity.search`) over
real measured levels (:func:`bench.measure.run.benchmark.measure_level`, the closed loop of
``bench run sweep``), judged by :class:`~bench.measure.capacity.result.Criteria`, filed as a
capacity file (:mod:`bench.measure.capacity.result`). Plain functions; the CLI parses its flags
into :class:`CapacityOptions`.

- max users: closed-loop levels of 1, 2, 4, ... streams up to ``--max-concurrency``, then
  bisection; a level passes when its slow streams (p10 of per-request decode tok/s) decode at
  ``--min-decode`` or faster, its TTFT p95 is at most ``--max-ttft``, and it is trusted (no
  request failed, no other client, lengths as asked).
- longest context: one stream, prompts from ``--input-tokens`` doubling up to the served context
  (less the output), then bisection to within 1/8; a level passes on decode speed and trust
  (TTFT grows with the prompt by nature and is shown, not judged).

A search that stops early (an error, Ctrl-C) writes nothing: half an answer is no answer.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path

from bench.errors import ConfigError
from bench.measure import metrics
from bench.measure.capacity.result import (
    CAPACITY_FILE,
    Answer,
    Axis,
    CapacityResult,
    Criteria,
    Probe,
    Shape,
    capacity_dir,
)
from bench.measure.capacity.search import BoundarySearch
from bench.measure.metrics import RequestRecord
from bench.measure.run import levels
from bench.measure.run.benchmark import measure_level, resolve_model
from bench.measure.run.loops import LevelRun, LevelSpec, calibrate
from bench.measure.run.options import RunOptions
from bench.measure.run.prompts import PromptFactory, new_salt
from bench.measure.run.results import LevelResult
from bench.measure.run.workloads import Driver, spec
from bench.measure.stream.client import ChatClient, Endpoint
from bench.measure.target import Target

DECODE_PERCENTILE = 0.10  # the slow streams: 9 in 10 decode at least this fast
TTFT_PERCENTILE = 0.95
CONTEXT_STEP = 64  # the context bisection stops 64 tokens or 1/8 of the answer apart, whichever is more
CONTEXT_PRECISION = 0.125


@dataclass(frozen=True, slots=True)
class CapacityOptions:
    """Everything a capacity search needs besides the target (the CLI's flags)."""

    results_dir: Path
    min_decode_tps: float = 20.0
    max_ttft_s: float = 2.0
    max_concurrency: int = 64
    input_tokens: int = 512
    output_tokens: int = 128
    requests: int = 8
    context: bool = True
    max_context: int | None = None
    context_requests: int = 4
    read_timeout_s: float = 300.0
    request_timeout_s: float = 600.0

    def check(self) -> None:
        """Refuse what no search could run with; the ConfigError names the flag."""
        above_zero = {"--min-decode": self.min_decode_tps, "--max-ttft": self.max_ttft_s}
        above_zero |= {"--read-timeout": self.read_timeout_s, "--request-timeout": self.request_timeout_s}
        for flag, value in above_zero.items():
            if not value > 0:
                raise ConfigError(f"{flag}: must be above 0, got {value:g}")
        at_least = {"--max-concurrency": (self.max_concurrency, 1), "--input-tokens": (self.input_tokens, 1)}
        at_least |= {"--output-tokens": (self.output_tokens, 2), "--requests": (self.requests, 2)}
        at_least |= {"--context-requests": (self.context_requests, 2)}
        if self.max_context is not None:
            at_least["--max-context"] = (self.max_context, self.input_tokens)
        for flag, (value, lowest) in at_least.items():
            if value < lowest:
                raise ConfigError(f"{flag}: must be at least {lowest}, got {value}")

    @property
    def criteria(self) -> Criteria:
        return Criteria(self.min_decode_tps, DECODE_PERCENTILE, self.max_ttft_s * 1000, TTFT_PERCENTILE)

    @property
    def shape(self) -> Shape:
        return Shape(self.input_tokens, self.output_tokens, self.requests, self.context_requests)


@dataclass(slots=True)
class Hooks:
    """Callbacks the CLI shows progress with; the defaults do nothing."""

    level_started: Callable[[Axis, LevelSpec], None] = lambda axis, spec: None
    request_done: Callable[[RequestRecord], None] = lambda record: None
    probed: Callable[[Probe], None] = lambda probe: None


def judge(axis: Axis, value: int, level: LevelRun, summary: LevelResult, criteria: Criteria) -> Probe:
    """Whether one measured level passes the criteria, and why not."""
    speeds = [m.decode_tps for m in levels.measured_in(level) if m.decode_tps is not None]
    low = metrics.percentile(speeds, criteria.decode_percentile) if speeds else None
    ttft = summary.latency.ttft_ms
    high = ttft.p95 if ttft is not None else None
    because = list(summary.untrusted_because)
    if low is None:
        because.append("no request was measured")
    elif low < criteria.min_decode_tps:
        because.append(f"slow streams decode at {low:.1f} tok/s (p10), below {criteria.min_decode_tps:g}")
    if axis == "concurrency" and high is not None and high > criteria.max_ttft_ms:
        because.append(f"TTFT p95 {high:,.0f} ms, above {criteria.max_ttft_ms:,.0f}")
    return Probe(axis, value, low, high, passed=not because, failed_because=because, level=summary)


@dataclass(slots=True)
class _Searcher:
    """Measures the levels the searches ask for, one after another, each with fresh prompts."""

    driver: Driver
    criteria: Criteria
    hooks: Hooks
    probes: list[Probe] = field(default_factory=list)

    async def search(self, axis: Axis, search: BoundarySearch, shape: Callable[[int], LevelSpec]) -> Answer:
        while (value := search.next_value()) is not None:
            level = LevelRun(shape(value))
            self.hooks.level_started(axis, level.spec)
            summary = await measure_level(level, self.driver)
            # The next level's request numbers follow this level's, so its prompts are new.
            self.driver = replace(self.driver, first_index=self.driver.first_index + level.spec.requests)
            probe = judge(axis, value, level, summary, self.criteria)
            self.probes.append(probe)
            self.hooks.probed(probe)
            search.record(value, probe.passed)
        found = search.answer
        return Answer(found.outcome, found.value, found.first_failed, search.lowest, search.cap)


def context_cap(options: CapacityOptions, served: int | None) -> int:
    """The longest prompt the context search may try: the served context less the output, or
    ``--max-context`` when lower (or when the server does not say its context)."""
    fits = None if served is None else served - options.output_tokens
    caps = [cap for cap in (fits, options.max_context) if cap is not None]
    if not caps:
        raise ConfigError("--max-context: the server does not say its context length; give one, or --no-context")
    cap = min(caps)
    if cap < options.input_tokens:
        raise ConfigError(
            f"--input-tokens: the context search starts there ({options.input_tokens}), above the longest "
            f"prompt the server takes with --output-tokens {options.output_tokens} ({cap})"
        )
    return cap


async def execute(target: Target, options: CapacityOptions, hooks: Hooks | None = None) -> tuple[CapacityResult, Path]:
    """Run both searches and write the capacity file; returns the result and its path."""
    options.check()
    hooks = hooks or Hooks()
    started = datetime.now(UTC)
    timeouts = (options.read_timeout_s, options.request_timeout_s)
    async with ChatClient(Endpoint(target.base_url, target.model or "", target.api_key, *timeouts)) as probe:
        model, served = await resolve_model(probe, target)
    cap = context_cap(options, served) if options.context else None
    run_options = RunOptions(
        "sweep", options.requests, options.input_tokens, options.output_tokens, options.results_dir,
        read_timeout_s=options.read_timeout_s, request_timeout_s=options.request_timeout_s, gpu_telemetry=False,
    )  # fmt: skip
    endpoint = Endpoint(target.base_url, model, target.api_key, *timeouts)
    prompts = PromptFactory(new_salt(), run_options.seed)
    async with ChatClient(endpoint, max_connections=options.max_concurrency + 4) as client:
        calibration = await calibrate(client, prompts)
        calibration.words_for(options.input_tokens)  # a prompt below the fixed overhead: ConfigError now
        driver = Driver(client, prompts, calibration, run_options, target.metrics_url, 0, hooks.request_done)
        searcher = _Searcher(driver, options.criteria, hooks)
        users = await searcher.search(
            "concurrency",
            BoundarySearch(1, options.max_concurrency),
            lambda c: spec(run_options, options.input_tokens, streams=c, requests=max(options.requests, 4 * c)),
        )
        context = None
        if cap is not None:
            context = await searcher.search(
                "context",
                BoundarySearch(options.input_tokens, cap, step=CONTEXT_STEP, precision=CONTEXT_PRECISION),
                lambda tokens: spec(run_options, tokens, streams=1, requests=options.context_requests),
            )
    result = CapacityResult(
        schema_version=CAPACITY_FILE.version,
        tag=target.tag,
        started_at=started.isoformat(),
        base_url=target.base_url,
        model=model,
        engine=target.engine,
        served_context=served,
        criteria=options.criteria,
        shape=options.shape,
        probes=searcher.probes,
        max_users=users,
        longest_context=context,
    )
    path = capacity_dir(options.results_dir, target.tag) / f"{started:%Y%m%dT%H%M%S.%fZ}.json"
    return result, CAPACITY_FILE.write(path, result)


def run(target: Target, options: CapacityOptions, hooks: Hooks | None = None) -> tuple[CapacityResult, Path]:
    """Synchronous wrapper of :func:`execute`."""
    return asyncio.run(execute(target, options, hooks))
