"""Result files: one JSON document per run under ``results/<tag>/``, the serialisation of
:class:`RunResult`, schema-versioned, written atomically (a temporary file in the same
directory, then a rename), with the summary, the environment and every request's raw events
(gzip-compressed JSON lines, base64 in the file).

The types below are the result: :class:`RunResult` holds its :class:`LevelResult` levels, each
with its distributions (:class:`~bench.measure.metrics.Summary`, :class:`WeightedSummary`), the
server's report (:class:`~bench.measure.telemetry.server.ServerReport`), and the run holds the GPU report
(:class:`~bench.measure.telemetry.gpu.GpuReport`). The JSON Schema generated from them is committed as
``result.schema.json`` beside this module (``python -m bench.cli.schemas`` writes it).
:data:`RESULT_FILE` reads and writes them; it refuses a file of another ``schema_version``,
naming the file and both versions.

A run that was interrupted is written with ``"partial": true`` and whatever it measured; a run
in which nothing succeeded is never written as if it had.
"""

from __future__ import annotations

import base64
import gzip
import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import orjson

from bench.codec import OMIT_IF_NONE, JsonObject, from_json
from bench.documents import Document
from bench.measure.metrics import RequestRecord, Summary
from bench.measure.run.agent_sessions import AgentSessions
from bench.measure.run.options import RunOptions
from bench.measure.run.prompts import Calibration
from bench.measure.run.spec_requests import SpecDecodeRequests
from bench.measure.run.trace import TraceSource
from bench.measure.telemetry.gpu import GpuAbsent, GpuReport
from bench.measure.telemetry.ollama import OllamaCrossCheck
from bench.measure.telemetry.server import Counters, ServerReport
from bench.rig import Deployment, recorded_deployment


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
    # vLLM's per-request speculative decoding over the measured requests; absent when the server
    # sent none (no speculative decoding, --per-request-spec-decode-metrics off, another engine).
    spec_decode_requests: SpecDecodeRequests | None = field(default=None, metadata=OMIT_IF_NONE)
    # Open loop: why the level was stopped as over-saturated (bench.measure.run.saturation); it
    # has no steady state, and bench compare leaves it out.
    saturated: str | None = field(default=None, metadata=OMIT_IF_NONE)
    # The agent workload: its sessions' tool rounds and calls, result sizes and start times.
    agent: AgentSessions | None = field(default=None, metadata=OMIT_IF_NONE)


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
    # The deployment record the run measured, as a document of its schema_version; {} without one.
    # Kept as the JSON it is, so files that hold an older record still read (deployment_record).
    deployment: JsonObject | None
    max_model_len: int | None  # as /v1/models said; None when the server does not say

    @property
    def deployment_record(self) -> Deployment | None:
        """:attr:`deployment` read as the typed record (bench.rig.recorded_deployment); None when
        the run had none, or kept a copy of no version this bench reads."""
        return recorded_deployment(self.deployment)


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
    trace: TraceSource | None = field(default=None, metadata=OMIT_IF_NONE)  # the trace workload: what it replayed

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


RESULT_FILE: Document[RunResult] = Document(
    RunResult,
    version=1,
    name="result",
    title="bench run result",
    noun="bench result",
    schema_file=Path(__file__).with_name("result.schema.json"),
)
"""Result files: read, written and schema-checked through this (:mod:`bench.documents`)."""
