"""The agent workload against the scripted server (a protocol fake): the model's own tool calls
answered with results of the drawn sizes, think times and staggered session starts as drawn, and
the cold-prefix level; the ground truth is the fake's own log of what each request carried."""

from __future__ import annotations

import asyncio
import itertools
import json
from pathlib import Path
from typing import Any

import pytest

from bench.errors import ConfigError
from bench.measure.metrics import ToolCall
from bench.measure.run import agent_report, agent_script, results
from bench.measure.run.benchmark import RunOptions, execute
from bench.measure.run.options import settings_for
from bench.measure.stream.extras import tool_calls
from bench.measure.target import Target
from tests.result_files import load_result
from tests.scripted import KEY, scripted

FAST = {"ttft_ms": 5.0, "itl_ms": 1.0, "content_tokens": 8}


def _run(base_url: str, tmp_path: Path, **settings: Any) -> tuple[dict[str, Any], results.RunResult]:
    target = Target(base_url=base_url, api_key=KEY, model="scripted", tag="agent", engine="vllm", deployment=None)
    options = RunOptions("agent", 2, 32, 8, tmp_path / "results", settings=settings_for("agent", settings))
    _, path = asyncio.run(execute(target, options))
    return load_result(path), results.RESULT_FILE.read(path)


def _log(path: Path) -> list[dict[str, Any]]:
    """The fake's log, the two one-word calibration requests left out, in arrival order."""
    entries = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    return sorted((e for e in entries if "system" in e["roles"]), key=lambda e: e["arrived_ns"])


def test_tool_rounds_answer_each_of_the_models_calls_with_a_result_of_the_drawn_size(tmp_path: Path) -> None:
    """Two calls per answer, two rounds per turn, two turns, two sessions one after the other: each
    session sends required, required, none per turn; each round's two calls come back as two tool
    messages of the drawn sizes (the fake counts one token per word: the calibration's slope is 1)."""
    with scripted(tmp_path, tool_calls=2, **FAST) as server:
        settings = {"sessions": 2, "turns": 2, "tool_rounds": 2, "tool_result_tokens": 40, "system_tokens": 100}
        document, result = _run(server.base_url, tmp_path, **settings)
        sent = _log(server.log)
    assert len(sent) == 2 * 2 * 3
    assert [e["tool_choice"] for e in sent] == ["required", "required", "none"] * 4
    for session in range(2):
        mine = sent[session * 6 : (session + 1) * 6]
        drawn = [
            agent_script.tool_result_tokens(0, session, step, call, 40)
            for step in (0, 1, 3, 4)  # the rounds of turn 0 are steps 0 and 1, of turn 1 steps 3 and 4
            for call in range(2)
        ]
        # Each request carries every result so far, each "<tool> returned: <drawn> words".
        assert [len(e["tool_results"]) for e in mine] == [0, 2, 4, 4, 6, 8]
        assert mine[-1]["tool_results"] == [tokens + 2 for tokens in drawn]
        assert mine[2]["roles"] == ["system", "user", "assistant", "tool", "tool", "assistant", "tool", "tool"]
        assert mine[3]["roles"][-2:] == ["assistant", "user"]  # the turn's answer, then the next task step
    (level,) = result.levels
    agent = level.agent
    assert agent is not None
    assert (agent.sessions, agent.tool_rounds, agent.tool_calls) == (2, 8, 16)
    assert (agent.parallel_rounds, agent.rounds_without_call, agent.invalid_calls) == (8, 0, 0)
    assert agent.calls_per_session is not None
    assert agent.calls_per_session.mean == 8
    assert agent.tool_result_tokens is not None
    assert agent.tool_result_tokens.n == 16
    assert level.untrusted_because == []  # the rounds were not asked for a fixed length
    assert [t.turn for t in level.agent_turns or []] == list(range(6))
    records = results.records_by_level(result)[0]
    assert all(len(r.tool_calls or ()) == 2 for r in records if r.tool_calls is not None)
    assert sum(r.tool_calls is not None for r in records) == 8
    assert document["options"]["tool_rounds"] == 2


def test_think_times_and_session_starts_are_kept_as_drawn(tmp_path: Path) -> None:
    """Three sessions at once, Poisson starts 0.15 s apart on average, 0.05 s think time on average:
    no session starts before its drawn time and no request leaves before its drawn pause is over
    (lower bounds: a busy machine can only make them later)."""
    with scripted(tmp_path, **FAST) as server:
        settings = {"concurrency": (3,), "sessions": 3, "turns": 3, "session_interval": 0.15, "think_time": 0.05}
        _, result = _run(server.base_url, tmp_path, **settings)
    (level,) = result.levels
    assert level.agent is not None
    starts = agent_script.session_starts_s(0, 3, 0.15)
    assert starts[0] == 0
    assert starts[1] > 0
    assert all(got >= want for got, want in zip(level.agent.session_start_s, starts, strict=True))
    line = agent_report.starts_line(level.agent)
    assert line == "sessions started at " + ", ".join(f"{s:.2f}" for s in level.agent.session_start_s) + " s"
    records = results.records_by_level(result)[0]
    for session in range(3):
        mine = sorted((r for r in records if r.session == session), key=lambda r: r.t_disp_ns)
        for before, after in itertools.pairwise(mine):
            pause = agent_script.think_time_s(0, session, after.turn or 0, 0.05)
            assert pause > 0
            assert (after.t_disp_ns - before.t_end_ns) / 1e9 >= pause


