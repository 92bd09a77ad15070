"""Pure functions from per-event timestamps to the numbers ``bench run`` reports.

No I/O and no clock: every input is a :class:`RequestRecord` whose timestamps were taken with
``time.perf_counter_ns()`` by the client. Definitions follow BENCH-METRICS.md section (b):

- ``ttft``: dispatch to the first event that carries a token (content, reasoning or a tool
  call, or a growth of the continuous usage count); ``ttfr``: dispatch to the first event of any
  kind; ``ttfo``: dispatch to the first *answer* token (content or tool call, not reasoning).
- ``e2e``: dispatch to the last token event; ``decode_time``: first to last token event.
- ``tpot`` = decode_time / (out_tokens - 1) and ``decode_tps`` = its inverse, per request.
- ``itl_token``: each gap between token events divided by the tokens the later event carried,
  weighted by those tokens (pooled, token-weighted); ``icl_chunk``: the raw gaps (pooled,
  chunk-weighted; this is what vLLM's bench calls ITL).

Tokens per event come from continuous usage when the server sends it, else one per token event
when the final usage count equals the number of token events, else the final count minus one
spread evenly over the events after the first (the request is then marked ``chunked``).
"""

from __future__ import annotations

import bisect
import itertools
import math
import random
from collections.abc import Sequence
from dataclasses import dataclass, field

from bench.codec import OMIT_IF_NONE

NS_PER_MS = 1_000_000
NS_PER_S = 1_000_000_000


@dataclass(slots=True)  # not frozen: a frozen dataclass costs three times as much to make, once per streamed event
class Event:
    """One server-sent event, stamped when the read that completed it returned (treat it as read-only)."""

    t_ns: int
    content_chars: int = 0
    reasoning_chars: int = 0
    tool_call: bool = False
    completion_tokens: int | None = None  # continuous usage, when the server sends it


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One tool call of an answer, as the client sends it back: its id, the tool, the arguments' JSON text."""

    id: str
    name: str
    arguments: str


@dataclass(frozen=True, slots=True)
class RequestRecord:
    """Everything the client saw of one request; timestamps are perf_counter_ns values."""

    index: int
    t_disp_ns: int
    t_end_ns: int
    events: tuple[Event, ...]
    requested_tokens: int
    t_sched_ns: int | None = None
    prompt_tokens: int | None = None
    cached_tokens: int | None = None
    completion_tokens: int | None = None
    reasoning_tokens: int | None = None
    finish_reason: str | None = None
    error: str | None = None  # error kind; None when the request succeeded
    # What the server said of the error (HTTP body, error event), one line; absent from the
    # records of files written before bench kept it.
    error_message: str | None = field(default=None, metadata=OMIT_IF_NONE)
    answer: str = ""  # the answer's text, kept only by multi-turn workloads
    session: int | None = None  # agent workload: session and turn of this request
    turn: int | None = None
    # vLLM's per-request speculative decoding (--per-request-spec-decode-metrics, the final usage
    # chunk's metrics.speculative_decoding): draft tokens accepted and proposed, verify steps.
    spec_accepted: int | None = field(default=None, metadata=OMIT_IF_NONE)
    spec_drafted: int | None = field(default=None, metadata=OMIT_IF_NONE)
    spec_steps: int | None = field(default=None, metadata=OMIT_IF_NONE)
    # The answer's tool calls, kept with its text by the agent workload (None: not kept).
    tool_calls: tuple[ToolCall, ...] | None = field(default=None, metadata=OMIT_IF_NONE)


