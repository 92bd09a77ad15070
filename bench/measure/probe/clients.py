"""The agent clients' own requests, replayed: does the deployment serve OpenCode, Continue, Aider
and Hermes Agent as they really ask?

Each client's chat requests were recorded once from the real client (the version ``bench
clients`` writes for, run with those files against a protocol fake; the files are in
``client_requests/``): its parameters (streaming, ``stream_options``, ``tool_choice``, the
answer length), its tools with their schemas, its system prompt, and for a tool user the next
turn carrying the tool's result. A replay sends each one as recorded, with two changes: the
served model's name, and ``max_tokens`` cut to :data:`REPLAY_MAX_TOKENS` (the probe's time, not
the client's). The sampling stays the client's (most set none: the server's defaults, which for a
reasoning model are never greedy, since greedy decoding makes them repeat themselves).

A client is served correctly when every request gets HTTP 200 and a whole stream (``[DONE]``),
with the usage chunk it asks for (``stream_options.include_usage``: the client's token counts),
no ``<think>`` tag in ``content`` (reasoning separated), and, where it offers tools, a call of
one of them in ``tool_calls`` with JSON arguments on the first turn (not written into
``content``) and an answer to the turn that carries the result. A request larger than the served
context fails on the server's own 400, which says so.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import httpx

from bench.measure.probe.http import THINK_TAG, CheckFailed, Outcome, Probe, error_message, refuse_401, snippet
from bench.measure.probe.result import CheckResult
from bench.measure.probe.tools import call_arguments
from bench.measure.stream.sse import one_line_message

CLIENT_REQUESTS_DIR = Path(__file__).with_name("client_requests")
CLIENT_TITLES = {"opencode": "OpenCode", "continue": "Continue", "aider": "Aider", "hermes": "Hermes Agent"}
REPLAY_MAX_TOKENS = 2048
# A tool call written as text into content, as a server without a tool-call parser leaves it.
TOOL_MARKUP = ("<tool_call>", "<function=", '{"name":')


class ReplayFailed(CheckFailed):
    """A replayed request not served as the client needs; ``capability`` names the probe check
    whose capability it needs (a deployment without it explains the failure), else empty."""

    def __init__(self, detail: str, capability: str = "") -> None:
        super().__init__(detail)
        self.capability = capability


class ReplayInconclusive(CheckFailed):
    """A replayed request whose answer neither serves the client nor fails it: the replay's answer
    length ran out before the model got past its reasoning."""


@dataclass(frozen=True, slots=True)
class ClientRequests:
    """One client's recorded chat requests, in the order it sent them."""

    client: str
    title: str
    version: str
    requests: list[dict[str, Any]]  # as the client sent them: any JSON

    @property
    def uses_tools(self) -> bool:
        return any(body.get("tools") for body in self.requests)


@cache
def client_requests() -> dict[str, ClientRequests]:
    """Every recorded client, by the name ``bench clients`` uses, in :data:`CLIENT_TITLES` order."""
    found = {}
    for client in CLIENT_TITLES:
        document = json.loads((CLIENT_REQUESTS_DIR / f"{client}.json").read_text(encoding="utf-8"))
        found[client] = ClientRequests(client, document["title"], document["version"], document["requests"])
    return found


@dataclass
class Streamed:
    """What one streamed answer carried, put together from its chunks."""

    content: str = ""
    reasoning: str = ""
    calls: dict[int, list[str]] = field(default_factory=dict)  # index: [name, arguments]
    finish: str | None = None
    usage: bool = False
    done: bool = False

    def feed(self, line: str) -> None:
        """One line of the event stream; :class:`ReplayFailed` for a chunk that is not one."""
        if not line.startswith("data:"):
            return
        data = line.removeprefix("data:").strip()
        if data == "[DONE]":
            self.done = True
            return
        try:
            chunk = json.loads(data)
        except json.JSONDecodeError as exc:
            raise ReplayFailed(f"a stream chunk is not JSON: {snippet(data)}") from exc
        if not isinstance(chunk, dict):
            raise ReplayFailed(f"a stream chunk is not an object: {snippet(data)}")
        if chunk.get("error"):
            raise ReplayFailed(f"an error in the stream: {snippet(error_message(chunk, data), 160)}")
        self.usage = self.usage or (isinstance(chunk.get("usage"), dict) and bool(chunk["usage"]))
        try:
            for choice in chunk.get("choices") or []:
                self.finish = choice.get("finish_reason") or self.finish
                self._add(choice.get("delta") or {})
        except (AttributeError, TypeError, ValueError) as exc:
            raise ReplayFailed(f"a stream chunk not as the OpenAI API has it: {snippet(data)}") from exc

    def _add(self, delta: dict[str, Any]) -> None:
        self.content += str(delta.get("content") or "")
        self.reasoning += str(delta.get("reasoning") or delta.get("reasoning_content") or "")
        for call in delta.get("tool_calls") or []:
            function = call.get("function") or {}
            index = call.get("index")
            if not isinstance(index, int):  # no index: a new call when it says its id or name, else the last one
                starts = call.get("id") or function.get("name") or not self.calls
                index = len(self.calls) if starts else max(self.calls)
            entry = self.calls.setdefault(index, ["", ""])
            entry[0] = entry[0] or str(function.get("name") or "")  # some servers repeat the name in each delta
            entry[1] += str(function.get("arguments") or "")


