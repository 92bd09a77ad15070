"""PROTOCOL FAKE: an OpenAI-compatible chat server (not an LLM) whose capabilities are scripted,
for the tests of ``bench probe``.

It answers ``GET /v1/models`` (one model with ``max_model_len``) and
``POST /v1/chat/completions`` with canned answers, well or badly by ``behaviour``:

- ``tools``: ``json`` (structured ``tool_calls``), ``text`` (the call written into ``content``,
  as a server without a tool parser does) or ``400`` (tool_choice auto and required refused,
  as vLLM 0.32 does without ``--tool-call-parser``);
- ``parallel``: two calls when the prompt names Tokyo too (False: only one);
- ``tool_names``: ``exact`` or ``mangled`` (``-`` and ``.`` become ``_``);
- ``args``: ``valid`` or ``invalid`` arguments of ``create_ticket`` (a priority outside its enum);
- ``reasoning`` (thinking on): ``field`` (``reasoning``), ``legacy_field`` (``reasoning_content``),
  ``think_tags`` (``<think>`` in content) or ``none``;
- ``thinking_off``: ``answer`` or ``empty`` content;
- ``over_context`` (a prompt of more words than ``max_model_len``): ``400`` with an error
  body, ``500``, ``200`` (accepted) or ``hang`` (no answer until the fake stops);
- ``response_format``: ``valid``, ``invalid_json`` or ``wrong_schema``;
- ``think_s``: with ``stream: true`` and thinking on, the seconds between the reasoning chunk
  and the first content chunk (a streamed answer is the same message as server-sent events: one
  chunk of reasoning, if any, then one of content, then one per tool call, then one with the
  ``finish_reason``, then the usage chunk, then ``[DONE]``);
- ``stream_usage``: whether a stream ends with the usage chunk that ``stream_options``
  ``include_usage`` asks for; ``stream_done``: whether it ends with ``[DONE]``.
- ``spec_accepted``: a plain answer carries vLLM's per-request ``metrics.speculative_decoding``
  with this many of 40 draft tokens accepted (20 steps of 2), as a server with MTP and
  ``--per-request-spec-decode-metrics summary`` does; ``None`` sends none (no speculative decoding);
- ``client_turn``: how an agent client's first turn is answered: ``call`` (its file-writing
  tool), ``reasoning_cut`` (reasoning only, until the answer length runs out) or ``drop`` (the
  connection closed without an answer, as a server that crashes on the request).

The agent clients' requests (their own tools, no ``chat_template_kwargs``: thinking is on, as a
Qwen3 template has it) get a call of the client's file-writing tool on the first turn (as
:mod:`tests.fakes.agent_server` finds it) and a short answer once a tool result came back.

A request without ``Authorization: Bearer <api_key>`` gets 401. Every request body is kept in
``requests`` for the tests to inspect. Runs in a thread of the test process.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

from tests.fakes.agent_server import write_call
from tests.helpers import LoopbackServer

GOOD: dict[str, Any] = {
    "model": "capable",
    "api_key": "test-key",
    "max_model_len": 2048,
    "tools": "json",
    "parallel": True,
    "tool_names": "exact",
    "args": "valid",
    "reasoning": "field",
    "thinking_off": "answer",
    "over_context": "400",
    "response_format": "valid",
    "think_s": 0.0,
    "stream_usage": True,
    "stream_done": True,
    "client_turn": "call",
    "spec_accepted": 30,  # draft tokens accepted of 40 (vLLM's per-request metrics.speculative_decoding)
}
ARGUMENTS = {
    "get_weather": {"city": "Paris"},
    "repo-search.v2": {"query": "flush_handlers"},
    "create_ticket": {"title": "GPU 1 fan is loud", "priority": "high", "labels": ["hardware"]},
}
JSON_ANSWERS = {
    "valid": '{"city": "Paris", "is_capital": true}',
    "invalid_json": '{"city": "Paris", ',
    "wrong_schema": '{"city": "Berlin", "is_capital": "yes"}',
}


def _tool_message(behaviour: dict[str, Any], request: dict[str, Any], prompt: str) -> dict[str, Any] | None:
    """The assistant message for a request with tools; None where the fake refuses it (400)."""
    name = request["tools"][0]["function"]["name"]
    if behaviour["tools"] == "400" and request.get("tool_choice") != "none":
        return None
    arguments: dict[str, Any]
    if name in ARGUMENTS:
        arguments = dict(ARGUMENTS[name])
    elif any(message.get("role") == "tool" for message in request["messages"]):
        return _plain_message(behaviour, request)  # an agent client's next turn: the answer
    elif behaviour["client_turn"] == "reasoning_cut":
        return {"role": "assistant", "reasoning": "The user wants a file. " * 50, "content": None, "finish": "length"}
    else:  # an agent client's first turn: a call of its file-writing tool
        name, arguments = write_call(request["tools"], Path("/home/user/project")) or (name, {})
    if name == "create_ticket" and behaviour["args"] == "invalid":
        arguments["priority"] = "urgent"
    if behaviour["tools"] == "text" and request.get("tool_choice") != "required":
        call = json.dumps({"name": name, "arguments": arguments})
        return {"role": "assistant", "content": f"<tool_call>{call}</tool_call>", "tool_calls": []}
    shown = name.replace("-", "_").replace(".", "_") if behaviour["tool_names"] == "mangled" else name
    cities = ["Paris", "Tokyo"] if "Tokyo" in prompt and behaviour["parallel"] else [None]
    calls = [
        {
            "id": f"call-{index}",
            "type": "function",
            "function": {"name": shown, "arguments": json.dumps({**arguments, **({"city": city} if city else {})})},
        }
        for index, city in enumerate(cities)
    ]
    return {"role": "assistant", "content": None, "tool_calls": calls}


def thinking_on(request: dict[str, Any]) -> bool:
    """Thinking as asked per request, on where it is not said (a Qwen3 template's default)."""
    return bool(
        (request.get("chat_template_kwargs") or {}).get("enable_thinking", "chat_template_kwargs" not in request)
    )


def _plain_message(behaviour: dict[str, Any], request: dict[str, Any]) -> dict[str, Any]:
    if "response_format" in request:
        return {"role": "assistant", "content": JSON_ANSWERS[behaviour["response_format"]]}
    if thinking_on(request):
        mode = behaviour["reasoning"]
        if mode == "think_tags":
            return {"role": "assistant", "content": "<think>12 plus 30 is 42</think>42"}
        message = {"role": "assistant", "content": "42"}
        if mode in ("field", "legacy_field"):
            message["reasoning" if mode == "field" else "reasoning_content"] = "12 plus 30 is 42"
        return message
    return {"role": "assistant", "content": "Paris" if behaviour["thinking_off"] == "answer" else ""}


class CapabilityServer(LoopbackServer):
    """The fake on a free loopback port, in a daemon thread; ``stop()`` ends it."""

    def __init__(self, **behaviour: Any) -> None:
        self.behaviour = {**GOOD, **behaviour}
        self.requests: list[dict[str, Any]] = []
        self.released = threading.Event()  # a hanging answer waits for this
        super().__init__(self._handler())
        self.base_url = f"{self.url}/v1"

    def stop(self) -> None:
        self.released.set()
        self.close()

    def answer(self, path: str, headers: dict[str, str], body: bytes) -> tuple[int, dict[str, Any]]:
        """Status and JSON body for one request."""
        behaviour = self.behaviour
        if headers.get("authorization") != f"Bearer {behaviour['api_key']}":
            return 401, {"error": {"message": "Unauthorized"}}
        if path == "/v1/models":
            return 200, {
                "object": "list",
                "data": [{"id": behaviour["model"], "max_model_len": behaviour["max_model_len"]}],
            }
        if path != "/v1/chat/completions":
            return 404, {"error": {"message": "not found"}}
        request = json.loads(body)
        self.requests.append(request)
        prompt = " ".join(str(message.get("content", "")) for message in request["messages"])
        if len(prompt.split()) > behaviour["max_model_len"] and behaviour["over_context"] != "200":
            mode = behaviour["over_context"]
            if mode == "hang":
                self.released.wait()
            limit = behaviour["max_model_len"]
            message = f"This model's maximum context length is {limit} tokens."
            return (400 if mode == "400" else 500), {"error": {"message": message, "type": "BadRequestError"}}
        client_tools = request.get("tools") and request["tools"][0]["function"]["name"] not in ARGUMENTS
        answered = any(message.get("role") == "tool" for message in request["messages"])
        if client_tools and not answered and behaviour["client_turn"] == "drop":
            return 0, {}  # no answer: the handler closes the connection
        message = (
            _tool_message(behaviour, request, prompt) if request.get("tools") else _plain_message(behaviour, request)
        )
        if message is None:
            text = '"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set'
            if request.get("tool_choice") == "required":
                text = 'tool_choice="required" requires --tool-call-parser to be set'
            return 400, {"error": {"message": text, "type": "BadRequestError"}}
        finish = "tool_calls" if message.get("tool_calls") else "stop"
        choice = {"index": 0, "message": message, "finish_reason": finish}
        document: dict[str, Any] = {
            "id": "chatcmpl-fake",
            "object": "chat.completion",
            "model": behaviour["model"],
            "choices": [choice],
        }
        accepted = behaviour["spec_accepted"]
        if accepted is not None:
            document["metrics"] = {
                "speculative_decoding": {
                    "mean_acceptance_length": 1 + accepted / 20,
                    "draft_acceptance_rate": accepted / 40,
                    "num_spec_steps": 20,
                    "num_accepted_draft_tokens": accepted,
                    "num_draft_tokens": 40,
                    "num_spec_tokens": 2,
                }
            }
        return 200, document

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def _reply(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                headers = {name.lower(): value for name, value in self.headers.items()}
                body = self.rfile.read(length)
                status, document = fake.answer(self.path, headers, body)
                if status == 0:
                    self.close_connection = True
                    return
                if status == 200 and self.path == "/v1/chat/completions" and json.loads(body).get("stream"):
                    # The probe closes a stream once it has its first answer token.
                    with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                        self._stream(document["choices"][0]["message"], json.loads(body))
                    return
                data = json.dumps(document).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _stream(self, message: dict[str, Any], request: dict[str, Any]) -> None:
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.send_header("connection", "close")
                self.end_headers()
                thinking = thinking_on(request)
                chunks = []
                for key in ("reasoning", "reasoning_content", "content"):
                    if message.get(key):
                        if key == "content" and thinking:
                            self._send(chunks)
                            chunks = []
                            time.sleep(fake.behaviour["think_s"])
                        chunks.append({"choices": [{"index": 0, "delta": {key: message[key]}}]})
                for index, call in enumerate(message.get("tool_calls") or []):
                    delta = {"tool_calls": [{**call, "index": index}]}
                    chunks.append({"choices": [{"index": 0, "delta": delta}]})
                finish = message.get("finish") or ("tool_calls" if message.get("tool_calls") else "stop")
                chunks.append({"choices": [{"index": 0, "delta": {}, "finish_reason": finish}]})
                if (request.get("stream_options") or {}).get("include_usage") and fake.behaviour["stream_usage"]:
                    chunks.append({"choices": [], "usage": {"prompt_tokens": 9, "completion_tokens": 3}})
                self._send(chunks)
                if fake.behaviour["stream_done"]:
                    self.wfile.write(b"data: [DONE]\n\n")
                self.close_connection = True

            def _send(self, chunks: list[dict[str, Any]]) -> None:
                for chunk in chunks:
                    self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
                self.wfile.flush()

            do_GET = _reply
            do_POST = _reply

            def log_message(self, format: str, *args: Any) -> None:
                """Quiet: the tests read ``requests``, not a log."""

        return Handler
