"""Rules on the knobs against the host: the OS, the GPUs found (parallelism, fp8 KV, GPU-only
settings), the disk, the RAM of the cpu device, and the KV plan. Those tied to the hardware
apply only while vLLM is the engine."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from bench.errors import PlanError
from bench.rig.plan import plan
from bench.rig.plan_inputs import setup_from_knobs
from bench.rig.presets import Preset
from bench.rig.problems import Problem
from bench.rig.rules.knobs import GIB, Host, Knobs, as_int, as_str, err, gpus, positive, serves_vllm

FP8_KV_MIN_CC = (8, 9)
CPU_KV_DTYPES = ("auto", "bfloat16", "float16")
SIZE_RE = re.compile(r"^[0-9]+(\.[0-9]+)?[KMGTkmgt]?$")


def rule_host_os(knobs: Knobs, host: Host, device: str, preset: Preset) -> list[Problem]:
    """The host runs a Debian-family OS (Ubuntu 24.04 on the GPU box; Debian 12 in tests)."""
    os_facts = host.get("os") or {}
    family = str(os_facts.get("family", ""))
    if family != "debian":
        return err(
            "inventory",
            f"{os_facts.get('pretty_name', 'this OS')} is not Debian-family; llmrig "
            "installs with apt and supports Ubuntu 24.04 (Debian 12 for tests)",
        )
    return []


def rule_parallelism(knobs: Knobs, host: Host, device: str, preset: Preset) -> list[Problem]:
    """Tensor x pipeline parallel fits the GPUs found and divides the attention heads."""
    tp, bad_tp = positive(knobs, "vllm_tensor_parallel_size")
    pp, bad_pp = positive(knobs, "vllm_pipeline_parallel_size")
    if bad_tp or bad_pp:
        return bad_tp + bad_pp
    if not serves_vllm(knobs):
        return []
    if device == "cpu" and tp * pp != 1:
        return err(
            "vllm_tensor_parallel_size",
            f"is {tp} (pipeline {pp}) but the cpu device runs one "
            "process; set vllm_tensor_parallel_size: 1 and vllm_pipeline_parallel_size: 1",
        )
    found = len(gpus(host))
    if device == "cuda" and tp * pp > found:
        return err(
            "vllm_tensor_parallel_size",
            f"{tp} x vllm_pipeline_parallel_size {pp} needs {tp * pp} GPUs "
            f"but {found} were found; lower vllm_tensor_parallel_size to {max(found // pp, 1)}",
        )
    return _heads_problems(tp, preset)


def _heads_problems(tp: int, preset: Preset) -> list[Problem]:
    """vLLM shards every head count over the tensor-parallel ranks: the query heads and the
    linear-attention key and value heads of a hybrid are split, so ``tp`` divides them; KV heads
    are split when there are at least ``tp`` of them and replicated otherwise, so one of the two
    divides the other (vLLM's own check)."""
    arch = preset.architecture
    counts = [("attention heads", arch.attention_heads)]
    if arch.linear_attention is not None:
        counts += [
            ("linear-attention key heads", arch.linear_attention.key_heads),
            ("linear-attention value heads", arch.linear_attention.value_heads),
        ]
    for what, count in counts:
        if count % tp:
            return err("vllm_tensor_parallel_size", f"{tp} does not divide the {count} {what} of {preset.name}")
    kv = arch.kv_heads
    if kv % tp and tp % kv:
        return err(
            "vllm_tensor_parallel_size",
            f"{tp} and the {kv} KV heads of {preset.name} do not divide one another (vLLM splits or replicates them)",
        )
    return []


def rule_kv_cache_dtype(knobs: Knobs, host: Host, device: str, preset: Preset) -> list[Problem]:
    """fp8 KV cache only on GPUs that have fp8 attention kernels (compute capability 8.9+)."""
    dtype = as_str(knobs, "vllm_kv_cache_dtype")
    if not serves_vllm(knobs):
        return []
    if device == "cpu":
        if dtype not in CPU_KV_DTYPES:
            return err("vllm_kv_cache_dtype", f"{dtype!r} is not supported by the cpu device; use auto")
        return []
    if not dtype.startswith("fp8"):
        return []
    for gpu in gpus(host):
        cc = str(gpu.get("compute_capability") or "")
        match = re.fullmatch(r"(\d+)\.(\d+)", cc)
        if match is None:
            return [
                Problem(
                    "vllm_kv_cache_dtype",
                    f"compute capability of {gpu.get('name')} is unknown, so fp8 KV support is unchecked",
                    "warning",
                )
            ]
        if (int(match[1]), int(match[2])) < FP8_KV_MIN_CC:
            return err(
                "vllm_kv_cache_dtype",
                f"{dtype} needs compute capability 8.9 or newer but {gpu.get('name')} is {cc}; use auto",
            )
    if as_str(knobs, "vllm_attention_backend") == "FLASH_ATTN":
        return err(
            "vllm_attention_backend",
            f"FLASH_ATTN cannot read a {dtype} KV cache on these GPUs; use "
            "TRITON_ATTN (or set vllm_kv_cache_dtype: auto)",
        )
    return []


def rule_device_flags(knobs: Knobs, host: Host, device: str, preset: Preset) -> list[Problem]:
    """GPU-only settings stay off the cpu device; memory settings are in range."""
    problems: list[Problem] = []
    if device == "cpu" and serves_vllm(knobs) and as_str(knobs, "vllm_attention_backend"):
        problems += err("vllm_attention_backend", "is a CUDA attention backend; leave it empty on the cpu device")
    try:
        utilization = float(knobs.get("vllm_gpu_memory_utilization", 0))
    except (TypeError, ValueError):
        utilization = -1.0
    if not 0 < utilization <= 1:
        problems += err(
            "vllm_gpu_memory_utilization",
            f"must be above 0 and at most 1, got {knobs.get('vllm_gpu_memory_utilization')!r}",
        )
    elif utilization > 0.95:
        problems.append(
            Problem(
                "vllm_gpu_memory_utilization",
                f"{utilization} leaves almost no room for the MTP and sampler workspace that the profiler misses",
                "warning",
            )
        )
    size = as_str(knobs, "vllm_kv_cache_memory_bytes")
    if size and not SIZE_RE.match(size):
        problems += err("vllm_kv_cache_memory_bytes", f"{size!r} is not a size such as 4G (GiB) or 4000000000")
    return problems


def rule_cpu_memory(knobs: Knobs, host: Host, device: str, preset: Preset) -> list[Problem]:
    """On the cpu device, weights plus the KV space fit in RAM."""
    if device != "cpu" or not serves_vllm(knobs):
        return []
    total = (host.get("memory") or {}).get("total_bytes")
    space, bad_space = positive(knobs, "vllm_cpu_kvcache_space_gib")
    if bad_space:
        return bad_space
    # bf16 weights are about twice the size of the 4-bit GGUF they are converted from.
    need = preset.weights_gb * 2e9 + space * GIB
    if isinstance(total, int) and need > total * 0.8:
        return err(
            "vllm_cpu_kvcache_space_gib",
            f"{space} GiB of KV space plus the weights needs "
            f"{need / GIB:.1f} GiB, over 80% of the {total / GIB:.1f} GiB of RAM; lower it",
        )
    return []


def disk_problem(disk: Mapping[str, Any], weights_gb: float, headroom_gib: int, name: str) -> Problem | None:
    """The one disk rule, for preflight and for the vllm role just before a download: the
    models directory's free bytes plus the bytes already in it (``used_bytes``, so a resumed
    partial download counts) must hold the weights plus ``headroom_gib``. None when they do."""
    free, used = disk.get("free_bytes"), disk.get("used_bytes") or 0
    if not isinstance(free, int):
        return Problem("llmrig_models_dir", "free space could not be measured", "warning")
    need = int(weights_gb * 1e9) + headroom_gib * GIB
    if free + int(used) >= need:
        return None
    return Problem(
        "llmrig_models_dir",
        f"{disk.get('path')} has {free / GIB:.1f} GiB free and {int(used) / GIB:.1f} GiB already there, but "
        f"{name} needs {need / GIB:.1f} GiB (weights plus llmrig_disk_headroom_gib); point llmrig_models_dir "
        "at a larger disk",
    )


def rule_disk(knobs: Knobs, host: Host, device: str, preset: Preset) -> list[Problem]:
    """The models directory has room for the weights (what is already there counts)."""
    headroom = as_int(knobs, "llmrig_disk_headroom_gib") or 0
    problem = disk_problem(host.get("disk") or {}, preset.weights_gb, headroom, preset.name)
    return [problem] if problem else []


def _plannable(knobs: Knobs, host: Host, device: str, preset: Preset) -> bool:
    """The knobs the planner reads are sane; otherwise the other rules report them."""
    numbers = [
        as_int(knobs, name) for name in ("vllm_max_model_len", "vllm_max_num_seqs", "vllm_max_num_batched_tokens")
    ]
    tp, pp = as_int(knobs, "vllm_tensor_parallel_size") or 0, as_int(knobs, "vllm_pipeline_parallel_size") or 0
    if any(value is None or value < 1 for value in numbers) or tp < 1 or pp < 1:
        return False
    if preset.architecture.attention_heads % tp:
        return False
    return tp * pp <= len(gpus(host)) if device == "cuda" else tp * pp == 1


def rule_kv_plan(knobs: Knobs, host: Host, device: str, preset: Preset) -> list[Problem]:
    """The KV planner (bench/rig/plan.py): one sequence of vllm_max_model_len must fit, max_num_seqs should."""
    if not serves_vllm(knobs) or not _plannable(knobs, host, device, preset):
        return []
    found = gpus(host) if device == "cuda" else []
    try:
        setup = setup_from_knobs(knobs, device, preset.weights_gb, found)
        if device == "cuda" and not setup.gpu_memory_mib and not setup.kv_cache_memory_bytes:
            return [
                Problem("vllm_kv_cache_memory_bytes", "the GPUs' memory is unknown, so there is no KV plan", "warning")
            ]
        result = plan(preset.architecture, setup, preset.native_context)
    except PlanError as exc:
        variable, _, message = str(exc).partition(": ")
        return [Problem(variable, f"no KV plan: {message}", "warning")]
    summary = (
        f"KV plan: {result.pool_tokens:,} tokens, {result.concurrency:.2f} sequences of {setup.max_model_len:,} "
        f"(blocks of {result.block_size:,} tokens); `bench plan` prints the arithmetic"
    )
    findings = [Problem("vllm_max_model_len", summary, "info")]
    return findings + result.problems
