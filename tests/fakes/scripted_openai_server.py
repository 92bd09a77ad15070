#!/usr/bin/env python3
"""PROTOCOL FAKE: a scripted OpenAI-compatible streaming server with known timings (not an LLM).

It answers ``POST /v1/chat/completions`` with ``stream: true`` on a schedule fixed by a JSON
scenario, so the harness's metrics can be checked against ground truth:

- the first token event leaves ``ttft_ms`` after the request arrived, then one event every
  ``itl_ms``; each event carries ``tokens_per_event`` tokens (one word per token);
  ``burst_events`` writes that many events at once (at the first one's time), as a batching
  server does, so that with ``itl_ms`` 0 the server outpaces any client and a client's CPU per
  event is its own work, not the wake-ups of waiting for each event (the failure modes below
  assume one event per write);
- ``reasoning_tokens`` come first as ``delta.reasoning`` (or ``delta.reasoning_content`` with
  ``reasoning_field``), then ``content_tokens`` as ``delta.content``;
- a role-only event is sent at once (``ttfr`` is ~0), and the final usage chunk last;
  ``continuous_usage`` adds the running ``usage`` to every event, as vLLM does on request;
- failure modes: ``status`` (answer that HTTP status with ``error_message``; a 400 whose message
  names the maximum context length is what vLLM sends on a context overflow),
  ``truncate_after`` (close the connection after N events, no ``[DONE]``), ``malformed_after``
  (send invalid JSON after N events), ``die_after`` (the whole server exits after sending N
  events, as a killed server does: the stream breaks and later connections are refused),
  ``close_after_stream`` (close the connection after each whole streamed answer without saying
  so, as llama.cpp does: the client's next request on it finds it closed);
- ``stall_after`` and ``stall_ms``: the event after the first ``stall_after`` comes ``stall_ms``
  later than its schedule (a decode hiccup; per request through ``requests``);
- load: a gap between events is ``slow_itl_ms`` instead of ``itl_ms`` while more than
  ``slow_above_streams`` answers stream at once, or when the prompt has more than
  ``slow_above_prompt_tokens`` tokens (0: never), so per-stream decode speed falls past a known
  concurrency or context, and by a step wide enough that a busy machine's late wake-ups cannot
  move a level across it; with ``slots`` at most that many answers stream at once and the rest
  wait for a free one (their TTFT grows), as llama.cpp's slots do; ``slow_every`` N (0: off)
  makes that load slow only the chat completions whose arrival number is a multiple of N, so a
  known fraction, 1 / N, of the requests past the threshold decode slowly;
- ``spec_decode``: ``{"num_spec_tokens": K, "steps": [a, b, ...]}`` sends vLLM's per-request
  speculative decoding (``--per-request-spec-decode-metrics summary``) in the final usage
  chunk's ``metrics.speculative_decoding``: one verify step per entry, each accepting that many
  of its K draft tokens (the histogram, rates and counts follow from them, as vLLM computes them);
- ``tool_calls``: K: a request that offers ``tools`` (``tool_choice`` not ``none``) is answered
  with K tool calls instead of content, streamed as vLLM does (the first piece of a call brings
  its id, type and name, the arguments follow in pieces; ``finish_reason: tool_calls``); call k
  calls the offered tool k (mod the number offered) with ``{"path": "<its words>"}``;
- ``requests``: per-request changes of the scenario, keyed by the arrival number of the chat
  completion (``"0"`` is the first, counting the two one-token calibration requests), e.g.
  ``{"4": {"status": 500}, "5": {"truncate_after": 2}, "6": {"itl_ms": 500}}``; any key of the
  scenario may change (``api_key`` too: a 401 after calibration);
- ``prompt_tokens`` counts one token per whitespace-separated word of the messages plus
  ``template_tokens`` (a tokenizer where every word is one token);
- ``prefix_cache_words``: a prefix cache as vLLM's, over words: each prompt's words (its
  messages' contents joined by spaces) in blocks of that many, a block hit when the same block
  with the same words before it arrived earlier; the hits, in words, are the final usage's
  ``prompt_tokens_details.cached_tokens`` and the log's ``cached``;
- ``event_log``: a file that gets one JSON line per answered request: the first words of its
  prompt (``key``), its arrival and every token event's send time with ``time.perf_counter_ns``
  (taken just before the write; the same monotonic clock as the client's on Linux), and the
  tokens each carried, and of the request: its prompt tokens, its messages' roles, its
  ``tool_choice`` and the word count of each ``tool`` message: the ground truth the tests
  compare the harness with.

``ollama`` adds Ollama's native ``GET /api/version`` and ``POST /api/chat`` (not streamed),
whose nanosecond timings follow the same script. ``GET /v1/models`` lists ``model`` with
``max_model_len``; ``GET /health`` answers 200; ``GET /metrics`` answers an empty exposition.
A request without ``Authorization: Bearer <api_key>`` gets 401 (an empty ``api_key`` turns
that off).

Usage: scripted_openai_server.py SCENARIO_JSON  (prints the port on the first stdout line).
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import sys
import time
from typing import Any

DEFAULTS: dict[str, Any] = {
    "model": "scripted",
    "api_key": "test-key",
    "ttft_ms": 100.0,
    "itl_ms": 10.0,
    "tokens_per_event": 1,
    "burst_events": 1,
    "reasoning_tokens": 0,
    "content_tokens": 32,
    "reasoning_field": "reasoning",
    "continuous_usage": False,
    "template_tokens": 9,
    "max_model_len": 4096,
    "event_log": None,
    "status": 200,
    "error_message": "scripted failure",
    "status_above_max_tokens": 0,  # answer ``status`` only to requests with max_tokens above this
    "prefix_cache_words": 0,  # a prefix cache of blocks of this many words (0: none)
    "ollama": False,
    # Streams out of lockstep: stream k's schedule is delayed by (k mod stagger_slots) * stagger_step_ms.
    "stagger_slots": 0,
    "stagger_step_ms": 1.0,
    "slow_itl_ms": 0.0,
    "slow_above_streams": 0,  # 0: never
    "slow_above_prompt_tokens": 0,  # 0: never
    "slow_every": 0,  # 0: every request under the load is slow; N: those whose arrival number N divides
    "slots": 0,  # 0: no limit
    "truncate_after": None,
    "malformed_after": None,
    "die_after": None,
    "close_after_stream": False,
    "stall_after": None,
    "stall_ms": 0.0,
    "spec_decode": None,
    "tool_calls": 0,
    "requests": {},
}


def _spec_decode(num_spec_tokens: int, steps: list[int]) -> dict[str, Any]:
    """vLLM's SpeculativeDecodingMetrics of a request whose verify steps accepted ``steps`` drafts each."""
    accepted, drafted = sum(steps), num_spec_tokens * len(steps)
    histogram = [sum(1 for step in steps if step == j) for j in range(num_spec_tokens + 1)]
    return {
        "mean_acceptance_length": 1 + accepted / len(steps) if steps else 1.0,
        "draft_acceptance_rate": accepted / drafted if drafted else 0.0,
        "acceptance_histogram": histogram,
        "num_spec_steps": len(steps),
        "num_accepted_draft_tokens": accepted,
        "num_draft_tokens": drafted,
        "num_spec_tokens": num_spec_tokens,
    }


