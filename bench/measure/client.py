"""Streaming requests to an OpenAI-compatible endpoint, with a monotonic timestamp per event.

The only module that opens connections (the probe's checks, :mod:`~bench.measure.probe_http`,
send theirs through a :class:`ChatClient`'s HTTP client). Each event of the server-sent stream is stamped with
``time.perf_counter_ns()`` when the read that completed it returned; events that arrive in one
read share that stamp, and a split event is stamped when its last piece arrives. Failures that
make the whole run meaningless (no connection, wrong key, unknown model) raise from the
:mod:`bench.errors` tree; failures of a single request (a truncated or malformed stream, a 5xx,
a context overflow, a gap past the read timeout, a request past the request timeout) are
recorded on its :class:`~bench.measure.metrics.RequestRecord` as an error kind.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from dataclasses import dataclass, field
from typing import Any

import httpx

from bench.errors import EndpointAuthError, EndpointModelError, EndpointProtocolError, EndpointUnreachable
from bench.measure.codec import JsonObject, JsonValue
from bench.measure.metrics import Event, RequestRecord

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Endpoint:
    """Where and as whom to send requests."""

    base_url: str  # e.g. http://127.0.0.1:8000/v1
    model: str
    api_key: str = ""
    read_timeout_s: float = 300.0  # the longest gap between two reads (headers and first token included)
    request_timeout_s: float = 600.0  # the longest one chat request may take, from dispatch to its end


@dataclass(frozen=True, slots=True)
class ServedModel:
    """One entry of /v1/models: the name to ask for, and the longest context it is served with
    (vLLM's ``max_model_len``, llama.cpp's ``meta.n_ctx``; None when the server does not say)."""

    id: str
    max_model_len: int | None


def _served_model(entry: JsonObject) -> ServedModel:
    meta = entry.get("meta")
    length: JsonValue = entry.get("max_model_len") or (meta.get("n_ctx") if isinstance(meta, dict) else None)
    return ServedModel(str(entry["id"]), int(length) if isinstance(length, int | float | str) and length else None)


@dataclass(slots=True)
class _Stream:
    """Parse state of one server-sent event stream."""

    buffer: bytes = b""
    events: list[Event] = field(default_factory=list)
    usage: dict[str, Any] | None = None
    finish_reason: str | None = None
    done: bool = False
    error: str | None = None
    text: list[str] = field(default_factory=list)


def _event_from(payload: dict[str, Any], t_ns: int, stream: _Stream) -> Event:
    usage = payload.get("usage")
    if isinstance(usage, dict):
        stream.usage = usage
    content = reasoning = 0
    tool_call = False
    for choice in payload.get("choices") or []:
        delta = choice.get("delta") or {}
        content += len(delta.get("content") or "")
        if delta.get("content"):
            stream.text.append(delta["content"])
        # vLLM renamed reasoning_content to reasoning; other servers still send the old name.
        reasoning += len(delta.get("reasoning") or "") + len(delta.get("reasoning_content") or "")
        tool_call = tool_call or bool(delta.get("tool_calls"))
        if choice.get("finish_reason"):
            stream.finish_reason = choice["finish_reason"]
    completion = usage.get("completion_tokens") if isinstance(usage, dict) and payload.get("choices") else None
    return Event(t_ns, content, reasoning, tool_call, completion)


def feed(stream: _Stream, data: bytes, t_ns: int) -> None:
    """Add bytes from one network read; complete events get the read's timestamp ``t_ns``."""
    stream.buffer += data.replace(b"\r\n", b"\n")
    while b"\n\n" in stream.buffer and not stream.done:
        raw, stream.buffer = stream.buffer.split(b"\n\n", 1)
        lines = [line for line in raw.split(b"\n") if line and not line.startswith(b":")]
        body = b"\n".join(line[5:].lstrip() for line in lines if line.startswith(b"data:"))
        if not body:
            continue
        if body == b"[DONE]":
            stream.done = True
            return
        try:
            payload = json.loads(body)
        except json.JSONDecodeError:
            payload = None
        if not isinstance(payload, dict) or "error" in payload:
            # A server that fails mid-stream sends {"error": ...}; anything else unparsable is malformed.
            stream.error = "server_error" if isinstance(payload, dict) else "malformed"
            stream.done = True
            return
        stream.events.append(_event_from(payload, t_ns, stream))


def _one_line(exc: Exception) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


def _raise_for_fatal(status: int, body: str, endpoint: Endpoint) -> None:
    if status == 401:
        raise EndpointAuthError(
            f"{endpoint.base_url} answered 401: wrong or missing API key (--api-key or BENCH_API_KEY)"
        )
    if status == 404 and "model" in body.lower():
        raise EndpointModelError(f"{endpoint.base_url} does not serve model {endpoint.model!r} (--model): {body[:200]}")


def _error_kind(status: int, body: str) -> str:
    text = body.lower()
    if status == 400 and ("context" in text or "maximum" in text or "too long" in text):
        return "context_overflow"
    return f"http_{status}"


