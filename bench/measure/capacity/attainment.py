"""Attainment, the fraction of a level's requests that met the service level, and how sure it is:
the Wilson score interval of a binomial proportion (Wilson 1927), and the verdict that compares
it with the target. Pure arithmetic, no I/O.

For ``met`` of ``n`` requests at confidence ``1 - alpha``, with ``z`` the standard normal's
``1 - alpha / 2`` quantile and ``p = met / n``::

    centre = (p + z^2 / 2n) / (1 + z^2 / n)
    half   = z / (1 + z^2 / n) * sqrt(p (1 - p) / n + z^2 / 4n^2)

The interval is ``centre -/+ half``. Unlike the normal (Wald) interval it stays inside [0, 1] and
does not shrink to nothing at ``p`` = 0 or 1, which matters here: a level where every request met
the target still has a lower bound of ``n / (n + z^2)``, so at 95 % it takes 35 requests, all met,
to show an attainment of 0.9.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from scipy import stats as scipy_stats

Verdict = Literal["pass", "fail", "inconclusive"]


@dataclass(frozen=True, slots=True)
class Interval:
    """A two-sided confidence interval of a proportion."""

    low: float
    high: float


def z_of(confidence: float) -> float:
    """The two-sided standard normal quantile of ``confidence`` (0.95: 1.959964)."""
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"a confidence is between 0 and 1, got {confidence}")
    return float(scipy_stats.norm.ppf(1.0 - (1.0 - confidence) / 2.0))


def wilson(met: int, n: int, confidence: float) -> Interval:
    """The Wilson score interval of ``met`` successes in ``n`` trials."""
    if n < 1 or not 0 <= met <= n:
        raise ValueError(f"a Wilson interval needs 0 <= met <= n and n >= 1, got {met} of {n}")
    z = z_of(confidence)
    p = met / n
    shrink = 1.0 + z * z / n
    centre = (p + z * z / (2 * n)) / shrink
    half = z / shrink * math.sqrt(p * (1.0 - p) / n + z * z / (4 * n * n))
    # At p = 0 or 1 one end is exactly 0 or 1; rounding must not move it past.
    return Interval(max(0.0, centre - half) if met else 0.0, min(1.0, centre + half) if met < n else 1.0)


def verdict(interval: Interval, target: float) -> Verdict:
    """``pass`` when the interval lies at or above ``target``, ``fail`` when it lies wholly below,
    ``inconclusive`` when it straddles it (more requests would narrow it)."""
    if interval.low >= target:
        return "pass"
    if interval.high < target:
        return "fail"
    return "inconclusive"
