"""The plots of ``bench report``, drawn on matplotlib Figures (no pyplot, no display) as PNG bytes: one line
or set of bars per tag. A plot with nothing to draw for any tag still appears, saying which run
would fill it. Every value axis starts at zero, so that a ratio read off a plot is the real one
(an axis zoomed on the points makes a 3 % difference look like 3x); a plot whose tags each have
one point draws labelled bars, not lines."""

from __future__ import annotations

import io
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from bench.measure.report.data import Point, TagSeries
from bench.measure.report.pareto import ParetoPoint, frontier

SIZE = (7.0, 4.0)
DPI = 100


@dataclass(frozen=True, slots=True)
class Plot:
    """One drawn plot: its file name, title and PNG bytes."""

    name: str
    title: str
    png: bytes


def _figure(value: float) -> str:
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:,.3g}"


def _lines(axes: Axes, lines: list[tuple[str, list[Point]]], marker: str = "o", *, bar_x: str = "") -> bool:
    """One line per tag from zero; where every tag has one point at most, one labelled bar per tag
    (its x said under it as "at X ``bar_x``")."""
    shown = [(tag, points) for tag, points in lines if points]
    if not shown:
        return False
    if all(len(points) == 1 for _, points in shown):
        for index, (tag, (point,)) in enumerate(shown):
            bars = axes.bar(index, point.y, label=tag, color=f"C{index}")
            axes.bar_label(bars, labels=[_figure(point.y)])
        axes.set_xticks(range(len(shown)), [f"{tag}\nat {_figure(points[0].x)} {bar_x}" for tag, points in shown])
        axes.set_xlabel("")
    else:
        for tag, points in shown:
            axes.plot([p.x for p in points], [p.y for p in points], marker=marker, label=tag)
        axes.set_xlim(left=0)
    axes.set_ylim(bottom=0)
    return True


def _ecdf(axes: Axes, samples: list[tuple[str, list[float]]]) -> bool:
    drawn = False
    for tag, values in samples:
        if values:
            ordered = np.sort(np.asarray(values, dtype=float))
            axes.step(ordered, np.arange(1, len(ordered) + 1) / len(ordered), where="post", label=tag)
            drawn = True
    if drawn:
        axes.set_xlim(left=0)
        axes.set_ylim(0, 1.02)
    return drawn


def figure(title: str, *, axes_labels: tuple[str, str], empty: str, paint: Callable[[Axes], bool]) -> Figure:
    """One plot as a matplotlib Figure (what :func:`plots` encodes as PNG)."""
    drawn = Figure(figsize=SIZE, dpi=DPI)
    axes = drawn.subplots()
    axes.set_title(title)
    axes.set_xlabel(axes_labels[0])
    axes.set_ylabel(axes_labels[1])
    if paint(axes):
        axes.grid(visible=True, alpha=0.3)
        axes.legend()
    else:
        axes.text(0.5, 0.5, empty, ha="center", va="center", transform=axes.transAxes, wrap=True)
    drawn.tight_layout()
    return drawn


def _png(drawn: Figure) -> bytes:
    buffer = io.BytesIO()
    drawn.savefig(buffer, format="png", metadata={"Software": None})
    return buffer.getvalue()


def _bars(axes: Axes, values: list[tuple[str, float | None]]) -> bool:
    shown = [(tag, value) for tag, value in values if value is not None]
    if not shown:
        return False
    axes.bar([tag for tag, _ in shown], [value * 100 for _, value in shown], label="accepted draft tokens")
    axes.set_ylim(0, 100)
    return True


