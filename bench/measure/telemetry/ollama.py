"""Ollama's own timings as a cross-check of bench's client-side numbers, when Ollama is the engine.

Ollama has no Prometheus /metrics. Its native ``/api/chat`` answers with server-side durations
in nanoseconds: ``prompt_eval_count``/``prompt_eval_duration`` (prefill), ``eval_count``/
``eval_duration`` (decode) and ``load_duration`` (a model load; well above zero means the
request paid for a cold load). After a run, bench sends a few native requests of the run's
shape and sets Ollama's decode speed beside the one it measured from the stream.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import httpx

from bench.codec import JsonObject, JsonValue
from bench.measure import metrics

CROSS_CHECK_REQUESTS = 3
COLD_LOAD_MS = 1000.0


async def is_ollama(http: httpx.AsyncClient, root: str) -> bool:
    """True when ``root`` answers Ollama's /api/version."""
    try:
        response = await http.get(f"{root}/api/version", timeout=5.0)
        return response.status_code == 200 and "version" in response.json()
    except (httpx.HTTPError, ValueError):
        return False


@dataclass(frozen=True, slots=True)
class OllamaCrossCheck:
    """Ollama's own timings beside bench's (the ``ollama_native`` of a result file)."""

    requests: int  # native requests that answered
    server_decode_tps_p50: float | None  # eval_count / eval_duration
    server_prefill_tps_p50: float | None  # prompt_eval_count / prompt_eval_duration
    load_duration_ms_max: float | None  # well above zero: a request paid for a model load
    client_decode_tps_p50: float | None  # bench's own, from the stream of the first level
    client_over_server: float | None
    warnings: list[str] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class NativeTimings:
    """The server-side counts and durations (nanoseconds) of one answered /api/chat request."""

    eval_count: float
    eval_duration_ns: float
    prompt_eval_count: float
    prompt_eval_duration_ns: float
    load_duration_ns: float

    @classmethod
    def from_answer(cls, answer: JsonObject) -> NativeTimings:
        """Read an /api/chat answer; a missing or non-numeric field counts as 0 (no speed from it)."""

        def number(key: str) -> float:
            value: JsonValue = answer.get(key)
            return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0.0

        return cls(
            number("eval_count"),
            number("eval_duration"),
            number("prompt_eval_count"),
            number("prompt_eval_duration"),
            number("load_duration"),
        )


async def native_chat(
    http: httpx.AsyncClient, root: str, model: str, messages: list[dict[str, str]], max_tokens: int
) -> NativeTimings | None:
    """One non-streamed /api/chat request; the timings of its final object, or None on failure."""
    body: JsonObject = {
        "model": model,
        "messages": [dict(message) for message in messages],
        "stream": False,
        "options": {"num_predict": max_tokens, "temperature": 0},
    }
    try:
        response = await http.post(f"{root}/api/chat", json=body)
    except httpx.HTTPError:
        return None
    if response.status_code != 200:
        return None
    try:
        answer = response.json()
    except ValueError:
        return None
    return NativeTimings.from_answer(answer) if isinstance(answer, dict) else None


def _speeds(pairs: list[tuple[float, float]]) -> list[float]:
    return [tokens / nanoseconds * 1e9 for tokens, nanoseconds in pairs if tokens and nanoseconds]


def cross_check(answers: list[NativeTimings], client_decode_tps_p50: float | None) -> OllamaCrossCheck:
    """Ollama's server-side decode and prefill speeds, and bench's client-side decode speed over them."""
    decode = _speeds([(a.eval_count, a.eval_duration_ns) for a in answers])
    prefill = _speeds([(a.prompt_eval_count, a.prompt_eval_duration_ns) for a in answers])
    loads = [a.load_duration_ns / 1e6 for a in answers]
    server = metrics.percentile(decode, 0.5) if decode else None
    warnings = []
    if loads and max(loads) > COLD_LOAD_MS:
        warnings.append(f"a cross-check request paid for a model load of {max(loads):.0f} ms (OLLAMA_KEEP_ALIVE?)")
    if len(answers) < CROSS_CHECK_REQUESTS:
        warnings.append(f"only {len(answers)} of {CROSS_CHECK_REQUESTS} native requests answered")
    return OllamaCrossCheck(
        requests=len(answers),
        server_decode_tps_p50=server,
        server_prefill_tps_p50=metrics.percentile(prefill, 0.5) if prefill else None,
        load_duration_ms_max=max(loads) if loads else None,
        client_decode_tps_p50=client_decode_tps_p50,
        client_over_server=client_decode_tps_p50 / server if server and client_decode_tps_p50 else None,
        warnings=warnings,
    )