@dataclass(frozen=True, slots=True)
class RequestMetrics:
    """Per-request metrics; times in milliseconds, rates in tokens per second."""

    index: int
    t_disp_ns: int
    ttfr_ms: float
    ttft_ms: float
    ttfo_ms: float | None
    e2e_ms: float
    decode_ms: float
    out_tokens: int
    token_source: str  # server-continuous | server | chunk-count
    chunked: bool
    token_events: int
    tpot_ms: float | None
    decode_tps: float | None
    stall_max_ms: float
    tokens_per_chunk: float
    osl_mismatch: float
    queue_client_ms: float | None
    itl_samples: tuple[tuple[float, float], ...]  # (ms per token, weight in tokens)
    icl_samples: tuple[float, ...]  # raw gaps between token events, ms
    spec_acceptance: float | None = None  # this request's draft tokens accepted over proposed


def _carries_token(event: Event, previous_usage: int) -> bool:
    grew = event.completion_tokens is not None and event.completion_tokens > previous_usage
    return grew or event.content_chars > 0 or event.reasoning_chars > 0 or event.tool_call


def token_events(record: RequestRecord) -> tuple[list[Event], list[float], str, bool]:
    """The events that carried tokens, the tokens each carried, the count's source, chunked."""
    continuous = any(event.completion_tokens is not None for event in record.events)
    picked: list[Event] = []
    counts: list[float] = []
    usage = 0
    for event in record.events:
        if _carries_token(event, usage):
            picked.append(event)
            if continuous:
                now = event.completion_tokens if event.completion_tokens is not None else usage
                counts.append(float(max(now - usage, 0)))
        if event.completion_tokens is not None:
            usage = max(usage, event.completion_tokens)
    if continuous and record.completion_tokens is not None and sum(counts) == record.completion_tokens:
        keep = [i for i, count in enumerate(counts) if count > 0]
        return [picked[i] for i in keep], [counts[i] for i in keep], "server-continuous", False
    if record.completion_tokens is None:
        return picked, [1.0] * len(picked), "chunk-count", False
    if record.completion_tokens == len(picked):
        return picked, [1.0] * len(picked), "server", False
    if len(picked) <= 1:
        return picked, [float(record.completion_tokens)] * len(picked), "server", True
    rest = (record.completion_tokens - 1) / (len(picked) - 1)
    return picked, [1.0] + [rest] * (len(picked) - 1), "server", True


def request_metrics(record: RequestRecord) -> RequestMetrics | None:
    """Metrics of one successful request; None when it failed or carried no token."""
    if record.error is not None:
        return None
    events, counts, source, chunked = token_events(record)
    if not events:
        return None
    out_tokens = round(sum(counts)) if source != "server" else (record.completion_tokens or len(events))
    first, last = events[0].t_ns, events[-1].t_ns
    answer = next((event.t_ns for event in events if event.content_chars or event.tool_call), None)
    gaps = [(events[i].t_ns - events[i - 1].t_ns) / NS_PER_MS for i in range(1, len(events))]
    decode_ms = (last - first) / NS_PER_MS
    tpot = decode_ms / (out_tokens - 1) if out_tokens >= 2 and decode_ms > 0 else None
    itl = tuple((gap / counts[i + 1], counts[i + 1]) for i, gap in enumerate(gaps) if counts[i + 1] > 0)
    requested = record.requested_tokens
    return RequestMetrics(
        index=record.index,
        t_disp_ns=record.t_disp_ns,
        ttfr_ms=(record.events[0].t_ns - record.t_disp_ns) / NS_PER_MS,
        ttft_ms=(first - record.t_disp_ns) / NS_PER_MS,
        ttfo_ms=None if answer is None else (answer - record.t_disp_ns) / NS_PER_MS,
        e2e_ms=(last - record.t_disp_ns) / NS_PER_MS,
        decode_ms=decode_ms,
        out_tokens=out_tokens,
        token_source=source,
        chunked=chunked,
        token_events=len(events),
        tpot_ms=tpot,
        decode_tps=None if tpot is None else 1000.0 / tpot,
        stall_max_ms=max(gaps, default=0.0),
        tokens_per_chunk=out_tokens / len(events),
        osl_mismatch=(out_tokens - requested) / requested if requested else 0.0,
        queue_client_ms=None if record.t_sched_ns is None else (record.t_disp_ns - record.t_sched_ns) / NS_PER_MS,
        itl_samples=itl,
        icl_samples=tuple(gaps),
        spec_acceptance=record.spec_accepted / record.spec_drafted
        if record.spec_accepted is not None and record.spec_drafted
        else None,
    )


