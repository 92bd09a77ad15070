"""bench run trace against the scripted server, and bench trace export of a filed run: exact
ground truth from the trace alone.

- Arrival offsets: request i is scheduled ``timestamp / --speedup`` after the first, to the
  nanosecond, and never dispatched before that.
- Lengths: the server (one token per word) counts each prompt at the trace's input_length and
  sends its output_length.
- Prefix sharing: the server keeps a prefix cache of 4-word blocks; with one request in flight
  (so each arrives after the last one finished), request r's cached words are what the trace
  implies: with j leading hash ids in common with an earlier request q, the salt (8 words) and
  the words of the first min(64j, q's length, r's length) tokens after the 20 of overhead, in
  whole cache blocks; at least the salt, which every prompt of the run starts with.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import math
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench.cli.main import main
from bench.errors import ConfigError
from bench.measure.metrics import RequestRecord
from bench.measure.run.benchmark import RunOptions, execute
from bench.measure.run.results import RESULT_FILE, RunResult, records_by_level
from bench.measure.run.trace_export import export
from bench.measure.target import Target
from tests.scripted import KEY, Scripted

SALT_WORDS, OVERHEAD_WORDS, CACHE_BLOCK = 8, 20, 4  # the scripted server: template 9, salt 8, instruction 3


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Scripted]:
    fake = Scripted(tmp_path, ttft_ms=5.0, itl_ms=1.0, content_tokens=10_000, prefix_cache_words=CACHE_BLOCK)
    yield fake
    fake.close()


def _target(server: Scripted) -> Target:
    return Target(server.base_url, KEY, "scripted", "test", "vllm", None)


def _run(server: Scripted, options: RunOptions) -> tuple[RunResult, list[RequestRecord]]:
    _, path = asyncio.run(execute(_target(server), options))
    result = RESULT_FILE.read(path)
    (records,) = records_by_level(result)
    return result, sorted(records, key=lambda record: record.index)


def _expected_cached(lines: list[dict[str, object]], block_size: int) -> list[int]:
    """Each request's cached words, from the trace alone (the rule in the module docstring)."""
    cached = []
    for r, request in enumerate(lines):
        best = SALT_WORDS
        for earlier in lines[:r]:
            a, b = list(request["hash_ids"]), list(earlier["hash_ids"])  # type: ignore[call-overload]
            shared = next((k for k, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))
            if shared:
                tokens = min(shared * block_size, request["input_length"], earlier["input_length"])  # type: ignore[type-var]
                words = SALT_WORDS + max(0, int(tokens) - OVERHEAD_WORDS)  # type: ignore[call-overload]
                best = max(best, words // CACHE_BLOCK * CACHE_BLOCK)
        cached.append(best)
    return cached


TRACE = [
    {"timestamp": 0, "input_length": 200, "output_length": 5, "hash_ids": [1, 2, 3, 4]},
    {"timestamp": 100, "input_length": 150, "output_length": 6, "hash_ids": [1, 2, 5]},
    {"timestamp": 200, "input_length": 300, "output_length": 7, "hash_ids": [1, 2, 3, 4, 6]},
    {"timestamp": 300, "input_length": 100, "output_length": 4, "hash_ids": [7, 8]},
    {"timestamp": 400, "input_length": 130, "output_length": 5, "hash_ids": [7, 8, 9]},
    {"timestamp": 500, "input_length": 64, "output_length": 3, "hash_ids": [1]},
]


def _replay(server: Scripted, tmp_path: Path, trace: Path, speedup: float, block_size: int) -> RunOptions:
    settings = {"trace": str(trace), "speedup": speedup, "trace_block_size": block_size, "max_in_flight": 1}
    return RunOptions("trace", 20, 512, 128, tmp_path / "results", gpu_telemetry=False, settings=settings)  # type: ignore[arg-type]


def test_a_trace_is_replayed_on_its_timestamps_with_its_lengths_and_shared_prefixes(
    server: Scripted, tmp_path: Path
) -> None:
    path = tmp_path / "trace.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in TRACE), encoding="utf-8")
    result, records = _run(server, _replay(server, tmp_path, path, speedup=2.0, block_size=64))
    assert result.trace is not None
    assert (result.trace.file, result.trace.requests, result.trace.speedup, result.trace.block_size) == (
        "trace.jsonl",
        6,
        2.0,
        64,
    )
    assert result.trace.sha256 == hashlib.sha256(path.read_bytes()).hexdigest()
    assert [r.error for r in records] == [None] * 6
    assert [r.prompt_tokens for r in records] == [line["input_length"] for line in TRACE]
    assert [r.completion_tokens for r in records] == [line["output_length"] for line in TRACE]
    scheduled = [r.t_sched_ns for r in records]
    assert all(s is not None for s in scheduled)
    assert [s - scheduled[0] for s in scheduled] == [50_000_000 * i for i in range(6)]  # type: ignore[operator]
    assert all(r.t_disp_ns >= r.t_sched_ns for r in records)  # type: ignore[operator]
    assert [r.cached_tokens for r in records] == _expected_cached(TRACE, 64) == [8, 116, 188, 8, 88, 52]
    (level,) = result.levels
    assert (level.label, level.concurrency, level.tokens.input_target, level.tokens.output_target) == (
        "20 req/s",
        1,
        300,
        7,
    )
    assert not [reason for reason in level.untrusted_because if "length" in reason]


def test_an_exported_trace_run_keeps_its_trace_s_ids_while_the_trace_is_unchanged(
    server: Scripted, tmp_path: Path
) -> None:
    """The export of a replay is the trace as sent: timestamps divided by the speed-up, the same
    lengths and ids; once the trace file changed (or at another block size), ids are fresh."""
    path = tmp_path / "trace.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in TRACE), encoding="utf-8")
    _, result_path = asyncio.run(execute(_target(server), _replay(server, tmp_path, path, speedup=2.0, block_size=64)))
    result = RESULT_FILE.read(result_path)
    exported = [json.loads(line) for line in export(result, 64).lines()]
    assert exported == [{**line, "timestamp": line["timestamp"] // 2} for line in TRACE]  # type: ignore[operator]
    path.write_text(path.read_text(encoding="utf-8") + "\n", encoding="utf-8")
    renumbered = [json.loads(line)["hash_ids"] for line in export(result, 64).lines()]
    assert renumbered == [list(range(0, 4)), [4, 5, 6], [7, 8, 9, 10, 11], [12, 13], [14, 15, 16], [17]]
    assert [json.loads(line)["hash_ids"] for line in export(result, 16).lines()][3] == list(
        range(42, 49)
    )  # 13 + 10 + 19 ids before it


def test_an_exported_agent_run_replays_with_its_lengths_offsets_and_history_hits(
    server: Scripted, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """bench trace export of a filed agent run (2 sessions of 3 turns, a 64-token system prompt):
    each turn keeps its session's previous ids for the blocks wholly inside the last prompt, the
    first turns share the system prompt's 64 // 16 = 4 blocks; replayed (here, 4 times as fast),
    every request has its length, its offset and the cache hits the exported ids imply."""
    agent = {"sessions": 2, "turns": 3, "system_tokens": 64, "concurrency": (1,)}
    options = RunOptions("agent", 20, 30, 6, tmp_path / "results", gpu_telemetry=False, settings=agent)  # type: ignore[arg-type]
    _, path = asyncio.run(execute(_target(server), options))
    (original,) = records_by_level(RESULT_FILE.read(path))
    out = tmp_path / "exported.jsonl"
    assert main(["trace", "export", str(path), "-o", str(out), "--block-size", "16"]) == 0
    assert capsys.readouterr().out.strip() == f"6 requests written to {out}"
    lines = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    sent = sorted(original, key=lambda r: r.t_disp_ns)
    assert [line["input_length"] for line in lines] == [r.prompt_tokens for r in sent]
    assert [line["output_length"] for line in lines] == [r.completion_tokens for r in sent] == [6] * 6
    assert [line["timestamp"] for line in lines] == [round((r.t_disp_ns - sent[0].t_disp_ns) / 1e6) for r in sent]
    by_turn = {(r.session, r.turn): line["hash_ids"] for r, line in zip(sent, lines, strict=True)}
    used = 0  # ids are numbered in order of first use
    for record, line in zip(sent, lines, strict=True):
        ids = line["hash_ids"]
        assert len(ids) == math.ceil(line["input_length"] / 16)
        kept = 4 if record.turn == 0 and record.session else 0  # a later session's first turn: the system prompt
        if record.turn:
            previous = next(r for r in sent if (r.session, r.turn) == (record.session, record.turn - 1))
            kept = previous.prompt_tokens // 16  # type: ignore[operator]
            assert ids[:kept] == by_turn[record.session, record.turn - 1][:kept]
        assert ids[kept:] == list(range(used, used + len(ids) - kept))
        used += len(ids) - kept
    assert by_turn[0, 0][:4] == by_turn[1, 0][:4] == [0, 1, 2, 3]
    assert by_turn[0, 0][4] != by_turn[1, 0][4]

    result, replayed = _run(server, _replay(server, tmp_path, out, speedup=4.0, block_size=16))
    assert [r.prompt_tokens for r in replayed] == [line["input_length"] for line in lines]
    assert [r.completion_tokens for r in replayed] == [line["output_length"] for line in lines]
    offsets = [round(line["timestamp"] * 1_000_000 / 4) for line in lines]
    assert [r.t_sched_ns - replayed[0].t_sched_ns for r in replayed] == offsets  # type: ignore[operator]
    assert [r.cached_tokens for r in replayed] == _expected_cached(lines, 16)
    assert result.trace is not None
    assert result.trace.file == "exported.jsonl"


def test_a_trace_longer_than_the_served_context_is_refused(server: Scripted, tmp_path: Path) -> None:
    """The scripted server serves 4096 tokens; the longest prompt (4000) and the longest output
    (line 2 asks for --output-tokens, 97) make 4097."""
    path = tmp_path / "long.jsonl"
    lines = [{"timestamp": 0, "input_length": 4000, "output_length": 1}, {"timestamp": 1, "input_length": 30}]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    options = _replay(server, tmp_path, path, speedup=1.0, block_size=64)
    options = RunOptions("trace", 20, 512, 97, options.results_dir, gpu_telemetry=False, settings=options.settings)
    with pytest.raises(
        ConfigError, match=r"^--input-tokens/--context/--trace: no level fits the server's context of 4096"
    ):
        asyncio.run(execute(_target(server), options))
