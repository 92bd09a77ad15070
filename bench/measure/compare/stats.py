"""The statistics of ``bench compare`` (BENCH-METRICS B.5): is tag B's number really different
from tag A's?

Two designs, chosen by how many runs each side has:

- **Between runs** (both sides have 2 runs or more): one value per run (that run's median, or
  its aggregate throughput), because requests inside one run share the server's state and are not
  independent samples. Each side: mean with a Student-t 95% interval and the coefficient of
  variation (CV). The difference: with 6 runs a side or more, a seeded bootstrap over runs
  (B = 1000) for the interval of Δ% and a two-sided Mann-Whitney U test; with 2 to 5 runs a side,
  Welch's t interval and test (Mann-Whitney's smallest p with 5 a side, 2/252, cannot pass the
  Holm adjustment over a level's eight metrics: 8 x 0.0079 > 0.05).
- **Within one run** (a side has a single run): the requests' own values, a seeded bootstrap of
  the difference of the statistic (median or p90) and, for the median, Mann-Whitney U. The
  verdict then rests on one run, and says so.

A difference is significant only when the test's p, Holm-adjusted over the metrics of the level
(:func:`holm`), is under ``ALPHA``, the interval of Δ% excludes 0, and (between runs) ``|Δ%|`` is
at least the larger of the two CVs.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
from scipy import special

from bench.measure.compare.ranks import mann_whitney_p

ALPHA = 0.05
RESAMPLES = 1000
# Mann-Whitney's smallest two-sided p is 2 / C(2n, n): 0.0022 with 6 runs a side, which survives
# the Holm adjustment over eight metrics (0.017); with 5 a side (0.0079) nothing could.
MIN_RUNS_FOR_RANK_TEST = 6

Design = Literal["between runs", "within one run"]


@dataclass(frozen=True, slots=True)
class Estimate:
    """One side's figure: the centre (mean of run values, or the requests' statistic) and its 95%
    interval; ``cv`` is the coefficient of variation between runs (None within one run)."""

    center: float
    low: float | None
    high: float | None
    n: int  # runs (between runs) or requests (within one run)
    cv: float | None


@dataclass(frozen=True, slots=True)
class Difference:
    """B against A: Δ% = B / A - 1, its 95% interval, the test and its p, and the decision."""

    delta_pct: float
    low_pct: float | None
    high_pct: float | None
    test: str  # "Mann-Whitney U", "Welch t", "bootstrap" or "none"
    p_value: float | None  # the test's own
    noise_pct: float | None  # the larger run-to-run CV in percent (between runs)
    p_adjusted: float | None  # Holm-adjusted over the level's metrics (see holm)
    significant: bool
    why: str  # what decided it, in words


def _t_quantile(df: float) -> float:
    """The two-sided 95% quantile of Student's t with ``df`` degrees of freedom."""
    return float(special.stdtrit(df, 1 - ALPHA / 2))


def _t_two_sided_p(t_value: float, df: float) -> float:
    return float(2 * special.stdtr(df, -abs(t_value)))


def estimate_between(values: Sequence[float]) -> Estimate:
    """Mean of the run values with its t interval and CV (at least 2 values)."""
    array = np.asarray(values, dtype=float)
    mean = float(array.mean())
    std = float(array.std(ddof=1))
    half = _t_quantile(len(array) - 1) * std / math.sqrt(len(array))
    return Estimate(mean, mean - half, mean + half, len(array), std / mean if mean else None)


def estimate_within(values: Sequence[float], fraction: float, seed: int) -> Estimate:
    """The requests' quantile ``fraction`` with a seeded percentile-bootstrap 95% interval."""
    array = np.asarray(values, dtype=float)
    center = float(np.quantile(array, fraction))
    if len(array) < 2:
        return Estimate(center, None, None, len(array), None)
    draws = _bootstrap(array, fraction, np.random.default_rng(seed))
    low, high = np.quantile(draws, [ALPHA / 2, 1 - ALPHA / 2])
    return Estimate(center, float(low), float(high), len(array), None)


def _bootstrap(array: np.ndarray, fraction: float, rng: np.random.Generator) -> np.ndarray:
    picks = rng.integers(0, len(array), size=(RESAMPLES, len(array)))
    result: np.ndarray = np.quantile(array[picks], fraction, axis=1)
    return result


def _mann_whitney(a: Sequence[float], b: Sequence[float]) -> float:
    return mann_whitney_p(a, b)


def _decide(
    delta: float,
    interval: tuple[float, float] | None,
    test: str,
    p: float | None,
    noise_pct: float | None,
    *,
    adjusted: float | None = None,
) -> Difference:
    low, high = interval if interval is not None else (None, None)
    decisive = p if adjusted is None else adjusted
    said = f"{test} p = {p:.3g}" if p is not None else test
    if adjusted is not None:
        said += f", Holm-adjusted {adjusted:.3g}"
    made = (delta, low, high, test, p, noise_pct, adjusted)
    if decisive is None or low is None or high is None or not _finite([delta, low, high, decisive]):
        return Difference(*made, False, "no test is possible with these samples")
    if decisive >= ALPHA:
        return Difference(*made, False, f"{said} >= {ALPHA:g}")
    if low <= 0 <= high:
        return Difference(*made, False, "the 95% interval of the difference contains 0")
    if noise_pct is not None and abs(delta) < noise_pct:
        return Difference(*made, False, f"|Δ| under the run-to-run CV ({noise_pct:.1f}%)")
    return Difference(*made, True, said)