def percentile(samples: Sequence[float], fraction: float) -> float:
    """Linear-interpolation percentile (numpy's default, Hyndman-Fan type 7) of ``samples``."""
    if not samples:
        raise ValueError("percentile of no samples")
    ordered = sorted(samples)
    position = (len(ordered) - 1) * fraction
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def weighted_percentile(samples: Sequence[tuple[float, float]], fraction: float) -> float:
    """Percentile of (value, weight) pairs: ``percentile`` of the list in which each value is
    repeated ``weight`` times, so weights of 1 give exactly ``percentile`` of the values.
    Fractional weights stretch that list: value i covers the positions [W_(i-1), W_i) of the
    cumulative weights, and the type-7 position (total - 1) * fraction interpolates between
    the values at its floor and the next position. Pairs of weight 0 or less count for nothing."""
    return weighted_percentiles(samples, (fraction,))[0]


def weighted_percentiles(samples: Sequence[tuple[float, float]], fractions: Sequence[float]) -> list[float]:
    """:func:`weighted_percentile` at each of ``fractions``, sorting the samples once."""
    ordered = sorted((value, weight) for value, weight in samples if weight > 0)
    if not ordered:
        raise ValueError("percentile of no samples")
    cumulative = list(itertools.accumulate(weight for _, weight in ordered))
    total = cumulative[-1]
    slack = 1e-9 * max(1.0, total)  # float sums of fractional weights land a hair off the integer positions

    def at(place: float) -> float:
        # The first value whose cumulative weight passes the position.
        return ordered[min(bisect.bisect_right(cumulative, place + slack), len(ordered) - 1)][0]

    out = []
    for fraction in fractions:
        position = max(0.0, (total - 1) * fraction)
        low = math.floor(position)
        below = at(low)
        out.append(below + (at(low + 1) - below) * (position - low))
    return out


@dataclass(frozen=True, slots=True)
class Summary:
    """Distribution of one metric: n, mean, sample std, percentiles (None where n is too small)."""

    n: int
    mean: float
    std: float | None
    p50: float
    p90: float
    p95: float
    p99: float | None
    max: float
    p50_ci: tuple[float, float] | None = None  # bootstrap 95% CI on the median


def summarize(samples: Sequence[float], *, bootstrap_seed: int | None = 0, resamples: int = 1000) -> Summary | None:
    """Summary of ``samples``; p99 only from 100 samples up; a seeded bootstrap CI on the median."""
    if not samples:
        return None
    n = len(samples)
    mean = sum(samples) / n
    std = math.sqrt(sum((x - mean) ** 2 for x in samples) / (n - 1)) if n > 1 else None
    ci = None
    if bootstrap_seed is not None and n > 1:
        ci = bootstrap_ci(samples, 0.5, seed=bootstrap_seed, resamples=resamples)
    return Summary(
        n=n,
        mean=mean,
        std=std,
        p50=percentile(samples, 0.5),
        p90=percentile(samples, 0.9),
        p95=percentile(samples, 0.95),
        p99=percentile(samples, 0.99) if n >= 100 else None,
        max=max(samples),
        p50_ci=ci,
    )


def bootstrap_ci(
    samples: Sequence[float], fraction: float, *, seed: int, resamples: int = 1000, level: float = 0.95
) -> tuple[float, float]:
    """Percentile-bootstrap confidence interval of the ``fraction`` percentile, seeded."""
    generator = random.Random(seed)
    n = len(samples)
    estimates = sorted(
        percentile([samples[generator.randrange(n)] for _ in range(n)], fraction) for _ in range(resamples)
    )
    tail = (1 - level) / 2
    return percentile(estimates, tail), percentile(estimates, 1 - tail)
