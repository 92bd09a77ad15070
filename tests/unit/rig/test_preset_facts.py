"""The presets' architecture figures against their public sources (docs/models.md lists them), by
what the sources derive from them: the layer pattern they state, the KV bytes per token they
compute, the checkpoint's bytes on disk. A figure no source states is left out and said so."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from bench.rig.plan_math import Setup, kv_bytes_per_token
from bench.rig.presets import Preset, load_presets
from tests.helpers import GROUP_VARS

PRESETS: dict[str, Preset] = load_presets(GROUP_VARS / "models.yml")
KIB = 1024


@dataclass(frozen=True)
class Source:
    """What the public sources say of one preset's model and checkpoint (None: no source says)."""

    layers: int
    full_every: int  # every n-th layer is full attention (full_attention_interval, Gemma's pattern)
    heads: tuple[int, int, int]  # attention heads, KV heads, head_dim
    kv_bytes_per_token_fp8: int | None  # all full-attention layers, one token, fp8, one GPU
    native_context: int | None  # config.json max_position_embeddings
    linear: tuple[int, int, int, int] | None  # DeltaNet key heads, value heads, head dim, conv kernel
    moe: bool
    mtp_layers: int
    checkpoint_bytes: int | None
    symmetric: bool | None


SOURCES = {
    # vllm-project/recipes models/Qwen/Qwen3.8-27B.yaml: 64 layers, 48 DeltaNet + 16 full
    # (full_attention_interval 4), 24 heads, 262144, mtp_num_hidden_layers 1; KV heads and
    # head_dim inferred from THUDM/slime scripts/models/qwen3.5-27B.sh; DeltaNet dimensions the
    # Qwen3.5 defaults (Modular MAX Qwen3_5Config); the recipe's arithmetic: 2 x 16 x 4 x 256 x 1
    # byte = 32 KiB at fp8. philbert440/Qwen3.8-27B-W4A16-AWQ@7908d42: 19,547,867,688 bytes in two
    # weight files, asymmetric INT4.
    "qwen3.8-27b-w4a16": Source(
        64, 4, (24, 4, 256), 32 * KIB, 262144, (16, 48, 128, 4), False, 1, 19_547_867_688, False
    ),
    # The Hub config.json of Qwen3.6-35B-A3B as quoted in feasibility notes and model cards: 40
    # layers, 30 DeltaNet + 10 full, 16 / 2 heads of 256, DeltaNet 16 key / 32 value heads of
    # 128, conv 4, 256 experts, one MTP layer. No source we have gives its max_position_embeddings,
    # the checkpoint's size, or whether its experts are symmetric.
    "qwen3.6-35b-a3b-awq": Source(40, 4, (16, 2, 256), None, None, (16, 32, 128, 4), True, 1, None, None),
    # Qwen3-32B config.json (copy in ronnywebdevs1/d-m-1; MindSpeed-RL qwen3_32b.yaml): 64 layers,
    # 64 / 8 heads of 128, max_position_embeddings 40960; 2 x 64 x 8 x 128 x 1 byte = 128 KiB at
    # fp8. Qwen3-32B-AWQ: zero_point true. No source states its size on disk.
    "qwen3-32b-awq": Source(64, 1, (64, 8, 128), 128 * KIB, 40960, None, False, 0, None, False),
    # google/gemma-3-270m config: 18 layers, sliding window 512 with full attention every 6th
    # (layers 5, 11, 17), 4 / 1 heads of 256, max_position_embeddings 32768. Served unquantized
    # by vLLM (the GGUF converted to bf16).
    "gemma3-270m": Source(18, 6, (4, 1, 256), None, 32768, None, False, 0, None, None),
}


def test_every_preset_has_its_sources() -> None:
    assert set(SOURCES) == set(PRESETS)


@pytest.mark.parametrize("name", sorted(SOURCES))
def test_layers_follow_the_pattern_the_source_states(name: str) -> None:
    """Full-attention layers are exactly the pattern's (every n-th: indices n-1, 2n-1, ...); the
    rest are DeltaNet (hybrid) or sliding-window layers."""
    source, arch = SOURCES[name], PRESETS[name].architecture
    full = [index for index in range(source.layers) if (index + 1) % source.full_every == 0]
    assert arch.layers == source.layers
    assert arch.full_attention_layers == len(full)
    if name == "gemma3-270m":
        assert full == [5, 11, 17]
    others = arch.layers - arch.full_attention_layers
    assert others == (arch.layers - len(full) if arch.hybrid or arch.sliding_window else 0)
    assert (arch.attention_heads, arch.kv_heads, arch.head_dim) == source.heads


@pytest.mark.parametrize("name", [name for name, source in SOURCES.items() if source.kv_bytes_per_token_fp8])
def test_kv_bytes_per_token_are_the_sources_arithmetic(name: str) -> None:
    """The planner's bytes per token (one GPU, fp8) over the full-attention layers equal the figure
    the source computes from layers x KV heads x head_dim."""
    arch = PRESETS[name].architecture
    setup = Setup(device="cuda", max_model_len=1, max_num_seqs=1, max_num_batched_tokens=1, kv_cache_dtype="fp8")
    assert kv_bytes_per_token(arch, setup) * arch.full_attention_layers == SOURCES[name].kv_bytes_per_token_fp8


@pytest.mark.parametrize("name", sorted(SOURCES))
def test_hybrid_moe_mtp_and_context_match_the_sources(name: str) -> None:
    source, preset = SOURCES[name], PRESETS[name]
    arch = preset.architecture
    assert arch.moe is source.moe
    assert arch.mtp_head is (source.mtp_layers > 0)
    assert arch.hybrid is (source.linear is not None)
    if source.linear is not None:
        linear = arch.linear_attention
        assert linear is not None
        assert linear.key_head_dim == linear.value_head_dim
        assert (linear.key_heads, linear.value_heads, linear.key_head_dim, linear.conv_kernel) == source.linear
    if source.native_context is not None:
        assert preset.native_context == source.native_context


@pytest.mark.parametrize("name", sorted(SOURCES))
def test_the_checkpoint_facts_match_the_sources(name: str) -> None:
    """Bytes on disk in GB (10^9) where a source gives them; zero points as the quantization_config says."""
    source, preset = SOURCES[name], PRESETS[name]
    if source.checkpoint_bytes is not None:
        assert preset.weights_gb == round(source.checkpoint_bytes / 1e9, 3)
    assert preset.quant_symmetric is source.symmetric
