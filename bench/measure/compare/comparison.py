"""``bench compare``: tag B against tag A, level by level, metric by metric, with intervals,
a test and a verdict in words; and what differs between the two configurations.

Every figure is recomputed from the requests' raw events in the result files (the same warm-up
and window as ``bench run``), so both sides use one definition. Levels are matched by workload,
level label and prompt and output length; a level only one side ran is listed, not compared.
Untrusted and partial runs are left out unless asked for. A side whose capability probes failed
is shown but not ranked (see :class:`Gate`).
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass

from bench.measure import metrics
from bench.measure.compare import stats, store
from bench.measure.compare.store import StoredRun
from bench.measure.run import levels, results

LevelKey = tuple[str, str, int, int]  # workload, level label, prompt tokens, output tokens


@dataclass(frozen=True, slots=True)
class Metric:
    """A headline metric: which request value (or run value) and which quantile of it."""

    key: str
    label: str  # in verdicts
    short: str  # in tables
    unit: str
    higher_is_better: bool
    field: str  # a RequestMetrics field, "itl_ms" (each request's median gap) or "output_tps"
    fraction: float | None  # the quantile of the requests' values; None: one value per run


METRICS = (
    Metric("ttft_p50", "TTFT p50", "TTFT p50", "ms", False, "ttft_ms", 0.5),
    Metric("ttft_p90", "TTFT p90", "TTFT p90", "ms", False, "ttft_ms", 0.9),
    Metric("ttfo_p50", "time to first answer p50", "TTFO p50", "ms", False, "ttfo_ms", 0.5),
    Metric("tpot_p50", "TPOT p50", "TPOT p50", "ms", False, "tpot_ms", 0.5),
    Metric("itl_p50", "ITL p50", "ITL p50", "ms", False, "itl_ms", 0.5),
    Metric("decode_p50", "per-stream decode p50", "decode/stream", "tok/s", True, "decode_tps", 0.5),
    Metric("output_tps", "aggregate output", "output all", "tok/s", True, "output_tps", None),
    Metric("e2e_p50", "E2E p50", "E2E p50", "ms", False, "e2e_ms", 0.5),
    # Only where vLLM sent its per-request speculative decoding (bench.measure.run.spec_requests).
    Metric("accept_p50", "per-request draft acceptance p50", "accepted p50", "share", True, "spec_acceptance", 0.5),
)


@dataclass(frozen=True, slots=True)
class Gate:
    """Whether a tag may be ranked: None when its probes passed, else why not (failed checks,
    or no probe on record when probes are required)."""

    tag: str
    not_ranked_because: str | None
    note: str | None = None  # said beside the tag, e.g. "no probe on record"


@dataclass(frozen=True, slots=True)
class Row:
    """One metric of one level: both sides, the difference and the verdict."""

    metric: Metric
    base: stats.Estimate
    other: stats.Estimate
    difference: stats.Difference
    verdict: str


@dataclass(frozen=True, slots=True)
class LevelComparison:
    """One level both tags ran."""

    key: LevelKey
    design: stats.Design
    runs: tuple[int, int]  # runs of each side that had this level
    note: str  # how the test was made, in words
    rows: list[Row]

    @property
    def title(self) -> str:
        workload, label, prompt, output = self.key
        return f"{workload} {label}, {prompt:,} in / {output:,} out"


@dataclass(frozen=True, slots=True)
class Comparison:
    """Tag ``other`` against tag ``base``."""

    base: str
    other: str
    levels: list[LevelComparison]
    only_base: list[str]  # levels only one side ran
    only_other: list[str]
    left_out: list[str]  # runs not used, and why
    differences: dict[str, tuple[str | None, str | None]]  # configuration: the candidate causes
    not_ranked_because: str | None
    outcomes: dict[str, tuple[str | None, str | None]]  # what the engines measured while they started


def _values(stored: StoredRun) -> dict[LevelKey, dict[str, list[float]]]:
    """Per level of one run: each metric field's values over the measured requests."""
    found: dict[LevelKey, dict[str, list[float]]] = {}
    by_level = results.records_by_level(stored.result)
    for level, records in zip(stored.result.levels, by_level, strict=True):
        if level.saturated is not None:  # no steady state to compare (bench.measure.run.saturation)
            continue
        key = (stored.result.workload, level.label, level.tokens.input_target, level.tokens.output_target)
        measured = levels.measured_requests(records, level)
        values: dict[str, list[float]] = {}
        for name in ("ttft_ms", "ttfo_ms", "tpot_ms", "decode_tps", "e2e_ms", "spec_acceptance"):
            values[name] = [float(getattr(m, name)) for m in measured if getattr(m, name) is not None]
        values["itl_ms"] = [metrics.weighted_percentile(m.itl_samples, 0.5) for m in measured if m.itl_samples]
        output = level.throughput.output_tps
        values["output_tps"] = [output] if output is not None else []
        found[key] = values
    return found


def level_keys(stored: list[StoredRun]) -> set[LevelKey]:
    """The levels the runs ran, as compare matches them."""
    return {
        (run.result.workload, level.label, level.tokens.input_target, level.tokens.output_target)
        for run in stored
        for level in run.result.levels
    }


def level_label(key: LevelKey) -> str:
    """A level key in words, as the lists of levels only one side ran say it."""
    workload, label, prompt, output = key
    return f"{workload} {label} ({prompt} in/{output} out)"


def _where(key: LevelKey) -> str:
    workload, label, prompt, _ = key
    if label == "c=1":
        where = "at one stream"
    elif label.startswith("c="):
        where = f"at {label.removeprefix('c=')} streams"
    else:
        where = f"at {label}"
    return f"{where}, {prompt:,}-token prompts" if workload == "context" else where


