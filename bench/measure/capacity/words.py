"""The answers of a capacity file in words, for the command line and the capability card: a
number only where the search established one ("6 (7 failed)"), "at least N" where the budget or
the cap stopped it, and a refusal, with the level, its attainment and interval and the flags that
sample more, where the boundary hangs on an inconclusive level."""

from __future__ import annotations

from bench.measure.capacity.result import Answer, Axis, CapacityResult, Probe


def level(axis: Axis, value: int) -> str:
    """A level by its value: "c=4" or "2,048 tok"."""
    return f"c={value}" if axis == "concurrency" else f"{value:,} tok"


def interval(probe: Probe) -> str:
    """ "0.88 [0.80, 0.93]": the attainment and its interval; "-" when nothing was measured."""
    if probe.attainment is None or probe.interval_low is None or probe.interval_high is None:
        return "-"
    return f"{probe.attainment:.2f} [{probe.interval_low:.2f}, {probe.interval_high:.2f}]"


def _probe(result: CapacityResult, axis: Axis, value: int | None) -> Probe | None:
    found = [p for p in result.probes if p.axis == axis and p.value == value]
    return found[-1] if found else None


def describe(result: CapacityResult, axis: Axis) -> str:
    """One line for the answer of ``axis``'s search in ``result``."""
    answer: Answer | None = result.max_users if axis == "concurrency" else result.longest_context
    if answer is None:
        return "not searched"
    unit = "" if axis == "concurrency" else " prompt tokens"
    confidence = f"{result.criteria.confidence * 100:g}%"
    target = f"{result.criteria.target_attainment:g}"
    if answer.outcome == "not_reached":
        return f"not reached even at {answer.lowest:,}{unit}"
    if answer.outcome == "cap_passed":
        return f"at least {answer.cap:,}{unit} (the cap passed)"
    if answer.outcome == "found":
        return f"{answer.value:,}{unit} ({answer.first_failed:,} failed)"
    undecided = level(axis, answer.undecided or 0)
    if answer.outcome == "at_least":
        head = f"at least {answer.value:,}{unit}" if answer.value is not None else "no level passed yet"
        return (
            f"{head}: the budget of {result.shape.budget_requests:,} requests ran out before {undecided} "
            f"({answer.requests_sent:,} sent); raise --budget to search further"
        )
    below = "" if answer.value is None else f" ({answer.value:,}{unit} passed)"
    probe = _probe(result, axis, answer.undecided)
    if probe is None:  # not written by bench: an inconclusive answer names a measured level
        return f"no answer{below}: {undecided} is inconclusive"
    why = "; ".join(probe.because)
    return (
        f"no answer{below}: {undecided} is inconclusive, attainment {interval(probe)} after "
        f"{probe.requests_measured} measured requests, its {confidence} interval straddling {target}; {why}: "
        "raise it to sample more"
    )
