"""A filed ``bench run`` result as a Mooncake-style trace (:mod:`bench.measure.run.trace`), which
the ``trace`` workload, AIPerf (``--custom-dataset-type mooncake_trace``) and GuideLLM replay.

Every request whose prompt length the server reported becomes one line, in the order it was
sent, all levels on one timeline:

- ``timestamp``: when it was scheduled (an open loop's arrival), else dispatched, in whole
  milliseconds after the first request exported;
- ``input_length``: the server's ``prompt_tokens``; ``output_length``: its ``completion_tokens``
  (what it asked for, when the server said nothing);
- ``hash_ids``: ``ceil(input_length / block_size)`` ids. A run of the ``trace`` workload keeps
  its trace's ids when that file is still where the run read it, unchanged (its SHA-256 as the
  result recorded it) and the block size is the one it was replayed with. Otherwise they are
  numbered from 0 in order of first use; a result keeps no prompt text, so the ids follow from
  what the workload shared: an agent
  session's turn keeps the previous turn's ids for every block that lies wholly inside that
  turn's prompt (its history is resent), and every session's blocks that lie wholly inside the
  shared system prompt (``--system-tokens``) have the same ids; every other block, and every
  block of the other workloads (whose prompts share only the salt, under a block), is new.
"""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from bench.errors import ConfigError
from bench.measure.metrics import RequestRecord
from bench.measure.run.results import RunResult, records_by_level
from bench.measure.run.trace import TraceRequest, read_trace


@dataclass(frozen=True, slots=True)
class Exported:
    """A run as a trace: its requests, and how many records had no prompt length to export."""

    requests: list[TraceRequest]
    skipped: int

    def lines(self) -> Iterator[str]:
        for request in self.requests:
            yield json.dumps(
                {
                    "timestamp": round(request.timestamp_ms),
                    "input_length": request.input_length,
                    "output_length": request.output_length,
                    "hash_ids": list(request.hash_ids),
                }
            )


def _sent_ns(record: RequestRecord) -> int:
    return record.t_sched_ns if record.t_sched_ns is not None else record.t_disp_ns


def replayed_ids(result: RunResult, block_size: int) -> dict[int, tuple[int, ...]]:
    """The hash ids of the trace a ``trace`` run replayed, by request index; {} when that trace
    is gone, changed, or was replayed with another block size."""
    source = result.trace
    if source is None or source.block_size != block_size:
        return {}
    try:
        trace = read_trace(Path(result.options.text("trace")), block_size, result.options.output_tokens)
    except ConfigError:
        return {}
    if trace.sha256 != source.sha256:
        return {}
    return {index: request.hash_ids for index, request in enumerate(trace.requests) if request.hash_ids}


def export(result: RunResult, block_size: int) -> Exported:
    """The requests of ``result`` as trace lines, their hash ids by the rule above."""
    if block_size < 1:
        raise ConfigError(f"--block-size: must be at least 1 token, got {block_size}")
    records = sorted((r for level in records_by_level(result) for r in level), key=_sent_ns)
    kept = [r for r in records if r.prompt_tokens is not None and r.prompt_tokens > 0]
    if not kept:
        raise ConfigError("the result has no request whose prompt length the server reported; nothing to export")
    replayed = replayed_ids(result, block_size)
    fresh = itertools.count(max((i + 1 for ids in replayed.values() for i in ids), default=0))
    system_blocks = 0
    if result.workload == "agent":
        system_blocks = result.options.integer("system_tokens") // block_size
    system = [next(fresh) for _ in range(system_blocks)]
    last_turn: dict[int, tuple[int, tuple[int, ...]]] = {}  # session: (prompt tokens, hash ids) of its last turn
    first_ns = _sent_ns(kept[0])
    requests = []
    for line, record in enumerate(kept, start=1):
        assert record.prompt_tokens is not None
        blocks = math.ceil(record.prompt_tokens / block_size)
        inherited: list[int] = list(replayed.get(record.index, ()))[:blocks]
        if record.session is not None:
            inherited = system[: min(blocks, record.prompt_tokens // block_size)]
            if record.session in last_turn:
                previous, ids = last_turn[record.session]
                inherited = list(ids[: min(previous, record.prompt_tokens) // block_size])
        ids = (*inherited, *(next(fresh) for _ in range(blocks - len(inherited))))
        if record.session is not None:
            last_turn[record.session] = (record.prompt_tokens, ids)
        output = record.completion_tokens if record.completion_tokens else record.requested_tokens
        stamp = (_sent_ns(record) - first_ns) / 1e6
        requests.append(TraceRequest(line, stamp, record.prompt_tokens, output, ids))
    return Exported(requests, len(records) - len(kept))
