"""Two servers the client writers describe, as :class:`ClientTarget` values with fixed paths, for
the golden files under ``golden/<case>/`` (each reviewed by hand against the clients' documented
keys, docs/clients.md; a change to a writer shows as a diff to review there, never regenerated
blindly)."""

from __future__ import annotations

from pathlib import Path

from bench.rig.clients import ClientTarget

GOLDEN = Path(__file__).parent / "golden"

CASES: dict[str, ClientTarget] = {
    # The box of the README: vLLM serving Qwen3.8-27B with its tool-call and reasoning parsers,
    # the API proxy over https with Caddy's CA.
    "qwen-vllm-https": ClientTarget(
        base_url="https://llm.lan:8443/v1",
        served_name="qwen3.8-27b",
        context=65536,
        max_output=16384,
        tools=True,
        reasoning=True,
        stop=(),
        ca_file="/home/ops/llmrig/artifacts/box/tls-root.crt",
        key_env="LLMRIG_API_KEY",
        key_file="/home/ops/llmrig/artifacts/box/api_key",
        engine="vllm",
        preset="qwen3.8-27b-w4a16",
    ),
    # The test rig's tiny base model on llama.cpp over plain http: no tool calls, no reasoning, a stop string.
    "gemma-llamacpp": ClientTarget(
        base_url="http://192.168.1.20:8443/v1",
        served_name="gemma3-270m",
        context=2048,
        max_output=512,
        tools=False,
        reasoning=False,
        stop=("\n",),
        ca_file="",
        key_env="LLMRIG_API_KEY",
        key_file="/home/ops/llmrig/artifacts/box/api_key",
        engine="llamacpp",
        preset="gemma3-270m",
    ),
}
