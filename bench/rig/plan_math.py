"""The planner's arithmetic: vLLM's allocator, one pure function per step, on a :class:`Setup`.

The constants are vLLM's defaults and the stated assumptions (the reserve per GPU); the steps
are those :mod:`bench.rig.plan` lists and strings together: bytes per token of a full-attention
layer, a DeltaNet layer's state, the block size, the layer groups and the blocks one sequence
takes. Nothing here writes an explanation or judges a result; :mod:`bench.rig.plan` does both.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from bench.errors import PlanError
from bench.rig.presets import Architecture

GIB = 1024**3
MIB = 1024**2

# vLLM's default attention block size per device (tokens), and the kernel alignment of the
# attention backends the planner knows (CPU attention: multiples of 32; Triton and
# FlashAttention on cuda: multiples of 16).
BLOCK_SIZE = {"cuda": 16, "cpu": 128}
KERNEL_ALIGNMENT = {"cuda": 16, "cpu": 32}
# Scheduler steps in flight: cuda schedules the next step while one runs (async scheduling, on
# by default), cpu does not; sliding-window layers must keep that many batches' tokens.
BATCHES_IN_FLIGHT = {"cuda": 2, "cpu": 1}

# The reserve per GPU for what the profile run measures on the box (peak activations of a
# max_num_batched_tokens batch, sampler and persistent buffers, cuBLAS and NCCL workspaces) and
# for CUDA graphs. An assumption, from vLLM's own profile on 16 GB cards (1-1.5 GB, more with
# MTP); ``--reserve-gib`` overrides it and ``--check`` measures how far off it was.
RESERVE_EAGER_GIB = 1.25
RESERVE_CUDA_GRAPHS_GIB = 0.5
RESERVE_MTP_GIB = 0.25

KV_DTYPE_BYTES = {"auto": 2, "bfloat16": 2, "float16": 2, "fp8": 1, "fp8_e4m3": 1, "fp8_e5m2": 1}
STATE_DTYPE_BYTES = {"float32": 4, "bfloat16": 2}
MODEL_DTYPE_BYTES = 2  # every preset runs bf16 activations (the DeltaNet conv state too)


@dataclass(frozen=True, slots=True)
class Setup:
    """The knobs that decide the pool; names follow the vllm_* variables."""

    device: str  # cuda | cpu
    max_model_len: int
    max_num_seqs: int
    max_num_batched_tokens: int
    tensor_parallel_size: int = 1
    kv_cache_dtype: str = "auto"
    gpus: int = 0
    gpu_memory_mib: int = 0  # total memory of one GPU (nvidia-smi memory.total)
    gpu_memory_utilization: float = 0.9
    weights_gb: float = 0.0  # checkpoint bytes (10^9) across all GPUs, vision tower excluded
    mtp_tokens: int = 0  # speculative tokens per step; 0 = MTP off
    prefix_caching: bool = True
    enforce_eager: bool = True
    cpu_kvcache_space_gib: int = 1
    kv_cache_memory_bytes: int | None = None
    reserve_gib: float | None = None  # None = the stated assumption


@dataclass(frozen=True, slots=True)
class Group:
    """One KV cache group of vLLM's allocator."""

    kind: str  # full | sliding | linear
    layers: int
    blocks_per_sequence: int


