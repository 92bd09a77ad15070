"""bench.measure.capacity.attainment: the Wilson score interval against published values and its
closed forms at the ends (met = n: the lower bound is n / (n + z^2); met = 0: the upper bound is
z^2 / (n + z^2)), the verdict at, above and below the target, and bad input refused."""

from __future__ import annotations

import pytest
from scipy import stats as scipy_stats

from bench.measure.capacity.attainment import Interval, verdict, wilson, z_of

Z95 = 1.959963984540054  # the standard normal's 0.975 quantile


@pytest.mark.parametrize(
    ("met", "n", "low", "high"),
    [
        (7, 10, 0.396778147461145, 0.892208732593699),  # statsmodels proportion_confint(7, 10, method="wilson")
        (5, 7, 0.358934451832619, 0.917781075995943),
        (38, 40, 0.834961226308590, 0.986179332613852),
        (1, 2, 0.094531205734134, 0.905468794265866),
    ],
)
def test_the_interval_matches_known_values(met: int, n: int, low: float, high: float) -> None:
    """95% Wilson intervals to 12 decimals, and the same as scipy's binomtest(...).proportion_ci."""
    interval = wilson(met, n, 0.95)
    assert interval.low == pytest.approx(low, abs=1e-12)
    assert interval.high == pytest.approx(high, abs=1e-12)
    reference = scipy_stats.binomtest(met, n).proportion_ci(0.95, method="wilson")
    assert (interval.low, interval.high) == pytest.approx((reference.low, reference.high), abs=1e-12)


@pytest.mark.parametrize("n", [1, 10, 34, 35, 200])
def test_the_ends_have_closed_forms(n: int) -> None:
    """All met: [n / (n + z^2), 1]; none met: [0, z^2 / (n + z^2)]. So at 95% it takes 35
    requests, all met, before the lower bound clears 0.9 (34: 0.8985; 35: 0.9011)."""
    z2 = Z95 * Z95
    assert wilson(n, n, 0.95) == Interval(pytest.approx(n / (n + z2), abs=1e-12), 1.0)  # type: ignore[arg-type]
    assert wilson(0, n, 0.95) == Interval(0.0, pytest.approx(z2 / (n + z2), abs=1e-12))  # type: ignore[arg-type]
    assert (wilson(n, n, 0.95).low >= 0.9) == (n >= 35)


def test_the_quantile_of_a_confidence() -> None:
    """95%: 1.959964; 90%: 1.644854 (the 0.95 quantile)."""
    assert z_of(0.95) == pytest.approx(Z95, abs=1e-12)
    assert z_of(0.90) == pytest.approx(1.6448536269514722, abs=1e-12)


def test_a_higher_confidence_widens_the_interval() -> None:
    """8 of 10 at 99% holds the 95% interval strictly inside it."""
    narrow, wide = wilson(8, 10, 0.95), wilson(8, 10, 0.99)
    assert wide.low < narrow.low < 0.8 < narrow.high < wide.high


@pytest.mark.parametrize(
    ("low", "high", "expected"),
    [(0.9, 1.0, "pass"), (0.91, 0.99, "pass"), (0.85, 0.95, "inconclusive"), (0.5, 0.9, "inconclusive"),
     (0.5, 0.8999, "fail")],
)  # fmt: skip
def test_the_verdict_against_a_target_of_0_9(low: float, high: float, expected: str) -> None:
    """Pass when the whole interval is at or above the target, fail when it is wholly below,
    inconclusive when the target lies inside it (its ends included on the high side)."""
    assert verdict(Interval(low, high), 0.9) == expected


@pytest.mark.parametrize(("met", "n"), [(0, 0), (3, 2), (-1, 4)])
def test_impossible_counts_are_refused(met: int, n: int) -> None:
    with pytest.raises(ValueError, match="a Wilson interval needs"):
        wilson(met, n, 0.95)
    with pytest.raises(ValueError, match="between 0 and 1"):
        z_of(1.0)
