"""``bench history``: the runs of one preset across tags in time order, each tag compared with
the one before it, and every significant change for the worse flagged as a regression."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from statistics import median

from bench.errors import ConfigError
from bench.measure.compare import comparison as compare
from bench.measure.compare import store
from bench.measure.compare.store import StoredRun


@dataclass(frozen=True, slots=True)
class Regression:
    """One metric of one level that got significantly worse from the previous tag."""

    level: str
    metric: str
    delta_pct: float
    verdict: str


@dataclass(frozen=True, slots=True)
class Step:
    """One tag of the history: its runs of the preset and what changed against the previous tag."""

    tag: str
    first: str
    runs: int
    engine: str
    decode_tps: float | None  # per-stream decode p50 of its first c=1 level, median over runs
    ttft_ms: float | None
    previous: str | None
    regressions: list[Regression]
    improvements: int
    not_ranked_because: str | None
    compared: bool = True  # False when no level of its usable runs matched the previous tag's


def presets(by_tag: dict[str, list[StoredRun]]) -> list[str]:
    """The presets that the stored runs name, by name."""
    return sorted({run.preset for runs in by_tag.values() for run in runs if run.preset is not None})


def _headline(stored: list[StoredRun]) -> tuple[float | None, float | None]:
    decode, ttft = [], []
    for run in stored:
        for level in run.result.levels:
            if level.concurrency == 1 and level.rate_per_s is None:
                if level.decode_tps is not None:
                    decode.append(level.decode_tps.p50)
                if level.latency.ttft_ms is not None:
                    ttft.append(level.latency.ttft_ms.p50)
                break
    return (median(decode) if decode else None, median(ttft) if ttft else None)


def _changes(result: compare.Comparison) -> tuple[list[Regression], int]:
    """The significant changes for the worse, and how many were for the better."""
    regressions: list[Regression] = []
    improvements = 0
    for level in result.levels:
        for row in level.rows:
            if not row.difference.significant:
                continue
            if (row.difference.delta_pct > 0) == row.metric.higher_is_better:
                improvements += 1
            else:
                said = compare.verdict(row.metric, result.other, row.difference, level.key)
                regressions.append(Regression(level.title, row.metric.label, row.difference.delta_pct, said))
    return regressions, improvements


def history(
    results_dir: Path, preset: str | None, gate: Callable[[str], compare.Gate], *, include_untrusted: bool = False
) -> tuple[str, list[Step], list[str]]:
    """The preset's tags oldest first (by their first run of it), each compared with the one
    before; and the folders left out because they hold other files than results."""
    by_tag, skipped = store.readable(results_dir)
    known = presets(by_tag)
    if preset is None:
        if len(known) != 1:
            raise ConfigError(f"PRESET: name one of the presets with results: {', '.join(known) or 'none'}")
        preset = known[0]
    elif preset not in known:
        raise ConfigError(f"PRESET {preset!r}: no runs of it under {results_dir} (presets there: {', '.join(known)})")
    chosen = {tag: [run for run in runs if run.preset == preset] for tag, runs in by_tag.items()}
    ordered = sorted((runs[0].result.started_at, tag) for tag, runs in chosen.items() if runs)
    steps: list[Step] = []
    previous: str | None = None
    for first, tag in ordered:
        stored = chosen[tag]
        regressions: list[Regression] = []
        improvements = 0
        not_ranked = None
        compared = True
        if previous is not None:
            result = compare.compare(
                chosen[previous], stored, (gate(previous), gate(tag)), include_untrusted=include_untrusted
            )
            not_ranked = result.not_ranked_because
            compared = bool(result.levels)
            if not_ranked is None:  # a tag that is not ranked has no regressions to flag
                regressions, improvements = _changes(result)
        decode, ttft = _headline(stored)
        steps.append(
            Step(
                tag,
                first,
                len(stored),
                stored[-1].result.environment.engine,
                decode,
                ttft,
                previous,
                regressions,
                improvements,
                not_ranked,
                compared,
            )
        )
        if compare.usable(stored, include_untrusted)[0]:  # a tag without usable runs is no baseline
            previous = tag
    return preset, steps, skipped
