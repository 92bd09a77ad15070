"""``bench run``: resolve the target, calibrate prompt lengths, run the workload's levels, and
write one result file. Plain functions; the CLI parses flags into :class:`RunOptions`.

Workloads: see :mod:`bench.measure.run.workloads`. A run that stops early (Ctrl-C, the server lost, a wrong key
after calibration) keeps what was measured: the file is written with ``"partial": true`` and
``stopped_because``, and the error that stopped it is raised as it was. A run in which no request
succeeded writes nothing.
"""

from __future__ import annotations

import asyncio
import platform
import secrets
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path

from bench import __version__, signals
from bench.errors import BenchError, ConfigError, EndpointError, EndpointModelError
from bench.measure import metrics
from bench.measure.metrics import RequestRecord
from bench.measure.run import levels as summaries
from bench.measure.run import results
from bench.measure.run.loops import LevelRun, LevelSpec, calibrate
from bench.measure.run.options import DEFAULT_CONTEXTS, WORKLOADS, RunOptions
from bench.measure.run.prompts import Calibration, PromptFactory, new_salt
from bench.measure.run.results import Environment, LevelResult, Prompts, RunResult
from bench.measure.run.trace_replay import trace_source
from bench.measure.run.workloads import Driver
from bench.measure.stream.client import ChatClient, Endpoint, ServedModel
from bench.measure.target import Target
from bench.measure.telemetry import ollama, server
from bench.measure.telemetry.gpu import GpuAbsent, GpuReport, GpuSampler
from bench.measure.telemetry.ollama import OllamaCrossCheck
from bench.rig import DEPLOYMENT_FILE

__all__ = [
    "DEFAULT_CONTEXTS",
    "WORKLOADS",
    "Progress",
    "RunOptions",
    "execute",
    "measure_level",
    "resolve_model",
    "run",
]


@dataclass(slots=True)
class Progress:
    """Callbacks the CLI uses to show progress; the defaults do nothing."""

    level_started: Callable[[LevelSpec], None] = lambda spec: None
    request_done: Callable[[RequestRecord], None] = lambda record: None
    written: Path | None = None  # set once the result file exists, also when the run stopped early
    result: RunResult | None = None  # the result written there


@dataclass(slots=True)
class _Run:
    """What a run has learnt so far; :meth:`result` makes the result file's content of it."""

    target: Target
    options: RunOptions
    run_id: str
    started: datetime
    environment: Environment
    calibration: Calibration | None = None
    prompts: Prompts | None = None
    levels: list[LevelRun] = field(default_factory=list)
    skipped_levels: list[str] | None = None
    stopped_because: str | None = None
    ollama_native: OllamaCrossCheck | None = None
    partial: bool = True

    def summaries(self) -> list[LevelResult]:
        """The levels that sent requests, summarised."""
        return [summaries.level_summary(level) for level in self.levels if level.records]

    def result(self, measured: list[LevelResult], gpu: GpuReport | GpuAbsent | None) -> RunResult:
        environment = self.environment
        if environment.engine == "unknown":
            environment = replace(environment, engine=_engine_from_metrics(measured) or "unknown")
        return RunResult(
            schema_version=results.RESULT_FILE.version,
            run_id=self.run_id,
            tag=self.target.tag,
            workload=self.options.workload,
            started_at=self.started.isoformat(),
            partial=self.partial,
            options=self.options,
            environment=environment,
            calibration=self.calibration,
            prompts=self.prompts,
            levels=measured,
            gpu=gpu,
            requests_events_gzip_b64=results.encode_events([r for level in self.levels for r in level.records]),
            trusted=not self.partial and all(not level.untrusted_because for level in measured),
            skipped_levels=self.skipped_levels,
            stopped_because=self.stopped_because,
            ollama_native=self.ollama_native,
            trace=trace_source(self.options) if self.options.workload == "trace" else None,
        )


def _environment(target: Target) -> Environment:
    return Environment(
        bench_version=__version__,
        python=platform.python_version(),
        client_host=platform.node(),
        base_url=target.base_url,
        model=target.model,
        engine=target.engine,
        sources=dict(target.sources),
        deployment=DEPLOYMENT_FILE.to_document(target.deployment) if target.deployment else {},
        max_model_len=None,
    )


