"""bench/measure/metrics.py on recorded timestamps: every figure is worked out by hand in the comments.

Each record is built from integer nanosecond stamps, as the client takes them with
perf_counter_ns; ``t(ms, us)`` is that many milliseconds (and microseconds) after the dispatch
T0. Results that are exact binary fractions are asserted with ``==``; where a division leaves
a repeating fraction, ``pytest.approx`` with rel=1e-12.
"""

from __future__ import annotations

import math
from typing import Any

import pytest

from bench.measure.metrics import (
    Event,
    RequestMetrics,
    RequestRecord,
    Summary,
    bootstrap_ci,
    percentile,
    request_metrics,
    summarize,
    token_events,
    weighted_percentile,
)
from bench.measure.run.window import Window, closed_loop_window, open_loop_window, tokens_in_window

T0 = 7_000_000_123_457  # an arbitrary perf_counter_ns reading: only differences matter


def t(ms: int, us: int = 0) -> int:
    return T0 + ms * 1_000_000 + us * 1_000


def text(ms: int, us: int = 0) -> Event:
    return Event(t(ms, us), content_chars=5)


def think(ms: int) -> Event:
    return Event(t(ms), reasoning_chars=6)


def record(*events: Event, completion: int | None, requested: int = 0, **changes: Any) -> RequestRecord:
    end = max((event.t_ns for event in events), default=T0) + 1
    fields: dict[str, Any] = {"index": 0, "t_disp_ns": T0, "t_end_ns": end, "events": events}
    return RequestRecord(**{**fields, "requested_tokens": requested, "completion_tokens": completion, **changes})


def test_plain_stream_counted_by_the_server() -> None:
    # A role-only event at 2 ms, four content events, then the usage-only chunk; usage says 4.
    events = (Event(t(2)), text(150, 250), text(160, 250), text(185, 250), text(190, 750), Event(t(191)))
    assert request_metrics(record(*events, completion=4, requested=4)) == RequestMetrics(
        index=0,
        t_disp_ns=T0,
        ttfr_ms=2.0,  # the role-only event: 2 000 000 ns
        ttft_ms=150.25,  # first content event: 150 250 000 ns
        ttfo_ms=150.25,  # no reasoning: the first answer token is the first token
        e2e_ms=190.75,  # last token event; the usage chunk after it carries no token
        decode_ms=40.5,  # 190.75 - 150.25
        out_tokens=4,
        token_source="server",  # usage (4) = token events (4): one token each
        chunked=False,
        token_events=4,
        tpot_ms=13.5,  # 40.5 / (4 - 1)
        decode_tps=pytest.approx(74.07407407407408, rel=1e-12),  # 1000 / 13.5
        stall_max_ms=25.0,  # gaps 160.25-150.25 = 10, 185.25-160.25 = 25, 190.75-185.25 = 5.5
        tokens_per_chunk=1.0,  # 4 / 4
        osl_mismatch=0.0,  # (4 - 4) / 4
        queue_client_ms=None,  # closed loop: no schedule
        itl_samples=((10.0, 1.0), (25.0, 1.0), (5.5, 1.0)),  # gap / 1 token, weight 1
        icl_samples=(10.0, 25.0, 5.5),
    )


def test_reasoning_then_answer() -> None:
    # Three reasoning events (100, 110, 120 ms), then the answer (130, 142 ms); usage says 5.
    events = (Event(t(1)), think(100), think(110), think(120), text(130), text(142))
    metrics = request_metrics(record(*events, completion=5, requested=5, reasoning_tokens=3))
    assert metrics is not None
    assert (metrics.ttfr_ms, metrics.ttft_ms, metrics.ttfo_ms, metrics.e2e_ms) == (1.0, 100.0, 130.0, 142.0)
    assert metrics.decode_ms == 42.0  # 142 - 100: reasoning tokens are decoded tokens
    assert metrics.tpot_ms == 10.5  # 42 / (5 - 1)
    assert metrics.decode_tps == pytest.approx(95.23809523809524, rel=1e-12)  # 1000 / 10.5
    assert metrics.icl_samples == (10.0, 10.0, 10.0, 12.0)
    assert metrics.stall_max_ms == 12.0


