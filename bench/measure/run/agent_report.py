"""What ``bench run agent`` prints under its summary: each level turn by turn, its sessions'
tool calls, and, with ``--cold-prefix``, what the prefix cache bought (the same sessions' TTFT
with every prefix shared as the agent sends it, and with none shared)."""

from __future__ import annotations

from rich import box
from rich.console import Console
from rich.table import Table

from bench.measure.run.agent_sessions import AgentSessions
from bench.measure.run.figures import fmt, p50
from bench.measure.run.results import AgentTurn, LevelResult


def print_agent(console: Console, levels: list[LevelResult]) -> None:
    """The agent levels of a run, each turn by turn, then the cache's saving when a cold level ran."""
    for level in levels:
        if level.agent_turns:
            cold = level.agent is not None and level.agent.cold_prefix
            _print_turns(console, level.agent_turns, "cold prefix: no request shares one" if cold else "")
        if level.agent is not None and level.agent.tool_rounds:
            console.print(tool_line(level.agent), soft_wrap=True)
        starts = starts_line(level.agent) if level.agent is not None else None
        if starts:
            console.print(starts, soft_wrap=True)
    line = cache_saving(levels)
    if line:
        console.print(line, soft_wrap=True)


def _print_turns(console: Console, turns: list[AgentTurn], note: str) -> None:
    """One agent level, turn by turn: the history grows, the cache should serve more of it."""
    title = "agent sessions, turn by turn" + (f" ({note})" if note else "")
    table = Table(title=title, box=box.SIMPLE_HEAD)
    for column in ("turn", "requests", "prompt tok", "TTFT p50 ms", "cached tok", "prefix hit"):
        table.add_column(column, justify="right")
    for row in turns:
        hit = row.prefix_cache_hit_rate
        table.add_row(
            str(row.turn),
            str(row.requests),
            fmt(row.prompt_tokens_mean, 0),
            p50(row.ttft_ms),
            fmt(row.cached_tokens_mean, 0),
            "-" if hit is None else f"{hit:.0%}",
        )
    console.print(table)


def tool_line(agent: AgentSessions) -> str:
    """The tool rounds of one level in a line."""
    per_session = agent.calls_per_session
    spread = "" if per_session is None else f", {per_session.mean:.1f} per session (max {per_session.max:g})"
    results = agent.tool_result_tokens
    sizes = "" if results is None else f"; tool results {results.p50:,.0f} tokens p50 (max {results.max:,.0f})"
    return (
        f"{agent.sessions} sessions, {agent.tool_rounds} tool rounds: {agent.tool_calls} calls{spread}, "
        f"{agent.parallel_rounds} rounds with several calls, {agent.rounds_without_call} without a call, "
        f"{agent.invalid_calls} invalid{sizes}"
    )


def cache_saving(levels: list[LevelResult]) -> str | None:
    """TTFT of the same sessions with the prefix cache (warm) and without (cold), when both ran."""
    warm = [level for level in levels if level.agent is not None and not level.agent.cold_prefix]
    cold = [level for level in levels if level.agent is not None and level.agent.cold_prefix]
    if not warm or not cold:
        return None
    hot, frozen = warm[0].latency.ttft_ms, cold[0].latency.ttft_ms
    if hot is None or frozen is None or frozen.p50 <= 0:
        return None
    saved = 1 - hot.p50 / frozen.p50
    verdict = f"the cache saves {saved:.0%} of it" if saved > 0 else "the cache saved none of it here"
    return (
        f"prefix cache: TTFT p50 {hot.p50:,.1f} ms as the sessions share their prefixes, {frozen.p50:,.1f} ms "
        f"with none shared (cold prefix): {verdict}"
    )


def starts_line(agent: AgentSessions) -> str | None:
    """When the sessions started, when they did not all start at once."""
    if len(agent.session_start_s) < 2 or max(agent.session_start_s) < 0.001:
        return None
    return "sessions started at " + ", ".join(f"{start:.2f}" for start in agent.session_start_s) + " s"
