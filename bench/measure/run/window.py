"""The steady-state measurement window of a level (BENCH-METRICS.md section (b)): the span in
which the intended load was really on the server, and the output tokens that arrived inside it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from bench.measure.metrics import NS_PER_S, RequestRecord, token_events


@dataclass(frozen=True, slots=True)
class Window:
    """The steady-state measurement window [start_ns, end_ns] of a run."""

    start_ns: int
    end_ns: int

    @property
    def seconds(self) -> float:
        return (self.end_ns - self.start_ns) / NS_PER_S


def closed_loop_window(records: Sequence[RequestRecord], concurrency: int, warmup: int) -> Window | None:
    """W0: the first moment at or after the first measured dispatch when ``concurrency`` requests
    are in flight; W1: the first moment after the last dispatch when fewer are in flight."""
    ordered = sorted(records, key=lambda record: record.t_disp_ns)
    if len(ordered) <= warmup:
        return None
    changes = sorted(
        [(r.t_disp_ns, 1) for r in ordered] + [(r.t_end_ns, -1) for r in ordered], key=lambda c: (c[0], c[1])
    )
    first_measured = ordered[warmup].t_disp_ns
    last_dispatch = ordered[-1].t_disp_ns
    in_flight, start, end = 0, None, None
    for moment, step in changes:
        in_flight += step
        if start is None and moment >= first_measured and in_flight >= concurrency:
            start = moment
        if moment > last_dispatch and in_flight < concurrency and step < 0:
            end = moment
            break
    if start is None or end is None or end <= start:
        return None
    return Window(start, end)


def open_loop_window(records: Sequence[RequestRecord], warmup: int) -> Window | None:
    """Open loop: from the schedule of the first measured request to the last schedule."""
    scheduled = sorted(r.t_sched_ns if r.t_sched_ns is not None else r.t_disp_ns for r in records)
    if len(scheduled) <= warmup + 1 or scheduled[-1] <= scheduled[warmup]:
        return None
    return Window(scheduled[warmup], scheduled[-1])


def tokens_in_window(records: Sequence[RequestRecord], window: Window) -> float:
    """Output tokens whose events arrived inside ``window`` (the steady-state throughput numerator)."""
    total = 0.0
    for record in records:
        if record.error is not None:
            continue
        events, counts, _, _ = token_events(record)
        total += sum(
            count for event, count in zip(events, counts, strict=True) if window.start_ns <= event.t_ns <= window.end_ns
        )
    return total