def test_a_tool_call_is_an_answer() -> None:
    events = (think(40), Event(t(55), tool_call=True), Event(t(60), tool_call=True))
    metrics = request_metrics(record(*events, completion=3))
    assert metrics is not None
    assert (metrics.ttft_ms, metrics.ttfo_ms, metrics.e2e_ms) == (40.0, 55.0, 60.0)


def test_one_token_response_has_no_decode_figures() -> None:
    metrics = request_metrics(record(Event(t(3)), text(50), Event(t(51)), completion=1, requested=1))
    assert metrics is not None
    assert (metrics.ttft_ms, metrics.ttfo_ms, metrics.e2e_ms, metrics.decode_ms) == (50.0, 50.0, 50.0, 0.0)
    assert (metrics.out_tokens, metrics.token_source, metrics.chunked, metrics.token_events) == (1, "server", False, 1)
    # TPOT needs two tokens: (out - 1) = 0, so none; no gap, so no ITL samples and no stall.
    assert (metrics.tpot_ms, metrics.decode_tps, metrics.stall_max_ms) == (None, None, 0.0)
    assert (metrics.itl_samples, metrics.icl_samples, metrics.tokens_per_chunk) == ((), (), 1.0)


def test_one_event_with_five_tokens() -> None:
    # Everything in one event: the 5 tokens stay on it; decode time is 0, so no TPOT.
    rec = record(text(80), completion=5)
    assert token_events(rec) == ([text(80)], [5.0], "server", True)
    metrics = request_metrics(rec)
    assert metrics is not None
    assert (metrics.out_tokens, metrics.decode_ms, metrics.tpot_ms, metrics.tokens_per_chunk) == (5, 0.0, None, 5.0)


def test_empty_content_and_failed_requests_have_no_metrics() -> None:
    empty = record(Event(t(2)), Event(t(3)), completion=0)  # role-only and usage-only events
    assert token_events(empty) == ([], [], "server", False)
    assert request_metrics(empty) is None
    assert request_metrics(record(completion=None)) is None  # no event at all
    failed = record(text(10), text(20), completion=None, error="truncated")
    assert request_metrics(failed) is None


def test_multi_token_events_spread_the_final_count() -> None:
    # MTP-like: 4 events 30 ms apart, usage 10 at the end. The first event gets 1 token, the
    # other 3 get (10 - 1) / (4 - 1) = 3 each.
    rec = record(text(80), text(110), text(140), text(170), completion=10, requested=8)
    assert token_events(rec)[1:] == ([1.0, 3.0, 3.0, 3.0], "server", True)
    metrics = request_metrics(rec)
    assert metrics is not None
    assert (metrics.ttft_ms, metrics.e2e_ms, metrics.decode_ms, metrics.out_tokens) == (80.0, 170.0, 90.0, 10)
    assert metrics.tpot_ms == 10.0  # 90 / (10 - 1)
    assert metrics.decode_tps == 100.0  # 1000 / 10
    assert metrics.itl_samples == ((10.0, 3.0),) * 3  # 30 ms / 3 tokens, weight 3
    assert metrics.icl_samples == (30.0, 30.0, 30.0)  # the raw gaps stay 30 ms
    assert metrics.tokens_per_chunk == 2.5  # 10 / 4
    assert metrics.osl_mismatch == 0.25  # (10 - 8) / 8


def test_uneven_spread_gives_the_same_per_token_time_as_tpot() -> None:
    # Usage 8 over 4 events: 1, then 7/3 each. ITL = 30 / (7/3) = 90/7; TPOT = 90 / 7 as well.
    metrics = request_metrics(record(text(80), text(110), text(140), text(170), completion=8))
    assert metrics is not None
    assert metrics.tpot_ms == pytest.approx(12.857142857142858, rel=1e-12)
    assert [value for value, _ in metrics.itl_samples] == [pytest.approx(12.857142857142858, rel=1e-12)] * 3
    assert [weight for _, weight in metrics.itl_samples] == [pytest.approx(7 / 3, rel=1e-12)] * 3
    assert metrics.tokens_per_chunk == 2.0  # 8 / 4


def test_fewer_tokens_than_events_spreads_fractions() -> None:
    # Usage 3 over 5 events 10 ms apart: 1, then (3 - 1) / 4 = 0.5 each, so 20 ms per token.
    metrics = request_metrics(record(*(text(100 + 10 * i) for i in range(5)), completion=3))
    assert metrics is not None
    assert metrics.itl_samples == ((20.0, 0.5),) * 4
    assert metrics.tpot_ms == 20.0  # 40 / (3 - 1)
    assert metrics.tokens_per_chunk == 0.6  # 3 / 5
    assert metrics.chunked is True


