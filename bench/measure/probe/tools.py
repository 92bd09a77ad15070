"""The tool-call checks: calls come back as structured ``tool_calls`` whose arguments are JSON
that validates against the tool's own schema.

- ``tool_call_single``: one tool, ``tool_choice`` auto: one call of it with JSON arguments;
- ``tool_calls_parallel``: one tool, a question that needs it twice: two calls in one turn;
- ``tool_choice_required``: ``tool_choice`` required and a prompt that needs no tool: a call anyway;
- ``tool_name_punctuation``: a tool named ``repo-search.v2``: the name comes back exactly;
- ``tool_args_schema``: a tool with an enum, a minimum length and no extra keys: the arguments
  validate against its schema (jsonschema, draft 2020-12).

A call written as text in ``content`` fails: a client only sees ``tool_calls``. Thinking is
turned off per request (``chat_template_kwargs``) so a reasoning model answers within the budget.
"""

from __future__ import annotations

import json
from typing import Any

from jsonschema import Draft202012Validator

from bench.codec import JsonObject
from bench.measure.probe.http import CheckFailed, Outcome, Probe, chat_message, snippet

MAX_TOKENS = 256


def _tool(name: str, description: str, parameters: JsonObject) -> JsonObject:
    return {"type": "function", "function": {"name": name, "description": description, "parameters": parameters}}


WEATHER = _tool(
    "get_weather",
    "The current weather in a city.",
    {"type": "object", "properties": {"city": {"type": "string", "description": "city name"}}, "required": ["city"]},
)
SEARCH = _tool(
    "repo-search.v2",
    "Search the code repository for a text.",
    {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]},
)
TICKET_SCHEMA: JsonObject = {
    "type": "object",
    "properties": {
        "title": {"type": "string", "minLength": 1},
        "priority": {"type": "string", "enum": ["low", "medium", "high"]},
        "labels": {"type": "array", "items": {"type": "string"}},
    },
    "required": ["title", "priority"],
    "additionalProperties": False,
}
TICKET = _tool("create_ticket", "Open a ticket in the issue tracker.", TICKET_SCHEMA)


async def _calls(probe: Probe, tool: JsonObject, prompt: str, tool_choice: str = "auto") -> list[tuple[str, Any]]:
    """(name, parsed arguments) of each tool call in the answer; :class:`CheckFailed` when there
    is none or an argument string is not a JSON object."""
    body: JsonObject = {
        "messages": [{"role": "user", "content": prompt}],
        "tools": [tool],
        "tool_choice": tool_choice,
        "max_tokens": MAX_TOKENS,
        "chat_template_kwargs": {"enable_thinking": False},
    }
    message = await chat_message(probe, body)
    calls = message.get("tool_calls")
    if not isinstance(calls, list) or not calls:
        raise CheckFailed(f"no tool_calls; content: {snippet(message.get('content') or '')}")
    found = []
    for call in calls:
        function = call.get("function") if isinstance(call, dict) else None
        if not isinstance(function, dict):
            raise CheckFailed(f"a tool call without a function: {snippet(call)}")
        name = str(function.get("name"))
        found.append((name, call_arguments(name, function.get("arguments"))))
    return found


def call_arguments(name: str, raw: object) -> dict[str, Any]:
    """The arguments of a call of tool ``name`` (a JSON string, or already an object), which must
    be a JSON object; :class:`CheckFailed` saying what came instead."""
    try:
        arguments = json.loads(raw) if isinstance(raw, str) else raw
    except json.JSONDecodeError as exc:
        raise CheckFailed(f"{name}: arguments are not JSON: {snippet(raw)}") from exc
    if not isinstance(arguments, dict):
        raise CheckFailed(f"{name}: arguments are not a JSON object: {snippet(raw)}")
    return arguments


def _shown(calls: list[tuple[str, Any]]) -> str:
    return "; ".join(f"{name}({json.dumps(arguments, separators=(',', ':'))})" for name, arguments in calls)


def _all_named(calls: list[tuple[str, Any]], want: str) -> None:
    wrong = [name for name, _ in calls if name != want]
    if wrong:
        raise CheckFailed(f"called {wrong[0]!r}, want {want!r}")


async def tool_call_single(probe: Probe) -> Outcome:
    """One tool, tool_choice auto: it is called with JSON arguments."""
    calls = await _calls(probe, WEATHER, "What is the weather in Paris right now? Use the get_weather tool.")
    _all_named(calls, "get_weather")
    return True, _shown(calls)


async def tool_calls_parallel(probe: Probe) -> Outcome:
    """A question that needs the tool twice gets two calls in one turn."""
    prompt = "What is the weather in Paris and in Tokyo? Call get_weather once for each city, both in this turn."
    calls = await _calls(probe, WEATHER, prompt)
    _all_named(calls, "get_weather")
    if len(calls) < 2:
        raise CheckFailed(f"1 call, want 2 in one turn: {_shown(calls)}")
    return True, _shown(calls)


async def tool_choice_required(probe: Probe) -> Outcome:
    """tool_choice required: a call comes even where the prompt needs none."""
    calls = await _calls(probe, WEATHER, "Hello! How are you today?", tool_choice="required")
    _all_named(calls, "get_weather")
    return True, _shown(calls)


async def tool_name_punctuation(probe: Probe) -> Outcome:
    """A tool name with '-' and '.' comes back exactly as declared."""
    prompt = "Search the repository for the text 'flush_handlers' with the repo-search.v2 tool."
    calls = await _calls(probe, SEARCH, prompt)
    _all_named(calls, "repo-search.v2")
    return True, _shown(calls)


async def tool_args_schema(probe: Probe) -> Outcome:
    """The arguments of a call validate against the tool's JSON schema."""
    prompt = "Open a high priority ticket titled 'GPU 1 fan is loud' with the label hardware, using create_ticket."
    calls = await _calls(probe, TICKET, prompt)
    _all_named(calls, "create_ticket")
    validator = Draft202012Validator(TICKET_SCHEMA)
    for _, arguments in calls:
        error = next(iter(validator.iter_errors(arguments)), None)
        if error is not None:
            where = "/".join(str(part) for part in error.absolute_path) or "arguments"
            raise CheckFailed(f"{where}: {snippet(error.message, 80)}")
    return True, _shown(calls)
