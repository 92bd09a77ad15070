"""`ansible-playbook playbooks/preflight.yml` (the first stage of site.yml) against localhost: bad
configurations stop before any change, naming the variable; good ones run preflight to completion. Real Ansible, real
argument specs, real filter plugin; GPUs come from protocol fakes of nvidia-smi and lspci."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import run_playbook

# site.yml runs this first; later stages install software, which these tests must not do here.
PREFLIGHT = "playbooks/preflight.yml"

pytestmark = pytest.mark.ansible

BAD = [
    # Types and choices, caught by the argument specs.
    ("cpu", {"vllm_max_num_seqs": "many"}, "vllm_max_num_seqs"),
    ("cpu", {"inference_engine": "docker"}, "inference_engine"),
    ("cpu", {"vllm_mtp": "maybe"}, "vllm_mtp"),
    ("cpu", {"vllm_extra_args": {"--foo": 1}}, "vllm_extra_args"),
    ("cpu", {"vllm_gpu_memory_utilization": "high"}, "vllm_gpu_memory_utilization"),
    ("gpu", {"vllm_kv_cache_dtype": "fp4"}, "vllm_kv_cache_dtype"),
    ("gpu", {"ollama_kv_cache_type": "q2_k"}, "ollama_kv_cache_type"),
    # Cross-field rules, caught by the llmrig_resolve / llmrig_check filters.
    ("cpu", {"model": "llama-70b"}, "model"),
    ("cpu", {"vllm_device": "cuda"}, "vllm_device"),
    (
        "cpu",
        {"model_presets": {"gemma3-270m": {"family": "gemma3"}}, "model": "gemma3-270m"},
        "model_presets.gemma3-270m",
    ),
    ("gpu", {"vllm_tensor_parallel_size": 4}, "vllm_tensor_parallel_size"),
    ("gpu", {"vllm_tool_call_parser": "hermes"}, "vllm_tool_call_parser"),
    ("gpu", {"vllm_reasoning_parser": "deepseek_r1"}, "vllm_reasoning_parser"),
    ("gpu", {"vllm_quantization": "awq_marlin"}, "vllm_quantization"),
    ("gpu", {"vllm_max_num_batched_tokens": 2048}, "vllm_max_num_batched_tokens"),
    ("gpu", {"model": "qwen3-32b-awq", "vllm_mtp": True}, "vllm_mtp"),
    ("gpu", {"vllm_max_model_len": 524288}, "vllm_max_model_len"),
    # The KV plan: one 262,144-token sequence needs more than 0.8 of two 16 GB cards leave.
    ("gpu", {"vllm_max_model_len": 262144, "vllm_gpu_memory_utilization": 0.8}, "vllm_max_model_len"),
    ("gpu", {"llmrig_disk_headroom_gib": 10000000}, "llmrig_models_dir"),
    ("gpu", {"open_webui_port": 8000}, "open_webui_port"),
    ("cpu", {"vllm_kv_cache_dtype": "fp8"}, "vllm_kv_cache_dtype"),
    ("gpu-cc86", {}, "vllm_kv_cache_dtype"),
    ("cpu", {"model": "qwen3.8-27b-w4a16"}, "model"),
    ("gpu", {"vllm_host": "0.0.0.0", "llmrig_allowed_client_cidrs": []}, "llmrig_allowed_client_cidrs"),
    ("gpu", {"inference_engine": "llamacpp"}, "model"),
    # The NVIDIA driver: a type the spec refuses, and the branch floor.
    ("cpu", {"nvidia_driver_source": "debian"}, "nvidia_driver_source"),
    ("gpu", {"nvidia_driver_branch": 570}, "nvidia_driver_branch"),
]

GOOD = [
    ("cpu", {}, "vllm on cpu, preset gemma3-270m"),
    ("gpu", {}, "vllm on cuda, preset qwen3.8-27b-w4a16"),
    ("gpu-no-driver", {}, "vllm on cuda, preset qwen3.8-27b-w4a16"),
    ("gpu-driver-not-loaded", {}, "vllm on cuda, preset qwen3.8-27b-w4a16"),
    ("gpu", {"vllm_mtp": True}, "vllm on cuda, preset qwen3.8-27b-w4a16"),
    ("gpu", {"model": "qwen3.6-35b-a3b-awq"}, "vllm on cuda, preset qwen3.6-35b-a3b-awq"),
    ("gpu", {"model": "qwen3-32b-awq"}, "vllm on cuda, preset qwen3-32b-awq"),
    ("gpu", {"inference_engine": "ollama"}, "ollama on cuda, preset qwen3.8-27b-w4a16"),
    ("cpu", {"inference_engine": "llamacpp"}, "llamacpp on cpu, preset gemma3-270m"),
]


def _names(message: str, variable: str) -> bool:
    """True when the message names the variable the way our errors and Ansible's argspec errors do."""
    name = re.escape(variable)
    return re.search(rf"(\"{name}: |argument '{name}' |value of {name} )", message) is not None


