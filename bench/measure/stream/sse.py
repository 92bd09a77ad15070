"""The server-sent event stream of a streamed chat completion, parsed into timestamped events.

:func:`feed` takes the bytes of one network read and the time that read returned; every event
the read completes gets that stamp (an event split over reads is stamped when its last piece
arrives). This runs once per streamed event, so it is written for speed: one split per read,
orjson for the JSON, a fast path for the one-line ``data: {...}`` events every server sends, and
as little work per event as the fields need.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import orjson

from bench.measure.metrics import Event


@dataclass(slots=True)
class Stream:
    """Parse state of one server-sent event stream."""

    buffer: bytes = b""
    events: list[Event] = field(default_factory=list)
    usage: dict[str, Any] | None = None
    server_metrics: dict[str, Any] | None = None  # vLLM's per-request metrics (the final usage chunk)
    finish_reason: str | None = None
    done: bool = False
    error: str | None = None  # "server_error" (an {"error": ...} event) or "malformed"
    error_message: str | None = None  # what the server said of its error, on one line
    text: list[str] = field(default_factory=list)
    tool_deltas: list[dict[str, Any]] = field(default_factory=list)  # the pieces of the answer's tool calls


def error_message(parsed: Any, text: str) -> str:
    """The message of an OpenAI error body (``{"error": {"message": ...}}`` or vLLM's older
    ``{"object": "error", "message": ...}``), else the raw text."""
    if isinstance(parsed, dict):
        error = parsed.get("error")
        if isinstance(error, dict) and error.get("message"):
            return str(error["message"])
        if isinstance(error, str):
            return error
        if parsed.get("object") == "error" and parsed.get("message"):
            return str(parsed["message"])
    return text


def one_line_message(text: str, limit: int = 200) -> str:
    """What the server said in an error body, on one line, cut to ``limit`` characters."""
    try:
        parsed = orjson.loads(text)
    except orjson.JSONDecodeError:
        parsed = None
    flat = " ".join(error_message(parsed, text).split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _data_of(raw: bytes) -> bytes:
    """The data of an event block other than one ``data: `` line: its ``data:`` lines joined,
    comments and other fields dropped."""
    lines = [line for line in raw.split(b"\n") if line and not line.startswith(b":")]
    return b"\n".join(line[5:].lstrip() for line in lines if line.startswith(b"data:"))


def _event_from(payload: dict[str, Any], t_ns: int, stream: Stream, text: list[str]) -> Event:
    """The event of one parsed chunk; its text goes to ``text``, its usage and finish reason to ``stream``."""
    choices = payload.get("choices")
    content = reasoning = 0
    tool_call = False
    if choices:
        for choice in choices:
            delta = choice.get("delta")
            if delta:
                piece = delta.get("content")
                if piece:
                    content += len(piece)
                    text.append(piece)
                if piece is None or len(delta) > 1:  # more than the content: reasoning, a tool call
                    # vLLM renamed reasoning_content to reasoning; other servers still send the old name.
                    for name in ("reasoning", "reasoning_content"):
                        thought = delta.get(name)
                        if thought:
                            reasoning += len(thought)
                    calls = delta.get("tool_calls")
                    if calls:
                        tool_call = True
                        stream.tool_deltas.extend(calls)
            finish = choice.get("finish_reason")
            if finish:
                stream.finish_reason = finish
    usage = payload.get("usage")
    completion = None
    metrics = payload.get("metrics")
    if type(metrics) is dict:
        stream.server_metrics = metrics
    if type(usage) is dict:
        stream.usage = usage
        if choices:
            completion = usage.get("completion_tokens")
    return Event(t_ns, content, reasoning, tool_call, completion)


def feed(stream: Stream, data: bytes, t_ns: int) -> None:
    """Add bytes from one network read; complete events get the read's timestamp ``t_ns``."""
    if stream.done:
        return
    buffer = stream.buffer + data if stream.buffer else data
    if b"\r" in buffer:
        buffer = buffer.replace(b"\r\n", b"\n")
    blocks = buffer.split(b"\n\n")
    stream.buffer = blocks.pop()  # the part after the last blank line: an event not yet complete
    events, text = stream.events, stream.text
    for raw in blocks:
        body = raw[6:] if raw[:6] == b"data: " and b"\n" not in raw else _data_of(raw)
        if not body:
            continue
        if body == b"[DONE]":
            stream.done = True
            return
        try:
            payload = orjson.loads(body)
        except orjson.JSONDecodeError:
            payload = None
        if type(payload) is not dict or "error" in payload:
            # A server that fails mid-stream sends {"error": ...}; anything else unparsable is malformed.
            stream.error = "server_error" if isinstance(payload, dict) else "malformed"
            if isinstance(payload, dict):
                stream.error_message = one_line_message(body.decode(errors="replace"))
            stream.done = True
            return
        events.append(_event_from(payload, t_ns, stream, text))
