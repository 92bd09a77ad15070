"""``bench run``: resolve the target, calibrate prompt lengths, run the workload's levels, and
write one result file. Plain functions; the CLI parses flags into :class:`RunOptions`.

Workloads: ``single`` (one stream, fixed input and output length) and ``sweep`` (closed-loop
levels of concurrency). Interrupting a run (Ctrl-C) keeps what was measured: the file is
written with ``"partial": true``. A run in which no request succeeded writes nothing.
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

from bench import __version__, metrics, ollama, results
from bench.client import ChatClient, Endpoint
from bench.config import Target
from bench.errors import ConfigError, EndpointError, EndpointModelError
from bench.gpu import GpuSampler
from bench.metrics import RequestRecord
from bench.runner import AgentSpec, LevelRun, LevelSpec, calibrate, run_agent, run_level
from bench.workloads import Calibration, PromptFactory, new_salt

WORKLOADS = ("single", "sweep", "rate", "context", "agent")
DEFAULT_CONTEXTS = (1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072)


@dataclass(frozen=True, slots=True)
class RunOptions:
    """Everything a run needs besides the target."""

    workload: str
    concurrency: tuple[int, ...]
    requests: int
    input_tokens: int
    output_tokens: int
    results_dir: Path
    fixed_output: bool = True
    temperature: float = 0.0
    seed: int = 0
    timeout_s: float = 600.0
    weight_bytes_per_gpu: float | None = None  # for the decode bandwidth bound (preset weights / TP)
    gpu_telemetry: bool = True
    rates: tuple[float, ...] = (0.5, 1.0, 2.0)  # rate workload: requests per second, one level each
    contexts: tuple[int, ...] = DEFAULT_CONTEXTS  # context workload: prompt lengths, one level each
    max_in_flight: int = 256  # rate workload: cap on concurrent requests (the rest wait, as client queue)
    sessions: int = 4  # agent workload: sessions, run concurrency[0] at a time
    turns: int = 6  # agent workload: turns per session
    system_tokens: int = 2048  # agent workload: system prompt with tool schemas, shared by every session

    def levels(self) -> list[LevelSpec]:
        """One level per concurrency; at least ``requests`` and at least 4 per stream."""
        if self.workload not in WORKLOADS:
            raise ConfigError(f"workload: {self.workload!r} is not one of {', '.join(WORKLOADS)}")
        for name, value in (("--input-tokens", self.input_tokens), ("--output-tokens", self.output_tokens)):
            if value < 1:
                raise ConfigError(f"{name}: must be at least 1, got {value}")
        if self.requests < 2:
            raise ConfigError(f"--requests: at least 2 are needed for a window, got {self.requests}")
        if any(c < 1 for c in self.concurrency):
            raise ConfigError(f"--concurrency: every level must be at least 1, got {list(self.concurrency)}")
        if self.workload == "rate":
            if any(r <= 0 for r in self.rates):
                raise ConfigError(f"--rate: every rate must be above 0 requests per second, got {list(self.rates)}")
            return [self._spec(self.max_in_flight, self.requests, self.input_tokens, rate) for rate in self.rates]
        if self.workload == "agent":
            if self.sessions < 1 or self.turns < 1:
                raise ConfigError(f"--sessions/--turns: at least 1 each, got {self.sessions} and {self.turns}")
            return [self._spec(self.concurrency[0], self.sessions * self.turns, self.input_tokens)]
        if self.workload == "context":
            if any(length < 1 for length in self.contexts):
                raise ConfigError(f"--context: every prompt length must be at least 1, got {list(self.contexts)}")
            return [self._spec(1, self.requests, length) for length in self.contexts]
        return [self._spec(c, max(self.requests, 4 * c), self.input_tokens) for c in self.concurrency]

    def _spec(self, concurrency: int, requests: int, input_tokens: int, rate: float | None = None) -> LevelSpec:
        return LevelSpec(
            concurrency,
            requests,
            input_tokens,
            self.output_tokens,
            fixed_output=self.fixed_output,
            temperature=self.temperature,
            rate=rate,
            seed=self.seed,
        )


@dataclass(slots=True)
class Progress:
    """Callbacks the CLI uses to show progress; the defaults do nothing."""

    level_started: Callable[[LevelSpec], None] = lambda spec: None
    request_done: Callable[[RequestRecord], None] = lambda record: None
    written: Path | None = None  # set once the result file exists, also when interrupted


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
    endpoint = Endpoint(target.base_url, target.model or "", target.api_key, options.timeout_s)
    levels: list[LevelRun] = []
    async with ChatClient(endpoint, max_connections=4) as probe:
        model, max_len = await _resolve_model(probe, target)
    endpoint = Endpoint(target.base_url, model, target.api_key, options.timeout_s)
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
            document["calibration"] = asdict(calibration)
            document["prompts"] = {"salt": prompts.salt, "seed": prompts.seed}
            await _run_levels(
                client, target, options, specs, shape=(prompts, calibration), levels=levels, progress=progress
            )
            await _ollama_cross_check(
                client, target, document, shape=(prompts, calibration), spec=specs[0], levels=levels
            )
        document["partial"] = False
    finally:
        sampler.stop()
        _finish(document, levels)
        produced = sum(r.completion_tokens or 0 for level in levels for r in level.records if r.error is None)
        document["gpu"] = _gpu_report(sampler, document, options, produced) if options.gpu_telemetry else None
        if any(record.error is None for level in levels for record in level.records):
            progress.written = results.write_atomic(path, document)
        elif levels:
            kinds = sorted({str(record.error) for level in levels for record in level.records})
            raise EndpointError(f"no request succeeded ({', '.join(kinds) or 'none finished'}); nothing was written")
    return document, path


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
    """vllm or llamacpp, from the series the server's /metrics exposed; None when it has none."""
    for level in levels:
        counters = level.server.get("counters", {})
        if counters.get("requests_succeeded") is not None:
            return "vllm"
        if counters.get("llamacpp_tokens_predicted") is not None:
            return "llamacpp"
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
