"""The search of ``bench capacity``: the largest value of one axis (streams at once, or prompt
tokens of one stream) whose measured level still passes, found with few levels. Pure logic, no
I/O: the caller measures each value :meth:`BoundarySearch.next_value` asks for and records its
verdict: ``pass``, ``fail``, or ``inconclusive`` (the level's attainment interval still straddled
the target when its sampling stopped; :mod:`bench.measure.capacity.attainment`).

1. Growth: the lowest value first, then twice the last value that passed (at most ``cap``),
   until a value does not pass or the cap passes.
2. Bisection between the highest value that passed and the lowest that did not (failed, or was
   inconclusive), until they are at most ``max(step, precision * passed)`` apart (concurrency:
   1 apart, so the boundary is exact; context: within a fraction of the answer, since each long
   prompt costs a long prefill).

An inconclusive level bounds the search as a failure does (nothing above it is measured), but it
is not a failure: when the lowest level that did not pass is inconclusive, the boundary hangs on
it and the answer is ``inconclusive``, with no number. The caller stops the search with
:meth:`BoundarySearch.run_out` when its budget cannot pay for the next level; the answer is then
``at_least`` the highest value that passed. So the answer's value is always a value that was
measured and passed with confidence, below every value that was measured and did not pass.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from bench.measure.capacity.attainment import Verdict

Outcome = Literal["found", "at_least", "inconclusive", "not_reached", "cap_passed"]


@dataclass(frozen=True, slots=True)
class SearchAnswer:
    """Where a search ended. ``value`` is the highest value that passed (None when none did);
    ``first_failed`` the lowest that failed; ``undecided`` the value the answer could not get
    past: the inconclusive level it hangs on, or the level the budget could not pay for.

    - ``found``: ``value`` passed and ``first_failed`` failed, nothing between is left to measure;
    - ``at_least``: the budget ran out first, so the answer is at least ``value``;
    - ``inconclusive``: the lowest level that did not pass, ``undecided``, was inconclusive;
    - ``not_reached``: even the lowest value failed (``value`` is None);
    - ``cap_passed``: the cap itself passed, so the answer is at least ``value`` (the cap).
    """

    outcome: Outcome
    value: int | None
    first_failed: int | None
    undecided: int | None


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
        self.inconclusive: int | None = None  # the lowest value that was inconclusive
        self.ran_out_at: int | None = None  # the value the budget could not pay for
        self.tried: list[tuple[int, Verdict]] = []

    @property
    def bound(self) -> int | None:
        """The lowest value that did not pass (failed or inconclusive); None when none."""
        return min((v for v in (self.failed, self.inconclusive) if v is not None), default=None)

    def _close_enough(self, passed: int, bound: int) -> bool:
        return bound - passed <= max(self.step, int(self.precision * passed))

    def next_value(self) -> int | None:
        """The value to measure next; None when the search is over (see :attr:`answer`)."""
        bound = self.bound
        if self.ran_out_at is not None or (bound is not None and bound <= self.lowest):
            return None
        if self.passed is None:
            return self.lowest
        if bound is None:
            return None if self.passed >= self.cap else min(self.cap, 2 * self.passed)
        if self._close_enough(self.passed, bound):
            return None
        return (self.passed + bound) // 2

    def record(self, value: int, verdict: Verdict) -> None:
        """Record the verdict of the value :meth:`next_value` asked for."""
        if value != self.next_value():
            raise ValueError(f"recorded {value}, but the search asked for {self.next_value()}")
        self.tried.append((value, verdict))
        if verdict == "pass":
            self.passed = value
        elif verdict == "fail":
            self.failed = value
        else:
            self.inconclusive = value

    def run_out(self, value: int) -> None:
        """The budget cannot pay for measuring ``value``, the value asked for: the search ends."""
        if value != self.next_value():
            raise ValueError(f"ran out at {value}, but the search asked for {self.next_value()}")
        self.ran_out_at = value

    @property
    def answer(self) -> SearchAnswer:
        """The answer of a finished search."""
        if self.next_value() is not None:
            raise ValueError("the search is not over")
        if self.ran_out_at is not None:
            return SearchAnswer("at_least", self.passed, self.failed, self.ran_out_at)
        bound = self.bound
        if bound is None:
            return SearchAnswer("cap_passed", self.passed, None, None)
        if bound == self.failed:
            outcome: Outcome = "not_reached" if self.passed is None else "found"
            return SearchAnswer(outcome, self.passed, self.failed, None)
        return SearchAnswer("inconclusive", self.passed, self.failed, bound)