def test_cold_prefix_runs_the_same_sessions_with_no_shared_head(tmp_path: Path) -> None:
    """The cold level's requests each begin with their own salt; the warm level's share the run's.
    The fake answers the cold level's four requests (arrivals 6 to 9, after two calibration and
    four warm ones) ten times later, as a server that must prefill everything again would, and the
    saving line says what share of the TTFT the shared prefixes saved."""
    slow = {str(arrival): {"ttft_ms": 50.0} for arrival in range(6, 10)}
    with scripted(tmp_path, requests=slow, **FAST) as server:
        _, result = _run(server.base_url, tmp_path, sessions=2, turns=2, cold_prefix=True)
        sent = _log(server.log)
    hot, frozen = (level.latency.ttft_ms for level in result.levels)
    assert hot is not None
    assert frozen is not None
    assert frozen.p50 >= 50 > hot.p50
    line = agent_report.cache_saving(result.levels)
    assert line is not None
    assert f"the cache saves {1 - hot.p50 / frozen.p50:.0%} of it" in line
    assert agent_report.cache_saving(result.levels[:1]) is None  # no cold level, no claim
    assert [level.label for level in result.levels] == ["c=1", "c=1 cold"]
    warm, cold = sent[:4], sent[4:]
    heads = [" ".join(e["key"].split()[:8]) for e in sent]
    assert len(set(heads[:4])) == 1
    assert len(set(heads[4:])) == 4
    assert [e["prompt_tokens"] for e in warm] == [e["prompt_tokens"] for e in cold]  # the same sessions
    assert [level.agent.cold_prefix for level in result.levels if level.agent] == [False, True]


def test_a_server_that_refuses_tools_stops_the_run_naming_the_flag(tmp_path: Path) -> None:
    with (
        scripted(tmp_path, status=400, status_above_max_tokens=1, error_message="tool_choice needs a parser") as server,
        pytest.raises(ConfigError, match="--tool-rounds 0"),
    ):
        _run(server.base_url, tmp_path, sessions=1, turns=1, tool_rounds=1)


@pytest.mark.parametrize(
    ("settings", "flag"),
    [
        ({"tool_rounds": -1}, "--tool-rounds"),
        ({"think_time": -0.5}, "--think-time"),
        ({"session_interval": -1.0}, "--session-interval"),
        ({"tool_result_tokens": 0}, "--tool-result-tokens"),
    ],
)
def test_bad_agent_settings_name_their_flag(settings: dict[str, Any], flag: str, tmp_path: Path) -> None:
    options = RunOptions("agent", 2, 32, 8, tmp_path, settings=settings_for("agent", settings))
    with pytest.raises(ConfigError, match=flag):
        options.levels()


def test_tool_calls_are_put_together_from_their_streamed_pieces() -> None:
    """vLLM's shape (id and name first, arguments in pieces, by index), two calls interleaved, and
    llama.cpp's pieces without an index."""
    vllm = [
        {"index": 0, "id": "a", "type": "function", "function": {"name": "read_file", "arguments": ""}},
        {"index": 0, "function": {"arguments": '{"path": '}},
        {"index": 1, "id": "b", "type": "function", "function": {"name": "search", "arguments": '{"query"'}},
        {"index": 0, "function": {"arguments": '"x.py"}'}},
        {"index": 1, "function": {"arguments": ': "y"}'}},
    ]
    assert tool_calls(vllm) == (
        ToolCall("a", "read_file", '{"path": "x.py"}'),
        ToolCall("b", "search", '{"query": "y"}'),
    )
    no_index = [
        {"id": "c", "function": {"name": "run_tests", "arguments": "{"}},
        {"function": {"arguments": "}"}},
        {"id": "d", "function": {"name": "search", "arguments": "{}"}},
    ]
    assert tool_calls(no_index) == (ToolCall("c", "run_tests", "{}"), ToolCall("d", "search", "{}"))
    assert agent_script.valid_arguments(ToolCall("c", "run_tests", "{}"))
    assert not agent_script.valid_arguments(ToolCall("e", "rm_rf", "{}"))
    assert not agent_script.valid_arguments(ToolCall("f", "search", "not json"))


def test_drawn_sizes_follow_their_distribution_and_bounds() -> None:
    """Tool results: median near the asked one over many draws, never outside 16 .. 8 x median."""
    sizes = sorted(agent_script.tool_result_tokens(7, s, 0, 0, 500) for s in range(2001))
    assert sizes[0] >= 16
    assert sizes[-1] <= 4000
    assert 450 <= sizes[1000] <= 550
    pauses = [agent_script.think_time_s(7, s, 1, 2.0) for s in range(4000)]
    assert 1.8 <= sum(pauses) / len(pauses) <= 2.2
    assert agent_script.think_time_s(7, 0, 0, 2.0) == 0.0  # none before a session's first request
