"""bench tags, compare and history as a user runs them, on result files of known distributions."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.cli import main
from tests.synthetic_runs import Shape, deployment, file_run, make_run

SLOW = Shape(ttft_ms=100.0, tpot_ms=20.0, requests=24)
FAST = Shape(ttft_ms=100.0, tpot_ms=10.0, requests=24)


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("results")
    for seed, (tag, shape, kv) in enumerate(
        [("v1", SLOW, "auto"), ("v1", SLOW, "auto"), ("v2", FAST, "fp8"), ("v2", FAST, "fp8")]
    ):
        started = f"2026-11-0{1 + seed // 2}T10:0{seed}:00+00:00"
        file_run(folder, make_run(tag, [shape], seed, started_at=started, deployment=deployment(kv_cache_dtype=kv)))
    return folder


@pytest.fixture(autouse=True)
def _wide(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tables as wide as they need (a terminal's COLUMNS would cut them, and differs between hosts)."""
    monkeypatch.setenv("COLUMNS", "200")


def _bench(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    status = main(list(args))
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def test_tags_lists_each_tag_and_the_settings_that_differ(results: Path, capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = _bench(capsys, "tags", "--results-dir", str(results))
    assert status == 0
    assert "v1 " in out
    assert "v2 " in out
    assert "qwen3.8-27b-w4a16" in out
    assert "Settings that differ between tags" in out
    assert "vllm.args --kv-cache-dtype" in out
    assert "auto" in out
    assert "fp8" in out


def test_compare_prints_figures_verdicts_and_candidate_causes(
    results: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status, out, _ = _bench(capsys, "compare", "v1", "v2", "--results-dir", str(results))
    assert status == 0
    assert "v2 against v1" in out
    assert "v1: no probe on record, so ranked unchecked (bench probe --tag TAG checks" in out
    assert "once a probe fails any check, an expected failure included, the tag is not ranked without" in out
    assert "sweep c=1, 64 in / 16 out" in out
    assert "tested between runs (2 and 2 runs; one value per run; Welch t)" in out
    assert "* v2 decodes 2.0x faster per stream at one stream (better), significant" in out
    assert "- no significant difference in TTFT p50 at one stream" in out
    assert "What differs between the configurations (candidate causes):" in out
    assert "vllm.args --kv-cache-dtype: auto -> fp8" in out
    assert "outcomes, not causes" not in out  # the runs recorded no start-up figures


@pytest.mark.parametrize("columns", [200, 80, 60, 40])
def test_compare_never_cuts_a_figure(
    results: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, columns: int
) -> None:
    """Every figure, interval, difference and p of the table is printed whole at any terminal width:
    the table wraps between a figure and its interval, and where even that would cut one, each
    metric is a line of its own (an 80-column terminal once showed "935.2 [796.2, 1,074…")."""
    from bench.cli.compare import _cells  # noqa: PLC0415
    from bench.measure.compare import comparison, store  # noqa: PLC0415

    monkeypatch.setenv("COLUMNS", str(columns))
    status, out, _ = _bench(capsys, "compare", "v1", "v2", "--results-dir", str(results))
    assert status == 0
    assert "…" not in out
    gates = (comparison.Gate("v1", None), comparison.Gate("v2", None))
    (level,) = comparison.compare(store.runs(results, "v1"), store.runs(results, "v2"), gates).levels
    words = set(out.split())
    cells = [cell for row in level.rows for cell in _cells(row)[1:]]
    assert len(cells) == 5 * 8
    missing = [word for cell in cells for word in cell.split() if word not in words]
    assert missing == []
    assert ("───" in out) == (columns >= 80)  # the table where it fits whole, lines where it does not


def test_compare_needs_two_known_tags(results: Path, capsys: pytest.CaptureFixture[str]) -> None:
    status, _, err = _bench(capsys, "compare", "v1", "--results-dir", str(results))
    assert (status, err.strip()) == (2, "bench: error: TAG: give at least two tags, the baseline first")
    status, _, err = _bench(capsys, "compare", "v1", "v9", "--results-dir", str(results))
    assert status == 2
    assert err.startswith("bench: error: tag 'v9': no result files under ")
    assert err.rstrip().endswith("(tags in " + str(results) + ": v1, v2)")


def test_history_flags_the_regression(tmp_path: Path, results: Path, capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = _bench(capsys, "history", "--results-dir", str(results))
    assert status == 0
    assert "History of qwen3.8-27b-w4a16" in out
    assert "no regression (" in out  # v2 is faster than v1
    assert "better, vs v1)" in out
    later = tmp_path / "results"
    for seed, (tag, shape, day) in enumerate([("v1", FAST, 1), ("v1", FAST, 1), ("v2", SLOW, 2), ("v2", SLOW, 2)]):
        file_run(
            later,
            make_run(tag, [shape], seed, started_at=f"2026-11-0{day}T10:0{seed}:00+00:00", deployment=deployment()),
        )
    status, out, _ = _bench(capsys, "history", "--results-dir", str(later))
    assert status == 0
    assert (
        "REGRESSION v2 vs v1, sweep c=1, 64 in / 16 out: "
        "v2's TPOT p50 is 2.0x higher at one stream (worse), significant" in out
    )
