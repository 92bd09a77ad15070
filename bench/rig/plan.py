"""The KV planner: vLLM's KV pool, predicted before the box spends minutes loading a model.

It follows vLLM's own arithmetic (v1 ``kv_cache_utils``, the hybrid block alignment of
``platforms/interface.py`` and the workers' memory budget), step by step, and keeps every step
as a printable line so an operator can check it:

1. memory for the KV cache per GPU: ``ceil(total x gpu_memory_utilization)`` minus the weights
   on that GPU minus a stated reserve for activations (and CUDA graphs when they are on); on the
   cpu device exactly ``VLLM_CPU_KVCACHE_SPACE`` GiB; ``--kv-cache-memory-bytes`` when set;
2. bytes per token of one full-attention layer on one GPU: ``2 x KV heads per GPU x head_dim x
   dtype bytes`` (fp8 = 1); a Gated DeltaNet layer holds a fixed state per sequence instead;
3. the block size: 16 tokens on cuda, 128 on cpu, raised for hybrids until one attention page
   holds a whole DeltaNet state;
4. layers grouped as vLLM's hybrid allocator groups them (full attention, sliding window and
   DeltaNet layers never share a group), ``bytes per block = group size x page``;
5. ``blocks = KV memory // bytes per block``; one sequence of ``max_model_len`` needs
   ``cdiv(max_model_len, block)`` blocks per full-attention group, ``cdiv(min(window - 1 +
   in-flight tokens, max_model_len), block) + 1`` per sliding-window group, and ``2 + k`` state
   blocks per DeltaNet group (1 + k without prefix caching; k speculative tokens);
6. ``concurrency = blocks / blocks per sequence``; ``KV pool = int(concurrency x max_model_len)``
   tokens, the figure vLLM logs as "KV cache size".

On the cpu device nothing is estimated, so the prediction is exact. On cuda the reserve is an
assumption (:data:`RESERVE_EAGER_GIB` and friends): ``bench plan --check`` compares the
prediction with the pool the engine reported in deployment.json and prints the error.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

from bench.errors import ConfigError
from bench.rig.presets import Architecture
from bench.rig.problems import Problem

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


class PlanError(ConfigError):
    """A setting the planner cannot model (the message names the variable)."""


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


@dataclass
class Plan:
    """The prediction and the arithmetic that led to it."""

    setup: Setup
    kv_memory_bytes: int
    block_size: int
    page_bytes: int
    groups: list[Group]
    bytes_per_block: int
    num_blocks: int
    blocks_per_sequence: int
    concurrency: float
    pool_tokens: int
    largest_max_model_len: int  # that still holds one sequence
    largest_len_for_all_seqs: int  # that still holds max_num_seqs sequences
    lines: list[tuple[str, str]] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)

    @property
    def verdict(self) -> str:
        """``fails``, ``tight`` (warnings) or ``fits``."""
        severities = {problem.severity for problem in self.problems}
        return "fails" if "error" in severities else "tight" if severities else "fits"

    @property
    def reported_block_size(self) -> int:
        """The block size vLLM reports (/metrics cache_config_info): the smallest block of the groups that take
        part in prefix caching. Without prefix caching a hybrid's DeltaNet block is max_model_len."""
        hybrid = any(group.kind == "linear" for group in self.groups)
        if hybrid and not self.setup.prefix_caching:
            return min(self.block_size, self.setup.max_model_len)
        return self.block_size

    @property
    def full_sequences(self) -> int:
        """Whole sequences of max_model_len that the pool holds at once."""
        return math.floor(self.concurrency)


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