def _host(kind: str) -> tuple[str, dict[str, str]]:
    if kind == "gpu-cc86":  # the same fake, now an Ampere card without fp8 attention kernels
        return "gpu", {"LLMRIG_FAKE_GPU_CC": "8.6"}
    if kind == "gpu-driver-not-loaded":
        return kind, {"LLMRIG_FAKE_NO_DRIVER": "1"}
    return kind, {}


@pytest.mark.parametrize(("kind", "extra_vars", "variable"), BAD, ids=[f"{v}-{k}" for k, _, v in BAD])
def test_bad_configuration_fails_in_preflight(
    kind: str, extra_vars: dict[str, Any], variable: str, tmp_path: Path
) -> None:
    """A real run (not --check) fails in the preflight role, changes nothing, and names the variable."""
    host, env = _host(kind)
    run = run_playbook(PREFLIGHT, extra_vars, host=host, check=False, env=env, tmp_path=tmp_path)
    assert run.returncode != 0, run.output
    assert run.changed == 0
    assert len(run.failed_tasks) == 1, run.failed_tasks
    name, path, message = run.failed_tasks[0]
    assert name.startswith("preflight : ")
    assert "/roles/preflight/" in path or path.endswith("playbooks/preflight.yml:2")
    assert _names(message, variable), message


@pytest.mark.parametrize(("kind", "extra_vars", "plan"), GOOD, ids=[f"{k}-{e}" for k, e, _ in GOOD])
def test_good_configuration_completes_preflight(
    kind: str, extra_vars: dict[str, Any], plan: str, tmp_path: Path
) -> None:
    """`playbooks/preflight.yml --check` runs preflight to completion and reports the plan for the host."""
    host, env = _host(kind)
    run = run_playbook(PREFLIGHT, extra_vars, host=host, env=env, tmp_path=tmp_path)
    assert run.returncode == 0, run.output
    assert run.failed_tasks == []
    assert f"Plan: {plan}" in run.output
    kv_plan = re.search(r"KV plan: [0-9,]+ tokens, [0-9.]+ sequences of [0-9,]+", run.output)
    assert (kv_plan is not None) == plan.startswith("vllm"), run.output
    source = {"cpu": "none", "gpu": "nvidia-smi"}.get(kind, "lspci")
    assert f"GPUs ({source}):" in run.output


def test_preflight_changes_nothing_in_a_real_run(tmp_path: Path) -> None:
    """Without --check, preflight still reports zero changes."""
    run = run_playbook(PREFLIGHT, host="cpu", check=False, tmp_path=tmp_path)
    assert run.returncode == 0, run.output
    assert run.changed == 0


def test_supplied_api_key_never_appears_in_output(tmp_path: Path) -> None:
    """A bad key is reported by name only; its value is not echoed, even with -vvv."""
    secret = "s3cret value!"
    run = run_playbook(
        PREFLIGHT, {"llmrig_api_key": secret}, host="cpu", check=False, flags=("-vvv",), tmp_path=tmp_path
    )
    assert run.returncode != 0
    assert "llmrig_api_key:" in run.failed_tasks[0][2]
    assert secret not in run.output


def test_no_secret_appears_in_a_passing_run_at_vvv(tmp_path: Path) -> None:
    """The three secrets pass through every preflight knob check; none is printed, even with -vvv."""
    secrets = {
        "llmrig_api_key": "pfApiKey3Hw8Zr5Tq1",
        "llmrig_hf_token": "hf_pfToken6Km2Yd9Xa",
        "open_webui_secret_key": "pfWebuiSecret4Gv7Ls",
    }
    run = run_playbook(PREFLIGHT, secrets, host="cpu", check=False, flags=("-vvv",), tmp_path=tmp_path)
    assert run.returncode == 0, run.failed_tasks
    assert [name for name, value in secrets.items() if value in run.output] == []
