"""tests/benchmarks/speed.py: the synthetic result files it times bench over are real result files,
two tags of the asked number of runs that bench compare tells apart (tag b decodes twice as fast)."""

from __future__ import annotations

from pathlib import Path

from bench.measure.compare import store
from tests.benchmarks.speed import results_under


def test_the_timed_results_are_two_tags_of_the_asked_runs(tmp_path: Path) -> None:
    """Two runs a tag, each a sweep of one and four streams, read back by bench's result store."""
    results_under(tmp_path, 2)
    assert store.tags(tmp_path) == ["a", "b"]
    for tag in ("a", "b"):
        runs = store.runs(tmp_path, tag)
        assert len(runs) == 2
        assert [level.concurrency for level in runs[0].result.levels] == [1, 4]
    slow, fast = (store.runs(tmp_path, tag)[0].result.levels[0] for tag in ("a", "b"))
    assert slow.latency.tpot_ms is not None
    assert fast.latency.tpot_ms is not None
    assert slow.latency.tpot_ms.p50 > 1.8 * fast.latency.tpot_ms.p50
