"""The Pareto plot's points and frontier: exact on points of known figures, and from result files."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from matplotlib.axes import Axes

from bench.measure.compare import store
from bench.measure.report import data as report_data
from bench.measure.report import plots
from bench.measure.report.pareto import ParetoPoint, frontier, points


def _p(tag: str, streams: int, total: float, user: float) -> ParetoPoint:
    return ParetoPoint(tag, streams, total, user)


def test_the_frontier_keeps_exactly_the_points_nothing_beats_on_both() -> None:
    a1, a4, a8 = _p("a", 1, 40, 40), _p("a", 4, 120, 30), _p("a", 8, 150, 12)
    b1, b4, b8 = _p("b", 1, 35, 35), _p("b", 4, 130, 30), _p("b", 8, 140, 20)
    # b4 beats a4 (more in all, as much per user); b1 is beaten by a1; a8 and b8 trade off.
    assert frontier([a1, a4, a8, b1, b4, b8]) == [a1, b4, b8, a8]
    assert frontier([a1]) == [a1]
    assert frontier([]) == []
    twin = _p("c", 1, 40, 40)  # the same figures twice: neither beats the other
    assert frontier([a1, twin]) == [a1, twin]


def test_points_are_the_sweep_levels_medians_over_runs(results: Path) -> None:
    """The synthetic tags' sweeps (1 and 4 streams, two runs each; tests/synthetic_runs.py):
    medians of the levels' own aggregate output and per-stream decode p50."""
    runs = store.runs(results, "mtp")
    found = points("mtp", runs)
    assert [point.streams for point in found] == [1, 4]
    for point in found:
        levels = [
            level
            for run in runs
            if run.result.workload == "sweep"
            for level in run.result.levels
            if level.concurrency == point.streams
        ]
        assert len(levels) == 2
        totals = sorted(level.throughput.output_tps or 0.0 for level in levels)
        users = sorted(level.decode_tps.p50 for level in levels if level.decode_tps is not None)
        assert point.total_tps == pytest.approx(sum(totals) / 2)
        assert point.user_tps == pytest.approx(sum(users) / 2)
    assert points("mtp", [run for run in runs if run.result.workload == "context"]) == []


def test_the_plot_marks_the_frontier_over_every_tag(results: Path) -> None:
    tags = [report_data.series(tag, store.runs(results, tag)) for tag in ("base", "mtp")]
    best = frontier([point for series in tags for point in series.pareto])
    # mtp decodes faster and serves more at both levels: its two points are the frontier.
    assert [(point.tag, point.streams) for point in best] == [("mtp", 1), ("mtp", 4)]
    (axes,) = [figure.axes[0] for name, _, figure in plots.figures(tags) if name == "pareto"]
    assert isinstance(axes, Axes)
    lines = {line.get_label(): line for line in axes.get_lines()}
    assert list(lines) == ["base", "mtp", "frontier"]
    assert np.asarray(lines["frontier"].get_xdata()).tolist() == [point.total_tps for point in best]
    assert sorted(text.get_text() for text in axes.texts) == ["c=1", "c=1", "c=4", "c=4"]
    assert (axes.get_xlim()[0], axes.get_ylim()[0]) == (0, 0)
