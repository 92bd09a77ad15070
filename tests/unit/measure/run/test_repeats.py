"""bench run --repeat's summary: AIPerf's aggregate fields, exact on known values, over result
files of known distributions (tests/synthetic_runs.py), failed runs left out and listed."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from bench.measure.run.repeats import REPEAT_FILE, FailedRun, repeat_path, spread, summarise, write_repeats
from tests.synthetic_runs import Shape, make_run

# Student's t, 97.5th percentile. With 2 degrees of freedom its quantile has a closed form,
# (2p - 1) / sqrt(2p(1 - p)); with 3, the printed tables' 3.182446 (seven digits).
T_2 = (2 * 0.975 - 1) / math.sqrt(2 * 0.975 * 0.025)
T_3 = 3.182446


def test_the_spread_of_three_values_is_exact() -> None:
    found = spread("decode_p50", "tok/s", [10.0, 12.0, 14.0])
    assert (found.n, found.mean, found.sd) == (3, 12.0, 2.0)
    assert found.cv == pytest.approx(2.0 / 12.0)
    assert found.se == pytest.approx(2.0 / math.sqrt(3))
    assert found.ci95 == pytest.approx((12.0 - T_2 * 2.0 / math.sqrt(3), 12.0 + T_2 * 2.0 / math.sqrt(3)), rel=1e-12)
    assert found.values == [10.0, 12.0, 14.0]


def test_four_values_use_three_degrees_of_freedom() -> None:
    found = spread("ttft_p50", "ms", [1.0, 2.0, 3.0, 6.0])
    sd = math.sqrt(((1 - 3) ** 2 + (2 - 3) ** 2 + 0 + (6 - 3) ** 2) / 3)
    assert found.sd == pytest.approx(sd)
    assert found.ci95 is not None
    low, high = found.ci95
    assert (low + high) / 2 == pytest.approx(3.0)
    assert (high - low) / 2 == pytest.approx(T_3 * sd / 2, rel=1e-6)


def test_one_value_has_a_mean_and_nothing_else() -> None:
    found = spread("ttft_p50", "ms", [5.0])
    assert (found.n, found.mean, found.sd, found.cv, found.se, found.ci95) == (1, 5.0, None, None, None, None)


def test_the_summary_leaves_out_the_failed_runs_and_lists_them(tmp_path: Path) -> None:
    shapes = [Shape(ttft_ms=100.0, tpot_ms=10.0, requests=24), Shape(ttft_ms=150.0, tpot_ms=14.0, concurrency=4)]
    runs = [make_run("t", shapes, seed, started_at=f"2026-12-07T10:0{seed}:00+00:00") for seed in range(4)]
    failed = [FailedRun(3, runs[2].run_id, "1 of 24 requests failed: http_500 1")]
    summary = summarise(
        tag="t", workload="sweep", started_at="2026-12-07T10:00:00+00:00", seed=0, repeats=5, runs=runs,
        failed=[*failed, FailedRun(5, None, "lost the server")],
    )  # fmt: skip
    assert summary.runs == [run.run_id for run in runs]
    assert [(run.index, run.run_id) for run in summary.failed] == [(3, runs[2].run_id), (5, None)]
    assert [(level.label, level.input_tokens, level.output_tokens) for level in summary.levels] == [
        ("c=1", 64, 16),
        ("c=4", 64, 16),
    ]
    kept = [runs[0], runs[1], runs[3]]
    for index, level in enumerate(summary.levels):
        metrics = {metric.metric: metric for metric in level.metrics}
        assert list(metrics) == [
            "ttft_p50", "ttft_p90", "ttfo_p50", "tpot_p50", "itl_p50", "decode_p50", "output_tps", "request_tps",
            "e2e_p50",
        ]  # fmt: skip
        decode = [summary_.p50 for run in kept if (summary_ := run.levels[index].decode_tps) is not None]
        assert metrics["decode_p50"].values == decode
        assert metrics["decode_p50"].n == 3
        assert metrics["output_tps"].values == [run.levels[index].throughput.output_tps for run in kept]
    # Filed under the tag's repeats/ folder, and read back whole.
    path = write_repeats(tmp_path, summary)
    assert path == repeat_path(tmp_path, summary) == tmp_path / "t" / "repeats" / "20261207T1000000000.json"
    assert REPEAT_FILE.read(path) == summary
