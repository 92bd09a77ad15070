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

from bench.codec import JsonObject
from bench.measure.metrics import NS_PER_MS, Event, RequestRecord
from bench.measure.run import results
from bench.measure.run.levels import level_summary
from bench.measure.run.loops import LevelRun, LevelSpec
from bench.measure.run.options import RunOptions
from bench.measure.run.results import Environment, RunResult
from bench.measure.telemetry.gpu import GpuReport
from bench.measure.telemetry.server import Scrape, ServerReport, server_report
from tests import deployments

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
    input_tokens: int = INPUT_TOKENS
    kv_usage: float | None = None  # the KV pool's usage the server reports, 0-1, rising over the level
    accepted: float | None = None  # the share of draft tokens the server reports accepted


def _request(index: int, start_ns: int, ttft_ms: float, tpot_ms: float, prompt_tokens: int) -> RequestRecord:
    first = start_ns + round(ttft_ms * NS_PER_MS)
    times = [first + round(i * tpot_ms * NS_PER_MS) for i in range(OUTPUT_TOKENS)]
    events = tuple(Event(t_ns=t, content_chars=4) for t in times)
    return RequestRecord(
        index=index,
        t_disp_ns=start_ns,
        t_end_ns=times[-1] + 1000,
        events=events,
        requested_tokens=OUTPUT_TOKENS,
        prompt_tokens=prompt_tokens,
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
        record = _request(index, free_at[stream], float(ttfts[index]), float(tpots[index]), shape.input_tokens)
        free_at[stream] = record.t_end_ns + 100_000
        records.append(record)
    return records


def _server(shape: Shape) -> ServerReport:
    """What a vLLM server would have said during the level: KV usage every second, and the
    speculative decoder's draft counters before and after."""
    during = []
    if shape.kv_usage is not None:
        during = [Scrape(i * 10**9, {"vllm:kv_cache_usage_perc": shape.kv_usage * (i + 1) / 10}) for i in range(10)]
    if shape.accepted is None:
        return server_report(None, None, during)
    counters = ("vllm:spec_decode_num_drafts_total", "vllm:spec_decode_num_draft_tokens_total")
    before = Scrape(0, dict.fromkeys((*counters, "vllm:spec_decode_num_accepted_tokens_total"), 0.0))
    after = Scrape(
        10**10,
        {counters[0]: 100.0, counters[1]: 300.0, "vllm:spec_decode_num_accepted_tokens_total": 300 * shape.accepted},
    )
    return server_report(before, after, during)


def make_run(
    tag: str,
    shapes: Sequence[Shape],
    seed: int,
    *,
    workload: str = "sweep",
    started_at: str = "2026-11-01T10:00:00+00:00",
    deployment: JsonObject | None = None,
    trusted: bool = True,
    tokens_per_joule: float | None = None,
) -> RunResult:
    """One run of ``shapes`` (one level each) as ``bench run`` would file it."""
    rng = np.random.default_rng(seed)
    runs, records = [], []
    for shape in shapes:
        spec = LevelSpec(
            requests=shape.requests,
            input_tokens=shape.input_tokens,
            output_tokens=OUTPUT_TOKENS,
            streams=shape.concurrency,
        )
        level = LevelRun(spec, level_records(shape, rng), complete=True, server=_server(shape))
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
        schema_version=results.RESULT_FILE.version,
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
        gpu=_gpu(tokens_per_joule),
        requests_events_gzip_b64=results.encode_events(records),
        trusted=trusted,
    )
    assert all(not level.untrusted_because for level in runs), [level.untrusted_because for level in runs]
    return run if trusted else replace(run, trusted=False)


def _gpu(tokens_per_joule: float | None) -> GpuReport | None:
    if tokens_per_joule is None:
        return None
    return GpuReport(
        gpus=[],
        energy_j=1000.0,
        tokens_per_joule=tokens_per_joule,
        decode_bound_tps=None,
        decode_fraction_of_bound=None,
    )


def file_run(results_dir: Path, run: RunResult) -> Path:
    """Write ``run`` where ``bench run`` would: RESULTS_DIR/<tag>/<run_id>.json."""
    return results.RESULT_FILE.write(results_dir / run.tag / f"{run.run_id}.json", run)


def deployment(preset: str = "qwen3.8-27b-w4a16", **vllm_flags: str) -> JsonObject:
    """A deployment.json of the shape the engine role writes (tests/deployments.py), with these vLLM flags."""
    args = ["--model", "/srv/models/m"]
    for name, value in vllm_flags.items():
        args += [f"--{name.replace('_', '-')}", value]
    return deployments.record(preset=preset, args=args, device="cuda")


def report_results(results_dir: Path) -> None:
    """Two tags as a report would show them: a sweep (1 and 4 streams) and a context run (one
    stream at 64 and 2,048 prompt tokens) each, twice, the KV pool reported as it fills and 2.5
    tokens per joule from NVML; "mtp" decodes faster, answers sooner and has speculative decoding
    accepted at 70%."""
    for day, (tag, tpot, ttft, extra) in enumerate((("base", 20.0, 100.0, {}), ("mtp", 12.0, 85.0, {"accepted": 0.7}))):
        for seed in range(2):
            started = f"2026-11-{10 + day:02d}T10:{seed:02d}"
            sweep = [
                Shape(ttft, tpot, requests=20, kv_usage=0.3 - day / 10, **extra),  # type: ignore[arg-type]
                Shape(ttft * 1.5, tpot * 1.4, concurrency=4, requests=40, kv_usage=0.8 - day / 10, **extra),  # type: ignore[arg-type]
            ]
            context = [Shape(ttft, tpot, requests=12), Shape(ttft * 9, tpot * 1.2, requests=12, input_tokens=2048)]
            file_run(
                results_dir,
                make_run(
                    tag, sweep, seed, started_at=f"{started}:00+00:00", deployment=deployment(), tokens_per_joule=2.5
                ),
            )
            file_run(
                results_dir,
                make_run(
                    tag,
                    context,
                    seed + 10,
                    workload="context",
                    started_at=f"{started}:30+00:00",
                    deployment=deployment(),
                ),
            )
