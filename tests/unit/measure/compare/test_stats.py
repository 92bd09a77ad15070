"""The statistics of bench compare: the rank test against scipy's, decisions on samples of known
distributions, and seeded simulations of many A/A comparisons for the false-positive rate."""

from __future__ import annotations

import math
from typing import Literal

import numpy as np
import pytest
from scipy.stats import mannwhitneyu

from bench.measure.compare import stats
from bench.measure.compare.ranks import mann_whitney_p, u_counts, u_statistic

# With N simulated A/A comparisons the observed rate of a test at level ALPHA has a binomial
# standard error of sqrt(ALPHA (1 - ALPHA) / N); the tolerance is three of them.
SIMULATIONS = 400
TOLERANCE = 3 * math.sqrt(stats.ALPHA * (1 - stats.ALPHA) / SIMULATIONS)


def test_u_counts_are_the_null_distribution_of_u() -> None:
    # 2 and 2: the six orderings give U = 0, 1, 2, 2, 3, 4.
    assert u_counts(2, 2) == [1, 1, 2, 1, 1]
    for n1, n2 in ((1, 5), (3, 4), (6, 6), (10, 7)):
        counts = u_counts(n1, n2)
        assert sum(counts) == math.comb(n1 + n2, n1)
        assert counts == counts[::-1]  # symmetric about n1 n2 / 2


def test_u_statistic_counts_pairs_with_ties_as_halves() -> None:
    assert u_statistic([3.0, 4.0], [1.0, 2.0]) == 4
    assert u_statistic([1.0, 2.0], [3.0, 4.0]) == 0
    assert u_statistic([2.0], [2.0]) == 0.5


@pytest.mark.parametrize("method", ["exact", "asymptotic"])
def test_mann_whitney_gives_scipys_p_values(method: Literal["exact", "asymptotic"]) -> None:
    rng = np.random.default_rng(20261202)
    for _ in range(200):
        n1, n2 = (int(n) for n in rng.integers(2, 16, 2))
        a = rng.normal(0, 1, n1).tolist()
        b = rng.normal(rng.uniform(0, 1.5), 1, n2).tolist()
        expected = mannwhitneyu(a, b, alternative="two-sided", method=method).pvalue
        assert mann_whitney_p(a, b, method) == pytest.approx(expected, abs=1e-12)


def test_mann_whitney_with_ties_gives_scipys_p_values() -> None:
    rng = np.random.default_rng(7)
    for _ in range(100):
        a = rng.integers(0, 5, 30).astype(float).tolist()
        b = rng.integers(1, 6, 25).astype(float).tolist()
        expected = mannwhitneyu(a, b, alternative="two-sided", method="asymptotic").pvalue
        assert mann_whitney_p(a, b) == pytest.approx(expected, abs=1e-12)


def test_a_real_difference_between_runs_is_significant() -> None:
    rng = np.random.default_rng(1)
    a = rng.normal(50.0, 1.0, 6).tolist()
    b = rng.normal(100.0, 2.0, 6).tolist()
    difference = stats.between_runs(a, b, seed=3)
    assert difference.significant
    assert difference.test == "Mann-Whitney U"
    assert difference.delta_pct == pytest.approx((np.mean(b) / np.mean(a) - 1) * 100)
    assert difference.low_pct is not None
    assert difference.high_pct is not None
    assert 90 < difference.low_pct < difference.delta_pct < difference.high_pct < 110
    # Six runs a side is the fewest with which the rank test survives Holm over a level's 8 metrics.
    assert all(d.significant for d in stats.holm([difference] * 8))
    five = stats.between_runs(a[:5], b[:5], seed=3)
    assert five.test == "Welch t"
    assert all(d.significant for d in stats.holm([five] * 8))


def test_two_or_three_runs_a_side_use_welch() -> None:
    difference = stats.between_runs([50.0, 51.0, 49.0], [60.0, 61.5, 59.5], seed=0)
    assert difference.test == "Welch t"
    assert difference.significant
    assert difference.p_value is not None
    assert difference.p_value < 0.001
    same = stats.between_runs([50.0, 51.0, 49.0], [50.5, 49.5, 50.2], seed=0)
    assert not same.significant


def test_a_difference_smaller_than_the_run_to_run_noise_is_not_significant() -> None:
    """p < ALPHA and an interval off 0, but a Δ under the runs' CV: not called."""
    a = [100.0, 100.1, 99.9, 100.0, 130.0, 70.0]
    b = [x + 0.3 for x in a]
    difference = stats.between_runs(a, b, seed=0)
    assert not difference.significant


def test_a_real_difference_within_one_run_is_significant_and_equal_ones_are_not() -> None:
    rng = np.random.default_rng(5)
    a = rng.lognormal(math.log(20), 0.1, 60).tolist()
    b = rng.lognormal(math.log(15), 0.1, 60).tolist()
    faster = stats.within_run(a, b, 0.5, seed=1)
    assert faster.significant
    assert faster.delta_pct < -20
    tail = stats.within_run(a, b, 0.9, seed=1)
    assert tail.significant
    assert tail.test == "bootstrap"
    same = stats.within_run(a, rng.lognormal(math.log(20), 0.1, 60).tolist(), 0.5, seed=1)
    assert not same.significant