def kv_memory(setup: Setup, lines: list[tuple[str, str]]) -> int:
    """Bytes for the KV cache on one GPU (or the cpu device), with the lines that explain them."""
    if setup.device == "cpu":
        value = setup.cpu_kvcache_space_gib * GIB
        lines.append(("KV memory", f"VLLM_CPU_KVCACHE_SPACE {setup.cpu_kvcache_space_gib} GiB = {value:,} B (exact)"))
        return value
    if setup.kv_cache_memory_bytes:
        value = setup.kv_cache_memory_bytes
        lines.append(("KV memory", f"--kv-cache-memory-bytes = {value:,} B per GPU ({value / GIB:.2f} GiB)"))
        return value
    if setup.gpu_memory_mib <= 0:
        raise PlanError("gpu memory: unknown; pass --gpu-memory-mib (nvidia-smi memory.total)")
    budget = math.ceil(setup.gpu_memory_mib * MIB * setup.gpu_memory_utilization)
    weights = int(setup.weights_gb * 1e9 / setup.tensor_parallel_size)
    reserve = reserve_bytes(setup)
    how = "given" if setup.reserve_gib is not None else "assumed: activations and buffers"
    if setup.reserve_gib is None:
        how += ", CUDA graphs" if not setup.enforce_eager else " (eager, no CUDA graphs)"
        how += ", MTP" if setup.mtp_tokens else ""
    lines += [
        (
            "GPU budget",
            f"{setup.gpu_memory_mib:,} MiB x {setup.gpu_memory_utilization} utilization = {budget / GIB:.2f} GiB",
        ),
        (
            "weights",
            f"{setup.weights_gb} GB / TP {setup.tensor_parallel_size} = {weights / GIB:.2f} GiB per GPU",
        ),
        ("reserve", f"{reserve / GIB:.2f} GiB per GPU ({how})"),
    ]
    value = budget - weights - reserve
    lines.append(
        ("KV memory", f"{budget / GIB:.2f} - {weights / GIB:.2f} - {reserve / GIB:.2f} = {value / GIB:.2f} GiB per GPU")
    )
    if value <= 0:
        raise PlanError(
            f"vllm_gpu_memory_utilization: {setup.gpu_memory_utilization} of {setup.gpu_memory_mib} MiB leaves no "
            "memory for the KV cache after the weights; add GPUs (vllm_tensor_parallel_size) or raise it"
        )
    return value


