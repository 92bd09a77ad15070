"""``bench run --repeat N``: the same seeded workload N times, each run filed as usual, and one
summary of them, with AIPerf's aggregate fields per level and metric: the runs' mean, sample
standard deviation, coefficient of variation, standard error and Student-t 95 % interval of the
mean, over the runs that succeeded; the runs that failed are listed with why, never averaged in.
Filed under ``RESULTS_DIR/<tag>/repeats/<started_at>.json`` (:data:`REPEAT_FILE`)."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from statistics import fmean, stdev

from scipy import stats as scipy_stats

from bench.documents import Document
from bench.measure.metrics import Summary
from bench.measure.run.results import LevelResult, RunResult, WeightedSummary

REPEATS_DIR = "repeats"
CONFIDENCE = 0.95


@dataclass(frozen=True, slots=True)
class MetricSpread:
    """One metric of one level over the runs that succeeded."""

    metric: str  # its key, e.g. ttft_p50
    unit: str
    n: int
    mean: float
    sd: float | None  # sample standard deviation (n - 1); None with one run
    cv: float | None  # sd / mean; None with one run or a mean of 0
    se: float | None  # sd / sqrt(n)
    ci95: tuple[float, float] | None  # mean -/+ t(0.975, n - 1) * se
    values: list[float]  # each run's value, in run order


@dataclass(frozen=True, slots=True)
class LevelSpread:
    """One level (matched by its label and lengths) over the runs that succeeded."""

    label: str
    input_tokens: int
    output_tokens: int
    metrics: list[MetricSpread]


@dataclass(frozen=True, slots=True)
class FailedRun:
    """A run left out of the summary, and why."""

    index: int  # 1-based, in run order
    run_id: str | None  # None when it wrote no result
    reason: str


@dataclass(frozen=True, slots=True)
class RepeatResult:
    """The summary of one ``bench run --repeat N``."""

    schema_version: int
    tag: str
    workload: str
    started_at: str
    repeats: int
    seed: int
    runs: list[str]  # the run_id of every run that wrote a result, in run order
    failed: list[FailedRun]
    levels: list[LevelSpread]


REPEAT_FILE: Document[RepeatResult] = Document(
    RepeatResult,
    version=1,
    name="repeats",
    title="bench run --repeat summary",
    noun="bench repeat summary",
    schema_file=Path(__file__).with_name("repeats.schema.json"),
)
"""Repeat summaries: read, written and schema-checked through this (:mod:`bench.documents`)."""


def _p50(summary: Summary | WeightedSummary | None) -> float | None:
    return None if summary is None else summary.p50


# The metrics summarised, as bench compare names them: key, unit, and how a level gives its value.
METRICS: tuple[tuple[str, str, Callable[[LevelResult], float | None]], ...] = (
    ("ttft_p50", "ms", lambda level: _p50(level.latency.ttft_ms)),
    ("ttft_p90", "ms", lambda level: None if level.latency.ttft_ms is None else level.latency.ttft_ms.p90),
    ("ttfo_p50", "ms", lambda level: _p50(level.latency.ttfo_ms)),
    ("tpot_p50", "ms", lambda level: _p50(level.latency.tpot_ms)),
    ("itl_p50", "ms", lambda level: _p50(level.itl_token_ms)),
    ("decode_p50", "tok/s", lambda level: _p50(level.decode_tps)),
    ("output_tps", "tok/s", lambda level: level.throughput.output_tps),
    ("request_tps", "req/s", lambda level: level.throughput.request_tps),
    ("e2e_p50", "ms", lambda level: _p50(level.latency.e2e_ms)),
)


def spread(metric: str, unit: str, values: list[float]) -> MetricSpread:
    """The aggregate of one metric's per-run values (at least one)."""
    n = len(values)
    mean = fmean(values)
    if n < 2:
        return MetricSpread(metric, unit, n, mean, None, None, None, None, values)
    sd = stdev(values)
    se = sd / math.sqrt(n)
    half = float(scipy_stats.t.ppf(0.5 + CONFIDENCE / 2, n - 1)) * se
    cv = sd / mean if mean != 0 else None
    return MetricSpread(metric, unit, n, mean, sd, cv, se, (mean - half, mean + half), values)


def summarise(
    *, tag: str, workload: str, started_at: str, seed: int, repeats: int, runs: list[RunResult], failed: list[FailedRun]
) -> RepeatResult:
    """The summary of ``runs`` (every run that wrote a result, in order): the levels and metrics
    of the runs not in ``failed``, matched by level label and lengths."""
    failed_ids = {run.run_id for run in failed}
    kept = [run for run in runs if run.run_id not in failed_ids]
    keys: list[tuple[str, int, int]] = []
    values: dict[tuple[tuple[str, int, int], str], list[float]] = {}
    for run in kept:
        for level in run.levels:
            key = (level.label, level.tokens.input_target, level.tokens.output_target)
            if key not in keys:
                keys.append(key)
            for metric, _, read in METRICS:
                value = read(level)
                if value is not None and math.isfinite(value):
                    values.setdefault((key, metric), []).append(value)
    levels = []
    for key in keys:
        label, prompt, output = key
        found = [spread(metric, unit, values[(key, metric)]) for metric, unit, _ in METRICS if (key, metric) in values]
        levels.append(LevelSpread(label, prompt, output, found))
    return RepeatResult(
        schema_version=REPEAT_FILE.version,
        tag=tag,
        workload=workload,
        started_at=started_at,
        repeats=repeats,
        seed=seed,
        runs=[run.run_id for run in runs],
        failed=failed,
        levels=levels,
    )


def repeat_path(results_dir: Path, summary: RepeatResult) -> Path:
    """Where ``summary`` is filed: ``results_dir/<tag>/repeats/<compact started_at>.json``."""
    stamp = "".join(char for char in summary.started_at if char.isalnum())
    return results_dir / summary.tag / REPEATS_DIR / f"{stamp}.json"


def write_repeats(results_dir: Path, summary: RepeatResult) -> Path:
    """Write ``summary`` atomically under its tag; its path."""
    return REPEAT_FILE.write(repeat_path(results_dir, summary), summary)
