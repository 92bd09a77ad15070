"""The arithmetic of tests/benchmarks/peer_cost.py, worked out by hand: a pair's cost per extra
token, the median over pairs, and the steady-state slopes that leave out the calibration steps."""

from __future__ import annotations

import pytest

from tests.benchmarks.peer_cost import Cost, Pair, Steady


def test_a_pair_costs_the_extra_cpu_over_the_extra_tokens() -> None:
    """1.5 s more CPU for 500,000 more tokens is 3 us a token; start-up (the short run) cancels."""
    assert Pair(2.0, 3.5, 1_000, 501_000).per_token_us == pytest.approx(3.0)


def test_the_cost_of_a_tool_is_the_median_pair_and_its_spread() -> None:
    """Slopes of 2, 3 and 10 us: the median 3 is the cost, not the mean 5; the spread is 2 to 10."""
    pairs = (Pair(1.0, 2.0, 0, 500_000), Pair(1.0, 2.5, 0, 500_000), Pair(1.0, 6.0, 0, 500_000))
    cost = Cost("bench", pairs)
    assert cost.per_token_us == pytest.approx(3.0)
    assert cost.spread_us == pytest.approx((2.0, 10.0))


def test_steady_slopes_count_only_whole_answers() -> None:
    """Samples at each answer's end: a one-token calibration step (tokens 1) is left out, two
    256-token answers costing 0.128 s and 0.256 s give 500 us and 1000 us; the median is 750."""
    samples = ((0.5, 1), (1.0, 2), (1.128, 258), (1.384, 514))
    steady = Steady("bench", samples, answer_tokens=256)
    assert steady.slopes_us == pytest.approx([500.0, 1000.0])
    assert steady.per_token_us == pytest.approx(750.0)
    assert steady.spread_us == pytest.approx((500.0, 1000.0))
