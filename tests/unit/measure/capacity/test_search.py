"""bench.measure.capacity.search against synthetic oracles and scripted verdicts: a monotone
oracle's boundary is found exactly in O(log n) levels, the cap and a failure at the lowest value
are answered as such, the context precision holds, a noisy oracle still gives a measured, passing
answer below every measured failure; an inconclusive level that the boundary hangs on gives no
number, one that a failure below makes moot does not matter, and a budget that runs out gives
"at least" the highest pass."""

from __future__ import annotations

import math
import random
from collections.abc import Callable

import pytest

from bench.measure.capacity.attainment import Verdict
from bench.measure.capacity.search import BoundarySearch, SearchAnswer


def _run(search: BoundarySearch, passes: Callable[[int], bool]) -> SearchAnswer:
    while (value := search.next_value()) is not None:
        search.record(value, "pass" if passes(value) else "fail")
    return search.answer


def _scripted(search: BoundarySearch, verdicts: dict[int, Verdict]) -> SearchAnswer:
    """Record the scripted verdict of every value the search asks for (a KeyError: it asked for
    a value the script did not expect)."""
    while (value := search.next_value()) is not None:
        search.record(value, verdicts[value])
    return search.answer


@pytest.mark.parametrize("cap", [1, 2, 7, 64, 100])
def test_a_monotone_boundary_is_found_exactly_in_logarithmic_levels(cap: int) -> None:
    """For every boundary from 1 to cap - 1 the answer is that boundary and the next value failed,
    in at most 2 * ceil(log2(cap)) + 1 levels, none measured twice."""
    for boundary in range(1, cap):
        search = BoundarySearch(1, cap)
        answer = _run(search, lambda value, b=boundary: value <= b)
        assert answer == SearchAnswer("found", boundary, boundary + 1, None)
        values = [value for value, _ in search.tried]
        assert len(values) == len(set(values))
        assert len(values) <= 2 * math.ceil(math.log2(cap)) + 1, (boundary, values)


def test_the_levels_of_a_search_grow_then_bisect() -> None:
    """Boundary 6 under a cap of 64: 1, 2, 4, 8 (fails), then 6 (passes) and 7 (fails)."""
    search = BoundarySearch(1, 64)
    assert _run(search, lambda value: value <= 6) == SearchAnswer("found", 6, 7, None)
    assert search.tried == [(1, "pass"), (2, "pass"), (4, "pass"), (8, "fail"), (6, "pass"), (7, "fail")]


def test_a_passing_cap_is_the_answer_at_least() -> None:
    """When every value passes, growth stops at the cap (not a power of two) and says so."""
    search = BoundarySearch(1, 20)
    assert _run(search, lambda value: True) == SearchAnswer("cap_passed", 20, None, None)
    assert [value for value, _ in search.tried] == [1, 2, 4, 8, 16, 20]


def test_a_failure_at_the_lowest_value_ends_the_search() -> None:
    """Not reached even at the lowest value: one level, no answer value."""
    search = BoundarySearch(1, 64)
    assert _run(search, lambda value: False) == SearchAnswer("not_reached", None, 1, None)
    assert search.tried == [(1, "fail")]


