"""bench report's plots as drawn (the matplotlib Figures before they become PNGs) and the verdicts
beside them: value axes from zero, bars where each tag has one point, the KV pool named, and
exactly compare's verdicts on what each plot draws."""

from __future__ import annotations

import html
import re
from pathlib import Path

import pytest
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from bench.cli import main
from bench.measure.compare import comparison as compare
from bench.measure.compare import store
from bench.measure.report import data as report_data
from bench.measure.report import plots
from bench.measure.report.data import Point, TagSeries
from bench.measure.report.verdicts import TESTED, plot_verdicts


def _axes(drawn: Figure) -> Axes:
    (axes,) = drawn.axes
    return axes


def _series(tag: str, **changes: object) -> TagSeries:
    fields: dict[str, object] = {
        "throughput": [],
        "ttft_ms": [],
        "itl_ms": [],
        "ttft_by_context": [],
        "kv_usage": [],
        "spec_acceptance": None,
        **changes,
    }
    return TagSeries(tag, **fields)  # type: ignore[arg-type]


def test_every_value_axis_starts_at_zero(results: Path) -> None:
    """Close figures (the synthetic tags differ by 15-40 %) are drawn from zero, not zoomed on the points."""
    tags = [report_data.series(tag, store.runs(results, tag)) for tag in ("base", "mtp")]
    drawn = {name: _axes(figure) for name, _, figure in plots.figures(tags)}
    assert list(drawn) == ["throughput", "ttft", "itl", "ttft_context", "kv_usage", "pareto", "spec_decode"]
    for name, axes in drawn.items():
        assert axes.get_ylim()[0] == 0, name
    for name in ("throughput", "ttft", "itl", "ttft_context", "kv_usage"):
        assert drawn[name].get_xlim()[0] == 0, name
    assert len(drawn["throughput"].get_lines()) == 2  # two levels a tag: lines


def test_one_point_per_tag_is_drawn_as_labelled_bars() -> None:
    """A sweep of one level per tag: one bar each, its value on it and its level under it, no line."""
    tags = [
        _series("two-slots", throughput=[Point(2.0, 22.3)]),
        _series("one-slot", throughput=[Point(2.0, 29.35)]),
    ]
    axes = _axes(plots.figures(tags)[0][2])
    assert axes.get_lines() == []
    assert [round(patch.get_height(), 2) for patch in axes.patches if isinstance(patch, Rectangle)] == [22.3, 29.35]
    assert len(axes.patches) == 2
    assert [label.get_text() for label in axes.get_xticklabels()] == [
        "two-slots\nat 2 streams",
        "one-slot\nat 2 streams",
    ]
    assert sorted(text.get_text() for text in axes.texts) == ["22.3", "29.4"]
    assert axes.get_ylim()[0] == 0


def test_the_kv_plot_names_each_tags_pool(results: Path) -> None:
    """The legend says how large the pool is that the percent is of (vLLM's blocks times their size)."""
    runs = store.runs(results, "mtp")
    newest = [run for run in runs if run.result.workload == "sweep"][-1]
    assert report_data.series("mtp", runs).kv_pool_tokens is None  # the synthetic server gave no cache_config
    newest.result.levels[0].server.cache_config.update({"num_gpu_blocks": "2730", "block_size": "128"})
    found = report_data.series("mtp", runs)
    assert found.kv_pool_tokens == 349_440
    axes = _axes(plots.figures([found])[4][2])
    legend = axes.get_legend()
    assert legend is not None
    assert [text.get_text() for text in legend.get_texts()] == ["mtp (pool 349,440 tokens)"]
    assert axes.get_ylabel() == "KV pool used, percent of its blocks"


def test_each_plot_carries_exactly_compares_verdicts_on_what_it_draws(
    results: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    gates = (compare.Gate("base", None), compare.Gate("mtp", None))
    result = compare.compare(store.runs(results, "base"), store.runs(results, "mtp"), gates)
    said = plot_verdicts([result])
    throughput = [
        f"mtp against base: {row.verdict}"
        for level in result.levels
        if level.key[0] == "sweep"
        for row in level.rows
        if row.metric.key == "output_tps"
    ]
    assert len(throughput) == 2  # the sweep's 1 and 4 streams
    assert said["throughput"] == throughput
    assert len(said["ttft"]) == 2 * 4  # p50 and p90 at each of the four levels
    assert all(line.startswith("mtp against base: ") for line in said["ttft"])
    assert said["ttft_context"] == [
        f"mtp against base: {row.verdict}"
        for level in result.levels
        if level.key[1] == "c=1"
        for row in level.rows
        if row.metric.key == "ttft_p50"
    ]
    assert said["kv_usage"][0].startswith("not tested: ")
    assert said["spec_decode"][0].startswith("not tested: ")
    assert said["pareto"][0].startswith("not tested as a whole: ")
    assert set(TESTED) | {"kv_usage", "pareto", "spec_decode"} == set(said)
    # The page prints them under each plot.
    out = tmp_path / "report"
    assert main(["report", "base", "mtp", "--results-dir", str(results), "--out", str(out)]) == 0
    capsys.readouterr()
    page = (out / "report.html").read_text()
    for name, lines in said.items():
        block = re.search(rf'data-verdicts="{name}">(.*?)</ul>', page, re.DOTALL)
        assert block is not None, name
        assert [html.unescape(item) for item in re.findall(r"<li>(.*?)</li>", block.group(1))] == lines


def test_one_tag_and_a_tag_not_ranked_say_so() -> None:
    assert plot_verdicts([])["throughput"] == ["one tag: nothing to compare it with"]
    result = compare.Comparison("a", "b", [], [], [], [], {}, "b: failed probes: tools", {})
    assert plot_verdicts([result])["ttft"] == ["b against a: not ranked (b: failed probes: tools)"]
