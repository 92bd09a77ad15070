"""Streaming requests to an OpenAI-compatible endpoint, with a monotonic timestamp per event.

The only module that opens connections (the probe's checks, :mod:`~bench.measure.probe.http`,
send theirs through a :class:`ChatClient`'s HTTP client). The streamed chat completions go over
aiohttp, whose C parser hands over each read's bytes at once; everything else over httpx. Each
event of the server-sent stream (parsed by :mod:`bench.measure.stream.sse`) is stamped with
``time.perf_counter_ns()`` when the read that completed it returned; events that arrive in one
read share that stamp, and a split event is stamped when its last piece arrives. Failures that
make the whole run meaningless (no connection, wrong key, unknown model) raise from the
:mod:`bench.errors` tree; failures of a single request (a truncated or malformed stream, a 5xx,
a context overflow, a gap past the read timeout, a request past the request timeout) are
recorded on its :class:`~bench.measure.metrics.RequestRecord` as an error kind.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import aiohttp
import httpx
import orjson

from bench.codec import JsonObject, JsonValue
from bench.errors import EndpointAuthError, EndpointModelError, EndpointProtocolError, EndpointUnreachable
from bench.measure.metrics import RequestRecord
from bench.measure.stream.extras import spec_decode, tool_calls
from bench.measure.stream.sse import Stream, feed, one_line_message

log = logging.getLogger(__name__)
_JSON = {"Content-Type": "application/json"}


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


def _one_line(exc: Exception) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


def _connect_failure(exc: Exception) -> str:
    """Why a connection failed, in bench's words: aiohttp's own ("Cannot connect to host H:P
    ssl:default [...]", even for plain HTTP) become ``H:P: connection refused``."""
    if isinstance(exc, aiohttp.ClientConnectorDNSError):
        return f"{exc.host}: the name does not resolve"
    if isinstance(exc, aiohttp.ClientConnectorError):
        reason = exc.os_error.strerror
        shown = f"{reason[:1].lower()}{reason[1:]}" if reason else _one_line(exc.os_error)
        return f"{exc.host}:{exc.port}: {shown}"
    if isinstance(exc, aiohttp.ConnectionTimeoutError):
        return "no connection within 10 s"
    return _one_line(exc)


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
        self._headers = {"Authorization": f"Bearer {endpoint.api_key}"} if endpoint.api_key else {}
        limits = httpx.Limits(max_connections=max_connections, max_keepalive_connections=max_connections)
        timeout = httpx.Timeout(endpoint.read_timeout_s, connect=10.0)
        self._http = httpx.AsyncClient(
            base_url=endpoint.base_url.rstrip("/"), headers=self._headers, limits=limits, timeout=timeout
        )
        self._max_connections = max_connections
        self._streams: aiohttp.ClientSession | None = None  # opened on the first chat, inside the event loop
        self._answered = 0  # chat requests that got an HTTP answer, to tell a dead server from a wrong URL

    @property
    def http(self) -> httpx.AsyncClient:
        """The HTTP client for everything but the streamed chat completions (the server module
        scrapes /metrics with it, the probes send their requests through it)."""
        return self._http

    def _stream_session(self) -> aiohttp.ClientSession:
        """The session that carries the streamed chat completions (aiohttp: its C parser costs
        less than half of httpx's CPU per streamed event, and hands over every read's bytes at once)."""
        if self._streams is None:
            self._streams = aiohttp.ClientSession(
                headers=self._headers,
                connector=aiohttp.TCPConnector(limit=self._max_connections),
                timeout=aiohttp.ClientTimeout(total=None, sock_connect=10.0, sock_read=self.endpoint.read_timeout_s),
            )
        return self._streams

    async def __aenter__(self) -> ChatClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._http.aclose()
        if self._streams is not None:
            await self._streams.close()

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
        messages: Sequence[Mapping[str, Any]],
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
        stream = Stream()
        url = f"{self.endpoint.base_url.rstrip('/')}/chat/completions"
        session = self._stream_session()
        payload = orjson.dumps(body)
        t_disp = time.perf_counter_ns()
        try:
            async with asyncio.timeout(self.endpoint.request_timeout_s):
                response = None
                for stale in range(self._max_connections + 1):
                    try:
                        response = await session.post(url, data=payload, headers=_JSON)
                        break
                    except (aiohttp.ServerDisconnectedError, aiohttp.ClientOSError):
                        if not self._answered or stale == self._max_connections:
                            raise
                        # A kept-alive connection the server had closed (llama.cpp closes each one
                        # after a streamed answer): no byte of an answer came, so send it again, on
                        # the next pooled connection or a fresh one, and time it from there.
                        log.debug("request %s: the kept-alive connection was closed, sending it again", index)
                        t_disp = time.perf_counter_ns()
                assert response is not None
                async with response:
                    self._answered += 1
                    if response.status != 200:
                        text = (await response.read()).decode(errors="replace")
                        _raise_for_fatal(response.status, text, self.endpoint)
                        kind = _error_kind(response.status, text)
                        log.debug("request %s: HTTP %s: %s", index, response.status, text[:300])
                        stream.error_message = one_line_message(text)
                        return self._record(
                            index, t_disp, stream, max_tokens=max_tokens, t_sched_ns=t_sched_ns, error=kind
                        )
                    async for data in response.content.iter_any():
                        feed(stream, data, time.perf_counter_ns())
                        if stream.done:
                            break
        except (aiohttp.ClientConnectorError, aiohttp.ConnectionTimeoutError) as exc:
            raise self._unreachable(exc) from exc
        except aiohttp.SocketTimeoutError:
            stream.error = "read_timeout"  # --read-timeout: no byte came for that long
        except aiohttp.ServerTimeoutError:
            stream.error = "timeout"
        except TimeoutError:
            stream.error = "request_timeout"  # --request-timeout: the whole request took too long
        except (aiohttp.ClientPayloadError, aiohttp.ServerDisconnectedError, aiohttp.ClientOSError):
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
                f"failed ({_connect_failure(exc)}); the server stopped or restarted"
            )
        return EndpointUnreachable(
            f"cannot reach {self.endpoint.base_url} (--base-url): POST {url} failed: {_connect_failure(exc)}"
        )

    def _record(
        self,
        index: int,
        t_disp: int,
        stream: Stream,
        *,
        max_tokens: int,
        t_sched_ns: int | None,
        error: str | None,
        keep_text: bool = False,
    ) -> RequestRecord:
        usage = stream.usage or {}
        details = usage.get("completion_tokens_details") or {}
        prompt_details = usage.get("prompt_tokens_details") or {}
        spec = spec_decode(stream.server_metrics)
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
            error_message=stream.error_message if error is not None else None,
            answer="".join(stream.text) if keep_text else "",
            spec_accepted=spec[0],
            spec_drafted=spec[1],
            spec_steps=spec[2],
            tool_calls=tool_calls(stream.tool_deltas) if keep_text and stream.tool_deltas else None,
        )
        log.debug("request %s: %s events, error %s", index, len(stream.events), error)
        return record
