"""``bench run``: resolve the target, calibrate prompt lengths, run the workload's levels, and
write one result file. Plain functions; the CLI parses flags into :class:`RunOptions`.

Workloads: see :mod:`bench.measure.options`. A run that stops early (Ctrl-C, the server lost, a wrong key
after calibration) keeps what was measured: the file is written with ``"partial": true`` and
``stopped_because``, and the error that stopped it is raised as it was. A run in which no request
succeeded writes nothing.
"""

from __future__ import annotations

import asyncio
import platform
import secrets
from collections.abc import Callable
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench import __version__
from bench.errors import BenchError, ConfigError, EndpointError, EndpointModelError
from bench.measure import metrics, ollama, results, server
from bench.measure.client import ChatClient, Endpoint
from bench.measure.config import Target
from bench.measure.gpu import GpuSampler
from bench.measure.metrics import RequestRecord
from bench.measure.options import DEFAULT_CONTEXTS, WORKLOADS, RunOptions
from bench.measure.runner import AgentSpec, LevelRun, LevelSpec, calibrate, run_agent, run_level
from bench.measure.workloads import Calibration, PromptFactory, new_salt
from bench.rig import ENGINES

__all__ = ["DEFAULT_CONTEXTS", "WORKLOADS", "Progress", "RunOptions", "execute", "run"]


@dataclass(slots=True)
class Progress:
    """Callbacks the CLI uses to show progress; the defaults do nothing."""

    level_started: Callable[[LevelSpec], None] = lambda spec: None
    request_done: Callable[[RequestRecord], None] = lambda record: None
    written: Path | None = None  # set once the result file exists, also when the run stopped early
    document: dict[str, Any] | None = None  # the document written there


def _document(target: Target, options: RunOptions, run_id: str, started: datetime) -> dict[str, Any]:
    deployment = target.deployment or {}
    return {
        "schema_version": results.SCHEMA_VERSION,
        "run_id": run_id,
        "tag": target.tag,
        "workload": options.workload,
        "started_at": started.isoformat(),
        "partial": True,
        "options": {k: (str(v) if isinstance(v, Path) else v) for k, v in asdict(options).items()},
        "environment": {
            "bench_version": __version__,
            "python": platform.python_version(),
            "client_host": platform.node(),
            "base_url": target.base_url,
            "model": target.model,
            "engine": target.engine,
            "sources": target.sources,
            "deployment": deployment,
        },
        "calibration": None,
        "prompts": None,
        "levels": [],
    }


async def _resolve_model(client: ChatClient, target: Target) -> tuple[str, int | None]:
    """The model to ask for, and the longest context the server serves it with (None if unsaid)."""
    listing = await client.model_list()
    served = [str(entry["id"]) for entry in listing]
    model = _pick_model(served, target)
    entry = next(e for e in listing if str(e["id"]) == model)
    meta: dict[str, Any] = entry["meta"] if isinstance(entry.get("meta"), dict) else {}
    length = entry.get("max_model_len") or meta.get("n_ctx")  # vLLM, llama.cpp
    return model, int(length) if length else None


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


async def execute(target: Target, options: RunOptions, progress: Progress | None = None) -> tuple[dict[str, Any], Path]:
    """Run the benchmark and write its result file; returns the document and its path."""
    progress = progress or Progress()
    specs = options.levels()
    started = datetime.now(UTC)
    run_id = f"{started:%Y%m%dT%H%M%SZ}-{options.workload}-{secrets.token_hex(3)}"
    path = options.results_dir / target.tag / f"{run_id}.json"
    document = _document(target, options, run_id, started)
    endpoint = _endpoint(target, target.model or "", options)
    levels: list[LevelRun] = []
    async with ChatClient(endpoint, max_connections=4) as probe:
        model, max_len = await _resolve_model(probe, target)
    endpoint = _endpoint(target, model, options)
    document["environment"]["model"] = model
    document["environment"]["max_model_len"] = max_len
    if max_len is not None:
        fits = [spec for spec in specs if spec.input_tokens + spec.output_tokens <= max_len]
        document["skipped_levels"] = [f"{s.label}, {s.input_tokens} prompt tokens" for s in specs if s not in fits]
        if not fits:
            raise ConfigError(f"--input-tokens/--context: no level fits the server's context of {max_len} tokens")
        specs = fits
    connections = max(spec.concurrency for spec in specs) + 4
    prompts = PromptFactory(new_salt(), options.seed)
    sampler = GpuSampler()
    if options.gpu_telemetry:
        sampler.start()
    try:
        async with ChatClient(endpoint, max_connections=connections) as client:
            calibration = await calibrate(client, prompts)
            for spec in specs:
                calibration.words_for(spec.input_tokens)  # a prompt below the fixed overhead: ConfigError now
            document["calibration"] = asdict(calibration)
            document["prompts"] = {"salt": prompts.salt, "seed": prompts.seed}
            await _run_levels(
                client, target, options, specs, shape=(prompts, calibration), levels=levels, progress=progress
            )
            await _ollama_cross_check(
                client, target, document, shape=(prompts, calibration), spec=specs[0], levels=levels
            )
        document["partial"] = False
    except BaseException as exc:
        document["stopped_because"] = _stopped_because(exc)
        raise  # the error that stopped the run is what the user sees, never one made up after it
    finally:
        sampler.stop()
        _finish(document, levels)
        produced = sum(r.completion_tokens or 0 for level in levels for r in level.records if r.error is None)
        document["gpu"] = _gpu_report(sampler, document, options, produced) if options.gpu_telemetry else None
        records = [record for level in levels for record in level.records]
        if any(record.error is None for record in records):
            progress.written = results.write_atomic(path, document)
            progress.document = document
        elif levels and "stopped_because" not in document:
            kinds = sorted({str(record.error) for record in records})
            raise EndpointError(
                f"no request succeeded ({', '.join(kinds)}); all {len(records)} failed, nothing was written"
            )
    return document, path


