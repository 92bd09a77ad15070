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

Each step's arithmetic is a function of :mod:`bench.rig.plan_math`; this module strings them
together, writes the lines and judges the result (:func:`judge`).

On the cpu device nothing is estimated, so the prediction is exact. On cuda the reserve is an
assumption (:data:`~bench.rig.plan_math.RESERVE_EAGER_GIB` and friends): ``bench plan --check``
compares the prediction with the pool the engine reported in deployment.json and prints the
error.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from bench.errors import PlanError
from bench.rig.plan_math import (
    BLOCK_SIZE,
    GIB,
    KV_DTYPE_BYTES,
    MIB,
    STATE_DTYPE_BYTES,
    Group,
    Setup,
    block_size,
    capacity,
    group_size,
    kv_bytes_per_token,
    largest_len,
    layer_buckets,
    reserve_bytes,
    state_bytes,
)
from bench.rig.presets import Architecture
from bench.rig.problems import Problem

# The planner's face: the inputs and errors of plan_math travel with the plan they produce.
__all__ = ["GIB", "Group", "Plan", "PlanError", "Setup", "judge", "kv_memory", "plan"]


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
    groups, per_sequence = capacity(arch, setup, buckets=buckets, size=size, block=block, length=setup.max_model_len)
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
        return capacity(arch, setup, buckets=buckets, size=size, block=block, length=length)[1]

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
        fit = (
            f"{seqs} full sequences fit up to vllm_max_model_len {result.largest_len_for_all_seqs:,}"
            if result.largest_len_for_all_seqs
            else f"not even {seqs} sequences of one block fit; lower vllm_max_num_seqs"
        )
        problems.append(
            Problem(
                "vllm_max_num_seqs",
                f"{seqs} sequences of {length:,} tokens need {seqs * length:,} tokens but the pool holds "
                f"{result.pool_tokens:,} ({result.concurrency:.2f} sequences); long requests will queue or be "
                f"preempted; {fit}",
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
        problems += _state_problems(setup, result, sum(group.blocks_per_sequence for group in linear_groups))
    return problems


def _state_problems(setup: Setup, result: Plan, state_blocks: int) -> list[Problem]:
    """A hybrid's DeltaNet states against vllm_max_num_seqs. With CUDA graphs vLLM 0.32 raises
    "max_num_seqs (N) exceeds available Mamba cache blocks (M)" when N > M, the pool's blocks
    (``CompilationConfig.resolve_cudagraph_mode_and_sizes``); eager, nothing is checked. Either way
    the pool holds the states of ``blocks // state_blocks`` running sequences at most."""
    seqs, blocks = setup.max_num_seqs, result.num_blocks
    if not setup.enforce_eager and seqs > blocks:
        return [
            Problem(
                "vllm_max_num_seqs",
                f"{seqs} exceeds the {blocks:,} blocks of the KV pool; with CUDA graphs vLLM refuses to start "
                f'("exceeds available Mamba cache blocks"); lower it to at most {blocks:,}',
                "error",
            )
        ]
    slots = blocks // state_blocks
    if seqs > slots:
        return [
            Problem(
                "vllm_max_num_seqs",
                f"{seqs} exceeds the {slots} sequences whose DeltaNet states the pool holds ({blocks:,} blocks // "
                f"{state_blocks} state blocks each); the scheduler admits at most {slots} at once",
                "warning",
            )
        ]
    return []
