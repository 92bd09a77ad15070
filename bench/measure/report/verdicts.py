"""The verdicts that ``bench report`` prints beside each plot: ``bench compare``'s, of every later
tag against the first, for the metrics the plot draws. A plot says nothing that compare does not
(a gap between two lines that compare calls not significant is said to be so beside it)."""

from __future__ import annotations

from collections.abc import Callable

from bench.measure.compare.comparison import Comparison, LevelKey


def _sweep(key: LevelKey) -> bool:
    return key[0] == "sweep" and key[1].startswith("c=")


def _one_stream(key: LevelKey) -> bool:
    return key[1] == "c=1"


def _every(key: LevelKey) -> bool:
    return True


# Each plot that a test stands behind: compare's metrics it draws, and the levels it draws them for.
TESTED: dict[str, tuple[tuple[str, ...], Callable[[LevelKey], bool]]] = {
    "throughput": (("output_tps",), _sweep),
    "ttft": (("ttft_p50", "ttft_p90"), _every),
    "itl": (("itl_p50",), _every),
    "ttft_context": (("ttft_p50",), _one_stream),
}
# The plots no test stands behind, and why.
UNTESTED = {
    "pareto": "not tested as a whole: each point is a median over the tag's runs; bench compare tests its two "
    "figures level by level (aggregate output under the throughput plot)",
    "kv_usage": "not tested: the KV pool's usage is the server's gauge over one run, drawn to show how full it got",
    "spec_decode": "not tested: the acceptance is the server's own counter, a median over the tag's levels",
}


def plot_verdicts(comparisons: list[Comparison]) -> dict[str, list[str]]:
    """Per plot name, the lines to print beside it."""
    said: dict[str, list[str]] = {name: [] for name in (*TESTED, *UNTESTED)}
    if not comparisons:
        for lines in said.values():
            lines.append("one tag: nothing to compare it with")
        return said
    for result in comparisons:
        pair = f"{result.other} against {result.base}"
        for name, (metrics, levels) in TESTED.items():
            lines = said[name]
            if result.not_ranked_because is not None:
                lines.append(f"{pair}: not ranked ({result.not_ranked_because})")
                continue
            rows = [
                row for level in result.levels if levels(level.key) for row in level.rows if row.metric.key in metrics
            ]
            lines += [f"{pair}: {row.verdict}" for row in rows]
            if not rows:
                lines.append(f"{pair}: no level of this plot was run by both tags")
    for name, why in UNTESTED.items():
        said[name].append(why)
    return said
