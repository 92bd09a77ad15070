"""Judging one level of a capacity search over its batches (each a whole closed-loop level, fresh
prompts): how many of the measured requests met the service level, the Wilson interval of that
fraction, and the verdict; a failed request, an untrusted batch or a saturated one fails the level
whatever its attainment, since none of them is a figure sampling more would make surer.

A request meets the service level when it decodes at ``min_decode_tps`` or faster and, on the
concurrency axis, its TTFT is at most ``max_ttft_ms`` (at long prompts TTFT is prefill by nature,
so the context axis judges speed only). The requests counted are each batch's measured ones: the
warm-up and those outside the steady-state window are left out, as ``bench run`` leaves them out.
"""

from __future__ import annotations

from bench.measure import metrics
from bench.measure.capacity import attainment
from bench.measure.capacity.result import Axis, Criteria, Probe
from bench.measure.metrics import RequestMetrics
from bench.measure.run import levels
from bench.measure.run.loops import LevelRun
from bench.measure.run.results import LevelResult

DECODE_SHOWN = 0.10  # the slow streams' decode, shown beside the attainment
TTFT_SHOWN = 0.95


def met(request: RequestMetrics, axis: Axis, criteria: Criteria) -> bool:
    """Whether one request met the service level."""
    fast = request.decode_tps is not None and request.decode_tps >= criteria.min_decode_tps
    return fast and (axis == "context" or request.ttft_ms <= criteria.max_ttft_ms)


def _hard_failures(batches: list[LevelResult]) -> list[str]:
    """Why the level fails whatever its attainment: a saturated or untrusted batch."""
    because: list[str] = []
    for number, batch in enumerate(batches, 1):
        where = f"batch {number}: " if len(batches) > 1 else ""
        if batch.saturated is not None:  # no steady state, so no level to count on
            because.append(f"{where}saturated ({batch.saturated})")
        because += [f"{where}{reason}" for reason in batch.untrusted_because]
    return because


def judge(axis: Axis, value: int, runs: list[tuple[LevelRun, LevelResult]], criteria: Criteria) -> Probe:
    """The probe of one level over all its batches so far (``runs``: each batch's raw requests
    and summary). Its verdict is ``inconclusive`` while the interval straddles the target; the
    caller then measures another batch or says why it stopped (:attr:`Probe.because`)."""
    measured = [m for level, _ in runs for m in levels.measured_in(level)]
    speeds = [m.decode_tps for m in measured if m.decode_tps is not None]
    ttfts = [m.ttft_ms for m in measured]
    low = metrics.percentile(speeds, DECODE_SHOWN) if speeds else None
    high = metrics.percentile(ttfts, TTFT_SHOWN) if ttfts else None
    batches = [summary for _, summary in runs]
    because = _hard_failures(batches)
    count = sum(1 for m in measured if met(m, axis, criteria))
    share = count / len(measured) if measured else None
    bounds = attainment.wilson(count, len(measured), criteria.confidence) if measured else None
    verdict: attainment.Verdict = "fail"
    if bounds is None:
        because.append("no request was measured")
    elif not because:
        verdict = attainment.verdict(bounds, criteria.target_attainment)
        if verdict == "fail":
            because.append(_below(criteria, bounds))
    return Probe(
        axis=axis,
        value=value,
        requests_measured=len(measured),
        requests_met=count,
        attainment=share,
        interval_low=None if bounds is None else bounds.low,
        interval_high=None if bounds is None else bounds.high,
        verdict=verdict,
        because=because,
        decode_tps_low=low,
        ttft_ms_high=high,
        batches=batches,
    )


def _below(criteria: Criteria, bounds: attainment.Interval) -> str:
    return (
        f"attainment below {criteria.target_attainment:g}: at most {bounds.high:.2f} "
        f"at {criteria.confidence * 100:g}% confidence"
    )
