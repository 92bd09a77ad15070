"""``bench capacity``: how many users at once the tag serves at a reading speed, and how long a
prompt one user may send and keep it. Two searches (:mod:`bench.measure.capacity.search`) over
real measured levels (:func:`bench.measure.run.benchmark.measure_level`, the closed loop of
``bench run sweep``), judged by :class:`~bench.measure.capacity.result.Criteria`, filed as a
capacity file (:mod:`bench.measure.capacity.result`). Plain functions; the CLI parses its flags
into :class:`CapacityOptions`.

- max users: closed-loop levels of 1, 2, 4, ... streams up to ``--max-concurrency``, then
  bisection; a level passes when the fraction of its requests that decode at ``--min-decode``
  or faster with TTFT at most ``--max-ttft`` is, with ``--confidence``, at least
  ``--target-attainment`` (:mod:`bench.measure.capacity.judge`), and it is trusted.
- longest context: one stream, prompts from ``--input-tokens`` doubling up to the served context
  (less the output), then bisection to within 1/8; judged on decode speed and trust (TTFT grows
  with the prompt by nature and is shown, not judged).

A level whose interval straddles the target gets another batch of requests (fresh prompts) until
it clears the target or the next batch would pass ``--max-requests-per-level``; it is then
inconclusive. Each search spends at most ``--budget`` requests: when the next batch would pass
it, the search stops and its answer is "at least" the highest level that passed.

A search that stops early (an error, Ctrl-C) writes nothing: half an answer is no answer.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path

from bench.errors import ConfigError
from bench.measure.capacity.judge import judge
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
from bench.measure.run.benchmark import measure_level, resolve_model
from bench.measure.run.loops import LevelRun, LevelSpec, calibrate
from bench.measure.run.options import RunOptions
from bench.measure.run.prompts import PromptFactory, new_salt
from bench.measure.run.results import LevelResult
from bench.measure.run.workloads import Driver, spec
from bench.measure.stream.client import ChatClient, Endpoint
from bench.measure.target import Target

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
    target_attainment: float = 0.9
    confidence: float = 0.95
    max_requests_per_level: int = 256
    budget: int = 3000
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
        for flag, value in {"--target-attainment": self.target_attainment, "--confidence": self.confidence}.items():
            if not 0 < value < 1:
                raise ConfigError(f"{flag}: must be between 0 and 1 (not either), got {value:g}")
        at_least = {"--max-concurrency": (self.max_concurrency, 1), "--input-tokens": (self.input_tokens, 1)}
        at_least |= {"--output-tokens": (self.output_tokens, 2), "--requests": (self.requests, 2)}
        at_least |= {"--context-requests": (self.context_requests, 2)}
        batch = max(self.requests, self.context_requests)
        at_least |= {"--max-requests-per-level": (self.max_requests_per_level, batch), "--budget": (self.budget, batch)}
        if self.max_context is not None:
            at_least["--max-context"] = (self.max_context, self.input_tokens)
        for flag, (value, lowest) in at_least.items():
            if value < lowest:
                raise ConfigError(f"{flag}: must be at least {lowest}, got {value}")

    @property
    def criteria(self) -> Criteria:
        return Criteria(self.min_decode_tps, self.max_ttft_s * 1000, self.target_attainment, self.confidence)

    @property
    def shape(self) -> Shape:
        limits = (self.max_requests_per_level, self.budget)
        return Shape(self.input_tokens, self.output_tokens, self.requests, self.context_requests, *limits)


@dataclass(slots=True)
class Hooks:
    """Callbacks the CLI shows progress with; the defaults do nothing. ``probed`` comes after each
    batch, with the level judged over its batches so far and whether that is its last batch."""

    level_started: Callable[[Axis, LevelSpec], None] = lambda axis, spec: None
    request_done: Callable[[RequestRecord], None] = lambda record: None
    probed: Callable[[Probe, bool], None] = lambda probe, last: None


@dataclass(slots=True)
class _Searcher:
    """Measures the levels the searches ask for, one after another, each batch with fresh prompts,
    within the requests each level and each search may send."""

    driver: Driver
    options: CapacityOptions
    hooks: Hooks
    probes: list[Probe] = field(default_factory=list)

    async def _batch(self, axis: Axis, spec: LevelSpec) -> tuple[LevelRun, LevelResult]:
        level = LevelRun(spec)
        self.hooks.level_started(axis, level.spec)
        summary = await measure_level(level, self.driver)
        # The next batch's request numbers follow this one's, so its prompts are new.
        self.driver = replace(self.driver, first_index=self.driver.first_index + spec.requests)
        return level, summary

    async def _level(self, axis: Axis, value: int, spec: LevelSpec, spent: int) -> Probe:
        """Batches of ``value`` until its verdict is settled or no further batch may be sent."""
        options, runs = self.options, []
        while True:
            runs.append(await self._batch(axis, spec))
            probe = judge(axis, value, runs, options.criteria)
            sent, spent = probe.requests_sent, spent + spec.requests
            stop = ""
            if sent + spec.requests > options.max_requests_per_level:
                stop = f"--max-requests-per-level {options.max_requests_per_level}"
            elif spent + spec.requests > options.budget:
                stop = f"--budget {options.budget}"
            if probe.verdict != "inconclusive" or stop:
                if probe.verdict == "inconclusive":
                    probe = replace(probe, because=[f"no room for another batch of {spec.requests} under {stop}"])
                self.hooks.probed(probe, True)
                return probe
            self.hooks.probed(probe, False)

    async def search(self, axis: Axis, search: BoundarySearch, shape: Callable[[int], LevelSpec]) -> Answer:
        spent = 0
        while (value := search.next_value()) is not None:
            spec = shape(value)
            if spent + spec.requests > self.options.budget:
                search.run_out(value)
                break
            probe = await self._level(axis, value, spec, spent)
            spent += probe.requests_sent
            self.probes.append(probe)
            search.record(value, probe.verdict)
        found = search.answer
        return Answer(found.outcome, found.value, found.first_failed, found.undecided, search.lowest, search.cap, spent)


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
        searcher = _Searcher(driver, options, hooks)
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
