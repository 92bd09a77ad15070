"""bench.measure.capacity.judge on recorded requests: twelve requests one after another (the first
two are warm-up), each decoding at a known speed, so the requests that met the service level, the
attainment and its interval are exact; batches pool; a saturated or untrusted batch fails the
level whatever its attainment, so a level marked saturated is never a passing bound."""

from __future__ import annotations

from dataclasses import replace

import pytest

from bench.measure.capacity.attainment import wilson
from bench.measure.capacity.judge import judge
from bench.measure.capacity.result import Criteria
from bench.measure.metrics import NS_PER_MS, Event, RequestRecord
from bench.measure.run.levels import level_summary
from bench.measure.run.loops import LevelRun, LevelSpec
from bench.measure.run.results import LevelResult

TOKENS = 9
FAST_MS, SLOW_MS = 10.0, 40.0  # 100 and 25 tok/s
CRITERIA = Criteria(min_decode_tps=50.0, max_ttft_ms=100.0, target_attainment=0.9, confidence=0.95)


def _level(slow: set[int], ttft_ms: float = 50.0, error: int | None = None) -> tuple[LevelRun, LevelResult]:
    """Twelve requests at concurrency 1, gaps of 40 ms in those of ``slow`` and 10 ms in the rest."""
    level = LevelRun(LevelSpec(requests=12, input_tokens=64, output_tokens=TOKENS), complete=True)
    start = 10**12
    for index in range(12):
        t = start + round(ttft_ms * NS_PER_MS)
        times = [t + round(token * (SLOW_MS if index in slow else FAST_MS) * NS_PER_MS) for token in range(TOKENS)]
        record = RequestRecord(
            index=index,
            t_disp_ns=start,
            t_end_ns=times[-1] + NS_PER_MS,
            events=tuple(Event(t_ns=time, content_chars=5) for time in times),
            requested_tokens=TOKENS,
            prompt_tokens=64,
            completion_tokens=TOKENS,
            finish_reason="length",
            error="http_500" if index == error else None,
        )
        level.records.append(record)
        start = record.t_end_ns + NS_PER_MS
    return level, level_summary(level)


def test_attainment_counts_the_measured_requests_that_met_the_level() -> None:
    """Requests 3 and 7 decode at 25 tok/s (below 50), request 0 too but it is warm-up: 8 of the
    10 measured met it, attainment 0.8, the interval Wilson's for 8 of 10, which straddles 0.9."""
    probe = judge("concurrency", 1, [_level({0, 3, 7})], CRITERIA)
    assert (probe.requests_measured, probe.requests_met, probe.attainment) == (10, 8, 0.8)
    interval = wilson(8, 10, 0.95)
    assert (probe.interval_low, probe.interval_high) == (interval.low, interval.high)
    assert probe.verdict == "inconclusive"
    assert probe.because == []
    assert probe.decode_tps_low == pytest.approx(25.0)  # p10 of ten speeds, two of them 25: shown, not judged


def test_batches_pool_until_the_interval_clears_the_target() -> None:
    """Four batches, every measured request fast: 40 of 40 met, Wilson's lower bound 0.912 >= 0.9."""
    probe = judge("concurrency", 1, [_level(set()) for _ in range(4)], CRITERIA)
    assert (probe.requests_measured, probe.requests_met) == (40, 40)
    assert probe.interval_low == pytest.approx(40 / (40 + 1.959963984540054**2), abs=1e-12)
    assert probe.verdict == "pass"
    assert len(probe.batches) == 4


def test_ttft_counts_on_the_concurrency_axis_only() -> None:
    """TTFT of 150 ms over a bound of 100: no request met it on the concurrency axis, so the level
    fails, saying so; on the context axis the same requests all met it."""
    runs = [_level(set(), ttft_ms=150.0)]
    users = judge("concurrency", 1, runs, CRITERIA)
    assert (users.requests_met, users.verdict) == (0, "fail")
    assert users.because == [f"attainment below 0.9: at most {wilson(0, 10, 0.95).high:.2f} at 95% confidence"]
    context = judge("context", 1024, runs, CRITERIA)
    assert (context.requests_met, context.verdict) == (10, "inconclusive")


def test_a_saturated_batch_fails_the_level_whatever_its_attainment() -> None:
    """Forty fast requests would pass; one of the four batches marked saturated fails the level,
    with the reason, so the search never takes it as a passing bound."""
    runs = [_level(set()) for _ in range(4)]
    level, summary = runs[2]
    runs[2] = (level, replace(summary, saturated="over-saturated: requests outstanding rise"))
    probe = judge("concurrency", 8, runs, CRITERIA)
    assert probe.requests_met == 40
    assert probe.verdict == "fail"
    assert probe.because == ["batch 3: saturated (over-saturated: requests outstanding rise)"]


def test_a_failed_request_fails_the_level() -> None:
    """One request of the batch failed: the level is untrusted and fails, naming it."""
    probe = judge("concurrency", 1, [_level(set(), error=5)], CRITERIA)
    assert probe.verdict == "fail"
    assert probe.because == ["1 of 12 requests failed: http_500 1"]
