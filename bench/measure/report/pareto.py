"""The trade-off between what one user gets and what the box serves in all, as vLLM's
``plot_pareto`` draws it: per sweep level, per-stream decode tok/s (p50, what one user reads at)
against aggregate output tok/s, across tags and levels; the frontier is the points that no other
point beats on both at once (``bench report``'s ``pareto`` plot)."""

from __future__ import annotations

from dataclasses import dataclass
from statistics import median

from bench.measure.compare.store import StoredRun


@dataclass(frozen=True, slots=True)
class ParetoPoint:
    """One sweep level of one tag: aggregate output against per-stream decode, medians over runs."""

    tag: str
    streams: int
    total_tps: float  # aggregate output tok/s
    user_tps: float  # per-stream decode tok/s, p50 over the level's requests


def points(tag: str, stored: list[StoredRun]) -> list[ParetoPoint]:
    """The tag's sweep levels (closed loop), one point per concurrency, medians over its runs."""
    found: dict[int, tuple[list[float], list[float]]] = {}
    for run in stored:
        if run.result.workload != "sweep":
            continue
        for level in run.result.levels:
            total = level.throughput.output_tps
            if level.rate_per_s is not None or total is None or level.decode_tps is None:
                continue
            totals, users = found.setdefault(level.concurrency, ([], []))
            totals.append(total)
            users.append(level.decode_tps.p50)
    return [
        ParetoPoint(tag, streams, median(totals), median(users)) for streams, (totals, users) in sorted(found.items())
    ]


def frontier(candidates: list[ParetoPoint]) -> list[ParetoPoint]:
    """The points no other point beats on both figures (at least as good on both, better on one),
    by aggregate output; ties on both figures are all kept."""
    kept = [
        point
        for point in candidates
        if not any(
            other.total_tps >= point.total_tps
            and other.user_tps >= point.user_tps
            and (other.total_tps > point.total_tps or other.user_tps > point.user_tps)
            for other in candidates
        )
    ]
    return sorted(kept, key=lambda point: (point.total_tps, -point.user_tps))