def _capacity(
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


def plan(arch: Architecture, setup: Setup, native_context: int) -> Plan:
    """Predict the KV pool of ``arch`` served with ``setup``, and judge it."""
    if setup.device not in BLOCK_SIZE:
        raise PlanError(f"vllm_device: the planner knows cuda and cpu; got {setup.device!r}")
    lines: list[tuple[str, str]] = []
    memory = kv_memory(setup, lines)
    per_token = kv_bytes_per_token(arch, setup)
    heads = max(1, arch.kv_heads // setup.tensor_parallel_size)
    dtype = KV_DTYPE_BYTES[setup.kv_cache_dtype]
    lines.append(
        (
            "attention KV",
            f"2 x {heads} KV heads per GPU x {arch.head_dim} head_dim x {dtype} B ({setup.kv_cache_dtype})"
            f" = {per_token:,} B per token per full-attention layer",
        )
    )
    block = block_size(arch, setup)
    state = state_bytes(arch, setup)
    if arch.linear_attention:
        linear = arch.linear_attention
        lines.append(
            (
                "DeltaNet state",
                f"conv ({linear.key_head_dim} x {linear.key_heads} x 2 + {linear.value_head_dim} x "
                f"{linear.value_heads}) / TP x {linear.conv_kernel - 1 + setup.mtp_tokens} x 2 B + recurrent "
                f"{linear.value_heads} / TP x {linear.value_head_dim} x {linear.key_head_dim} x "
                f"{STATE_DTYPE_BYTES[linear.state_dtype]} B = {state:,} B per layer per sequence",
            )
        )
        lines.append(
            (
                "block size",
                f"raised from {BLOCK_SIZE[setup.device]} to {block:,} tokens so one attention page "
                f"({block:,} x {per_token:,} B) holds a DeltaNet state",
            )
        )
    else:
        lines.append(("block size", f"{block} tokens (vLLM's default on {setup.device})"))
    page = block * per_token
    buckets = layer_buckets(arch, setup)
    size = group_size(buckets)
    bytes_per_block = size * page
    blocks = memory // bytes_per_block
    groups, per_sequence = _capacity(arch, setup, buckets=buckets, size=size, block=block, length=setup.max_model_len)
    counts = ", ".join(f"{count} {kind}" for kind, count in buckets.items())
    lines += [
        ("page", f"{block:,} x {per_token:,} B = {page:,} B"),
        ("groups", f"layers {counts}: group size {size} -> {len(groups)} groups"),
        ("bytes per block", f"{size} x {page:,} B = {bytes_per_block:,} B"),
        ("blocks", f"{memory:,} B // {bytes_per_block:,} B = {blocks:,}"),
        (
            "per sequence",
            " + ".join(f"{group.kind} {group.blocks_per_sequence}" for group in groups)
            + f" = {per_sequence:,} blocks for {setup.max_model_len:,} tokens",
        ),
    ]
    concurrency = blocks / per_sequence if per_sequence else 0.0
    pool = int(concurrency * setup.max_model_len)
    lines += [
        ("concurrency", f"{blocks:,} / {per_sequence:,} = {concurrency:.2f} sequences of {setup.max_model_len:,}"),
        ("KV pool", f"int({concurrency:.4f} x {setup.max_model_len:,}) = {pool:,} tokens"),
    ]

    def need(length: int) -> int:
        return _capacity(arch, setup, buckets=buckets, size=size, block=block, length=length)[1]

    # vLLM's start-up check keeps one block back (the null block).
    one = largest_len(blocks - 1, 1, native_context, need)
    seqs = setup.max_num_seqs
    all_seqs = largest_len(blocks, 1, native_context, lambda length: need(length) * seqs)
    result = Plan(
        setup, memory, block, page, groups, bytes_per_block, blocks, per_sequence, concurrency, pool, one, all_seqs
    )
    result.lines = lines
    result.problems = judge(arch, setup, result)
    return result


def judge(arch: Architecture, setup: Setup, result: Plan) -> list[Problem]:
    """What cannot start, and what starts but cannot hold what it promises."""
    problems: list[Problem] = []
    length, seqs = setup.max_model_len, setup.max_num_seqs
    if result.num_blocks - 1 < result.blocks_per_sequence:
        hint = f"the largest that fits is {result.largest_max_model_len:,}" if result.largest_max_model_len else ""
        fix = (
            "vllm_kv_cache_memory_bytes or vllm_gpu_memory_utilization"
            if setup.device == "cuda"
            else "vllm_cpu_kvcache_space_gib"
        )
        problems.append(
            Problem(
                "vllm_max_model_len",
                f"{length:,} tokens need {result.blocks_per_sequence:,} blocks but the pool has "
                f"{result.num_blocks:,}: vLLM refuses to start; lower it ({hint or 'nothing fits'}) or give the "
                f"KV cache more memory ({fix})",
                "error",
            )
        )
    elif result.concurrency < seqs:
        problems.append(
            Problem(
                "vllm_max_num_seqs",
                f"{seqs} sequences of {length:,} tokens need {seqs * length:,} tokens but the pool holds "
                f"{result.pool_tokens:,} ({result.concurrency:.2f} sequences); long requests will queue or be "
                f"preempted; {seqs} full sequences fit up to vllm_max_model_len {result.largest_len_for_all_seqs:,}",
                "warning",
            )
        )
    if arch.linear_attention and result.block_size > setup.max_num_batched_tokens:
        problems.append(
            Problem(
                "vllm_max_num_batched_tokens",
                f"{setup.max_num_batched_tokens} is below the hybrid block size {result.block_size}; vLLM asserts "
                f"at start-up; raise it to at least {result.block_size}",
                "error",
            )
        )
    linear_groups = [group for group in result.groups if group.kind == "linear"]
    if linear_groups:
        state_slots = result.num_blocks // sum(group.blocks_per_sequence for group in linear_groups)
        if state_slots < seqs:
            problems.append(
                Problem(
                    "vllm_max_num_seqs",
                    f"{seqs} exceeds the {state_slots} DeltaNet state slots the pool holds; "
                    + (
                        "the scheduler admits fewer at once"
                        if setup.enforce_eager
                        else "CUDA graph capture fails at start-up; lower it"
                    ),
                    "warning" if setup.enforce_eager else "error",
                )
            )
    return problems
