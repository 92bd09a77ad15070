"""The agent workload's sessions over one level: the tool calls the model made in its tool
rounds, the tool results bench sent back, and when each session started. Read from the level's
records (a tool round's record carries its calls, ``()`` when the model made none)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from bench.measure import metrics
from bench.measure.metrics import Summary
from bench.measure.run import agent_script
from bench.measure.run.loops import LevelRun


@dataclass(frozen=True, slots=True)
class AgentSessions:
    """Sessions, tool rounds and calls of one agent level."""

    sessions: int
    cold_prefix: bool  # every request began with its own salt: nothing shared for the cache to serve
    tool_rounds: int  # requests that asked for tool calls (tool_choice required)
    tool_calls: int  # calls the model made in them
    rounds_without_call: int  # rounds the model answered without one
    parallel_rounds: int  # answers with two calls or more
    invalid_calls: int  # calls of no offered tool, or whose arguments are not a JSON object
    calls_per_session: Summary | None
    tool_result_tokens: Summary | None  # the sizes bench drew and sent back
    session_start_s: list[float]  # each session's first request, seconds after the level began


def agent_sessions(level: LevelRun) -> AgentSessions:
    """The sessions of an agent level."""
    records = [record for record in level.records if record.session is not None]
    rounds = [record for record in records if record.tool_calls is not None and record.error is None]
    calls = [call for record in rounds for call in record.tool_calls or ()]
    per_session = Counter(record.session for record in rounds for _ in record.tool_calls or ())
    numbers = sorted({record.session for record in records if record.session is not None})
    firsts = {number: min(r.t_disp_ns for r in records if r.session == number) for number in numbers}
    return AgentSessions(
        sessions=len(numbers),
        cold_prefix=level.spec.cold_prefix,
        tool_rounds=len(rounds),
        tool_calls=len(calls),
        rounds_without_call=sum(1 for record in rounds if not record.tool_calls),
        parallel_rounds=sum(1 for record in rounds if len(record.tool_calls or ()) >= 2),
        invalid_calls=sum(1 for call in calls if not agent_script.valid_arguments(call)),
        calls_per_session=metrics.summarize([float(per_session[number]) for number in numbers]) if rounds else None,
        tool_result_tokens=metrics.summarize([float(t) for t in level.tool_result_tokens]) if calls else None,
        session_start_s=[round((firsts[number] - level.started_ns) / 1e9, 3) for number in numbers],
    )