def test_continuous_usage_counts_each_event() -> None:
    # The role event reports 0 tokens. At 60 ms usage grows to 3 with an empty delta (a parser
    # buffering a tool call): a token event. 75 ms: 4; 95 ms: 6; 100 ms: content but still 6, so
    # it carries no token of its own and is dropped; 120 ms: 7. The usage-only chunk has no
    # choices, so no per-event count. Deltas 3, 1, 2, 0, 1 sum to the final 7.
    events = (
        Event(t(1), completion_tokens=0),
        Event(t(60), completion_tokens=3),
        Event(t(75), content_chars=4, completion_tokens=4),
        Event(t(95), content_chars=4, completion_tokens=6),
        Event(t(100), content_chars=4, completion_tokens=6),
        Event(t(120), content_chars=4, completion_tokens=7),
        Event(t(121)),
    )
    rec = record(*events, completion=7, requested=7)
    picked, counts, source, chunked = token_events(rec)
    assert ([e.t_ns for e in picked], counts) == ([t(60), t(75), t(95), t(120)], [3.0, 1.0, 2.0, 1.0])
    assert (source, chunked) == ("server-continuous", False)
    metrics = request_metrics(rec)
    assert metrics is not None
    assert (metrics.ttfr_ms, metrics.ttft_ms, metrics.ttfo_ms, metrics.e2e_ms) == (1.0, 60.0, 75.0, 120.0)
    assert (metrics.out_tokens, metrics.decode_ms, metrics.tpot_ms) == (7, 60.0, 10.0)  # 60 / (7 - 1)
    assert metrics.icl_samples == (15.0, 20.0, 25.0)  # 75-60, 95-75, 120-95
    assert metrics.itl_samples == ((15.0, 1.0), (10.0, 2.0), (25.0, 1.0))  # 15/1, 20/2, 25/1
    assert (metrics.tokens_per_chunk, metrics.stall_max_ms) == (1.75, 25.0)  # 7 / 4


def test_continuous_usage_that_disagrees_with_the_final_count_falls_back_to_the_spread() -> None:
    # Per-event usage sums to 5, the final usage says 9: the final count wins, spread as
    # 1, then (9 - 1) / (3 - 1) = 4 each.
    events = tuple(Event(t(ms), content_chars=1, completion_tokens=n) for ms, n in ((10, 2), (20, 4), (30, 5)))
    assert token_events(record(*events, completion=9))[1:] == ([1.0, 4.0, 4.0], "server", True)


def test_no_usage_counts_one_token_per_event() -> None:
    rec = record(text(10), text(20), text(35), completion=None)
    assert token_events(rec)[1:] == ([1.0, 1.0, 1.0], "chunk-count", False)
    metrics = request_metrics(rec)
    assert metrics is not None
    assert (metrics.out_tokens, metrics.tpot_ms) == (3, 12.5)  # (35 - 10) / (3 - 1)


def test_client_queue_time_and_output_length_mismatch() -> None:
    # Scheduled 7.5 ms before the dispatch (open loop); nothing requested means no mismatch.
    metrics = request_metrics(record(text(10), completion=1, t_sched_ns=T0 - 7_500_000))
    assert metrics is not None
    assert (metrics.queue_client_ms, metrics.osl_mismatch) == (7.5, 0.0)


def test_percentile_is_numpys_linear_interpolation() -> None:
    samples = [40.0, 10.0, 30.0, 20.0]  # sorted: 10 20 30 40; position = (4 - 1) * fraction
    assert percentile(samples, 0.0) == 10.0
    assert percentile(samples, 0.25) == 17.5  # position 0.75: 10 + (20 - 10) * 0.75
    assert percentile(samples, 0.5) == 25.0  # position 1.5: 20 + 10 * 0.5
    assert percentile(samples, 0.9) == pytest.approx(37.0, rel=1e-12)  # position 2.7: 30 + 10 * 0.7
    assert percentile(samples, 1.0) == 40.0
    assert percentile([5.0], 0.99) == 5.0
    with pytest.raises(ValueError, match="no samples"):
        percentile([], 0.5)


