"""Rules on knobs that only make sense together: vLLM-only settings while another engine serves
(a warning: they have no effect), the GPUs CUDA_VISIBLE_DEVICES leaves to vLLM's parallelism, and
the watchdog's probe timeout within its interval."""

from __future__ import annotations

from bench.rig.presets import Preset
from bench.rig.problems import Problem
from bench.rig.rules.knobs import Host, Knobs, as_bool, as_int, as_str, err, serves_vllm

# vLLM settings that are off by default and that no other engine reads: set while another engine
# serves, they do nothing (an operator may think they do).
VLLM_ONLY_SETTINGS = (
    "vllm_mtp",
    "vllm_rope_override",
    "vllm_default_chat_template_kwargs",
    "vllm_kv_cache_memory_bytes",
    "vllm_model_local_dir",
    "vllm_extra_args",
    "vllm_extra_env",
)


def rule_vllm_only_settings(knobs: Knobs, host: Host, device: str, preset: Preset) -> list[Problem]:
    """A warning for each vLLM-only setting that is on while another engine serves."""
    engine = as_str(knobs, "inference_engine")
    if serves_vllm(knobs):
        return []
    set_ones = [
        name for name in VLLM_ONLY_SETTINGS if (as_bool(knobs, name) if name == "vllm_mtp" else knobs.get(name))
    ]
    return [
        Problem(name, f"is set, but only vLLM reads it and inference_engine is {engine}: it has no effect", "warning")
        for name in set_ones
    ]


def rule_visible_devices(knobs: Knobs, host: Host, device: str, preset: Preset) -> list[Problem]:
    """CUDA_VISIBLE_DEVICES in vllm_extra_env lists at least tensor x pipeline parallel GPUs."""
    env = knobs.get("vllm_extra_env")
    visible = env.get("CUDA_VISIBLE_DEVICES") if isinstance(env, dict) else None
    tp, pp = as_int(knobs, "vllm_tensor_parallel_size") or 1, as_int(knobs, "vllm_pipeline_parallel_size") or 1
    if visible is None or not serves_vllm(knobs) or device != "cuda":
        return []
    listed = [item for item in str(visible).split(",") if item.strip()]
    if len(listed) < tp * pp:
        return err(
            "vllm_extra_env",
            f"CUDA_VISIBLE_DEVICES lists {len(listed)} GPU(s), tensor x pipeline parallel needs {tp * pp}",
        )
    return []


def rule_watchdog_timing(knobs: Knobs, host: Host, device: str, preset: Preset) -> list[Problem]:
    """One watchdog probe ends by the time the next is due."""
    timeout, interval = as_int(knobs, "watchdog_check_timeout_s"), as_int(knobs, "watchdog_interval_s")
    if timeout is not None and interval is not None and timeout > interval:
        return err(
            "watchdog_check_timeout_s",
            f"{timeout} is longer than watchdog_interval_s ({interval}): a probe would outlast it",
        )
    return []
