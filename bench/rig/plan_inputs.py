"""Where the planner's inputs come from: the knobs (group_vars or preflight), a deployment.json,
or a Hugging Face config.json. One :class:`~bench.rig.plan_math.Setup` per source, no arithmetic here."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from bench.errors import ConfigError, PlanError
from bench.rig.deployment import Deployment
from bench.rig.plan_math import Setup
from bench.rig.presets import Architecture, LinearAttention
from bench.rig.values import truthy

# What the vllm role renders for the knobs whose group_vars default is a Jinja expression of the
# device (group_vars/all/vllm.yml says the same in its comments).
DEVICE_DEFAULTS: dict[str, dict[str, Any]] = {
    "cuda": {"vllm_kv_cache_dtype": "fp8", "vllm_tensor_parallel_size": 2},
    "cpu": {"vllm_kv_cache_dtype": "auto", "vllm_tensor_parallel_size": 1},
}
SIZE = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*([KMGTkmgt]?)\s*$")


def parse_size(text: str, variable: str) -> int | None:
    """vLLM's human-readable sizes: ``4G`` = 4 GiB, ``4g`` = 4x10^9 bytes; '' = unset."""
    if not str(text).strip():
        return None
    match = SIZE.match(str(text))
    if not match:
        raise PlanError(f"{variable}: {text!r} is not a size such as 4G (GiB) or 4g (10^9 bytes)")
    number, unit = float(match.group(1)), match.group(2)
    power = " KMGT".index(unit.upper()) if unit else 0
    return int(number * (1024 if unit.isupper() else 1000) ** power)


def _int(knobs: Mapping[str, Any], name: str) -> int:
    try:
        return int(str(knobs[name]).strip())
    except (KeyError, ValueError) as exc:
        raise PlanError(f"{name}: needs an integer, got {knobs.get(name)!r}") from exc


def setup_from_knobs(
    knobs: Mapping[str, Any], device: str, weights_gb: float, gpus: Sequence[Mapping[str, Any]]
) -> Setup:
    """The setup the vllm role would render from these knobs on a host with ``gpus``."""
    memory = [int(gpu["memory_mib"]) for gpu in gpus if isinstance(gpu.get("memory_mib"), int)]
    try:
        utilization = float(knobs["vllm_gpu_memory_utilization"])
    except (KeyError, ValueError) as exc:
        raise PlanError("vllm_gpu_memory_utilization: needs a number such as 0.9") from exc
    return Setup(
        device=device,
        max_model_len=_int(knobs, "vllm_max_model_len"),
        max_num_seqs=_int(knobs, "vllm_max_num_seqs"),
        max_num_batched_tokens=_int(knobs, "vllm_max_num_batched_tokens"),
        tensor_parallel_size=_int(knobs, "vllm_tensor_parallel_size"),
        kv_cache_dtype=str(knobs["vllm_kv_cache_dtype"]),
        gpus=len(gpus),
        gpu_memory_mib=min(memory) if memory else 0,
        gpu_memory_utilization=utilization,
        weights_gb=weights_gb,
        mtp_tokens=_int(knobs, "vllm_mtp_tokens") if truthy(knobs.get("vllm_mtp")) else 0,
        prefix_caching=truthy(knobs.get("vllm_enable_prefix_caching", True)),
        enforce_eager=truthy(knobs.get("vllm_enforce_eager", True)),
        cpu_kvcache_space_gib=_int(knobs, "vllm_cpu_kvcache_space_gib"),
        kv_cache_memory_bytes=parse_size(
            str(knobs.get("vllm_kv_cache_memory_bytes") or ""), "vllm_kv_cache_memory_bytes"
        ),
    )