CACHED: set[int] = set()  # with ``prefix_cache_words``: the chained hashes of the blocks seen


def _prefix_cache(content: str, block: int) -> int:
    """The words of ``content`` a prefix cache of ``block``-word blocks already held; it keeps them all after."""
    words, chain, hits, missed = content.split(), 0, 0, False
    for start in range(0, len(words) - block + 1, block):
        chain = hash((chain, *words[start : start + block]))
        if chain in CACHED and not missed:
            hits += block
        else:
            missed = True
            CACHED.add(chain)
    return hits


def _final_chunk(
    base: dict[str, Any], scenario: dict[str, Any], prompt_tokens: int, sent: int, cached: int | None = None
) -> dict[str, Any]:
    """The last chunk of an answer: its usage, and vLLM's per-request speculative decoding when scripted."""
    usage: dict[str, Any] = {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": sent,
        "total_tokens": prompt_tokens + sent,
        "completion_tokens_details": {"reasoning_tokens": min(sent, scenario["reasoning_tokens"])},
    }
    if cached is not None:
        usage["prompt_tokens_details"] = {"cached_tokens": cached}
    final: dict[str, Any] = {**base, "choices": [], "usage": usage}
    if scenario["spec_decode"]:
        final["metrics"] = {"speculative_decoding": _spec_decode(**scenario["spec_decode"])}
    return final


def _chunk(payload: dict[str, Any]) -> bytes:
    return b"data: " + json.dumps(payload, separators=(",", ":")).encode() + b"\n\n"


async def _read_request(reader: asyncio.StreamReader) -> tuple[str, str, dict[str, str], bytes]:
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    method, path, _ = lines[0].split(" ", 2)
    headers = {}
    for line in lines[1:]:
        if ":" in line:
            name, value = line.split(":", 1)
            headers[name.strip().lower()] = value.strip()
    body = await reader.readexactly(int(headers.get("content-length", "0")))
    return method, path, headers, body


