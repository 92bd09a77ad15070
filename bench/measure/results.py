"""Result files: one JSON document per run under ``results/<tag>/``, the serialisation of
:class:`RunResult`, schema-versioned, written atomically (a temporary file in the same
directory, then a rename), with the summary, the environment and every request's raw events
(gzip-compressed JSON lines, base64 in the file).

The types below are the result: :class:`RunResult` holds its :class:`LevelResult` levels, each
with its distributions (:class:`~bench.measure.metrics.Summary`, :class:`WeightedSummary`), the
server's report (:class:`~bench.measure.server.ServerReport`), and the run holds the GPU report
(:class:`~bench.measure.gpu.GpuReport`). The JSON Schema generated from them is committed as
``result.schema.json`` beside this module (``python -m bench.measure.schema`` writes it).
:func:`read` refuses a file of another ``schema_version``, naming the file and both versions.

A run that was interrupted is written with ``"partial": true`` and whatever it measured; a run
in which nothing succeeded is never written as if it had.
"""

from __future__ import annotations

import base64
import gzip
import json
import os
import tempfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import orjson

from bench.errors import ResultFileError, ShapeError
from bench.measure.codec import OMIT_IF_NONE, JsonObject, from_json, to_json_object
from bench.measure.gpu import GpuAbsent, GpuReport
from bench.measure.metrics import RequestRecord, Summary
from bench.measure.ollama import OllamaCrossCheck
from bench.measure.options import RunOptions
from bench.measure.prompts import Calibration
from bench.measure.server import Counters, ServerReport

SCHEMA_VERSION = 1


@dataclass(frozen=True, slots=True)
class WeightedSummary:
    """A pooled distribution in ms: token-weighted inter-token latency, or raw chunk gaps."""

    n: int
    weighting: Literal["token", "chunk"]
    p50: float
    p90: float
    p99: float | None  # only from 100 samples up
    max: float


@dataclass(frozen=True, slots=True)
class RequestCounts:
    """The requests of one level: how many, how many failed and why, how many were measured."""

    total: int
    successful: int
    errored: int
    errors_by_kind: dict[str, int]
    warmup_discarded: int
    measured: int  # inside the steady-state window


@dataclass(frozen=True, slots=True)
class Latency:
    """Per-request latencies in ms over the measured requests; None where no request had one."""

    ttft_ms: Summary | None
    ttfo_ms: Summary | None
    ttfr_ms: Summary | None
    e2e_ms: Summary | None
    tpot_ms: Summary | None
    queue_client_ms: Summary | None  # open loop: scheduled time to dispatch


@dataclass(frozen=True, slots=True)
class Throughput:
    """Aggregate speeds of one level: output tokens per second in the window and over the wall
    time, and measured requests per second."""

    output_tps: float | None
    output_tps_wall: float | None
    request_tps: float | None


@dataclass(frozen=True, slots=True)
class Tokens:
    """Prompt and output lengths of one level against their targets, and where counts came from."""

    input_target: int
    input: Summary | None
    cached: Summary | None
    output_target: int
    output: Summary | None
    tokens_per_chunk: Summary | None
    count_sources: dict[str, int]  # server-continuous | server | chunk-count: requests each
    chunked_requests: int


@dataclass(frozen=True, slots=True)
class AgentTurn:
    """One turn of the agent workload over its sessions: TTFT, prompt length, prefix-cache hits."""

    turn: int
    requests: int
    ttft_ms: Summary | None
    prompt_tokens_mean: float | None
    cached_tokens_mean: float | None
    prefix_cache_hit_rate: float | None


@dataclass(frozen=True, slots=True)
class LevelResult:
    """Every number of one level (a concurrency, a rate, a prompt length, or the agent sessions)."""

    label: str
    concurrency: int  # the most requests this level had in flight
    rate_per_s: float | None
    requests: RequestCounts
    window_s: float | None
    latency: Latency
    decode_tps: Summary | None
    itl_token_ms: WeightedSummary | None
    icl_chunk_ms: WeightedSummary | None
    stall_max_ms: float | None
    throughput: Throughput
    tokens: Tokens
    server: ServerReport
    agent_turns: list[AgentTurn] | None
    per_request_server: dict[str, Counters]  # agent, one session at a time: counters around each request
    untrusted_because: list[str]


@dataclass(frozen=True, slots=True)
class Environment:
    """Where the run went and what ran it; ``sources`` says where each target value came from."""

    bench_version: str
    python: str
    client_host: str
    base_url: str
    model: str | None
    engine: str
    sources: dict[str, str]
    deployment: JsonObject | None  # the deployment.json read, as it was
    max_model_len: int | None  # as /v1/models said; None when the server does not say