async def resolve_model(client: ChatClient, target: Target) -> tuple[str, int | None]:
    """The model to ask for, and the longest context the server serves it with (None if unsaid)."""
    return pick_model(await client.model_list(), target)


def pick_model(listing: list[ServedModel], target: Target) -> tuple[str, int | None]:
    """The model of ``listing`` (/v1/models) to ask for, and its served context (None if unsaid):
    ``target.model``, or the only one served."""
    model = _pick_model([entry.id for entry in listing], target)
    return model, next(entry.max_model_len for entry in listing if entry.id == model)


def _pick_model(served: list[str], target: Target) -> str:
    if target.model is None:
        if len(served) != 1:
            raise ConfigError(f"--model: the endpoint serves {served}; name one")
        return served[0]
    if target.model not in served:
        raise EndpointModelError(
            f"{target.base_url} does not serve model {target.model!r} (--model); it serves {served}"
        )
    return target.model


async def execute(target: Target, options: RunOptions, progress: Progress | None = None) -> tuple[RunResult, Path]:
    """Run the benchmark and write its result file; returns the result and its path."""
    progress = progress or Progress()
    specs = options.levels()
    started = datetime.now(UTC)
    run_id = f"{started:%Y%m%dT%H%M%SZ}-{options.workload}-{secrets.token_hex(3)}"
    path = options.results_dir / target.tag / f"{run_id}.json"
    state = _Run(target, options, run_id, started, _environment(target))
    async with ChatClient(_endpoint(target, target.model or "", options), max_connections=4) as probe:
        model, max_len = await resolve_model(probe, target)
    endpoint = _endpoint(target, model, options)
    state.environment = replace(state.environment, model=model, max_model_len=max_len)
    if max_len is not None:
        fits = [spec for spec in specs if spec.input_tokens + spec.output_tokens <= max_len]
        state.skipped_levels = [f"{s.label}, {s.input_tokens} prompt tokens" for s in specs if s not in fits]
        if not fits:
            raise ConfigError(
                f"--input-tokens/--context/--trace: no level fits the server's context of {max_len} tokens"
            )
        specs = fits
    connections = max(spec.in_flight for spec in specs) + 4
    prompts = PromptFactory(new_salt(), options.seed)
    sampler = GpuSampler()
    if options.gpu_telemetry:
        sampler.start()
    try:
        async with ChatClient(endpoint, max_connections=connections) as client:
            calibration = await calibrate(client, prompts)
            for spec in specs:
                calibration.words_for(spec.input_tokens)  # a prompt below the fixed overhead: ConfigError now
            state.calibration = calibration
            state.prompts = Prompts(salt=prompts.salt, seed=prompts.seed)
            await _run_levels(
                client, target, options, specs, shape=(prompts, calibration), levels=state.levels, progress=progress
            )
            await _ollama_cross_check(client, state, shape=(prompts, calibration), spec=specs[0])
        state.partial = False
    except BaseException as exc:
        state.stopped_because = _stopped_because(exc)
        raise  # the error that stopped the run is what the user sees, never one made up after it
    finally:
        sampler.stop()
        measured = state.summaries()
        gpu = _gpu_report(sampler, state, measured) if options.gpu_telemetry else None
        result = state.result(measured, gpu)
        records = [record for level in state.levels for record in level.records]
        if any(record.error is None for record in records):
            progress.written = results.RESULT_FILE.write(path, result)
            progress.result = result
        elif state.levels and state.stopped_because is None:
            raise EndpointError(
                f"no request succeeded: all {len(records)} failed, {_said(records)}; nothing was written"
            )
    return result, path


def _said(records: list[RequestRecord]) -> str:
    """Each kind of failure, how many, and what the server said the first time (when it said it):
    ``context_overflow 6 ("This model's maximum context length is 2048 tokens. ...")``."""
    kinds = Counter(str(record.error) for record in records)
    first: dict[str, str] = {}
    for record in records:
        if record.error_message:
            first.setdefault(str(record.error), record.error_message)
    return ", ".join(
        f"{kind} {count}" + (f' ("{first[kind]}")' if kind in first else "") for kind, count in sorted(kinds.items())
    )


