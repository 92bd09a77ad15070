"""The two-sided Mann-Whitney U test, without ``scipy.stats`` (whose import alone costs more than
a whole ``bench compare`` may take): midranks for ties, the exact null distribution of U for small
samples without ties, else the normal approximation with the tie and continuity corrections.
Both branches give ``scipy.stats.mannwhitneyu``'s p-values (tests/unit/measure/compare/test_stats.py
checks them against it)."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from typing import Literal

EXACT_MAX_PRODUCT = 400  # n1 * n2 up to which (without ties) the exact distribution is used

Method = Literal["auto", "exact", "asymptotic"]


def _midranks(values: list[float]) -> list[float]:
    order = sorted(range(len(values)), key=values.__getitem__)
    ranks = [0.0] * len(values)
    start = 0
    while start < len(order):
        end = start
        while end + 1 < len(order) and values[order[end + 1]] == values[order[start]]:
            end += 1
        for position in range(start, end + 1):
            ranks[order[position]] = (start + end) / 2 + 1
        start = end + 1
    return ranks


def u_statistic(a: Sequence[float], b: Sequence[float]) -> float:
    """U of ``a``: how many of the (a, b) pairs have a above b, ties counting a half."""
    ranks = _midranks([float(value) for value in (*a, *b)])
    return sum(ranks[: len(a)]) - len(a) * (len(a) + 1) / 2


def u_counts(n1: int, n2: int) -> list[int]:
    """How many of the C(n1 + n2, n1) orderings give each U = 0 .. n1 * n2: the coefficients of
    the Gaussian binomial [n1 + n2 choose n1]_q, built one factor (1 - q^(n2+i)) / (1 - q^i) at a time."""
    size = n1 * n2 + n1 + 1
    counts = [0] * size
    counts[0] = 1
    for i in range(1, n1 + 1):
        up = n2 + i
        for k in range(size - 1, up - 1, -1):
            counts[k] -= counts[k - up]
        for k in range(i, size):
            counts[k] += counts[k - i]
    return counts[: n1 * n2 + 1]


def mann_whitney_p(a: Sequence[float], b: Sequence[float], method: Method = "auto") -> float:
    """The two-sided p of the Mann-Whitney U test of ``a`` against ``b`` (each non-empty)."""
    n1, n2 = len(a), len(b)
    u1 = u_statistic(a, b)
    u_high = max(u1, n1 * n2 - u1)
    pooled = Counter(float(value) for value in (*a, *b))
    ties = [count for count in pooled.values() if count > 1]
    if method == "exact" or (method == "auto" and not ties and n1 * n2 <= EXACT_MAX_PRODUCT):
        counts = u_counts(n1, n2)
        at_or_above = sum(counts[math.ceil(u_high) :])
        return min(1.0, 2 * at_or_above / math.comb(n1 + n2, n1))
    n = n1 + n2
    tie_term = sum(t**3 - t for t in ties) / (n * (n - 1))
    sigma = math.sqrt(n1 * n2 / 12 * ((n + 1) - tie_term))
    if sigma == 0:
        return 1.0
    z = (u_high - n1 * n2 / 2 - 0.5) / sigma
    return min(1.0, math.erfc(z / math.sqrt(2)))