def test_estimates_have_their_intervals() -> None:
    between = stats.estimate_between([10.0, 12.0, 11.0])
    assert between.center == 11.0
    half = 4.302652729749464 * 1.0 / math.sqrt(3)  # t(0.975, 2) * s / sqrt(n)
    assert between.low == pytest.approx(11 - half)
    assert between.high == pytest.approx(11 + half)
    assert between.cv == pytest.approx(1 / 11)
    within = stats.estimate_within([1.0, 2.0, 3.0, 4.0, 5.0], 0.5, seed=0)
    assert within.center == 3.0
    assert within.low is not None
    assert within.high is not None
    assert 1.0 <= within.low <= 3.0 <= within.high <= 5.0


def _rate(decisions: list[bool]) -> float:
    return sum(decisions) / len(decisions)


def test_false_positive_rate_between_runs() -> None:
    """Many A/A comparisons of 2, 4, 6 and 10 runs a side drawn from one distribution: the share
    called significant stays within the tolerance of ALPHA (the CV rule makes it lower)."""
    rng = np.random.default_rng(42)
    for runs in (2, 4, 6, 10):
        called, rank_test = [], []
        for i in range(SIMULATIONS):
            a = rng.normal(50.0, 2.0, runs).tolist()
            b = rng.normal(50.0, 2.0, runs).tolist()
            difference = stats.between_runs(a, b, seed=i)
            called.append(difference.significant)
            rank_test.append(difference.p_value is not None and difference.p_value < stats.ALPHA)
        assert _rate(called) <= stats.ALPHA + TOLERANCE, (runs, _rate(called))
        assert _rate(rank_test) <= stats.ALPHA + TOLERANCE, (runs, _rate(rank_test))
        if runs == 10:  # the test alone is not conservative to the point of uselessness
            assert _rate(rank_test) >= stats.ALPHA - TOLERANCE, _rate(rank_test)


def test_false_positive_rate_within_one_run() -> None:
    rng = np.random.default_rng(43)
    for fraction in (0.5, 0.9):
        called = []
        for i in range(SIMULATIONS // 2):
            a = rng.lognormal(math.log(20), 0.2, 40).tolist()
            b = rng.lognormal(math.log(20), 0.2, 40).tolist()
            called.append(stats.within_run(a, b, fraction, seed=i).significant)
        assert _rate(called) <= stats.ALPHA + 3 * math.sqrt(stats.ALPHA * (1 - stats.ALPHA) / len(called)), (
            fraction,
            _rate(called),
        )


def test_power_against_a_ten_percent_change_with_five_runs() -> None:
    """The other side of the coin: a real 10% change with 2% run-to-run noise is called almost always."""
    rng = np.random.default_rng(44)
    called = [
        stats.between_runs(rng.normal(50.0, 1.0, 5).tolist(), rng.normal(55.0, 1.1, 5).tolist(), seed=i).significant
        for i in range(100)
    ]
    assert _rate(called) >= 0.95


def _tested(p: float, delta: float = 10.0) -> stats.Difference:
    return stats.Difference(delta, delta - 1, delta + 1, "Welch t", p, None, None, p < stats.ALPHA, "")


def test_holm_adjusts_the_p_values_of_one_family() -> None:
    adjusted = stats.holm([_tested(0.01), _tested(0.04), _tested(0.03), stats.within_run([1.0], [2.0], 0.5, seed=0)])
    assert [d.p_adjusted for d in adjusted] == [pytest.approx(0.03), pytest.approx(0.06), pytest.approx(0.06), None]
    assert [d.significant for d in adjusted] == [True, False, False, False]
    assert adjusted[1].why == "Welch t p = 0.04, Holm-adjusted 0.06 >= 0.05"
    assert adjusted[3].why == "no test is possible with these samples"


def test_family_wise_false_positive_rate_over_a_levels_metrics() -> None:
    """A/A with 3 runs a side and eight metrics, half of them nearly the same measurement (as TPOT,
    ITL, decode and E2E are): the share of comparisons with any metric called stays within the
    tolerance of ALPHA."""
    rng = np.random.default_rng(45)
    any_called = []
    for i in range(SIMULATIONS):
        shared_a, shared_b = rng.normal(50.0, 2.0, 3), rng.normal(50.0, 2.0, 3)
        family = [
            stats.between_runs(
                (shared_a + rng.normal(0, 0.2, 3)).tolist(), (shared_b + rng.normal(0, 0.2, 3)).tolist(), seed=i
            )
            for _ in range(4)
        ]
        family += [
            stats.between_runs(rng.normal(50.0, 2.0, 3).tolist(), rng.normal(50.0, 2.0, 3).tolist(), seed=i)
            for _ in range(4)
        ]
        any_called.append(any(d.significant for d in stats.holm(family)))
    assert _rate(any_called) <= stats.ALPHA + TOLERANCE, _rate(any_called)


def test_a_zero_or_missing_figure_is_not_tested() -> None:
    """A level whose window held no token has an aggregate of 0: no ratio, no verdict, no crash."""
    for difference in (
        stats.between_runs([0.0, 0.0], [1.0, 2.0], seed=0),
        stats.within_run([0.0, 0.0, 0.0], [1.0, 2.0, 3.0], 0.5, seed=0),
        stats.between_runs([1.0, math.nan], [2.0, 3.0], seed=0),
    ):
        assert not difference.significant
        assert difference.p_value is None
        assert difference.why in ("a side's figure is 0: no ratio to test", "a run value is not a number")
    assert stats.holm([stats.between_runs([0.0, 0.0], [1.0, 2.0], seed=0), _tested(0.01)])[1].significant