def _endpoint(target: Target, model: str, options: RunOptions) -> Endpoint:
    return Endpoint(target.base_url, model, target.api_key, options.read_timeout_s, options.request_timeout_s)


def _stopped_because(exc: BaseException) -> str:
    if isinstance(exc, KeyboardInterrupt | asyncio.CancelledError):
        return signals.reason()  # "interrupted" (Ctrl-C), "stopped by SIGTERM"
    if isinstance(exc, BenchError):
        return str(exc)
    return f"unexpected {type(exc).__name__}: {exc}"


async def _run_levels(
    client: ChatClient,
    target: Target,
    options: RunOptions,
    specs: list[LevelSpec],
    *,
    shape: tuple[PromptFactory, Calibration],
    levels: list[LevelRun],
    progress: Progress,
) -> None:
    """Run each level in turn, appending it to ``levels`` before it starts (so an interruption keeps it)."""
    prompts, calibration = shape
    workload = WORKLOADS[options.workload]
    next_index = 0
    for spec in specs:
        level = LevelRun(spec)
        levels.append(level)
        progress.level_started(spec)
        driver = Driver(client, prompts, calibration, options, target.metrics_url, next_index, progress.request_done)
        await workload.drive(level, driver)
        next_index += spec.requests


async def measure_level(level: LevelRun, driver: Driver, workload: str = "sweep") -> LevelResult:
    """Drive one level as ``workload`` drives it (by default a closed loop of ``level.spec.streams``)
    and summarise it: the unit of measurement ``bench capacity`` searches with."""
    await WORKLOADS[workload].drive(level, driver)
    return summaries.level_summary(level)


async def _ollama_cross_check(
    client: ChatClient, state: _Run, *, shape: tuple[PromptFactory, Calibration], spec: LevelSpec
) -> None:
    """When Ollama serves, set its native decode timings beside bench's (Ollama has no /metrics)."""
    target = state.target
    root = target.server_url
    if target.engine not in ("ollama", "unknown") or not await ollama.is_ollama(client.http, root):
        return
    state.environment = replace(state.environment, engine="ollama")
    prompts, calibration = shape
    words = calibration.words_for(spec.input_tokens)
    answers: list[ollama.NativeTimings] = []
    for number in range(ollama.CROSS_CHECK_REQUESTS):
        messages = prompts.messages(20_000_000 + number, words)
        answer = await ollama.native_chat(client.http, root, client.endpoint.model, messages, spec.output_tokens)
        if answer is not None:
            answers.append(answer)
    first = [m for m in map(metrics.request_metrics, state.levels[0].records) if m is not None and m.decode_tps]
    client_tps = metrics.percentile([m.decode_tps for m in first if m.decode_tps], 0.5) if first else None
    state.ollama_native = ollama.cross_check(answers, client_tps)


def _gpu_report(sampler: GpuSampler, state: _Run, measured: list[LevelResult]) -> GpuReport | GpuAbsent:
    """NVML telemetry of the whole run: tokens per joule over every token the run produced, and
    the single-stream decode speed (concurrency 1, median) against the bandwidth bound."""
    produced = sum(r.completion_tokens or 0 for level in state.levels for r in level.records if r.error is None)
    single = next((lv.decode_tps.p50 for lv in measured if lv.concurrency == 1 and lv.decode_tps), None)
    return sampler.report(float(produced), single, state.options.weight_bytes_per_gpu)


def _engine_from_metrics(levels: list[LevelResult]) -> str | None:
    """The engine whose metrics (its row of the engine table) the server's /metrics exposed,
    vllm or llamacpp; None when it has none."""
    return next((name for level in levels if (name := server.engine_of(level.server.counters))), None)


def run(target: Target, options: RunOptions, progress: Progress | None = None) -> tuple[RunResult, Path]:
    """Synchronous wrapper of :func:`execute`."""
    return asyncio.run(execute(target, options, progress))
