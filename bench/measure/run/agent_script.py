"""What the agent workload sends: the messages of its sessions, the tools it offers, the tool
results it answers calls with, and its seeded schedule (think times, session starts, result sizes).

Everything here is a pure function of the run's seed and the session, step and call numbers, so
two runs with one seed send the same sessions (the salt at the head of the system prompt aside),
and the tests compute what bench must have sent.

- The system prompt: the run's salt, an agent's instruction, and filler to ``--system-tokens``.
  Without tool rounds the tool schemas are written into it as text (any server serves that);
  with tool rounds they go as OpenAI ``tools`` and the server's chat template renders them.
- Tool results: ``{"role": "tool"}`` messages whose length is drawn from a log-normal
  distribution around ``--tool-result-tokens`` (median; sigma 0.8, so a tenth of the results are
  under a third of it and a tenth over 2.8 times it, as file reads and test logs are), clamped
  to 16 .. 8 x the median.
- Think time between two requests of a session (the tool running, the user reading): exponential
  with mean ``--think-time``. Session starts: a Poisson process with mean gap ``--session-interval``.
"""

from __future__ import annotations

import json
import math
import random
from dataclasses import dataclass
from typing import Any

from bench.codec import JsonObject
from bench.measure.metrics import ToolCall
from bench.measure.run.prompts import VOCABULARY, PromptFactory

RESULT_SIGMA = 0.8
RESULT_MIN_TOKENS = 16
RESULT_MAX_FACTOR = 8


def _function(name: str, description: str, properties: dict[str, str], required: list[str]) -> JsonObject:
    schema: JsonObject = {
        "type": "object",
        "properties": {key: {"type": "string", "description": text} for key, text in properties.items()},
        "required": list(required),
    }
    return {"type": "function", "function": {"name": name, "description": description, "parameters": schema}}


# The tools a coding agent offers (OpenCode's and Aider's core set, reduced to four).
AGENT_TOOLS: tuple[JsonObject, ...] = (
    _function("read_file", "Read a file of the repository", {"path": "file path"}, ["path"]),
    _function(
        "edit_file",
        "Replace text in a file",
        {"path": "file path", "old": "text to replace", "new": "replacement"},
        ["path", "old", "new"],
    ),
    _function("search", "Search the repository for a text", {"query": "what to find"}, ["query"]),
    _function("run_tests", "Run the test suite and return its output", {"filter": "test name filter"}, []),
)


def _words(generator: random.Random, count: int) -> str:
    return " ".join(generator.choice(VOCABULARY) for _ in range(max(count, 0)))


TOOL_NAMES = ("read_file", "edit_file", "search", "run_tests")


def _tools_as_text() -> str:
    lines = []
    for tool in AGENT_TOOLS:
        function: Any = tool["function"]
        arguments = list(function["parameters"]["properties"])
        lines.append(f"- {function['name']}: {function['description']}; arguments {arguments}")
    return "\n".join(lines)


@dataclass(frozen=True, slots=True)
class AgentScript:
    """The messages of the run's sessions: a system prompt all share, then each session's own."""

    prompts: PromptFactory
    system_words: int
    turn_words: int
    tools_in_prompt: bool = True  # False: the tools go as OpenAI ``tools`` (tool rounds)

    def system(self, salt: str | None = None) -> JsonObject:
        """The system message every session of the run shares (the prefix a cache can reuse);
        ``salt`` replaces the run's salt (a cold prefix)."""
        filler = _words(random.Random(f"{self.prompts.seed}:system"), self.system_words)
        head = f"{self.prompts.salt if salt is None else salt}\nYou are a coding agent."
        tools = f" Tools:\n{_tools_as_text()}" if self.tools_in_prompt else " Use the tools to do the task."
        return {"role": "system", "content": f"{head}{tools}\n{filler}"}

    def user(self, session: int, turn: int) -> JsonObject:
        """Turn ``turn`` of session ``session``: the task, then the user's next instruction (or,
        without tool rounds, a tool result written as a user message)."""
        filler = _words(random.Random(f"{self.prompts.seed}:{session}:{turn}"), self.turn_words)
        kind = "Task" if turn == 0 else "Tool result" if self.tools_in_prompt else "Next step"
        return {"role": "user", "content": f"{kind} for session {session} step {turn}: {filler}"}


def tool_result_tokens(seed: int, session: int, step: int, call: int, median: int) -> int:
    """The drawn size of one tool result, in tokens."""
    generator = random.Random(f"{seed}:result:{session}:{step}:{call}")
    drawn = round(median * math.exp(RESULT_SIGMA * generator.gauss(0.0, 1.0)))
    return max(RESULT_MIN_TOKENS, min(RESULT_MAX_FACTOR * median, drawn))


def tool_result(seed: int, where: tuple[int, int, int], call: ToolCall, words: int) -> JsonObject:
    """The ``tool`` message answering ``call`` (at session, step, call number ``where``) with ``words`` words."""
    filler = _words(random.Random(f"{seed}:result-text:{where[0]}:{where[1]}:{where[2]}"), words)
    return {"role": "tool", "tool_call_id": call.id, "content": f"{call.name} returned: {filler}"}


def assistant_calls(answer: str, calls: tuple[ToolCall, ...]) -> JsonObject:
    """The assistant message that made ``calls``, as the client sends it back."""
    return {
        "role": "assistant",
        "content": answer or None,
        "tool_calls": [
            {"id": call.id, "type": "function", "function": {"name": call.name, "arguments": call.arguments}}
            for call in calls
        ],
    }


def valid_arguments(call: ToolCall) -> bool:
    """Whether a call names an offered tool and its arguments are a JSON object."""
    try:
        parsed = json.loads(call.arguments or "{}")
    except json.JSONDecodeError:
        return False
    return call.name in TOOL_NAMES and isinstance(parsed, dict)


def think_time_s(seed: int, session: int, step: int, mean_s: float) -> float:
    """The pause before request ``step`` of ``session`` (none before its first)."""
    if mean_s <= 0 or step == 0:
        return 0.0
    return random.Random(f"{seed}:think:{session}:{step}").expovariate(1.0 / mean_s)


def session_starts_s(seed: int, sessions: int, mean_gap_s: float) -> list[float]:
    """When each session may start, seconds after the level began (all at 0 without a gap)."""
    if mean_gap_s <= 0:
        return [0.0] * sessions
    generator = random.Random(f"{seed}:sessions")
    starts, at = [], 0.0
    for _ in range(sessions):
        starts.append(at)
        at += generator.expovariate(1.0 / mean_gap_s)
    return starts