def holm(differences: Sequence[Difference]) -> list[Difference]:
    """The same differences decided on Holm-adjusted p-values: the metrics of one level are one
    family, so that the chance of calling any of them significant when none differs stays under
    ``ALPHA``. A difference without a test is left as it is."""
    tested = sorted(
        (d.p_value, i) for i, d in enumerate(differences) if d.p_value is not None and math.isfinite(d.p_value)
    )
    adjusted: dict[int, float] = {}
    running = 0.0
    for rank, (p, i) in enumerate(tested):
        running = max(running, min(1.0, (len(tested) - rank) * p))
        adjusted[i] = running
    return [
        _decide(d.delta_pct, _interval(d), d.test, d.p_value, d.noise_pct, adjusted=adjusted[i]) if i in adjusted else d
        for i, d in enumerate(differences)
    ]


def _interval(difference: Difference) -> tuple[float, float] | None:
    if difference.low_pct is None or difference.high_pct is None:
        return None
    return difference.low_pct, difference.high_pct


def _untestable(why: str) -> Difference:
    return Difference(math.nan, None, None, "none", None, None, None, False, why)


def _finite(*values: Sequence[float]) -> bool:
    return all(math.isfinite(value) for side in values for value in side)


def between_runs(a: Sequence[float], b: Sequence[float], seed: int) -> Difference:
    """Δ% of the means of two sides' run values (each at least 2)."""
    if not _finite(a, b):
        return _untestable("a run value is not a number")
    mean_a, mean_b = float(np.mean(a)), float(np.mean(b))
    if mean_a <= 0 or mean_b <= 0:
        return _untestable("a side's figure is 0: no ratio to test")
    delta = (mean_b / mean_a - 1) * 100
    cvs = [float(np.std(side, ddof=1) / np.mean(side)) * 100 for side in (a, b)]
    if min(len(a), len(b)) >= MIN_RUNS_FOR_RANK_TEST:
        rng = np.random.default_rng(seed)
        array_a, array_b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
        draws_a = array_a[rng.integers(0, len(a), size=(RESAMPLES, len(a)))].mean(axis=1)
        draws_b = array_b[rng.integers(0, len(b), size=(RESAMPLES, len(b)))].mean(axis=1)
        ratios = (draws_b / draws_a - 1) * 100
        low, high = np.quantile(ratios, [ALPHA / 2, 1 - ALPHA / 2])
        return _decide(delta, (float(low), float(high)), "Mann-Whitney U", _mann_whitney(a, b), max(cvs))
    var_a, var_b = float(np.var(a, ddof=1)) / len(a), float(np.var(b, ddof=1)) / len(b)
    se = math.sqrt(var_a + var_b)
    if se == 0:
        p = 1.0 if mean_a == mean_b else 0.0
        return _decide(delta, (delta, delta), "Welch t", p, max(cvs))
    df = (var_a + var_b) ** 2 / (var_a**2 / (len(a) - 1) + var_b**2 / (len(b) - 1))
    half = _t_quantile(df) * se / mean_a * 100
    p = _t_two_sided_p((mean_b - mean_a) / se, df)
    return _decide(delta, (delta - half, delta + half), "Welch t", p, max(cvs))


def within_run(a: Sequence[float], b: Sequence[float], fraction: float, seed: int) -> Difference:
    """Δ% of a quantile of two sides' request values; Mann-Whitney U tests the median, the
    bootstrap interval alone decides another quantile."""
    if not _finite(a, b):
        return _untestable("a request value is not a number")
    if float(np.quantile(a, fraction)) <= 0 or float(np.quantile(b, fraction)) <= 0:
        return _untestable("a side's figure is 0: no ratio to test")
    if len(a) < 2 or len(b) < 2:
        center = (float(np.quantile(b, fraction)) / float(np.quantile(a, fraction)) - 1) * 100
        return _decide(center, None, "none", None, None)
    array_a, array_b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    delta = (float(np.quantile(array_b, fraction)) / float(np.quantile(array_a, fraction)) - 1) * 100
    rng = np.random.default_rng(seed)
    ratios = (_bootstrap(array_b, fraction, rng) / _bootstrap(array_a, fraction, rng) - 1) * 100
    low, high = np.quantile(ratios, [ALPHA / 2, 1 - ALPHA / 2])
    if fraction == 0.5:
        return _decide(delta, (float(low), float(high)), "Mann-Whitney U", _mann_whitney(a, b), None)
    # A tail quantile: the bootstrap interval is the test (p: the share of draws on the far side of 0).
    far = float(np.mean(ratios <= 0) if delta > 0 else np.mean(ratios >= 0))
    return _decide(delta, (float(low), float(high)), "bootstrap", min(1.0, 2 * far), None)
