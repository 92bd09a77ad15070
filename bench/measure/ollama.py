"""Ollama's own timings as a cross-check of bench's client-side numbers, when Ollama is the engine.

Ollama has no Prometheus /metrics. Its native ``/api/chat`` answers with server-side durations
in nanoseconds: ``prompt_eval_count``/``prompt_eval_duration`` (prefill), ``eval_count``/
``eval_duration`` (decode) and ``load_duration`` (a model load; well above zero means the
request paid for a cold load). After a run, bench sends a few native requests of the run's
shape and sets Ollama's decode speed beside the one it measured from the stream.
"""

from __future__ import annotations

from typing import Any

import httpx

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


async def native_chat(
    http: httpx.AsyncClient, root: str, model: str, messages: list[dict[str, Any]], max_tokens: int
) -> dict[str, Any] | None:
    """One non-streamed /api/chat request; its final object (with the timings), or None on failure."""
    body = {
        "model": model,
        "messages": messages,
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
    return answer if isinstance(answer, dict) else None


def cross_check(answers: list[dict[str, Any]], client_decode_tps_p50: float | None) -> dict[str, Any]:
    """Ollama's server-side decode and prefill speeds, and bench's client-side decode speed over them."""
    decode = [
        a["eval_count"] / a["eval_duration"] * 1e9 for a in answers if a.get("eval_duration") and a.get("eval_count")
    ]
    prefill = [
        a["prompt_eval_count"] / a["prompt_eval_duration"] * 1e9
        for a in answers
        if a.get("prompt_eval_duration") and a.get("prompt_eval_count")
    ]
    loads = [a.get("load_duration", 0) / 1e6 for a in answers]
    server = metrics.percentile(decode, 0.5) if decode else None
    warnings = []
    if loads and max(loads) > COLD_LOAD_MS:
        warnings.append(f"a cross-check request paid for a model load of {max(loads):.0f} ms (OLLAMA_KEEP_ALIVE?)")
    if len(answers) < CROSS_CHECK_REQUESTS:
        warnings.append(f"only {len(answers)} of {CROSS_CHECK_REQUESTS} native requests answered")
    return {
        "requests": len(answers),
        "server_decode_tps_p50": server,
        "server_prefill_tps_p50": metrics.percentile(prefill, 0.5) if prefill else None,
        "load_duration_ms_max": max(loads) if loads else None,
        "client_decode_tps_p50": client_decode_tps_p50,
        "client_over_server": client_decode_tps_p50 / server if server and client_decode_tps_p50 else None,
        "warnings": warnings,
    }