def verdict(metric: Metric, other: str, difference: stats.Difference, key: LevelKey) -> str:
    """The row's verdict in words: what B does against A, and whether it is significant."""
    if not difference.significant:
        return f"no significant difference in {metric.label} {_where(key)} ({difference.why})"
    ratio = 1 + difference.delta_pct / 100
    up = ratio > 1
    if ratio >= 1.5 or ratio <= 1 / 1.5:
        amount = f"{max(ratio, 1 / ratio):.1f}x"
    else:
        amount = f"{abs(difference.delta_pct):.0f}%"
    if metric.key == "decode_p50":
        phrase = f"{other} decodes {amount} {'faster' if up else 'slower'} per stream"
    else:
        phrase = f"{other}'s {metric.label} is {amount} {'higher' if up else 'lower'}"
    better = up == metric.higher_is_better
    return f"{phrase} {_where(key)} ({'better' if better else 'worse'}), significant ({difference.why})"


def _row(metric: Metric, key: LevelKey, a: list[dict[str, list[float]]], b: list[dict[str, list[float]]]) -> Row | None:
    seed = zlib.crc32(f"{metric.key} {key}".encode())
    design_between = len(a) >= 2 and len(b) >= 2
    if design_between:
        fraction = metric.fraction
        run_a = [_run_value(values[metric.field], fraction) for values in a if values[metric.field]]
        run_b = [_run_value(values[metric.field], fraction) for values in b if values[metric.field]]
        if len(run_a) < 2 or len(run_b) < 2:
            return None
        base, other = stats.estimate_between(run_a), stats.estimate_between(run_b)
        difference = stats.between_runs(run_a, run_b, seed)
    else:
        pooled_a = [value for values in a for value in values[metric.field]]
        pooled_b = [value for values in b for value in values[metric.field]]
        if not pooled_a or not pooled_b:
            return None
        fraction = metric.fraction if metric.fraction is not None else 0.5
        base = stats.estimate_within(pooled_a, fraction, seed)
        other = stats.estimate_within(pooled_b, fraction, seed + 1)
        difference = stats.within_run(pooled_a, pooled_b, fraction, seed)
    return Row(metric, base, other, difference, "")


def _run_value(values: list[float], fraction: float | None) -> float:
    if fraction is None:
        return values[0]
    return metrics.percentile(sorted(values), fraction)


def _note(design: stats.Design, runs: tuple[int, int]) -> str:
    if design == "between runs":
        test = "bootstrap over runs and Mann-Whitney U" if min(runs) >= stats.MIN_RUNS_FOR_RANK_TEST else "Welch t"
        return f"tested between runs ({runs[0]} and {runs[1]} runs; one value per run; {test})"
    return (
        f"the verdict rests on one run ({runs[0]} and {runs[1]} runs): requests within a run are not "
        "independent samples; run each tag at least twice to test between runs"
    )


def usable(stored: list[StoredRun], include_untrusted: bool) -> tuple[list[StoredRun], list[str]]:
    """The runs a comparison uses, and the ones it leaves out with why."""
    kept, left = [], []
    for run in stored:
        result = run.result
        if not include_untrusted and (result.partial or not result.trusted):
            why = "partial" if result.partial else "untrusted"
            left.append(f"{result.tag}/{run.path.name}: {why} (--include-untrusted to use it)")
        else:
            kept.append(run)
    return kept, left


def compare(
    base: list[StoredRun], other: list[StoredRun], gates: tuple[Gate, Gate], *, include_untrusted: bool = False
) -> Comparison:
    """``other``'s runs against ``base``'s (each the runs of one tag)."""
    base_tag, other_tag = gates[0].tag, gates[1].tag
    kept_a, left_a = usable(base, include_untrusted)
    kept_b, left_b = usable(other, include_untrusted)
    values_a = [_values(run) for run in kept_a]
    values_b = [_values(run) for run in kept_b]
    keys_a = {key for values in values_a for key in values}
    keys_b = {key for values in values_b for key in values}
    reasons = [f"{gate.tag}: {gate.not_ranked_because}" for gate in gates if gate.not_ranked_because]
    not_ranked = "; ".join(reasons) or None
    compared = []
    for key in sorted(keys_a & keys_b):
        a = [values[key] for values in values_a if key in values]
        b = [values[key] for values in values_b if key in values]
        design: stats.Design = "between runs" if len(a) >= 2 and len(b) >= 2 else "within one run"
        found = [row for row in (_row(metric, key, a, b) for metric in METRICS) if row is not None]
        rows = []
        for row, difference in zip(found, stats.holm([row.difference for row in found]), strict=True):
            said = "not ranked" if not_ranked else verdict(row.metric, other_tag, difference, key)
            rows.append(Row(row.metric, row.base, row.other, difference, said))
        compared.append(LevelComparison(key, design, (len(a), len(b)), _note(design, (len(a), len(b))), rows))
    differing = store.differences(store.tag_configuration(base), store.tag_configuration(other))
    return Comparison(
        base=base_tag,
        other=other_tag,
        levels=compared,
        only_base=[level_label(key) for key in sorted(keys_a - keys_b)],
        only_other=[level_label(key) for key in sorted(keys_b - keys_a)],
        left_out=left_a + left_b,
        differences={key: pair for key, pair in differing.items() if not store.is_outcome(key)},
        not_ranked_because=not_ranked,
        outcomes={key: pair for key, pair in differing.items() if store.is_outcome(key)},
    )