def setup_from_deployment(deployment: Deployment, weights_gb: float) -> Setup:
    """The setup vLLM really ran with, from deployment.json's arguments, environment and host."""
    if deployment.engine != "vllm":
        raise ConfigError(f"--check: deployment.json describes engine {deployment.engine!r}; only vLLM has a KV pool")
    flags = deployment.section.flags()
    env = deployment.section.env or {}
    speculative = flags.get("--speculative-config")
    mtp = int(json.loads(speculative).get("num_speculative_tokens", 0)) if speculative else 0
    knobs = {
        "vllm_max_model_len": flags.get("--max-model-len"),
        "vllm_max_num_seqs": flags.get("--max-num-seqs") or 256,
        "vllm_max_num_batched_tokens": flags.get("--max-num-batched-tokens") or 2048,
        "vllm_tensor_parallel_size": flags.get("--tensor-parallel-size") or 1,
        "vllm_kv_cache_dtype": flags.get("--kv-cache-dtype") or "auto",
        "vllm_gpu_memory_utilization": flags.get("--gpu-memory-utilization") or 0.92,
        "vllm_mtp": mtp > 0,
        "vllm_mtp_tokens": mtp,
        "vllm_enable_prefix_caching": "--no-enable-prefix-caching" not in flags,
        "vllm_enforce_eager": "--enforce-eager" in flags,
        "vllm_cpu_kvcache_space_gib": env.get("VLLM_CPU_KVCACHE_SPACE", 4),
        "vllm_kv_cache_memory_bytes": flags.get("--kv-cache-memory-bytes") or "",
    }
    gpus = [{"memory_mib": gpu.memory_mib} for gpu in deployment.host.gpus]
    return setup_from_knobs(knobs, deployment.device, weights_gb, gpus)


def _text_config(config: Mapping[str, Any]) -> Mapping[str, Any]:
    nested = config.get("text_config")
    return nested if isinstance(nested, Mapping) else config


def architecture_from_config(config: Mapping[str, Any], where: str) -> tuple[Architecture, int]:
    """An :class:`Architecture` and the native context from a Hugging Face config.json."""
    text = _text_config(config)
    try:
        layers = int(text["num_hidden_layers"])
        heads = int(text["num_attention_heads"])
        kv_heads = int(text.get("num_key_value_heads", heads))
        head_dim = int(text.get("head_dim") or int(text["hidden_size"]) // heads)
        native = int(text.get("max_position_embeddings", 0))
    except (KeyError, TypeError, ValueError) as exc:
        raise ConfigError(f"--config-json: {where} lacks {exc} (num_hidden_layers, num_attention_heads, ...)") from exc
    kinds = [str(kind) for kind in text.get("layer_types") or []]
    window = int(text.get("sliding_window") or 0)
    if not kinds and text.get("sliding_window_pattern") and window:
        pattern = int(text["sliding_window_pattern"])  # Gemma 3: every pattern-th layer is global
        kinds = ["full_attention" if (index + 1) % pattern == 0 else "sliding_attention" for index in range(layers)]
    full = sum(kind == "full_attention" for kind in kinds) if kinds else layers
    linear_layers = sum(kind == "linear_attention" for kind in kinds)
    sliding_layers = sum(kind == "sliding_attention" for kind in kinds)
    linear = None
    if linear_layers:
        linear = LinearAttention(
            key_heads=int(text["linear_num_key_heads"]),
            value_heads=int(text["linear_num_value_heads"]),
            key_head_dim=int(text["linear_key_head_dim"]),
            value_head_dim=int(text["linear_value_head_dim"]),
            conv_kernel=int(text["linear_conv_kernel_dim"]),
            state_dtype="float32" if str(text.get("mamba_ssm_dtype", "float32")) == "float32" else "bfloat16",
        )
    arch = Architecture(
        layers=layers,
        full_attention_layers=full,
        attention_heads=heads,
        kv_heads=kv_heads,
        head_dim=head_dim,
        sliding_window=window if sliding_layers else 0,
        hybrid=linear is not None,
        moe=bool(text.get("num_experts") or text.get("num_local_experts")),
        mtp_head=bool(text.get("mtp_num_hidden_layers")),
        linear_attention=linear,
    )
    return arch, native


def load_config_json(source: str) -> tuple[dict[str, Any], str]:
    """A config.json from a local path, or ``REPO[@REVISION]`` fetched with huggingface-hub."""
    path = Path(source)
    if path.is_dir():
        path = path / "config.json"
    if path.is_file():
        where = str(path)
    else:
        from huggingface_hub import hf_hub_download  # noqa: PLC0415 only this path needs the hub client
        from huggingface_hub.errors import HfHubHTTPError  # noqa: PLC0415

        repo, _, revision = source.partition("@")
        try:
            where = hf_hub_download(repo, "config.json", revision=revision or None)
        except (HfHubHTTPError, OSError, ValueError) as exc:
            raise ConfigError(f"--config-json: cannot fetch config.json of {source}: {exc}") from exc
    try:
        data = json.loads(Path(where).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise ConfigError(f"--config-json: cannot read {where}: {exc}") from exc
    if not isinstance(data, dict):
        raise ConfigError(f"--config-json: {where} is not a JSON object")
    return data, where