class ChatClient:
    """Streaming chat completions against one endpoint, reusing one connection pool."""

    def __init__(self, endpoint: Endpoint, *, max_connections: int = 64) -> None:
        self.endpoint = endpoint
        headers = {"Authorization": f"Bearer {endpoint.api_key}"} if endpoint.api_key else {}
        limits = httpx.Limits(max_connections=max_connections, max_keepalive_connections=max_connections)
        timeout = httpx.Timeout(endpoint.read_timeout_s, connect=10.0)
        self._http = httpx.AsyncClient(
            base_url=endpoint.base_url.rstrip("/"), headers=headers, limits=limits, timeout=timeout
        )
        self._answered = 0  # chat requests that got an HTTP answer, to tell a dead server from a wrong URL

    @property
    def http(self) -> httpx.AsyncClient:
        """The underlying HTTP client (the server module scrapes /metrics with it)."""
        return self._http

    async def __aenter__(self) -> ChatClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._http.aclose()

    async def model_list(self) -> list[ServedModel]:
        """The entries of /v1/models (id, and max_model_len on vLLM or meta.n_ctx on llama.cpp);
        raises on a wrong key or an unreachable endpoint."""
        url = f"{self.endpoint.base_url.rstrip('/')}/models"
        try:
            response = await self._http.get("/models")
        except httpx.TransportError as exc:
            raise EndpointUnreachable(
                f"cannot reach {self.endpoint.base_url} (--base-url): GET {url} failed: {_one_line(exc)}"
            ) from exc
        if response.status_code == 401:
            _raise_for_fatal(401, response.text, self.endpoint)
        if response.status_code != 200:
            hint = "an OpenAI base URL ends in /v1" if response.status_code == 404 else "is it OpenAI-compatible?"
            raise EndpointProtocolError(
                f"GET {url} answered {response.status_code}: check --base-url ({self.endpoint.base_url}; {hint})"
            )
        try:
            entries = response.json()["data"]
            if not all(isinstance(entry, dict) and "id" in entry for entry in entries):
                raise TypeError("an entry without id")
            return [_served_model(entry) for entry in entries]
        except (ValueError, KeyError, TypeError) as exc:
            raise EndpointProtocolError(
                f"GET {url} is not an OpenAI model list: check --base-url ({self.endpoint.base_url})"
            ) from exc

    async def chat(
        self,
        index: int,
        messages: list[dict[str, str]],
        max_tokens: int,
        *,
        extra_body: JsonObject | None = None,
        t_sched_ns: int | None = None,
        keep_text: bool = False,
    ) -> RequestRecord:
        """Send one streamed chat completion and record every event's arrival time.

        ``keep_text`` keeps the answer's text on the record (multi-turn workloads send it back)."""
        body: dict[str, Any] = {
            "model": self.endpoint.model,
            "messages": messages,
            "max_tokens": max_tokens,
            "stream": True,
            "stream_options": {"include_usage": True, "continuous_usage_stats": True},
            **(extra_body or {}),
        }
        stream = _Stream()
        t_disp = time.perf_counter_ns()
        try:
            async with asyncio.timeout(self.endpoint.request_timeout_s):
                async with self._http.stream("POST", "/chat/completions", json=body) as response:
                    self._answered += 1
                    if response.status_code != 200:
                        text = (await response.aread()).decode(errors="replace")
                        _raise_for_fatal(response.status_code, text, self.endpoint)
                        kind = _error_kind(response.status_code, text)
                        log.debug("request %s: HTTP %s: %s", index, response.status_code, text[:300])
                        return self._record(
                            index, t_disp, stream, max_tokens=max_tokens, t_sched_ns=t_sched_ns, error=kind
                        )
                    async for data in response.aiter_raw():
                        feed(stream, data, time.perf_counter_ns())
                        if stream.done:
                            break
        except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
            raise self._unreachable(exc) from exc
        except TimeoutError:
            stream.error = "request_timeout"  # --request-timeout: the whole request took too long
        except httpx.ReadTimeout:
            stream.error = "read_timeout"  # --read-timeout: no byte came for that long
        except httpx.TimeoutException:
            stream.error = "timeout"
        except (httpx.RemoteProtocolError, httpx.ReadError):
            stream.error = "truncated"
        if stream.error is None and not stream.done:
            stream.error = "truncated"  # the connection closed before [DONE]
        return self._record(
            index, t_disp, stream, max_tokens=max_tokens, t_sched_ns=t_sched_ns, error=stream.error, keep_text=keep_text
        )

    def _unreachable(self, exc: Exception) -> EndpointUnreachable:
        url = f"{self.endpoint.base_url.rstrip('/')}/chat/completions"
        if self._answered:
            return EndpointUnreachable(
                f"lost {self.endpoint.base_url}: it answered {self._answered} requests, then POST {url} "
                f"failed ({_one_line(exc)}); the server stopped or restarted"
            )
        return EndpointUnreachable(
            f"cannot reach {self.endpoint.base_url} (--base-url): POST {url} failed: {_one_line(exc)}"
        )

    def _record(
        self,
        index: int,
        t_disp: int,
        stream: _Stream,
        *,
        max_tokens: int,
        t_sched_ns: int | None,
        error: str | None,
        keep_text: bool = False,
    ) -> RequestRecord:
        usage = stream.usage or {}
        details = usage.get("completion_tokens_details") or {}
        prompt_details = usage.get("prompt_tokens_details") or {}
        record = RequestRecord(
            index=index,
            t_disp_ns=t_disp,
            t_end_ns=time.perf_counter_ns(),
            events=tuple(stream.events),
            requested_tokens=max_tokens,
            t_sched_ns=t_sched_ns,
            prompt_tokens=usage.get("prompt_tokens"),
            cached_tokens=prompt_details.get("cached_tokens"),
            completion_tokens=usage.get("completion_tokens") if error is None else None,
            reasoning_tokens=details.get("reasoning_tokens"),
            finish_reason=stream.finish_reason,
            error=error,
            answer="".join(stream.text) if keep_text else "",
        )
        log.debug("request %s: %s events, error %s", index, len(stream.events), error)
        return record
