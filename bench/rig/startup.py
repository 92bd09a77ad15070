"""Facts that vLLM prints once while it starts, read from its log (the unit's journal).

vLLM 0.33 prints the KV summary as one line with comma-grouped numbers::

    GPU KV cache size: 123,456 tokens, Maximum concurrency for 32,768 tokens per request: 3.77x

Older releases printed the two halves on separate lines, and the CPU build says ``CPU KV cache
size``. The patterns below accept every form. A fact that is absent from the log is ``None``,
never a guess. When a line repeats (a restart inside one log, or one line per worker) the last
one wins, since it describes the engine that is serving now.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

NUMBER = r"([0-9][0-9,]*(?:\.[0-9]+)?)"

PATTERNS: dict[str, tuple[re.Pattern[str], Callable[[str], Any]]] = {}


def _number(text: str) -> float:
    return float(text.replace(",", ""))


def _integer(text: str) -> int:
    return int(_number(text))


def _pattern(name: str, regex: str, convert: Callable[[str], Any]) -> None:
    PATTERNS[name] = (re.compile(regex), convert)


_pattern("kv_cache_device", r"\b(GPU|CPU|XPU|TPU) KV cache size: " + NUMBER + " tokens", str)
_pattern("kv_cache_tokens", r"\b(?:GPU|CPU|XPU|TPU) KV cache size: " + NUMBER + " tokens", _integer)
_pattern("max_concurrency_tokens_per_request", r"Maximum concurrency for " + NUMBER + " tokens per request", _integer)
_pattern("max_concurrency", r"Maximum concurrency for [0-9,]+ tokens per request: " + NUMBER + "x", _number)
_pattern("available_kv_cache_gib", r"Available KV cache memory: " + NUMBER + " GiB", _number)
_pattern("model_load_gib", r"Model loading took " + NUMBER + " GiB", _number)
_pattern("model_load_seconds", r"Model loading took [0-9.,]+ GiB(?: memory)? and " + NUMBER + " sec", _number)
_pattern("graph_capture_seconds", r"Graph capturing finished in " + NUMBER + " secs?", _number)
_pattern("graph_capture_gib", r"Graph capturing finished in [0-9.,]+ secs?, took " + NUMBER + " GiB", _number)
_pattern("torch_compile_seconds", r"torch\.compile takes " + NUMBER + " s in total", _number)
_pattern("init_engine_seconds", r"init engine \(profile, create kv cache, warmup model\) took " + NUMBER, _number)
_pattern("max_model_len", r"Using max model len " + NUMBER, _integer)
_pattern("attention_backend", r"Using (?:AttentionBackendEnum\.)?([A-Z][A-Z0-9_]*) (?:attention )?backend", str)
_pattern("quantization_kernel", r"Using (\w+) for (?:CompressedTensors|AWQ|GPTQ)\w*", str)
_pattern("weights_load_seconds", r"Loading weights took " + NUMBER + " sec", _number)
_pattern("vllm_version", r"(?:vLLM API server version |Initializing a V1 LLM engine \(v)([0-9][\w.+-]*[0-9a-z])", str)


def parse_vllm_log(text: str) -> dict[str, Any]:
    """Every start-up fact found in ``text``; ``None`` for the ones the log does not contain."""
    facts: dict[str, Any] = {}
    for name, (pattern, convert) in PATTERNS.items():
        matches = pattern.findall(text)
        if not matches:
            facts[name] = None
            continue
        last = matches[-1]
        facts[name] = convert(last[0] if isinstance(last, tuple) else last)
    return facts