def _pareto(axes: Axes, tags: list[TagSeries]) -> bool:
    """Each tag's sweep levels as points labelled by their streams, joined in order; the frontier
    over every tag as a dashed step line through its points, circled."""
    every: list[ParetoPoint] = [point for series in tags for point in series.pareto]
    if not every:
        return False
    for index, series in enumerate(tags):
        if series.pareto:
            xs, ys = [p.total_tps for p in series.pareto], [p.user_tps for p in series.pareto]
            axes.plot(xs, ys, marker="o", label=series.tag, color=f"C{index}")
            for point in series.pareto:
                axes.annotate(
                    f"c={point.streams}",
                    (point.total_tps, point.user_tps),
                    textcoords="offset points",
                    xytext=(4, 4),
                    fontsize=8,
                )
    best = frontier(every)
    axes.step(
        [p.total_tps for p in best],
        [p.user_tps for p in best],
        where="post",
        linestyle="--",
        color="0.3",
        label="frontier",
    )
    axes.scatter([p.total_tps for p in best], [p.user_tps for p in best], s=140, facecolors="none", edgecolors="0.3")
    axes.margins(0.08, 0.12)  # room for the labels at the edges
    axes.set_xlim(left=0)
    axes.set_ylim(bottom=0)
    return True


def _pool(series: TagSeries) -> str:
    """The KV plot's legend: the tag and its pool, since a percent means little without it (a CPU
    server's pool of 349,440 tokens is 0.2 % used by a few short requests)."""
    if series.kv_pool_tokens is None:
        return series.tag
    return f"{series.tag} (pool {series.kv_pool_tokens:,} tokens)"


# Each plot: file name, title, axis labels, what it says when no tag has data, and how it draws.
SPECS: list[tuple[str, str, tuple[str, str], str, Callable[[Axes, list[TagSeries]], bool]]] = [
    (
        "throughput",
        "Aggregate output against concurrency",
        ("concurrent streams", "output tok/s"),
        "no sweep run (bench run sweep)",
        lambda axes, tags: _lines(axes, [(t.tag, t.throughput) for t in tags], bar_x="streams"),
    ),
    (
        "ttft",
        "Time to first token, every measured request",
        ("TTFT ms", "share of requests at or under"),
        "no requests",
        lambda axes, tags: _ecdf(axes, [(t.tag, t.ttft_ms) for t in tags]),
    ),
    (
        "itl",
        "Inter-token latency, every gap between tokens",
        ("ms per token", "share of gaps at or under"),
        "no tokens",
        lambda axes, tags: _ecdf(axes, [(t.tag, t.itl_ms) for t in tags]),
    ),
    (
        "ttft_context",
        "TTFT p50 against prompt length, one stream",
        ("prompt tokens", "TTFT p50 ms"),
        "no one-stream level (bench run single, or context)",
        lambda axes, tags: _lines(axes, [(t.tag, t.ttft_by_context) for t in tags], bar_x="prompt tokens"),
    ),
    (
        "kv_usage",
        "KV pool usage over the newest run, its levels end to end",
        ("seconds", "KV pool used, percent of its blocks"),
        "the server reported no KV usage (vLLM does; llama.cpp and Ollama do not)",
        lambda axes, tags: _lines(axes, [(_pool(t), t.kv_usage) for t in tags], marker=""),
    ),
    (
        "pareto",
        "What one user gets against what the box serves (sweep levels)",
        ("aggregate output tok/s", "per-stream decode tok/s, p50"),
        "no sweep run (bench run sweep)",
        _pareto,
    ),
    (
        "spec_decode",
        "Speculative decoding: draft tokens accepted",
        ("tag", "accepted, percent"),
        "no speculative decoding in these runs (vLLM with --speculative-config)",
        lambda axes, tags: _bars(axes, [(t.tag, t.spec_acceptance) for t in tags]),
    ),
]


def figures(tags: list[TagSeries]) -> list[tuple[str, str, Figure]]:
    """Every plot of the report as a Figure, with its file name and title, in the page's order."""
    drawn = []
    for name, title, labels, empty, paint in SPECS:

        def on(axes: Axes, paint: Callable[[Axes, list[TagSeries]], bool] = paint) -> bool:
            return paint(axes, tags)

        drawn.append((name, title, figure(title, axes_labels=labels, empty=empty, paint=on)))
    return drawn


def plots(tags: list[TagSeries]) -> list[Plot]:
    """Every plot of the report, in the order the page shows them."""
    return [Plot(name, title, _png(drawn)) for name, title, drawn in figures(tags)]
