"""From what one level produced (a :class:`~bench.measure.run.loops.LevelRun`) to its
:class:`~bench.measure.run.results.LevelResult`: the warm-up and the steady-state window, every
distribution, the server's view, and why the level is not to be trusted, if it is not.
"""

from __future__ import annotations

import math
from collections import Counter
from typing import Literal

from bench.measure import metrics
from bench.measure.metrics import RequestMetrics, RequestRecord
from bench.measure.run import spec_requests
from bench.measure.run.agent_sessions import agent_sessions
from bench.measure.run.loops import LevelRun
from bench.measure.run.results import (
    AgentTurn,
    Latency,
    LevelResult,
    RequestCounts,
    Throughput,
    Tokens,
    WeightedSummary,
)
from bench.measure.run.window import Window, closed_loop_window, open_loop_window, tokens_in_window
from bench.measure.telemetry.server import Counters, server_report

LENGTH_TOLERANCE = 0.05  # an output off by more than this fraction, or by 50 tokens, is flagged (inputs: the fraction)
# A stall: a gap between two token events of one answer longer than both STALL_FACTOR times the
# level's median gap and STALL_MIN_MS. A level with one is not trusted: its TPOT median hides it
# (one long gap among many short ones), while its throughput falls.
STALL_FACTOR = 10.0
STALL_MIN_MS = 2000.0


_summary = metrics.summarize


def _weighted(samples: list[tuple[float, float]], weighting: Literal["token", "chunk"]) -> WeightedSummary | None:
    if not samples:
        return None
    fractions = (0.5, 0.9, 0.99) if len(samples) >= 100 else (0.5, 0.9)
    p50, p90, *p99 = metrics.weighted_percentiles(samples, fractions)
    return WeightedSummary(
        n=len(samples),
        weighting=weighting,
        p50=p50,
        p90=p90,
        p99=p99[0] if p99 else None,
        max=max(value for value, _ in samples),
    )


