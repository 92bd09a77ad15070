"""``bench history``: the runs of one preset across tags in time order, each level of a tag
compared with the newest earlier tag that ran that level, and every significant change for the
worse flagged as a regression, naming the tag it was measured against."""

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
    """One metric of one level that got significantly worse than in ``against``, the newest earlier
    tag that ran the level."""

    level: str
    metric: str
    delta_pct: float
    verdict: str
    against: str


@dataclass(frozen=True, slots=True)
class Step:
    """One tag of the history: its runs of the preset and what changed against earlier tags."""

    tag: str
    first: str
    runs: int
    engine: str
    decode_tps: float | None  # per-stream decode p50 of its first c=1 level, median over runs
    ttft_ms: float | None
    against: list[str]  # the earlier tags its levels were compared with, newest first
    regressions: list[Regression]
    improvements: int
    not_ranked_because: str | None
    uncompared: list[str]  # its levels that no earlier usable tag ran
    usable_runs: int  # the runs a comparison uses (not untrusted or partial, unless asked for)
    has_earlier: bool  # an earlier tag had usable runs to compare with


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


def _changes(result: compare.Comparison, keys: set[compare.LevelKey]) -> tuple[list[Regression], int]:
    """The significant changes for the worse in the levels ``keys``, and how many were for the better."""
    regressions: list[Regression] = []
    improvements = 0
    for level in result.levels:
        if level.key not in keys:
            continue
        for row in level.rows:
            if not row.difference.significant:
                continue
            if (row.difference.delta_pct > 0) == row.metric.higher_is_better:
                improvements += 1
            else:
                said = compare.verdict(row.metric, result.other, row.difference, level.key)
                regressions.append(
                    Regression(level.title, row.metric.label, row.difference.delta_pct, said, result.base)
                )
    return regressions, improvements


@dataclass(slots=True)
class _Against:
    """What one tag's levels met in the earlier tags, filled newest tag first."""

    tags: list[str]
    regressions: list[Regression]
    improvements: int = 0
    not_ranked_because: str | None = None


def _against_earlier(
    stored: list[StoredRun],
    tag: str,
    earlier: list[tuple[str, list[StoredRun]]],
    gate: Callable[[str], compare.Gate],
    include_untrusted: bool,
) -> tuple[_Against, list[str]]:
    """Each level of ``tag`` against the newest of ``earlier`` (oldest first) that ran it; and the
    levels none of them ran."""
    remaining = compare.level_keys(compare.usable(stored, include_untrusted)[0])
    found = _Against([], [])
    for base, runs in reversed(earlier):
        if not remaining:
            break
        result = compare.compare(runs, stored, (gate(base), gate(tag)), include_untrusted=include_untrusted)
        matched = {level.key for level in result.levels} & remaining
        if not matched:
            continue
        remaining -= matched
        found.tags.append(base)
        if result.not_ranked_because is not None:  # a tag that is not ranked has no regressions to flag
            found.not_ranked_because = found.not_ranked_because or result.not_ranked_because
            continue
        regressions, improvements = _changes(result, matched)
        found.regressions += regressions
        found.improvements += improvements
    return found, [compare.level_label(key) for key in sorted(remaining)]


def history(
    results_dir: Path, preset: str | None, gate: Callable[[str], compare.Gate], *, include_untrusted: bool = False
) -> tuple[str, list[Step], list[str]]:
    """The preset's tags oldest first (by their first run of it), each level compared with the
    newest earlier tag that ran it; and the folders left out because they hold other files than
    results."""
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
    earlier: list[tuple[str, list[StoredRun]]] = []  # the tags with usable runs so far, oldest first
    for first, tag in ordered:
        stored = chosen[tag]
        usable = compare.usable(stored, include_untrusted)[0]
        found, uncompared = _against_earlier(stored, tag, earlier, gate, include_untrusted)
        decode, ttft = _headline(stored)
        steps.append(
            Step(
                tag,
                first,
                len(stored),
                stored[-1].result.environment.engine,
                decode,
                ttft,
                found.tags,
                found.regressions,
                found.improvements,
                found.not_ranked_because,
                uncompared,
                len(usable),
                bool(earlier),
            )
        )
        if usable:  # a tag without usable runs is no baseline
            earlier.append((tag, stored))
    return preset, steps, skipped
