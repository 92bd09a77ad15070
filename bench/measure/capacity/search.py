"""The search of ``bench capacity``: the largest value of one axis (streams at once, or prompt
tokens of one stream) whose measured level still passes, found with few levels. Pure logic, no
I/O: the caller measures each value :meth:`BoundarySearch.next_value` asks for and records
whether it passed.

1. Growth: the lowest value first, then twice the last value that passed (at most ``cap``),
   until a value fails or the cap passes.
2. Bisection between the highest value that passed and the lowest that failed, until they are
   at most ``max(step, precision * passed)`` apart (concurrency: 1 apart, so the boundary is
   exact; context: within a fraction of the answer, since each long prompt costs a long prefill).

Both phases take about log2 of the answer levels each. The search only ever measures values
between the highest pass and the lowest fail, so a level that passes or fails by chance (the
server was busier for a moment) can move the answer by that level and no further: the answer is
always a value that was measured and passed, below every value that was measured and failed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Outcome = Literal["found", "not_reached", "cap_passed"]


@dataclass(frozen=True, slots=True)
class SearchAnswer:
    """Where a search ended. ``found``: ``value`` passed and ``first_failed`` did not (nothing
    between them is left to measure); ``not_reached``: even the lowest value failed (``value`` is
    None); ``cap_passed``: the cap itself passed, so the answer is at least ``value`` (the cap)."""

    outcome: Outcome
    value: int | None
    first_failed: int | None


class BoundarySearch:
    """Exponential growth from ``lowest``, then bisection, over the integers up to ``cap``."""

    def __init__(self, lowest: int, cap: int, *, step: int = 1, precision: float = 0.0) -> None:
        if lowest < 1 or cap < lowest:
            raise ValueError(f"a search needs 1 <= lowest <= cap, got lowest {lowest}, cap {cap}")
        if step < 1 or not 0.0 <= precision < 1.0:
            raise ValueError(f"a search needs step >= 1 and 0 <= precision < 1, got {step} and {precision}")
        self.lowest, self.cap, self.step, self.precision = lowest, cap, step, precision
        self.passed: int | None = None  # the highest value that passed
        self.failed: int | None = None  # the lowest value that failed
        self.tried: list[tuple[int, bool]] = []

    def _close_enough(self, passed: int, failed: int) -> bool:
        return failed - passed <= max(self.step, int(self.precision * passed))

    def next_value(self) -> int | None:
        """The value to measure next; None when the search is over (see :attr:`answer`)."""
        if self.failed is not None and self.failed <= self.lowest:
            return None
        if self.passed is None:
            return self.lowest
        if self.failed is None:
            return None if self.passed >= self.cap else min(self.cap, 2 * self.passed)
        if self._close_enough(self.passed, self.failed):
            return None
        return (self.passed + self.failed) // 2

    def record(self, value: int, passed: bool) -> None:
        """Record the outcome of the value :meth:`next_value` asked for."""
        if value != self.next_value():
            raise ValueError(f"recorded {value}, but the search asked for {self.next_value()}")
        self.tried.append((value, passed))
        if passed:
            self.passed = value
        else:
            self.failed = value

    @property
    def answer(self) -> SearchAnswer:
        """The answer of a finished search."""
        if self.next_value() is not None:
            raise ValueError("the search is not over")
        if self.passed is None:
            return SearchAnswer("not_reached", None, self.failed)
        if self.failed is None:
            return SearchAnswer("cap_passed", self.passed, None)
        return SearchAnswer("found", self.passed, self.failed)