def _respond(writer: asyncio.StreamWriter, status: int, body: bytes, content_type: str = "application/json") -> None:
    reason = {200: "OK", 400: "Bad Request", 401: "Unauthorized", 404: "Not Found", 500: "Internal Server Error"}
    writer.write(
        f"HTTP/1.1 {status} {reason.get(status, 'Error')}\r\ncontent-type: {content_type}\r\n"
        f"content-length: {len(body)}\r\n\r\n".encode()
        + body
    )


def _max_tokens(request: dict[str, Any], default: int) -> int:
    """The answer's cap: ``max_tokens``, or OpenAI's newer ``max_completion_tokens`` (AIPerf sends that)."""
    return int(request.get("max_tokens") or request.get("max_completion_tokens") or default)


def _piece(data: bytes) -> bytes:
    """One piece of a chunked transfer encoding."""
    return f"{len(data):x}\r\n".encode() + data + b"\r\n"


LOG: list[Any] = []
ACTIVE = [0]  # answers streaming now
SLOTS: list[asyncio.Semaphore] = []  # with ``slots``: one semaphore of that many
STREAMS = itertools.count()
CHATS = itertools.count()  # arrival number of each chat completion, the key of ``requests``


def _words(message: dict[str, Any]) -> int:
    """A message's words: its content's, and its tool calls' arguments'."""
    calls = message.get("tool_calls") or []
    content = message.get("content") or ""
    return len(str(content).split()) + sum(len(call["function"]["arguments"].split()) for call in calls)


def _prompt_tokens(request: dict[str, Any], scenario: dict[str, Any]) -> int:
    return int(sum(map(_words, request.get("messages", []))) + scenario["template_tokens"])


CALL_IDS = itertools.count()


class _Calls:
    """The tool calls of one answer (``tool_calls`` of the scenario, when the request offers tools):
    event e of its ``events`` belongs to call e * count // events."""

    def __init__(self, request: dict[str, Any], scenario: dict[str, Any], events: int) -> None:
        offered = request.get("tools") and request.get("tool_choice") != "none"
        self.tools = request.get("tools") or []
        self.count = min(int(scenario["tool_calls"]), events) if offered else 0
        self.events, self.current = events, -1

    def delta(self, event: int, tokens: int, *, last: bool) -> dict[str, Any]:
        """The delta of one event: closes the calls before this one, opens this one or adds to it."""
        call, words = event * self.count // self.events, " word" * tokens
        pieces: list[dict[str, Any]] = []
        if self.current >= 0:
            pieces += [{"index": k, "function": {"arguments": '"}'}} for k in range(self.current, call)]
        if call != self.current:
            name = self.tools[call % len(self.tools)]["function"]["name"]
            function = {"name": name, "arguments": '{"path": "' + words.strip()}
            pieces.append({"index": call, "id": f"call_{next(CALL_IDS)}", "type": "function", "function": function})
        else:
            pieces.append({"index": call, "function": {"arguments": words}})
        if last:
            pieces.append({"index": call, "function": {"arguments": '"}'}})
        self.current = call
        return {"tool_calls": pieces}