def warmup_count(requests: int, concurrency: int) -> int:
    """Requests discarded at the start of a level: max(c, 10%), keeping at least half the level."""
    return min(max(concurrency, math.ceil(0.1 * requests)), requests // 2) if requests > 1 else 0


def failed_requests(records: list[RequestRecord]) -> str | None:
    """How many of ``records`` failed and why, by kind ("2 of 6 requests failed: http_500 1,
    truncated 1"); None when none did."""
    kinds = Counter(record.error for record in records if record.error is not None)
    if not kinds:
        return None
    by_kind = ", ".join(f"{kind} {count}" for kind, count in sorted(kinds.items()))
    return f"{kinds.total()} of {len(records)} requests failed: {by_kind}"


def _trust(level: LevelRun, measured: list[RequestMetrics], input_target: int) -> list[str]:
    reasons = []
    failed = failed_requests(level.records)
    if failed:
        reasons.append(failed)
    counters = level.server.counters if level.server is not None else Counters()
    succeeded = sum(1 for record in level.records if record.error is None)
    seen = counters.requests_succeeded
    if seen is not None and round(seen) != succeeded:
        reasons.append(f"another client used the server: it completed {round(seen)} requests, this run {succeeded}")
    predicted = counters.llamacpp_tokens_predicted
    ours = sum(record.completion_tokens or 0 for record in level.records if record.error is None)
    if predicted is not None and round(predicted) > ours:
        reasons.append(f"another client used the server: it generated {round(predicted)} tokens, this run {ours}")
    if counters.preemptions:
        reasons.append(f"the server preempted {round(counters.preemptions)} requests (KV cache too small)")
    targets = dict(enumerate(level.spec.targets))  # a trace: each request's own lengths, by its index
    if level.spec.fixed_output:
        target = level.spec.output_tokens
        rounds = {record.index for record in level.records if record.tool_calls is not None}  # asked for calls
        fixed = [m for m in measured if m.index not in rounds]
        off = [
            m
            for m in fixed
            if abs(m.osl_mismatch) > LENGTH_TOLERANCE or abs(m.out_tokens - targets.get(m.index, (0, target))[1]) > 50
        ]
        if off:
            goal = "their trace's output lengths" if targets else f"the output length {target}"
            reasons.append(f"{len(off)} of {len(fixed)} requests missed {goal}")
    pairs = [
        (r.prompt_tokens, targets.get(r.index, (input_target, 0))[0])
        for r in level.records
        if r.prompt_tokens is not None
    ]
    growing = any(record.turn is not None for record in level.records)  # agent histories grow on purpose
    missed = [p for p, goal in pairs if abs(p - goal) > max(1, LENGTH_TOLERANCE * goal)]
    if missed and not growing:
        prompts = [p for p, _ in pairs]
        aim = f"{len(missed)} off their trace's" if targets else f"target {input_target}"
        reasons.append(f"input lengths {min(prompts)}..{max(prompts)} tokens, {aim}")
    stalled = stalls(measured)
    if stalled:
        reasons.append(stalled)
    if not level.complete:
        reasons.append("the level was interrupted")
    return reasons


def stall_bound_ms(measured: list[RequestMetrics]) -> float:
    """The longest gap between two token events that is not a stall: STALL_FACTOR times the
    median of every gap of the measured requests, and at least STALL_MIN_MS."""
    gaps = [gap for m in measured for gap in m.icl_samples]
    median = metrics.percentile(gaps, 0.5) if gaps else 0.0
    return max(STALL_FACTOR * median, STALL_MIN_MS)


def stalls(measured: list[RequestMetrics]) -> str | None:
    """How many measured requests stalled and for how long at most ("2 of 6 requests stalled
    ..."); None when none did."""
    bound = stall_bound_ms(measured)
    stalled = [m.stall_max_ms for m in measured if m.stall_max_ms > bound]
    if not stalled:
        return None
    return (
        f"{len(stalled)} of {len(measured)} requests stalled: up to {max(stalled):,.0f} ms between two tokens "
        f"(a stall: over {STALL_FACTOR:g} times the level's median gap and over {STALL_MIN_MS:,.0f} ms)"
    )


def _measured(
    records: list[RequestRecord], in_flight: int, rate: float | None
) -> tuple[int, Window | None, list[RequestMetrics], list[RequestMetrics]]:
    """The warm-up count, the steady-state window, every request's metrics and those of the
    measured requests (inside the window; after the warm-up when there is no window)."""
    if rate is None:
        warmup = warmup_count(len(records), in_flight)
        window = closed_loop_window(records, in_flight, warmup)
    else:
        warmup = min(math.ceil(0.1 * len(records)), len(records) // 2)
        window = open_loop_window(records, warmup)
    per_request = [m for m in map(metrics.request_metrics, records) if m is not None]
    if window is not None:
        measured = [m for m in per_request if window.start_ns <= m.t_disp_ns <= window.end_ns]
    else:
        measured = per_request[warmup:]
    return warmup, window, per_request, measured


def measured_requests(records: list[RequestRecord], level: LevelResult) -> list[RequestMetrics]:
    """The metrics of the requests ``level`` summarised, recomputed from its raw records (as
    read back from a result file): the same warm-up and window as :func:`level_summary`."""
    ordered = sorted(records, key=lambda record: record.t_disp_ns)
    return _measured(ordered, level.concurrency, level.rate_per_s)[3]


def measured_in(level: LevelRun) -> list[RequestMetrics]:
    """The metrics of the requests :func:`level_summary` measures in ``level``."""
    records = sorted(level.records, key=lambda record: record.t_disp_ns)
    return _measured(records, level.spec.in_flight, level.spec.rate)[3]


def level_summary(level: LevelRun) -> LevelResult:
    """Every run-level number of one level."""
    spec = level.spec
    records = sorted(level.records, key=lambda record: record.t_disp_ns)
    warmup, window, per_request, measured = _measured(records, spec.in_flight, spec.rate)
    ok = [record for record in records if record.error is None]
    errors = Counter(record.error for record in records if record.error is not None)
    wall = (max(r.t_end_ns for r in records) - min(r.t_disp_ns for r in records)) / 1e9 if records else 0.0
    in_window = tokens_in_window(records, window) if window is not None else None

    def values(name: str) -> list[float]:
        return [float(getattr(m, name)) for m in measured if getattr(m, name) is not None]

    return LevelResult(
        label=spec.label,
        concurrency=spec.in_flight,
        rate_per_s=spec.rate,
        requests=RequestCounts(
            total=len(records),
            successful=len(ok),
            errored=len(records) - len(ok),
            errors_by_kind=dict(errors),
            warmup_discarded=warmup,
            measured=len(measured),
        ),
        window_s=None if window is None else window.seconds,
        latency=Latency(
            **{
                name: _summary(values(name))
                for name in ("ttft_ms", "ttfo_ms", "ttfr_ms", "e2e_ms", "tpot_ms", "queue_client_ms")
            }
        ),
        decode_tps=_summary(values("decode_tps")),
        itl_token_ms=_weighted([s for m in measured for s in m.itl_samples], "token"),
        icl_chunk_ms=_weighted([(gap, 1.0) for m in measured for gap in m.icl_samples], "chunk"),
        stall_max_ms=max((m.stall_max_ms for m in measured), default=None),
        throughput=Throughput(
            output_tps=None if window is None or in_window is None else in_window / window.seconds,
            output_tps_wall=sum(m.out_tokens for m in per_request) / wall if wall else None,
            request_tps=len(measured) / window.seconds if window is not None else None,
        ),
        tokens=Tokens(
            input_target=spec.input_tokens,
            input=_summary([float(r.prompt_tokens) for r in ok if r.prompt_tokens is not None]),
            cached=_summary([float(r.cached_tokens) for r in ok if r.cached_tokens is not None]),
            output_target=spec.output_tokens,
            output=_summary([float(m.out_tokens) for m in measured]),
            tokens_per_chunk=_summary([m.tokens_per_chunk for m in measured]),
            count_sources=dict(Counter(m.token_source for m in per_request)),
            chunked_requests=sum(1 for m in per_request if m.chunked),
        ),
        # A level stopped before its closing scrape has no server report; it says so (scraped: false).
        server=level.server if level.server is not None else server_report(None, None, []),
        agent_turns=agent_turns(level) if any(r.turn is not None for r in records) else None,
        per_request_server={str(index): deltas for index, deltas in sorted(level.per_request_server.items())},
        untrusted_because=_trust(level, measured, spec.input_tokens),
        spec_decode_requests=spec_requests.summarise(records, {m.index for m in measured}),
        saturated=level.saturated,
        agent=agent_sessions(level) if any(r.session is not None for r in records) else None,
    )


def agent_turns(level: LevelRun) -> list[AgentTurn]:
    """Per turn of the agent workload: TTFT, prompt length, and how much of it the cache served."""
    rows = []
    turns = sorted({record.turn for record in level.records if record.turn is not None})
    for turn in turns:
        mine = [r for r in level.records if r.turn == turn and r.error is None]
        measured = [m for m in map(metrics.request_metrics, mine) if m is not None]
        server = [level.per_request_server.get(r.index, Counters()) for r in mine]
        hits = [s.prefix_cache_hits for s in server]
        queries = [s.prefix_cache_queries for s in server]
        known = [(h, q) for h, q in zip(hits, queries, strict=True) if h is not None and q]
        cached = [r.cached_tokens for r in mine if r.cached_tokens is not None]
        rows.append(
            AgentTurn(
                turn=turn,
                requests=len(mine),
                ttft_ms=_summary([m.ttft_ms for m in measured]),
                prompt_tokens_mean=_mean([r.prompt_tokens for r in mine if r.prompt_tokens is not None]),
                cached_tokens_mean=_mean(cached) if cached else None,
                prefix_cache_hit_rate=sum(h for h, _ in known) / sum(q for _, q in known) if known else None,
            )
        )
    return rows


def _mean(values: list[int] | list[float]) -> float | None:
    return sum(values) / len(values) if values else None
