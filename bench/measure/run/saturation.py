"""Over-saturation of an open-loop level (GuideLLM's rule): arrivals come faster than the server
finishes them when both the requests outstanding (scheduled and not yet answered, whether they
wait in the server's queue or in bench's ``--max-in-flight`` queue) and the wait for the first
token (from the scheduled time, so the client's queue counts) rise with a positive slope that a
one-sided t-test on the least-squares slope calls significant. Such a level has no steady state:
its figures grow with its length. bench stops sending its remaining requests, lets the ones in
flight finish, and marks the level ``saturated``; ``bench compare`` leaves it out."""

from __future__ import annotations

import asyncio
import bisect
import math
import time
from dataclasses import dataclass

from scipy import stats as scipy_stats

from bench.measure.metrics import RequestRecord

ALPHA = 0.01  # one-sided, each slope: both must pass, so a level that is not saturated is stopped rarely
MIN_POINTS = 10  # of each series, before the test is made (samples of the queue; answered requests)
SAMPLE_S = 0.5  # seconds between two samples of the requests outstanding


@dataclass(frozen=True, slots=True)
class Slope:
    """A least-squares slope and the one-sided p-value that it is above zero."""

    per_s: float
    p: float
    n: int


def rising(points: list[tuple[float, float]]) -> Slope | None:
    """The slope of ``points`` (x in seconds) and its one-sided p; None below :data:`MIN_POINTS`
    points or when every x is the same."""
    n = len(points)
    if n < MIN_POINTS:
        return None
    mean_x = sum(x for x, _ in points) / n
    mean_y = sum(y for _, y in points) / n
    sxx = sum((x - mean_x) ** 2 for x, _ in points)
    if sxx == 0:
        return None
    slope = sum((x - mean_x) * (y - mean_y) for x, y in points) / sxx
    residual = sum((y - mean_y - slope * (x - mean_x)) ** 2 for x, y in points) / (n - 2)
    if residual == 0:
        return Slope(slope, 0.0 if slope > 0 else 1.0, n)
    t = slope / math.sqrt(residual / sxx)
    return Slope(slope, float(scipy_stats.t.sf(t, n - 2)), n)


def verdict(outstanding: list[tuple[float, float]], first_token_ms: list[tuple[float, float]]) -> str | None:
    """Why the level is over-saturated, or None: both series rise significantly."""
    queue, wait = rising(outstanding), rising(first_token_ms)
    if queue is None or wait is None or queue.p >= ALPHA or wait.p >= ALPHA:
        return None
    return (
        f"over-saturated: requests outstanding rise {queue.per_s:+.2f}/s (p {queue.p:.2g}) and the wait for the "
        f"first token {wait.per_s:+,.0f} ms/s (p {wait.p:.2g}); the server cannot keep up with this rate"
    )


async def watch(records: list[RequestRecord], start: int, schedule: list[int]) -> str:
    """Every :data:`SAMPLE_S` until the level is over-saturated, then why: how many requests are
    outstanding (``schedule``'s send times that have passed, less the ``records`` answered, which
    the level appends to as they finish), and the wait from each answered request's scheduled time
    to its first token. Runs until cancelled when the level never saturates."""
    outstanding: list[tuple[float, float]] = []
    while True:
        await asyncio.sleep(SAMPLE_S)
        now = time.perf_counter_ns()
        outstanding.append(((now - start) / 1e9, float(bisect.bisect_right(schedule, now) - len(records))))
        waits = [
            ((record.t_sched_ns - start) / 1e9, (first - record.t_sched_ns) / 1e6)
            for record in records
            if record.error is None and record.t_sched_ns is not None and (first := _first_token_ns(record)) is not None
        ]
        found = verdict(outstanding, sorted(waits))
        if found is not None:
            return found


def _first_token_ns(record: RequestRecord) -> int | None:
    """When the first event that carried output (answer, reasoning or a tool call) came."""
    return next((e.t_ns for e in record.events if e.content_chars or e.reasoning_chars or e.tool_call), None)
