"""`ansible-playbook playbooks/preflight.yml` (the first stage of site.yml) against localhost: good
configurations run preflight to completion (the bad ones are in test_preflight_refusals.py). Real Ansible, real
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
    (
        "cpu",
        {
            "inference_engine": "llamacpp",
            "llamacpp_host": "0.0.0.0",
            "llmrig_firewall_enabled": False,
            "llmrig_allow_unfiltered": True,
        },
        "llamacpp on cpu, preset gemma3-270m",
    ),
    # Open WebUI off: nothing listens on open_webui_port, so an engine may have it.
    ("gpu", {"vllm_port": 8080, "open_webui_enabled": False}, "vllm on cuda, preset qwen3.8-27b-w4a16"),
    (
        "cpu",
        {"inference_engine": "llamacpp", "llamacpp_port": 8080, "open_webui_enabled": False},
        "llamacpp on cpu, preset gemma3-270m",
    ),
    (
        "gpu",
        {"inference_engine": "ollama", "ollama_port": 8080, "open_webui_enabled": False},
        "ollama on cuda, preset qwen3.8-27b-w4a16",
    ),
    ("gpu", {"reverse_proxy_enabled": True}, "vllm on cuda, preset qwen3.8-27b-w4a16"),
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


def test_the_firewall_line_names_the_connected_networks_and_the_session(tmp_path: Path) -> None:
    """With the defaults, the client networks are the box's own (its LAN in the test's namespace,
    loopback left out), and SSH is also allowed from the address the run's SSH session comes from."""
    run = run_playbook(PREFLIGHT, host="cpu", tmp_path=tmp_path)
    assert run.returncode == 0, run.output
    assert (
        "Firewall: clients from 192.0.2.0/24 (connected: the networks of this box's interfaces); "
        "SSH from 192.0.2.0/24, 192.0.2.10/32 (this session)"
    ) in run.output
    listed = run_playbook(
        PREFLIGHT,
        {"llmrig_allowed_client_cidrs": ["connected", "2001:db8:1::/64"], "llmrig_ssh_allowed_cidrs": ["192.0.2.8/29"]},
        host="cpu",
        tmp_path=tmp_path,
    )
    assert listed.returncode == 0, listed.output
    assert "Firewall: clients from 192.0.2.0/24, 2001:db8:1::/64 (connected: " in listed.output
    assert "; SSH from 192.0.2.8/29" in listed.output


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


def test_a_vllm_only_setting_under_another_engine_is_a_warning_naming_it(tmp_path: Path) -> None:
    """Ollama with vLLM's extra arguments set: preflight passes and says they have no effect."""
    run = run_playbook(
        PREFLIGHT,
        {"inference_engine": "ollama", "vllm_extra_args": ["--swap-space", "4"]},
        host="gpu",
        tmp_path=tmp_path,
    )
    assert run.returncode == 0, run.failed_tasks
    assert (
        "vllm_extra_args: is set, but only vLLM reads it and inference_engine is ollama: it has no effect" in run.output
    )
