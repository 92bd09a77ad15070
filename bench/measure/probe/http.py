"""The one request a probe check makes: a non-streamed chat completion with a deadline.

A check gets a :class:`Probe` (the HTTP client of :class:`~bench.measure.stream.client.ChatClient`, the
model, what the server and the deployment say about the context) and returns an
:data:`Outcome`: passed (True, False, or None when the check could not be made) and one short
line saying what came back. Helpers raise :class:`CheckFailed` with that line; a wrong key or a
server that cannot be reached raises from the :mod:`bench.errors` tree and ends the probe.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import time
from dataclasses import dataclass
from typing import Any

import httpx

from bench.codec import JsonObject
from bench.errors import EndpointAuthError, EndpointUnreachable
from bench.measure.probe.expect import Expectations
from bench.measure.stream.sse import error_message

log = logging.getLogger(__name__)
__all__ = ["THINK_TAG", "CheckFailed", "Outcome", "Probe", "error_message", "refuse_401", "snippet"]

Outcome = tuple[bool | None, str]
THINK_TAG = re.compile(r"</?think>")


class CheckFailed(Exception):
    """A check's answer is not what it asks for; the message is the check's detail line."""


@dataclass(frozen=True, slots=True)
class Probe:
    """What every check needs: where to ask, what the server and the deployment say."""

    http: httpx.AsyncClient  # base URL and API key set
    model: str
    served_context: int | None  # max_model_len (vLLM) or meta.n_ctx (llama.cpp) of /v1/models
    expected: Expectations
    timeout_s: float  # the longest one request may take


def snippet(text: object, limit: int = 60) -> str:
    """``text`` on one line, cut to ``limit`` characters, quoted."""
    flat = " ".join(str(text).split())
    return repr(flat if len(flat) <= limit else flat[: limit - 1] + "…")


def refuse_401(probe: Probe, status: int) -> None:
    """A 401 ends the probe: the key is wrong or missing (:class:`EndpointAuthError`)."""
    if status == 401:
        raise EndpointAuthError(f"{probe.http.base_url} answered 401: wrong or missing API key (--api-key)")


async def post_chat(probe: Probe, body: JsonObject) -> tuple[int, Any, str]:
    """POST one chat completion (temperature 0, not streamed): status, parsed JSON (None when the
    body is not JSON) and the body's text; :class:`CheckFailed` when no answer came in time."""
    request = {"model": probe.model, "temperature": 0, "stream": False, **body}
    try:
        async with asyncio.timeout(probe.timeout_s):
            response = await probe.http.post("/chat/completions", json=request, timeout=probe.timeout_s)
    except (TimeoutError, httpx.TimeoutException) as exc:
        raise CheckFailed(f"no answer within {probe.timeout_s:g} s") from exc
    except httpx.TransportError as exc:
        raise EndpointUnreachable(f"POST {probe.http.base_url}/chat/completions failed: {exc}") from exc
    log.debug("probe request: HTTP %s: %s", response.status_code, response.text[:300])
    refuse_401(probe, response.status_code)
    try:
        parsed = response.json()
    except json.JSONDecodeError:
        parsed = None
    return response.status_code, parsed, response.text


async def chat_answer(probe: Probe, body: JsonObject) -> tuple[JsonObject, str | None]:
    """The assistant message and the finish_reason of a successful answer; :class:`CheckFailed`
    naming the status and the error message of any other answer."""
    status, parsed, text = await post_chat(probe, body)
    if status != 200:
        raise CheckFailed(f"HTTP {status}: {snippet(error_message(parsed, text), 70)}")
    try:
        choice = parsed["choices"][0]
        message = choice["message"]
    except (TypeError, KeyError, IndexError) as exc:
        raise CheckFailed(f"HTTP 200 without choices[0].message: {snippet(text)}") from exc
    if not isinstance(message, dict):
        raise CheckFailed(f"choices[0].message is not an object: {snippet(message)}")
    finish = choice.get("finish_reason")
    return message, str(finish) if finish is not None else None


async def chat_message(probe: Probe, body: JsonObject) -> JsonObject:
    """The assistant message of a successful answer (see :func:`chat_answer`)."""
    message, _ = await chat_answer(probe, body)
    return message


async def first_answer_ms(probe: Probe, body: JsonObject) -> float | None:
    """Milliseconds from sending a streamed chat completion to its first answer token (content or
    a tool call, not reasoning), the stream then closed; None when the answer ended, failed or
    timed out before any. Times with the same clock as ``bench run`` (``perf_counter_ns``)."""
    request = {"model": probe.model, "temperature": 0, **body, "stream": True}
    sent = time.perf_counter_ns()
    try:
        async with asyncio.timeout(probe.timeout_s):
            async with probe.http.stream("POST", "/chat/completions", json=request) as response:
                if response.status_code != 200:
                    return None
                async for line in response.aiter_lines():
                    if _answers(line):
                        return (time.perf_counter_ns() - sent) / 1e6
    except (TimeoutError, httpx.TimeoutException, httpx.RemoteProtocolError, httpx.ReadError):
        return None
    except httpx.TransportError as exc:
        raise EndpointUnreachable(f"POST {probe.http.base_url}/chat/completions failed: {exc}") from exc
    return None


def _answers(line: str) -> bool:
    """Whether one server-sent ``data:`` line carries answer content or a tool call."""
    if not line.startswith("data:") or line.strip() == "data: [DONE]":
        return False
    try:
        delta = json.loads(line.removeprefix("data:"))["choices"][0]["delta"]
    except (ValueError, KeyError, IndexError, TypeError):
        return False
    return isinstance(delta, dict) and bool(delta.get("content") or delta.get("tool_calls"))
