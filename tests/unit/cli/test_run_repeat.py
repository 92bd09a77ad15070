"""bench run --repeat N against the scripted server (a protocol fake): N runs filed, one summary
of them filed and printed, a run with a failed request left out and listed (exit 3 after the
summary), an endpoint that cannot be reached ends the series."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.cli import main
from bench.measure.run.repeats import REPEAT_FILE
from tests.scripted import FAST, read_table, result_files, run_args, scripted


def _summary(tmp_path: Path) -> Path:
    (path,) = (tmp_path / "results" / "t" / "repeats").glob("*.json")
    return path


def test_three_runs_are_filed_and_summarised(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with scripted(tmp_path, **FAST) as server:
        assert main([*run_args(server, tmp_path), "--requests", "4", "--repeat", "3", "--seed", "7"]) == 0
    out = capsys.readouterr().out
    files = result_files(tmp_path)
    assert len(files) == 3
    summary = REPEAT_FILE.read(_summary(tmp_path))
    assert (summary.repeats, summary.seed, summary.failed) == (3, 7, [])
    assert sorted(summary.runs) == sorted(json.loads(path.read_text())["run_id"] for path in files)
    (level,) = summary.levels
    decode = {metric.metric: metric for metric in level.metrics}["decode_p50"]
    filed = [json.loads(path.read_text())["levels"][0]["decode_tps"]["p50"] for path in files]
    assert sorted(decode.values) == sorted(filed)  # each run's own figure, none recomputed
    assert "3 of 3 runs summarised (seed 7)" in out
    header, rows = read_table(out, "metric")
    assert header == ["metric", "mean [95% CI]", "sd", "CV", "n"]
    assert [row[0] for row in rows][:2] == ["ttft_p50 ms", "ttft_p90 ms"]
    assert all(row[-1] == "3" for row in rows)
    assert f"summary: {_summary(tmp_path)}" in out


def test_a_run_with_a_failed_request_is_left_out_and_listed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Arrival 9 is the fourth request of the second run (each run: two calibration requests,
    then four measured ones): that run is filed, listed, and left out of the summary."""
    with scripted(tmp_path, **FAST, requests={"9": {"status": 500}}) as server:
        assert main([*run_args(server, tmp_path), "--requests", "4", "--repeat", "3"]) == 3
    captured = capsys.readouterr()
    assert len(result_files(tmp_path)) == 3
    summary = REPEAT_FILE.read(_summary(tmp_path))
    (failed,) = summary.failed
    assert (failed.index, failed.reason) == (2, "1 of 4 requests failed: http_500 1; the result is marked untrusted")
    assert failed.run_id == summary.runs[1]
    assert all(metric.n == 2 for metric in summary.levels[0].metrics)
    assert "2 of 3 runs summarised" in captured.out
    assert "left out, run 2: 1 of 4 requests failed: http_500 1" in captured.out
    assert captured.err.rstrip().endswith(
        "bench: error: 1 of 3 runs failed (run 2: 1 of 4 requests failed: http_500 1; the result is marked "
        "untrusted); the summary covers the other 2"
    )


def test_an_unreachable_endpoint_ends_the_series(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with scripted(tmp_path, **FAST) as server:
        args = run_args(server, tmp_path)
    assert main([*args, "--requests", "4", "--repeat", "2"]) == 3
    summary = REPEAT_FILE.read(_summary(tmp_path))
    assert [(run.index, run.run_id) for run in summary.failed] == [(1, None), (2, None)]
    assert summary.failed[1].reason == "not run: the endpoint could not be used"
    assert (summary.runs, summary.levels) == ([], [])
    assert "--base-url" in capsys.readouterr().err


def test_a_repeat_below_one_names_the_flag(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with scripted(tmp_path, **FAST) as server:
        assert main([*run_args(server, tmp_path), "--repeat", "0"]) == 2
    assert capsys.readouterr().err.strip() == "bench: error: --repeat: 0 runs; give 1 or more"
    assert result_files(tmp_path) == []