def replay_body(body: dict[str, Any], model: str) -> dict[str, Any]:
    """The recorded request as the replay sends it (see the module's docstring)."""
    sent = {**body, "model": model}
    if isinstance(sent.get("max_tokens"), int):
        sent["max_tokens"] = min(sent["max_tokens"], REPLAY_MAX_TOKENS)
    return sent


async def _streamed(probe: Probe, body: dict[str, Any]) -> Streamed:
    answer = Streamed()
    try:
        async with asyncio.timeout(probe.timeout_s):
            async with probe.http.stream("POST", "/chat/completions", json=body) as response:
                refuse_401(probe, response.status_code)
                if response.status_code != 200:
                    text = (await response.aread()).decode(errors="replace")
                    raise ReplayFailed(f"HTTP {response.status_code}: {snippet(one_line_message(text), 160)}")
                async for line in response.aiter_lines():
                    answer.feed(line)
    except (TimeoutError, httpx.TimeoutException) as exc:
        raise ReplayFailed(f"no whole answer within {probe.timeout_s:g} s") from exc
    except (httpx.RemoteProtocolError, httpx.ReadError) as exc:
        raise ReplayFailed(f"the stream broke off: {exc}") from exc
    except httpx.TransportError as exc:  # the server went away on this client's request: the others may still run
        raise ReplayFailed(f"POST {probe.http.base_url}/chat/completions failed: {exc}") from exc
    return answer


async def _answer(probe: Probe, body: dict[str, Any]) -> Streamed:
    """The answer to one replayed request (every recorded client streams), put together."""
    answer = await _streamed(probe, body)
    if not answer.done:
        raise ReplayFailed("the stream ended without data: [DONE]")
    return answer


def _called(answer: Streamed, body: dict[str, Any]) -> str:
    """The first turn's tool calls, shown; :class:`ReplayFailed` when there is none or one is wrong."""
    offered = {str(tool.get("function", {}).get("name")) for tool in body.get("tools") or []}
    if any(mark in answer.content for mark in TOOL_MARKUP):
        raise ReplayFailed(f"a tool call written into content: {snippet(answer.content)}", "tool_call_single")
    if not answer.calls and answer.finish == "length" and answer.reasoning and not answer.content.strip():
        raise ReplayInconclusive(
            f"the replay's {REPLAY_MAX_TOKENS} tokens ran out while the model was still reasoning "
            f"({snippet(answer.reasoning, 40)})"
        )
    if not answer.calls:
        ran_out = ": the answer length or the context ran out" if answer.finish == "length" else ""
        why = f"finish_reason {answer.finish}{ran_out}"
        raise ReplayFailed(f"no tool call ({why}); content: {snippet(answer.content)}", "tool_call_single")
    shown = []
    for name, arguments in answer.calls.values():
        if name not in offered:
            raise ReplayFailed(f"called {name!r}, which the client does not offer", "tool_call_single")
        try:
            parsed = call_arguments(name, arguments or "{}")
        except CheckFailed as wrong:
            raise ReplayFailed(str(wrong), "tool_call_single") from wrong
        shown.append(f"{name}({','.join(parsed)})")
    return " ".join(shown)


async def replay(probe: Probe, recorded: ClientRequests) -> Outcome:
    """Replay one client's requests in order; passed and one line saying what came back."""
    said = []
    for turn, body in enumerate(recorded.requests):
        sent = replay_body(body, probe.model)
        where = f"turn {turn + 1}: " if len(recorded.requests) > 1 else ""
        try:
            answer = await _answer(probe, sent)
            if (sent.get("stream_options") or {}).get("include_usage") and not answer.usage:
                raise ReplayFailed("no usage chunk, which the client asks for (stream_options.include_usage)")
            if THINK_TAG.search(answer.content):
                raise ReplayFailed(f"think tags in content: {snippet(answer.content)}", "reasoning_field")
            first_tool_turn = bool(sent.get("tools")) and not any(m.get("role") == "tool" for m in sent["messages"])
            if first_tool_turn:
                said.append(_called(answer, sent))
            elif not (answer.content.strip() or answer.calls):
                raise ReplayFailed(f"an empty answer (finish_reason {answer.finish})")
            else:
                said.append(snippet(answer.content, 30) if answer.content.strip() else "a tool call")
        except ReplayFailed as failed:
            # vLLM refuses tools in auto mode without its tool-call parser: 400 naming the tool choice.
            refused_tools = str(failed).startswith("HTTP 400") and "tool" in str(failed).lower() and sent.get("tools")
            capability = failed.capability or ("tool_call_single" if refused_tools else "")
            raise ReplayFailed(where + str(failed), capability) from failed
    return True, f"{recorded.title} {recorded.version}: " + "; then ".join(said)


async def replay_client(probe: Probe, recorded: ClientRequests) -> CheckResult:
    """One client's requests replayed, as a probe check: passed, failed (expected when the
    deployment lacks the capability the failed request needs: tool calls or separated
    reasoning), or not run when the answer was cut off before it said anything either way."""
    name, shown = recorded.client, f"{recorded.title} {recorded.version}"
    try:
        _, detail = await replay(probe, recorded)
    except ReplayInconclusive as cut:
        return CheckResult(name, False, f"{shown}: {cut}", expected_failure=False, ran=False)
    except ReplayFailed as failed:
        reason = probe.expected.absent.get(failed.capability) if failed.capability else None
        detail = f"{shown}: {failed}" + (f" (expected: {reason})" if reason else "")
        return CheckResult(name, False, detail, expected_failure=reason is not None)
    return CheckResult(name, True, detail, expected_failure=False)