def cdiv(a: int, b: int) -> int:
    """Ceiling division, as vLLM's ``cdiv``."""
    return -(a // -b)


def kv_bytes_per_token(arch: Architecture, setup: Setup) -> int:
    """Bytes of K and V for one token of one full-attention layer on one GPU."""
    try:
        dtype = KV_DTYPE_BYTES[setup.kv_cache_dtype]
    except KeyError as exc:
        known = ", ".join(KV_DTYPE_BYTES)
        raise PlanError(f"vllm_kv_cache_dtype: the planner knows {known}; got {setup.kv_cache_dtype!r}") from exc
    # KV heads are split across GPUs; with fewer heads than GPUs each GPU keeps a copy of one.
    return 2 * max(1, arch.kv_heads // setup.tensor_parallel_size) * arch.head_dim * dtype


def state_bytes(arch: Architecture, setup: Setup) -> int:
    """Bytes of one Gated DeltaNet layer's state for one sequence on one GPU (conv + recurrent)."""
    linear = arch.linear_attention
    if linear is None:
        return 0
    tp = setup.tensor_parallel_size
    conv_dim = linear.key_head_dim * linear.key_heads * 2 + linear.value_head_dim * linear.value_heads
    if conv_dim % tp or linear.value_heads % tp:
        raise PlanError(f"vllm_tensor_parallel_size: {tp} does not divide the DeltaNet heads of this model")
    conv = conv_dim // tp * (linear.conv_kernel - 1 + setup.mtp_tokens) * MODEL_DTYPE_BYTES
    recurrent = linear.value_heads // tp * linear.value_head_dim * linear.key_head_dim
    return conv + recurrent * STATE_DTYPE_BYTES[linear.state_dtype]


def block_size(arch: Architecture, setup: Setup) -> int:
    """vLLM's attention block size: the device default, raised for hybrids to hold a state."""
    base = BLOCK_SIZE[setup.device]
    if arch.linear_attention is None:
        return base
    align = max(KERNEL_ALIGNMENT[setup.device], base)
    raised = align * cdiv(state_bytes(arch, setup), align * kv_bytes_per_token(arch, setup))
    raised = KERNEL_ALIGNMENT[setup.device] * cdiv(raised, KERNEL_ALIGNMENT[setup.device])
    return max(base, raised)


def layer_buckets(arch: Architecture, setup: Setup) -> dict[str, int]:
    """Layers per kind; an MTP head adds one full-attention layer while MTP is on."""
    full = arch.full_attention_layers + (1 if setup.mtp_tokens and arch.mtp_head else 0)
    rest = arch.layers - arch.full_attention_layers
    kinds = {"full": full, "linear": rest if arch.linear_attention else 0}
    kinds["sliding"] = rest if not arch.linear_attention and arch.sliding_window else 0
    return {kind: count for kind, count in kinds.items() if count}


def group_size(buckets: dict[str, int]) -> int:
    """Layers per group: all of them when one kind, else vLLM's min/max rule."""
    if len(buckets) == 1:
        return next(iter(buckets.values()))
    smallest, largest = min(buckets.values()), max(buckets.values())
    return largest if largest < 1.5 * smallest else smallest


def blocks_per_sequence(kind: str, arch: Architecture, setup: Setup, block: int, length: int) -> int:
    """Blocks one sequence of ``length`` tokens takes in one group of ``kind``."""
    if kind == "full":
        return cdiv(length, block)
    if kind == "sliding":
        in_flight = BATCHES_IN_FLIGHT[setup.device] * setup.max_num_batched_tokens
        return cdiv(min(arch.sliding_window - 1 + in_flight, length), block) + 1
    # DeltaNet: with prefix caching ("align" mode) a running and a cached state, plus one per
    # speculative token.
    return (2 if setup.prefix_caching else 1) + setup.mtp_tokens


def reserve_bytes(setup: Setup) -> int:
    """The stated (or given) reserve per GPU for activations, buffers and CUDA graphs."""
    if setup.reserve_gib is not None:
        return int(setup.reserve_gib * GIB)
    gib = RESERVE_EAGER_GIB
    gib += 0 if setup.enforce_eager else RESERVE_CUDA_GRAPHS_GIB
    gib += RESERVE_MTP_GIB if setup.mtp_tokens else 0
    return int(gib * GIB)


def capacity(
    arch: Architecture, setup: Setup, *, buckets: dict[str, int], size: int, block: int, length: int
) -> tuple[list[Group], int]:
    """The groups, and the blocks one sequence of ``length`` tokens takes across them."""
    # vLLM deals a bucket's layers round-robin into cdiv(count, size) groups (layers[i::n]); a
    # smaller group is padded to ``size`` in memory.
    groups = [
        Group(kind, cdiv(count - index, cdiv(count, size)), blocks_per_sequence(kind, arch, setup, block, length))
        for kind, count in buckets.items()
        for index in range(cdiv(count, size))
    ]
    return groups, sum(group.blocks_per_sequence for group in groups)


def largest_len(fits: int, low: int, high: int, need: Callable[[int], int]) -> int:
    """The largest length in [low, high] for which ``need(length) <= fits`` (0 when none)."""
    if need(low) > fits:
        return 0
    while low < high:
        middle = (low + high + 1) // 2
        if need(middle) <= fits:
            low = middle
        else:
            high = middle - 1
    return low