def test_weighted_percentile_repeats_each_value_weight_times() -> None:
    # Weights of 1 are the plain percentile: the median of 10 20 30 40 is 25, not 20.
    ones = [(40.0, 1.0), (10.0, 1.0), (30.0, 1.0), (20.0, 1.0)]
    for fraction in (0.0, 0.25, 0.5, 0.9, 0.99, 1.0):
        assert weighted_percentile(ones, fraction) == percentile([40.0, 10.0, 30.0, 20.0], fraction)
    # (5, weight 3) and (1, weight 1) is the list 1 5 5 5.
    weighted = [(5.0, 3.0), (1.0, 1.0)]
    assert weighted_percentile(weighted, 0.25) == 4.0  # position 0.75: 1 + (5 - 1) * 0.75
    assert weighted_percentile(weighted, 0.5) == 5.0  # position 1.5: between 5 and 5
    for fraction in (0.0, 0.1, 0.25, 0.5, 0.9, 1.0):
        assert weighted_percentile(weighted, fraction) == percentile([1.0, 5.0, 5.0, 5.0], fraction)


def test_weighted_percentile_with_fractional_weights() -> None:
    # 10 covers positions [0, 1), 20 covers [1, 3.5); position = (3.5 - 1) * fraction.
    spread = [(20.0, 2.5), (10.0, 1.0)]
    assert weighted_percentile(spread, 0.0) == 10.0
    assert weighted_percentile(spread, 0.2) == 15.0  # position 0.5: 10 + (20 - 10) * 0.5
    assert weighted_percentile(spread, 0.5) == 20.0  # position 1.25: inside 20's range
    assert weighted_percentile([(7.0, 0.5)], 0.9) == 7.0  # total under 1: position 0
    # Ten values 1 of weight 0.7 cover [0, 7), then 2 of weight 3 covers [7, 10). The float sum of
    # the ten 0.7s is 7.000000000000001, a hair past 7, yet position 7 still belongs to 2, as in
    # exact arithmetic: at position 6.5 (fraction 6.5 / 9) the result is 1 + (2 - 1) * 0.5.
    boundary = [(1.0, 0.7)] * 10 + [(2.0, 3.0)]
    assert weighted_percentile(boundary, 6.5 / 9) == pytest.approx(1.5, rel=1e-12)
    assert weighted_percentile([(1.0, 0.0), (3.0, 1.0), (2.0, 1.0)], 0.0) == 2.0  # weight 0 counts for nothing
    with pytest.raises(ValueError, match="no samples"):
        weighted_percentile([(1.0, 0.0)], 0.5)


def test_summary_of_a_small_sample() -> None:
    # 2 4 4 4 5 5 7 9: mean 40 / 8 = 5; squared deviations 9+1+1+1+0+0+4+16 = 32, sample
    # std sqrt(32 / 7); positions 7 * fraction: p50 3.5 -> 4.5, p90 6.3 -> 7.6, p95 6.65 -> 8.3.
    summary = summarize([9.0, 2.0, 5.0, 4.0, 4.0, 7.0, 4.0, 5.0], bootstrap_seed=None)
    assert summary == Summary(
        n=8,
        mean=5.0,
        std=pytest.approx(2.138089935299395, rel=1e-12),
        p50=4.5,
        p90=pytest.approx(7.6, rel=1e-12),
        p95=pytest.approx(8.3, rel=1e-12),
        p99=None,  # under 100 samples
        max=9.0,
        p50_ci=None,
    )
    assert summarize([3.0]) == Summary(1, 3.0, None, 3.0, 3.0, 3.0, None, 3.0, None)
    assert summarize([]) is None


def test_summary_of_a_hundred_samples_has_p99() -> None:
    # 0..99: mean 49.5; sample variance n(n+1)/12 = 100 * 101 / 12; p99 at position 98.01.
    summary = summarize([float(i) for i in range(100)], bootstrap_seed=None)
    assert summary is not None
    assert (summary.mean, summary.p50, summary.max) == (49.5, 49.5, 99.0)
    assert summary.std == pytest.approx(math.sqrt(100 * 101 / 12), rel=1e-12)
    assert summary.p99 == pytest.approx(98.01, rel=1e-12)


