"""deployment.json records of the shape the engine role writes, for the tests that hand bench one.

:func:`record` builds one through the typed record (:mod:`bench.rig.deployment`), so every test
document is one the role could have written; each test names only what it is about.
"""

from __future__ import annotations

import re
from typing import Any

from bench.codec import JsonObject
from bench.rig import DEPLOYMENT_FILE, ENGINE_NAMES, ENGINES_BY_NAME, Deployment
from bench.rig.deployment import Endpoint, Engines, EngineSection, Startup
from bench.rig.host_record import Gpu, HostFacts


def gpu(index: int = 0, memory_mib: int = 16311) -> Gpu:
    """One RTX 5060 Ti 16 GB as nvidia-smi lists it."""
    return Gpu(
        index, "NVIDIA GeForce RTX 5060 Ti", memory_mib, "12.0", "580.95.05", f"00000000:0{index + 1}:00.0", "10de:2d04"
    )


def deployment(
    engine: str = "vllm",
    *,
    args: list[str] | None = None,
    base_url: str = "",
    preset: str = "gemma3-270m",
    served_model_name: str = "m",
    config_version: str = "v1",
    device: str = "cpu",
    startup: dict[str, Any] | None = None,
    gpus: tuple[Gpu, ...] = (),
    env: JsonObject | None = None,
) -> Deployment:
    """A record of ``engine`` serving ``served_model_name`` at ``base_url`` (default: the engine's
    port on loopback) with the command line ``args`` (vLLM and llama.cpp; Ollama records none)."""
    spec = ENGINES_BY_NAME[engine]
    base_url = base_url or f"http://127.0.0.1:{spec.default_port}/v1"
    root = re.sub(r"/v1$", "", base_url)
    endpoint = Endpoint(
        base_url=base_url,
        local_base_url=base_url,
        health_url=root + spec.health_path,
        metrics_url=root + "/metrics" if spec.metrics else "",
        api_key_file="/etc/llmrig/api_key" if spec.api_key else "",
    )
    section = EngineSection(
        unit=spec.unit,
        model={"path": "/srv/llmrig/models/m"},
        args=None if engine == "ollama" else list(args or []),
        env=env,
    )
    return Deployment(
        engine=engine,
        engines=Engines(engine, [name for name in ENGINE_NAMES if name != engine]),
        device=device,
        preset=preset,
        served_model_name=served_model_name,
        config_version=config_version,
        unit=spec.unit,
        endpoint=endpoint,
        # Read as the file is, so that ``startup`` may hold the typed figures (ready_s) beside the engine's facts.
        startup=Startup.__from_json__(
            {"invocation_id": "0123abcd", "active_since": "Tue 2026-12-01 10:00:00 UTC", **(startup or {})}, "startup"
        ),
        host=HostFacts(list(gpus), gpus[0].driver_version if gpus else "", "AMD Ryzen 9 7950X"),
        section=section,
    )


def record(engine: str = "vllm", **changes: Any) -> JsonObject:
    """:func:`deployment` as the JSON document deployment.json holds."""
    return DEPLOYMENT_FILE.to_document(deployment(engine, **changes))


def gateway() -> JsonObject:
    """The gateway section of a gateway host's record (box1 fronts box1 and box2), as JSON."""
    backend = {"engine": "vllm", "preset": "qwen3.8-27b-w4a16", "served_model_name": "qwen3.8-27b"}
    return {
        "base_url": "http://box1:8002/v1",
        "metrics_url": "http://box1:8002/metrics",
        "local_base_url": "http://127.0.0.1:8100/v1",
        "policy": "cache_aware",
        "router_version": "0.1.17",
        "out_of_rotation_s": 13,
        "backends": [
            {"host": "box1", "base_url": "http://box1:8001/v1", **backend, "device": "cuda",
             "gpus": ["NVIDIA GeForce RTX 5060 Ti", "NVIDIA GeForce RTX 5060 Ti"]},
            {"host": "box2", "base_url": "http://box2:8001/v1", **backend, "device": "cpu", "gpus": []},
        ],
    }  # fmt: skip
