"""Result files of known distributions, for the tests of ``bench compare``, ``history`` and ``report``.

Each request is built event by event (first token after its TTFT, then one token per TPOT),
summarised by bench's own level code, and filed as ``bench run`` files it, so the comparison
reads them back through the same path as real runs. Requests of a level run one after another
(a closed loop at concurrency 1) or ``concurrency`` at a time.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from bench.measure import results
from bench.measure.codec import JsonObject, JsonValue
from bench.measure.levels import level_summary
from bench.measure.loops import LevelRun, LevelSpec
from bench.measure.metrics import NS_PER_MS, Event, RequestRecord
from bench.measure.options import RunOptions
from bench.measure.results import Environment, RunResult
from bench.measure.server import server_report

INPUT_TOKENS = 64
OUTPUT_TOKENS = 16


@dataclass(frozen=True, slots=True)
class Shape:
    """A level's requests: TTFT and TPOT drawn from lognormal distributions (median, sigma)."""

    ttft_ms: float
    tpot_ms: float
    sigma: float = 0.1
    concurrency: int = 1
    requests: int = 40


def _request(index: int, start_ns: int, ttft_ms: float, tpot_ms: float) -> RequestRecord:
    first = start_ns + round(ttft_ms * NS_PER_MS)
    times = [first + round(i * tpot_ms * NS_PER_MS) for i in range(OUTPUT_TOKENS)]
    events = tuple(Event(t_ns=t, content_chars=4) for t in times)
    return RequestRecord(
        index=index,
        t_disp_ns=start_ns,
        t_end_ns=times[-1] + 1000,
        events=events,
        requested_tokens=OUTPUT_TOKENS,
        prompt_tokens=INPUT_TOKENS,
        completion_tokens=OUTPUT_TOKENS,
        finish_reason="length",
    )


def level_records(shape: Shape, rng: np.random.Generator, start_ns: int = 10**12) -> list[RequestRecord]:
    """``shape.requests`` requests, ``shape.concurrency`` streams each sending its next request
    when the last one ended."""
    ttfts = rng.lognormal(np.log(shape.ttft_ms), shape.sigma, shape.requests)
    tpots = rng.lognormal(np.log(shape.tpot_ms), shape.sigma, shape.requests)
    free_at = [start_ns + stream * NS_PER_MS for stream in range(shape.concurrency)]
    records = []
    for index in range(shape.requests):
        stream = min(range(shape.concurrency), key=lambda s: free_at[s])
        record = _request(index, free_at[stream], float(ttfts[index]), float(tpots[index]))
        free_at[stream] = record.t_end_ns + 100_000
        records.append(record)
    return records


def make_run(
    tag: str,
    shapes: Sequence[Shape],
    seed: int,
    *,
    workload: str = "sweep",
    started_at: str = "2026-11-01T10:00:00+00:00",
    deployment: JsonObject | None = None,
    trusted: bool = True,
) -> RunResult:
    """One run of ``shapes`` (one level each) as ``bench run`` would file it."""
    rng = np.random.default_rng(seed)
    runs, records = [], []
    for shape in shapes:
        spec = LevelSpec(
            requests=shape.requests, input_tokens=INPUT_TOKENS, output_tokens=OUTPUT_TOKENS, streams=shape.concurrency
        )
        level = LevelRun(spec, level_records(shape, rng), complete=True, server=server_report(None, None, []))
        runs.append(level_summary(level))
        records.extend(level.records)
    options = RunOptions(
        workload=workload,
        requests=shapes[0].requests,
        input_tokens=INPUT_TOKENS,
        output_tokens=OUTPUT_TOKENS,
        results_dir=Path("results"),
    )
    environment = Environment(
        bench_version="test",
        python="3.11",
        client_host="synthetic",
        base_url="http://127.0.0.1:1/v1",
        model="synthetic-model",
        engine="vllm",
        sources={},
        deployment=deployment,
        max_model_len=4096,
    )
    run = RunResult(
        schema_version=results.SCHEMA_VERSION,
        run_id=f"{started_at[:10]}-{workload}-{seed}",
        tag=tag,
        workload=workload,
        started_at=started_at,
        partial=False,
        options=options,
        environment=environment,
        calibration=None,
        prompts=None,
        levels=runs,
        gpu=None,
        requests_events_gzip_b64=results.encode_events(records),
        trusted=trusted,
    )
    assert all(not level.untrusted_because for level in runs), [level.untrusted_because for level in runs]
    return run if trusted else replace(run, trusted=False)


def file_run(results_dir: Path, run: RunResult) -> Path:
    """Write ``run`` where ``bench run`` would: RESULTS_DIR/<tag>/<run_id>.json."""
    return results.write_atomic(results_dir / run.tag / f"{run.run_id}.json", run)


def deployment(preset: str = "qwen3.8-27b-w4a16", **vllm_flags: str) -> JsonObject:
    """A deployment.json of the shape the engine role writes, with these vLLM flags."""
    args: list[JsonValue] = ["--model", "/srv/models/m"]
    for name, value in vllm_flags.items():
        args += [f"--{name.replace('_', '-')}", value]
    return {
        "engine": "vllm",
        "preset": preset,
        "config_version": "v1",
        "served_model_name": "m",
        "startup": {"invocation_id": "abc"},
        "vllm": {"args": args, "version": "0.33.0"},
        "host": {"driver_version": "580.95", "gpus": []},
    }