def _endpoint(target: Target, model: str, options: RunOptions) -> Endpoint:
    return Endpoint(target.base_url, model, target.api_key, options.read_timeout_s, options.request_timeout_s)


def _stopped_because(exc: BaseException) -> str:
    if isinstance(exc, KeyboardInterrupt | asyncio.CancelledError):
        return "interrupted"
    if isinstance(exc, BenchError):
        return f"{type(exc).__name__}: {exc}"
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
    next_index = 0
    for spec in specs:
        level = LevelRun(spec)
        levels.append(level)
        progress.level_started(spec)
        if options.workload == "agent":
            agent = AgentSpec(options.sessions, options.turns, options.system_tokens)
            await run_agent(
                client,
                prompts,
                calibration,
                level,
                agent,
                metrics_url=target.metrics_url,
                on_done=progress.request_done,
            )
        else:
            await run_level(
                client,
                prompts,
                calibration,
                level,
                metrics_url=target.metrics_url,
                first_index=next_index,
                on_done=progress.request_done,
            )
        next_index += spec.requests


async def _ollama_cross_check(
    client: ChatClient,
    target: Target,
    document: dict[str, Any],
    *,
    shape: tuple[PromptFactory, Calibration],
    spec: LevelSpec,
    levels: list[LevelRun],
) -> None:
    """When Ollama serves, set its native decode timings beside bench's (Ollama has no /metrics)."""
    root = target.metrics_url.removesuffix("/metrics")
    if target.engine not in ("ollama", "unknown") or not await ollama.is_ollama(client.http, root):
        return
    document["environment"]["engine"] = "ollama"
    prompts, calibration = shape
    words = calibration.words_for(spec.input_tokens)
    answers = []
    for number in range(ollama.CROSS_CHECK_REQUESTS):
        messages = prompts.messages(20_000_000 + number, words)
        answer = await ollama.native_chat(client.http, root, client.endpoint.model, messages, spec.output_tokens)
        if answer is not None:
            answers.append(answer)
    first = [m for m in map(metrics.request_metrics, levels[0].records) if m is not None and m.decode_tps]
    client_tps = metrics.percentile([m.decode_tps for m in first if m.decode_tps], 0.5) if first else None
    document["ollama_native"] = ollama.cross_check(answers, client_tps)


def _gpu_report(sampler: GpuSampler, document: dict[str, Any], options: RunOptions, produced: int) -> dict[str, Any]:
    """NVML telemetry of the whole run: tokens per joule over every token the run produced, and
    the single-stream decode speed (concurrency 1, median) against the bandwidth bound."""
    single = next(
        (lv["decode_tps"]["p50"] for lv in document["levels"] if lv["concurrency"] == 1 and lv["decode_tps"]), None
    )
    return sampler.report(float(produced), single, options.weight_bytes_per_gpu)


def _engine_from_metrics(levels: list[LevelRun]) -> str | None:
    """The engine whose metrics family (its prefix in the engine table) the server's /metrics
    exposed, vllm or llamacpp; None when it has none."""
    for level in levels:
        counters = level.server.get("counters", {})
        families = [server.COUNTERS.get(name, "") for name, value in counters.items() if value is not None]
        for engine in ENGINES:
            if engine.metrics_prefix and any(family.startswith(engine.metrics_prefix) for family in families):
                return engine.name
    return None


def _finish(document: dict[str, Any], levels: list[LevelRun]) -> None:
    if document["environment"]["engine"] == "unknown":
        document["environment"]["engine"] = _engine_from_metrics(levels) or "unknown"
    document["levels"] = [results.level_summary(level) for level in levels if level.records]
    document["requests_events_gzip_b64"] = results.encode_events([r for level in levels for r in level.records])
    document["trusted"] = not document["partial"] and all(not lv["untrusted_because"] for lv in document["levels"])


def run(target: Target, options: RunOptions, progress: Progress | None = None) -> tuple[dict[str, Any], Path]:
    """Synchronous wrapper of :func:`execute`."""
    return asyncio.run(execute(target, options, progress))