@dataclass(frozen=True, slots=True)
class Prompts:
    """The run's prompt salt and seed: every prompt of the run can be rebuilt from them."""

    salt: str
    seed: int


@dataclass(frozen=True, slots=True)
class RunResult:
    """One run of ``bench run``: what the result file holds."""

    schema_version: int
    run_id: str
    tag: str
    workload: str
    started_at: str
    partial: bool
    options: RunOptions
    environment: Environment
    calibration: Calibration | None
    prompts: Prompts | None
    levels: list[LevelResult]
    gpu: GpuReport | GpuAbsent | None
    requests_events_gzip_b64: str
    trusted: bool
    skipped_levels: list[str] | None = field(default=None, metadata=OMIT_IF_NONE)  # when max_model_len is known
    stopped_because: str | None = field(default=None, metadata=OMIT_IF_NONE)  # a partial run
    ollama_native: OllamaCrossCheck | None = field(default=None, metadata=OMIT_IF_NONE)  # when Ollama served

    def failed_requests(self) -> str | None:
        """How many requests of the whole run failed and why, by kind; None when none did."""
        kinds: Counter[str] = Counter()
        for level in self.levels:
            kinds.update(level.requests.errors_by_kind)
        if not kinds:
            return None
        total = sum(level.requests.total for level in self.levels)
        by_kind = ", ".join(f"{kind} {count}" for kind, count in sorted(kinds.items()))
        return f"{kinds.total()} of {total} requests failed: {by_kind}"


def encode_events(records: list[RequestRecord]) -> str:
    """Every request with its raw events, as base64 of gzip-compressed JSON lines."""
    # orjson writes a dataclass as the object of its fields, as json.dumps(asdict(...)) would, at a
    # small fraction of the cost (a run of 32 streams keeps hundreds of thousands of events).
    lines = b"\n".join(map(orjson.dumps, records))
    return base64.b64encode(gzip.compress(lines, mtime=0)).decode()


def decode_events(blob: str) -> list[JsonObject]:
    """The inverse of :func:`encode_events`, as plain dictionaries."""
    text = gzip.decompress(base64.b64decode(blob)).decode()
    return [json.loads(line) for line in text.splitlines() if line]


def records_by_level(result: RunResult) -> list[list[RequestRecord]]:
    """Every request of ``result`` as read back from its events, split into its levels (the
    file keeps them in level order; each level's ``requests.total`` says how many are its own)."""
    records = [from_json(RequestRecord, entry, "requests") for entry in decode_events(result.requests_events_gzip_b64)]
    split: list[list[RequestRecord]] = []
    start = 0
    for level in result.levels:
        split.append(records[start : start + level.requests.total])
        start += level.requests.total
    return split


def write_atomic(path: Path, result: object) -> Path:
    """Write ``result`` (a :class:`RunResult`, or another result dataclass) as JSON to ``path``
    through a temporary file and a rename."""
    return write_json_atomic(path, to_json_object(result))


def write_json_atomic(path: Path, document: JsonObject) -> Path:
    """Write ``document`` to ``path`` through a temporary file in the same folder and a rename,
    so a reader sees the old file or the whole new one, never a part."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as stream:
            json.dump(document, stream, indent=1, sort_keys=True)
            stream.write("\n")
            stream.flush()
            os.fsync(stream.fileno())
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    return path


def parse(document: object, where: str) -> RunResult:
    """A parsed result document as a :class:`RunResult`; ``where`` names it in errors."""
    if not isinstance(document, dict):
        raise ResultFileError(f"{where}: not a bench result (a JSON object was expected)")
    found = document.get("schema_version")
    if found != SCHEMA_VERSION:
        raise ResultFileError(
            f"{where}: schema_version {found!r}; this bench reads schema_version {SCHEMA_VERSION} only"
        )
    try:
        return from_json(RunResult, document)
    except ShapeError as exc:
        raise ResultFileError(f"{where}: not a bench result of schema_version {SCHEMA_VERSION}: {exc}") from exc


def read(path: Path) -> RunResult:
    """Read a result file; raises :class:`~bench.errors.ResultFileError` naming ``path`` when it
    cannot be read, has another ``schema_version``, or does not have the shape of a result."""
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ResultFileError(f"{path}: cannot read it as JSON: {exc}") from exc
    return parse(document, str(path))