def test_bootstrap_ci_of_the_median() -> None:
    # Two samples 1 and 3: a resample's median is 1 (p = 1/4), 2 (1/2) or 3 (1/4). Of 1000
    # sorted estimates, the 2.5% and 97.5% points (positions 24.975 and 974.025) lie among
    # the ~250 ones and the ~250 threes.
    assert bootstrap_ci([1.0, 3.0], 0.5, seed=0) == (1.0, 3.0)
    assert bootstrap_ci([5.0, 5.0, 5.0], 0.5, seed=3) == (5.0, 5.0)
    samples = [float(x) for x in (12, 7, 3, 9, 15, 4, 8, 11)]
    assert bootstrap_ci(samples, 0.5, seed=7) == bootstrap_ci(samples, 0.5, seed=7)  # seeded
    summary = summarize(samples)
    assert summary is not None
    assert summary.p50_ci == bootstrap_ci(samples, 0.5, seed=0)
    low, high = summary.p50_ci
    assert 3.0 <= low <= summary.p50 <= high <= 15.0


def span(dispatch_ms: int, end_ms: int, *events: Event, **changes: Any) -> RequestRecord:
    return RequestRecord(0, t(dispatch_ms), t(end_ms), events, 0, **changes)


def test_closed_loop_window_from_full_to_the_first_end_after_the_last_dispatch() -> None:
    # Concurrency 2, warm-up 2. In flight: 0 ms 1, 10 ms 2, 100 ms 1, 101 ms 2 (the first
    # measured dispatch, and 2 in flight: W0), ... the last dispatch at 231 ms, and the first
    # end after it, at 300 ms, leaves 1 in flight: W1.
    spans = [(0, 100), (10, 120), (101, 210), (121, 230), (211, 300), (231, 320)]
    records = [span(*pair) for pair in reversed(spans)]  # any order
    window = closed_loop_window(records, 2, 2)
    assert window == Window(t(101), t(300))
    assert window.seconds == 0.199  # 199 000 000 ns
    assert closed_loop_window(records, 3, 2) is None  # never 3 in flight
    assert closed_loop_window(records, 2, 6) is None  # everything is warm-up


def test_closed_loop_window_waits_until_the_level_is_full() -> None:
    # Warm-up 1: the first measured dispatch (60 ms) leaves 1 in flight; the next (70 ms)
    # makes 2: W0 = 70 ms. Last dispatch 211 ms; first end after it 300 ms.
    records = [span(0, 50), span(60, 200), span(70, 210), span(201, 300), span(211, 320)]
    assert closed_loop_window(records, 2, 1) == Window(t(70), t(300))
    sequential = [span(0, 50), span(51, 100), span(101, 150)]  # concurrency 1
    assert closed_loop_window(sequential, 1, 1) == Window(t(51), t(150))


def test_open_loop_window_runs_over_the_schedule() -> None:
    records = [span(ms + 3, ms + 90, t_sched_ns=t(ms)) for ms in (300, 0, 200, 100)]
    assert open_loop_window(records, 1) == Window(t(100), t(300))  # schedules, not dispatches
    assert open_loop_window([span(ms, ms + 90) for ms in (0, 100, 200)], 0) == Window(t(0), t(200))
    assert open_loop_window(records, 3) is None  # one schedule left: no span
    assert open_loop_window([span(0, 90, t_sched_ns=t(5)), span(1, 90, t_sched_ns=t(5))], 0) is None


def test_tokens_in_window_count_the_events_inside_it() -> None:
    window = Window(t(100), t(200))  # both ends inclusive
    records = [
        # One token each; 100, 150 and 200 ms are inside: 3.
        span(0, 220, text(90), text(100), text(150), text(200), text(210), completion_tokens=5),
        # Usage 7 over 3 events: 1, 3, 3; 120 and 180 ms are inside: 1 + 3 = 4.
        span(50, 250, text(120), text(180), text(240), completion_tokens=7),
        # Continuous usage 2 then 4; only the 130 ms event is inside: 2.
        span(
            60,
            210,
            Event(t(130), content_chars=1, completion_tokens=2),
            Event(t(205), content_chars=1, completion_tokens=4),
            completion_tokens=4,
        ),
        # A failed request's tokens do not count.
        span(110, 190, text(150), text(160), error="truncated"),
    ]
    assert tokens_in_window(records, window) == 9.0  # 3 + 4 + 2 + 0
    assert window.seconds == 0.1