async def _stream(
    writer: asyncio.StreamWriter, scenario: dict[str, Any], arrived_ns: int, request: dict[str, Any]
) -> bool:
    """Stream one scripted answer; False when the connection was dropped on purpose."""
    max_tokens = _max_tokens(request, 1 << 30)
    prompt_tokens = _prompt_tokens(request, scenario)
    if scenario["stagger_slots"]:
        arrived_ns += round((next(STREAMS) % int(scenario["stagger_slots"])) * float(scenario["stagger_step_ms"]) * 1e6)
    content = " ".join(str(message.get("content", "")) for message in request.get("messages", []))
    if scenario["prefix_cache_words"]:
        request["_cached"] = _prefix_cache(content, int(scenario["prefix_cache_words"]))
    writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n")
    base = {"id": "chatcmpl-scripted", "object": "chat.completion.chunk", "model": scenario["model"]}
    writer.write(_piece(_chunk({**base, "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]})))
    await writer.drain()
    total = min(scenario["reasoning_tokens"] + scenario["content_tokens"], max_tokens)
    target_ns = arrived_ns + int(scenario["ttft_ms"] * 1e6)
    slot = SLOTS[0] if SLOTS else None
    if slot is not None:
        await slot.acquire()
        target_ns = max(target_ns, time.perf_counter_ns() + int(scenario["ttft_ms"] * 1e6))
    ACTIVE[0] += 1
    try:
        return await _events(writer, scenario, (target_ns, arrived_ns), request, (total, prompt_tokens, content))
    finally:
        ACTIVE[0] -= 1
        if slot is not None:
            slot.release()


def _gap_ns(scenario: dict[str, Any], event: int, prompt_tokens: int) -> int:
    """The gap before token event ``event`` (not the first): the scripted ITL or, under the load
    that slows it, ``slow_itl_ms``; plus a stall."""
    streams, long_prompt = scenario["slow_above_streams"], scenario["slow_above_prompt_tokens"]
    slow = (streams and ACTIVE[0] > streams) or (long_prompt and prompt_tokens > long_prompt)
    every = scenario["slow_every"]
    slow = slow and (not every or scenario.get("arrival", 0) % every == 0)
    gap_ms = scenario["slow_itl_ms"] if slow else scenario["itl_ms"]
    return int((gap_ms + (scenario["stall_ms"] if event == scenario["stall_after"] else 0.0)) * 1e6)


async def _events(
    writer: asyncio.StreamWriter,
    scenario: dict[str, Any],
    times: tuple[int, int],
    request: dict[str, Any],
    counts: tuple[int, int, str],
) -> bool:
    """The token events of one answer, the first at ``times[0]``; False when dropped on purpose."""
    target_ns, arrived_ns = times
    total, prompt_tokens, content = counts
    max_tokens = _max_tokens(request, 1 << 30)
    base = {"id": "chatcmpl-scripted", "object": "chat.completion.chunk", "model": scenario["model"]}
    per_event = scenario["tokens_per_event"]
    calls = _Calls(request, scenario, -(-total // per_event))
    sent, event, log = 0, 0, []
    burst: list[bytes] = []  # events written together (``burst_events``), sent at the first one's time
    while sent < total:
        if event:
            target_ns += _gap_ns(scenario, event, prompt_tokens)
        if not burst:
            await asyncio.sleep(max(0.0, (target_ns - time.perf_counter_ns()) / 1e9))
        if scenario["die_after"] is not None and event >= scenario["die_after"]:
            os._exit(1)  # a killed server: no goodbye, the socket closes with the process
        if scenario["truncate_after"] is not None and event >= scenario["truncate_after"]:
            writer.close()
            return False
        if scenario["malformed_after"] is not None and event >= scenario["malformed_after"]:
            writer.write(_piece(b'data: {"choices": [\n\n'))
            await writer.drain()
            writer.close()
            return False
        count = min(per_event, total - sent)
        reasoning = max(0, min(count, scenario["reasoning_tokens"] - sent))
        delta: dict[str, Any] = {}
        if reasoning:
            delta[scenario["reasoning_field"]] = " think" * reasoning
        if calls.count:
            delta = calls.delta(event, count, last=sent + count >= total)
        elif count - reasoning:
            delta["content"] = " word" * (count - reasoning)
        sent += count
        payload: dict[str, Any] = {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]}
        if scenario["continuous_usage"]:
            payload["usage"] = {"prompt_tokens": prompt_tokens, "completion_tokens": sent}
        # Stamped just before the write: the write hands the bytes to the kernel, which may wake the
        # client on its core before this process takes another timestamp, so a stamp taken after
        # it could fall after the client's own (the client would seem to receive before the send).
        chunk = _piece(_chunk(payload))
        log.append((time.perf_counter_ns(), count, count > reasoning))
        burst.append(chunk)
        event += 1
        if len(burst) >= scenario["burst_events"] or sent >= total:
            writer.write(b"".join(burst))
            burst.clear()
            await writer.drain()
    finish = "tool_calls" if calls.count else "length" if sent >= max_tokens else "stop"
    writer.write(_piece(_chunk({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]})))
    writer.write(_piece(_chunk(_final_chunk(base, scenario, prompt_tokens, sent, request.get("_cached")))))
    writer.write(_piece(b"data: [DONE]\n\n") + b"0\r\n\r\n")
    await writer.drain()
    if LOG:
        _log(request, " ".join(content.split()[:11]), arrived_ns, log, prompt_tokens)
    return True


def _log(request: dict[str, Any], key: str, arrived_ns: int, sent: list[Any], prompt_tokens: int) -> None:
    """One line of the event log: the request's key, arrival and token events, and what it carried."""
    messages = request.get("messages", [])
    entry = {"key": key, "arrived_ns": arrived_ns, "sent": sent, "prompt_tokens": prompt_tokens}
    entry["cached"] = request.get("_cached")
    entry["roles"] = [message.get("role") for message in messages]
    entry["tool_choice"] = request.get("tool_choice")
    entry["tool_results"] = [len(str(m.get("content")).split()) for m in messages if m.get("role") == "tool"]
    LOG[0].write(json.dumps(entry) + "\n")


async def _native_chat(
    writer: asyncio.StreamWriter, scenario: dict[str, Any], arrived_ns: int, request: dict[str, Any]
) -> None:
    """Ollama's /api/chat, not streamed: the whole answer after the scripted time, with timings."""
    predict = int((request.get("options") or {}).get("num_predict") or 1 << 30)
    count = min(scenario["reasoning_tokens"] + scenario["content_tokens"], predict)
    total_ms = scenario["ttft_ms"] + max(count - 1, 0) * scenario["itl_ms"]
    await asyncio.sleep(max(0.0, (arrived_ns + total_ms * 1e6 - time.perf_counter_ns()) / 1e9))
    answer = {
        "model": scenario["model"],
        "message": {"role": "assistant", "content": " word" * count},
        "done": True,
        "load_duration": 1_000_000,
        "prompt_eval_count": _prompt_tokens(request, scenario),
        "prompt_eval_duration": int(scenario["ttft_ms"] * 1e6),
        "eval_count": count,
        "eval_duration": int(count * scenario["itl_ms"] * 1e6),
    }
    _respond(writer, 200, json.dumps(answer).encode())


async def _answer(
    scenario: dict[str, Any],
    request_line: tuple[str, str],
    headers: dict[str, str],
    body: bytes,
    *,
    arrived_ns: int,
    writer: asyncio.StreamWriter,
) -> bool:
    """Answer one request; False when the connection must close."""
    method, path = request_line
    if method == "POST" and path == "/v1/chat/completions":
        arrival = next(CHATS)
        scenario = {**scenario, "arrival": arrival, **scenario["requests"].get(str(arrival), {})}
    if path == "/health":
        _respond(writer, 200, b"{}")
    elif scenario["ollama"] and path == "/api/version":
        _respond(writer, 200, b'{"version":"0.0.0-scripted"}')
    elif scenario["ollama"] and method == "POST" and path == "/api/chat":
        await _native_chat(writer, scenario, arrived_ns, json.loads(body))
    elif path == "/metrics":
        _respond(writer, 200, b"", "text/plain; version=0.0.4")
    elif scenario["api_key"] and headers.get("authorization") != f"Bearer {scenario['api_key']}":
        _respond(writer, 401, b'{"error":{"message":"Unauthorized","type":"invalid_request_error"}}')
    elif path == "/v1/models":
        _respond(
            writer,
            200,
            json.dumps(
                {"object": "list", "data": [{"id": scenario["model"], "max_model_len": scenario["max_model_len"]}]}
            ).encode(),
        )
    elif method == "POST" and path == "/v1/chat/completions":
        request = json.loads(body)
        if scenario["status"] != 200 and _max_tokens(request, 0) > scenario["status_above_max_tokens"]:
            _respond(writer, scenario["status"], json.dumps({"error": {"message": scenario["error_message"]}}).encode())
        elif request.get("model") != scenario["model"]:
            message = f"The model `{request.get('model')}` does not exist."
            _respond(writer, 404, json.dumps({"error": {"message": message}}).encode())
        else:
            kept = await _stream(writer, scenario, arrived_ns, request)
            return kept and not scenario["close_after_stream"]
    else:
        _respond(writer, 404, b"{}")
    await writer.drain()
    return True


async def _handle(scenario: dict[str, Any], reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Serve requests on one keep-alive connection until the client closes it."""
    while True:
        try:
            method, path, headers, body = await _read_request(reader)
        except (asyncio.IncompleteReadError, ValueError, ConnectionError):
            break
        arrived_ns = time.perf_counter_ns()
        if not await _answer(scenario, (method, path), headers, body, arrived_ns=arrived_ns, writer=writer):
            break
    writer.close()


async def main() -> None:
    with open(sys.argv[1], encoding="utf-8") as handle:
        scenario = {**DEFAULTS, **json.load(handle)}
    if scenario["slots"]:
        SLOTS.append(asyncio.Semaphore(int(scenario["slots"])))
    if scenario["event_log"]:
        LOG.append(open(scenario["event_log"], "a", buffering=1, encoding="utf-8"))  # noqa: SIM115 (open for the server's life)
    server = await asyncio.start_server(lambda r, w: _handle(scenario, r, w), "127.0.0.1", 0, backlog=256)
    print(server.sockets[0].getsockname()[1], flush=True)
    print(f"started {time.time()}", file=sys.stderr, flush=True)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    asyncio.run(main())