@pytest.mark.parametrize("boundary", [600, 1000, 1500, 4095, 5888, 9000, 16000])
def test_the_context_search_stops_within_its_precision(boundary: int) -> None:
    """From 512 tokens with step 64 and precision 1/8: the answer passed, the first failure is
    above the boundary, and the two are at most max(64, answer / 8) apart."""
    search = BoundarySearch(512, 16368, step=64, precision=0.125)
    answer = _run(search, lambda value: value <= boundary)
    assert answer.outcome == "found"
    assert answer.value is not None
    assert answer.first_failed is not None
    assert answer.value <= boundary < answer.first_failed
    assert answer.first_failed - answer.value <= max(64, answer.value // 8)
    assert len(search.tried) <= 2 * math.ceil(math.log2(16368 / 512)) + 4


@pytest.mark.parametrize("seed", range(20))
def test_a_noisy_oracle_gives_a_measured_passing_answer_below_every_failure(seed: int) -> None:
    """Levels near the boundary pass or fail by chance: the search still ends within its bound,
    its answer is a value that was measured and passed, and every measured failure is above it."""
    generator = random.Random(seed)

    def noisy(value: int) -> bool:
        return value <= 10 if abs(value - 10) > 3 else generator.random() < 0.5

    search = BoundarySearch(1, 64)
    answer = _run(search, noisy)
    assert len(search.tried) <= 2 * math.ceil(math.log2(64)) + 1
    if answer.outcome == "found":
        assert (answer.value, "pass") in search.tried
        assert all(value > (answer.value or 0) for value, verdict in search.tried if verdict != "pass")
        assert answer.value is not None
        assert 6 <= answer.value <= 13


def test_recording_another_value_than_asked_is_refused() -> None:
    """The caller measures what the search asks for; anything else is a bug, said at once."""
    search = BoundarySearch(1, 8)
    with pytest.raises(ValueError, match="asked for 1"):
        search.record(2, "pass")
    with pytest.raises(ValueError, match="not over"):
        _ = search.answer


@pytest.mark.parametrize(("lowest", "cap", "step", "precision"), [(0, 4, 1, 0.0), (5, 4, 1, 0.0), (1, 4, 0, 0.0)])
def test_impossible_bounds_are_refused(lowest: int, cap: int, step: int, precision: float) -> None:
    """A search needs 1 <= lowest <= cap and a step of at least 1."""
    with pytest.raises(ValueError, match="a search needs"):
        BoundarySearch(lowest, cap, step=step, precision=precision)


def test_an_inconclusive_level_the_boundary_hangs_on_gives_no_number() -> None:
    """1, 2, 4 pass, 8 is inconclusive, so it bounds the search as a failure would: 6 and 7 pass
    and the answer hangs on 8: inconclusive, 7 the highest pass, no failure measured."""
    search = BoundarySearch(1, 64)
    script: dict[int, Verdict] = {1: "pass", 2: "pass", 4: "pass", 8: "inconclusive", 6: "pass", 7: "pass"}
    assert _scripted(search, script) == SearchAnswer("inconclusive", 7, None, 8)
    assert [value for value, _ in search.tried] == [1, 2, 4, 8, 6, 7]


def test_an_inconclusive_level_above_a_failure_does_not_matter() -> None:
    """8 inconclusive, then 6 fails: the lowest level that did not pass failed, so the answer is
    found (5, with 6 failed), whatever 8 would have shown."""
    script: dict[int, Verdict] = {1: "pass", 2: "pass", 4: "pass", 8: "inconclusive", 6: "fail", 5: "pass"}
    assert _scripted(BoundarySearch(1, 64), script) == SearchAnswer("found", 5, 6, None)


def test_an_inconclusive_level_below_a_failure_is_what_the_answer_hangs_on() -> None:
    """8 fails, then 6 is inconclusive: 7 is never measured (above a level not passed) and the
    answer hangs on 6, with 5 passed and 8 failed."""
    script: dict[int, Verdict] = {1: "pass", 2: "pass", 4: "pass", 8: "fail", 6: "inconclusive", 5: "pass"}
    assert _scripted(BoundarySearch(1, 64), script) == SearchAnswer("inconclusive", 5, 8, 6)


def test_an_inconclusive_lowest_level_gives_no_number_at_all() -> None:
    """Even the first level is inconclusive: no pass, no failure, one level measured."""
    search = BoundarySearch(1, 64)
    assert _scripted(search, {1: "inconclusive"}) == SearchAnswer("inconclusive", None, None, 1)
    assert search.tried == [(1, "inconclusive")]


def test_a_budget_that_runs_out_gives_at_least_the_highest_pass() -> None:
    """After 1, 2, 4 passed and 8 failed, the budget cannot pay for 6: at least 4, never 4 as
    found, and the search asks for nothing more."""
    search = BoundarySearch(1, 64)
    for value, verdict in [(1, "pass"), (2, "pass"), (4, "pass"), (8, "fail")]:
        search.record(value, verdict)  # type: ignore[arg-type]
    assert search.next_value() == 6
    search.run_out(6)
    assert search.next_value() is None
    assert search.answer == SearchAnswer("at_least", 4, 8, 6)


def test_a_budget_that_runs_out_before_any_pass_gives_no_value() -> None:
    """The budget cannot pay for the first level: at least nothing, said as no value."""
    search = BoundarySearch(1, 64)
    search.run_out(1)
    assert search.answer == SearchAnswer("at_least", None, None, 1)


def test_running_out_at_another_value_than_asked_is_refused() -> None:
    """The budget runs out at the value the search asked for, as a record does."""
    search = BoundarySearch(1, 8)
    with pytest.raises(ValueError, match="asked for 1"):
        search.run_out(2)
