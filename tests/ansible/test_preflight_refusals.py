"""Bad configurations, set where operators set them, are refused in preflight before the host changes.

Each case runs the real `playbooks/preflight.yml` (not in check mode) against this machine with
the value in extra vars (``-e @file``), in an inventory's ``group_vars/llmrig.yml`` or in its
``host_vars/localhost.yml``. Each must fail in the preflight role with one short message (at most
three lines of 100 columns) that names the variable, or the file and line of a YAML error, and
leave the host as it was: nothing under /etc, /opt, /srv, /var/lib/dpkg, /var/lib/apt or the
systemd unit folders is newer than a marker touched just before the run, and no entry appeared
in or vanished from /var/lib (users and groups live in /etc, units in those folders). Each run
has a network namespace of its own, so the ports it sees taken are the test's own.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
import yaml

from bench.rig.rules.secrets import SECRET_KNOBS
from tests.helpers import BIN, GROUP_VARS, OWN_NETWORK, REPO, PlaybookRun, run_playbook

pytestmark = pytest.mark.ansible

PREFLIGHT = "playbooks/preflight.yml"
WATCHED = ["/etc", "/opt", "/srv", "/var/lib/dpkg", "/var/lib/apt", "/usr/lib/systemd/system"]
# Holds 127.0.0.1:PORT open in a parent process while the child runs the command.
HOLD_PORT = (
    "import os, socket, sys\n"
    "server = socket.socket(); server.bind(('127.0.0.1', int(sys.argv[1]))); server.listen()\n"
    "child = os.fork()\n"
    "if child == 0:\n"
    "    server.close(); os.execvp(sys.argv[2], sys.argv[2:])\n"
    "sys.exit(os.waitstatus_to_exitcode(os.waitpid(child, 0)[1]))\n"
)


def _asymmetric_moe() -> dict[str, Any]:
    """The Qwen3.6 MoE preset marked as having asymmetric (zero-point) 4-bit experts."""
    presets = yaml.safe_load((GROUP_VARS / "models.yml").read_text(encoding="utf-8"))["model_presets"]
    preset = json.loads(json.dumps(presets["qwen3.6-35b-a3b-awq"]))
    preset["quant_symmetric"] = False
    return {**presets, "asymmetric-moe": preset}


def _hybrid_with_odd_heads() -> dict[str, Any]:
    """The Qwen3.6 preset with 15 linear-attention key heads, which tensor parallel 2 cannot split."""
    presets = yaml.safe_load((GROUP_VARS / "models.yml").read_text(encoding="utf-8"))["model_presets"]
    preset = json.loads(json.dumps(presets["qwen3.6-35b-a3b-awq"]))
    preset["architecture"]["linear_attention"]["key_heads"] = 15
    return {**presets, "odd-heads": preset}


# (id, host kind, where it is set, the variables, what the message must name)
CASES: list[tuple[str, str, str, dict[str, Any], str]] = [
    # Typos: a knob prefix on a name that is no knob.
    ("typo-utilisation", "gpu", "extra", {"vllm_gpu_memory_utilisation": 0.5}, "vllm_gpu_memory_utilisation"),
    ("typo-engine", "cpu", "group", {"inference_engin": "ollama"}, "inference_engin"),
    ("typo-models-dir", "cpu", "host", {"llmrig_model_dir": "/srv/models"}, "llmrig_model_dir"),
    ("typo-watchdog", "cpu", "host", {"watchdog_interval": 5}, "watchdog_interval"),
    # Paths, checked on the host.
    ("models-dir-is-a-file", "cpu", "group", {"llmrig_models_dir": "/etc/hostname"}, "llmrig_models_dir"),
    ("models-dir-relative", "cpu", "extra", {"llmrig_models_dir": "models"}, "llmrig_models_dir"),
    ("config-dir-under-a-file", "cpu", "host", {"llmrig_config_dir": "/etc/hostname/llmrig"}, "llmrig_config_dir"),
    ("local-dir-missing", "cpu", "host", {"vllm_model_local_dir": "/nonexistent/model"}, "vllm_model_local_dir"),
    (
        "gguf-missing",
        "cpu",
        "extra",
        {"inference_engine": "llamacpp", "llamacpp_model_local_file": "/nonexistent/m.gguf"},
        "llamacpp_model_local_file",
    ),
    (
        "server-binary-missing",
        "cpu",
        "group",
        {"inference_engine": "llamacpp", "llamacpp_server_binary": "/nonexistent/llama-server"},
        "llamacpp_server_binary",
    ),
    (
        "server-binary-not-executable",
        "cpu",
        "host",
        {"inference_engine": "llamacpp", "llamacpp_server_binary": "{tmp}/llama-server"},
        "llamacpp_server_binary",
    ),
    # Numbers out of range.
    ("watchdog-interval-0", "cpu", "extra", {"watchdog_interval_s": 0}, "watchdog_interval_s"),
    ("health-timeout-negative", "cpu", "group", {"engine_health_timeout_s": -1}, "engine_health_timeout_s"),
    ("headroom-negative", "cpu", "host", {"llmrig_disk_headroom_gib": -50}, "llmrig_disk_headroom_gib"),
    ("utilization-above-1", "gpu", "extra", {"vllm_gpu_memory_utilization": 1.5}, "vllm_gpu_memory_utilization"),
    ("port-above-65535", "cpu", "group", {"vllm_port": 70000}, "vllm_port"),
    ("ollama-parallel-0", "cpu", "host", {"ollama_num_parallel": 0}, "ollama_num_parallel"),
    # A port something else already holds.
    ("port-taken", "cpu", "extra", {"vllm_port": 18000, "hold": 18000}, "vllm_port"),
    ("ollama-port-taken", "cpu", "group", {"inference_engine": "ollama", "hold": 11434}, "ollama_port"),
    # Free-form arguments.
    ("extra-args-string", "cpu", "extra", {"vllm_extra_args": " "}, "vllm_extra_args"),
    ("extra-args-owned-flag", "gpu", "group", {"vllm_extra_args": ["--max-model-len", "999999"]}, "vllm_extra_args"),
    (
        "llamacpp-args-owned-flag",
        "cpu",
        "host",
        {"inference_engine": "llamacpp", "llamacpp_extra_args": ["-c", "4096"]},
        "llamacpp_extra_args",
    ),
    # Parsers and parallelism.
    ("no-reasoning-parser", "gpu", "group", {"vllm_reasoning_parser": ""}, "vllm_reasoning_parser"),
    (
        "tp-splits-no-hybrid-heads",
        "gpu",
        "extra",
        {"model_presets": _hybrid_with_odd_heads(), "model": "odd-heads"},
        "vllm_tensor_parallel_size",
    ),
    ("tp-4-on-2-gpus", "gpu", "extra", {"vllm_tensor_parallel_size": 4}, "vllm_tensor_parallel_size"),
    # Types and choices, one line each.
    ("type-int", "cpu", "extra", {"vllm_max_num_seqs": "many"}, "vllm_max_num_seqs"),
    ("type-bool", "cpu", "group", {"vllm_mtp": "maybe"}, "vllm_mtp"),
    ("type-choice", "gpu", "host", {"vllm_kv_cache_dtype": "fp4"}, "vllm_kv_cache_dtype"),
    ("type-list", "cpu", "extra", {"vllm_extra_args": {"--foo": 1}}, "vllm_extra_args"),
    ("type-float", "gpu", "group", {"vllm_gpu_memory_utilization": "high"}, "vllm_gpu_memory_utilization"),
    ("engine-unknown", "cpu", "host", {"inference_engine": "docker"}, "inference_engine"),
    ("ollama-kv-type", "gpu", "extra", {"ollama_kv_cache_type": "q2_k"}, "ollama_kv_cache_type"),
    # The foundation's rules, from each place.
    ("model-unknown", "cpu", "group", {"model": "llama-70b"}, "model"),
    ("cuda-without-gpus", "cpu", "host", {"vllm_device": "cuda"}, "vllm_device"),
    ("tool-parser-family", "gpu", "group", {"vllm_tool_call_parser": "hermes"}, "vllm_tool_call_parser"),
    ("reasoning-parser-family", "gpu", "extra", {"vllm_reasoning_parser": "deepseek_r1"}, "vllm_reasoning_parser"),
    ("quantization", "gpu", "host", {"vllm_quantization": "awq_marlin"}, "vllm_quantization"),
    ("batched-tokens", "gpu", "extra", {"vllm_max_num_batched_tokens": 2048}, "vllm_max_num_batched_tokens"),
    ("mtp-without-head", "gpu", "group", {"model": "qwen3-32b-awq", "vllm_mtp": True}, "vllm_mtp"),
    ("context-too-long", "gpu", "host", {"vllm_max_model_len": 524288}, "vllm_max_model_len"),
    ("disk-too-small", "gpu", "extra", {"llmrig_disk_headroom_gib": 10000000}, "llmrig_models_dir"),
    ("port-clash", "gpu", "group", {"open_webui_port": 8000}, "open_webui_port"),
    ("fp8-on-cpu", "cpu", "host", {"vllm_kv_cache_dtype": "fp8"}, "vllm_kv_cache_dtype"),
    (
        "exposed-without-clients",
        "cpu",
        "extra",
        {"inference_engine": "llamacpp", "llamacpp_host": "0.0.0.0", "llmrig_allowed_client_cidrs": []},
        "llmrig_allowed_client_cidrs",
    ),
    ("short-api-key", "cpu", "group", {"llmrig_api_key": "abc"}, "llmrig_api_key"),
    # Secrets: each a string of its length and alphabet, the value never shown.
    ("api-key-semicolon", "cpu", "extra", {"llmrig_api_key": "pfKey0123456789;x"}, "llmrig_api_key"),
    ("api-key-newline", "cpu", "group", {"llmrig_api_key": "pfKey0123456789x\n"}, "llmrig_api_key"),
    ("api-key-non-ascii", "cpu", "host", {"llmrig_api_key": "pfKey0123456789\u00e9"}, "llmrig_api_key"),
    ("api-key-list", "cpu", "host", {"llmrig_api_key": ["pfKey0123456789xx"]}, "llmrig_api_key"),
    ("webui-secret-short", "cpu", "extra", {"open_webui_secret_key": "pf"}, "open_webui_secret_key"),
    (
        "admin-password-newline",
        "cpu",
        "group",
        {"open_webui_admin_password": "pfPassword12\nx"},
        "open_webui_admin_password",
    ),
    ("hf-token-space", "cpu", "host", {"llmrig_hf_token": "hf_pf token 0123456"}, "llmrig_hf_token"),
    ("secret-length-8", "cpu", "extra", {"llmrig_secret_length": 8}, "llmrig_secret_length"),
    ("secret-length-0", "cpu", "group", {"llmrig_secret_length": 0}, "llmrig_secret_length"),
    # Versions and sources: one pinned release, URLs with a scheme, something to install from.
    ("vllm-version-latest", "gpu", "extra", {"vllm_version": "latest"}, "vllm_version"),
    ("ollama-version-range", "cpu", "group", {"ollama_version": ">=0.32"}, "ollama_version"),
    ("index-url-no-scheme", "cpu", "host", {"llmrig_pip_index_url": "pypi.example/simple"}, "llmrig_pip_index_url"),
    ("no-index-nothing", "cpu", "extra", {"llmrig_pip_no_index": True}, "llmrig_pip_no_index"),
    # The driver.
    ("reboot-timeout-0", "cpu", "group", {"nvidia_driver_reboot_timeout_s": 0}, "nvidia_driver_reboot_timeout_s"),
    (
        "compute-capability-impossible",
        "gpu",
        "host",
        {"nvidia_driver_compute_capability": "13.5"},
        "nvidia_driver_compute_capability",
    ),
    (
        "keyring-file-name",
        "cpu",
        "extra",
        {"nvidia_driver_cuda_keyring_url": "cuda-keyring_1.1-1_all.deb"},
        "nvidia_driver_cuda_keyring_url",
    ),
    (
        "module-params-string",
        "cpu",
        "group",
        {"nvidia_driver_module_params": "nvidia.NVreg_X=1"},
        "nvidia_driver_module_params",
    ),
    # The network: a bind address this host does not have (192.0.2.0/24 is TEST-NET-1).
    (
        "host-address-not-here",
        "cpu",
        "group",
        {"inference_engine": "ollama", "ollama_host": "192.0.2.10"},
        "ollama_host",
    ),
    # Engine combinations.
    ("visible-devices-fewer", "gpu", "extra", {"vllm_extra_env": {"CUDA_VISIBLE_DEVICES": "0"}}, "vllm_extra_env"),
    ("watchdog-timeout-over-interval", "cpu", "host", {"watchdog_check_timeout_s": 60}, "watchdog_check_timeout_s"),
    # A knob with "tokens" in its name is no secret: its value is shown and its range checked.
    ("tokens-knob-type", "cpu", "extra", {"vllm_max_num_batched_tokens": "lots"}, "vllm_max_num_batched_tokens"),
    ("no-gguf-for-llamacpp", "gpu", "host", {"inference_engine": "llamacpp"}, "model"),
    ("cuda-only-checkpoint-on-cpu", "cpu", "extra", {"model": "qwen3.8-27b-w4a16"}, "model"),
    # The KV plan: one 262,144-token sequence needs more than 0.8 of two 16 GB cards leave.
    (
        "kv-plan-one-sequence",
        "gpu",
        "group",
        {"vllm_max_model_len": 262144, "vllm_gpu_memory_utilization": 0.8},
        "vllm_max_model_len",
    ),
    # With CUDA graphs, 146 sequences on 2 x 16 GB: the default preset's pool has 145 blocks, one
    # DeltaNet state block per decode sequence ("exceeds available Mamba cache blocks" on the box).
    (
        "hybrid-seqs-over-state-blocks",
        "gpu",
        "host",
        {"vllm_max_num_seqs": 146, "vllm_enforce_eager": False},
        "vllm_max_num_seqs",
    ),
    # vLLM's compressed-tensors MoE path: "Only symmetric quantization is supported for MoE".
    (
        "asymmetric-moe-experts",
        "gpu",
        "extra",
        {"model_presets": _asymmetric_moe(), "model": "asymmetric-moe"},
        "model",
    ),
    # The NVIDIA driver: a choice the spec refuses, and the branch floor.
    ("driver-source", "cpu", "host", {"nvidia_driver_source": "debian"}, "nvidia_driver_source"),
    ("driver-branch-floor", "gpu", "group", {"nvidia_driver_branch": 570}, "nvidia_driver_branch"),
    # Exposure: every address allowed, or no firewall.
    (
        "world-open-clients",
        "gpu",
        "group",
        {"llmrig_allowed_client_cidrs": ["0.0.0.0/0"]},
        "llmrig_allowed_client_cidrs",
    ),
    ("world-open-ssh", "cpu", "host", {"llmrig_ssh_allowed_cidrs": ["0.0.0.0/0"]}, "llmrig_ssh_allowed_cidrs"),
    # The firewall's inputs: CIDR lists, and SSH's networks against this run's own session (the
    # tests run as an operator logged in over SSH from 192.0.2.10, on the box's LAN 192.0.2.0/24).
    (
        "client-cidrs-string",
        "cpu",
        "extra",
        {"llmrig_allowed_client_cidrs": "10.0.0.0/8"},
        "llmrig_allowed_client_cidrs",
    ),
    (
        "client-cidr-malformed",
        "cpu",
        "group",
        {"llmrig_allowed_client_cidrs": ["10.0.0.300/8"]},
        "llmrig_allowed_client_cidrs",
    ),
    (
        "client-cidr-host-bits",
        "cpu",
        "host",
        {"llmrig_allowed_client_cidrs": ["192.168.1.77/24"]},
        "llmrig_allowed_client_cidrs",
    ),
    ("client-cidrs-empty", "cpu", "extra", {"llmrig_allowed_client_cidrs": []}, "llmrig_allowed_client_cidrs"),
    ("ssh-cidrs-string", "cpu", "group", {"llmrig_ssh_allowed_cidrs": "192.0.2.0/24"}, "llmrig_ssh_allowed_cidrs"),
    (
        "ssh-cidrs-miss-the-session",
        "cpu",
        "host",
        {"llmrig_ssh_allowed_cidrs": ["10.0.0.0/8"]},
        "llmrig_ssh_allowed_cidrs",
    ),
    (
        "ssh-cidrs-miss-the-ipv6-session",
        "cpu",
        "extra",
        {"llmrig_ssh_allowed_cidrs": ["192.0.2.0/24"], "session": "2001:db8:9::20 50022 2001:db8:1::1 22"},
        "llmrig_ssh_allowed_cidrs",
    ),
    ("no-session-no-ssh-cidrs", "cpu", "group", {"session": "UNKNOWN 65535 UNKNOWN 65535"}, "llmrig_ssh_allowed_cidrs"),
    ("console-run-no-ssh-cidrs", "cpu", "extra", {"session": ""}, "llmrig_ssh_allowed_cidrs"),
    (
        "unfiltered-engine",
        "cpu",
        "host",
        {"inference_engine": "llamacpp", "llamacpp_host": "0.0.0.0", "llmrig_firewall_enabled": False},
        "llmrig_allow_unfiltered",
    ),
    # vLLM never off loopback (its key guards /v1 and a few more prefixes only); the proxy serves the LAN.
    ("vllm-off-loopback", "gpu", "host", {"vllm_host": "0.0.0.0"}, "vllm_host"),
    ("vllm-off-loopback-idle", "cpu", "group", {"inference_engine": "llamacpp", "vllm_host": "10.0.0.5"}, "vllm_host"),
    (
        "proxy-on-loopback",
        "cpu",
        "group",
        {"reverse_proxy_enabled": True, "reverse_proxy_host": "127.0.0.1"},
        "reverse_proxy_host",
    ),
    (
        "proxy-port-clash",
        "cpu",
        "extra",
        {"reverse_proxy_enabled": True, "reverse_proxy_port": 8080},
        "reverse_proxy_port",
    ),
    (
        "proxy-engine-port-clash",
        "gpu",
        "host",
        {"reverse_proxy_enabled": True, "reverse_proxy_port": 8081},
        "reverse_proxy_port",
    ),
    (
        "proxy-around-it",
        "cpu",
        "host",
        {"reverse_proxy_enabled": True, "inference_engine": "llamacpp", "llamacpp_host": "0.0.0.0"},
        "llamacpp_host",
    ),
    (
        "proxy-without-clients",
        "cpu",
        "extra",
        {"reverse_proxy_enabled": True, "open_webui_host": "127.0.0.1", "llmrig_allowed_client_cidrs": []},
        "llmrig_allowed_client_cidrs",
    ),
    (
        "proxy-wildcard-key",
        "cpu",
        "extra",
        {"reverse_proxy_enabled": True, "llmrig_api_key": "k" * 20 + "*"},
        "llmrig_api_key",
    ),
    (
        "unauthenticated-ollama-unfiltered",
        "gpu",
        "extra",
        {
            "inference_engine": "ollama",
            "ollama_host": "0.0.0.0",
            "llmrig_firewall_enabled": False,
            "llmrig_allow_unfiltered": True,
        },
        "ollama_host",
    ),
    ("fp8-on-ampere", "gpu-cc86", "group", {}, "vllm_kv_cache_dtype"),
    # HTTPS in front of Open WebUI: ACME for a private name, Open WebUI unfiltered off loopback, a taken port.
    (
        "tls-acme-private-name",
        "cpu",
        "group",
        {"tls_acme_email": "ops@example.org", "tls_server_name": "box.lan"},
        "tls_server_name",
    ),
    (
        "tls-webui-off-loopback-unfiltered",
        "cpu",
        "extra",
        {"llmrig_firewall_enabled": False, "open_webui_host": "0.0.0.0"},
        "open_webui_host",
    ),
    ("tls-port-taken", "cpu", "host", {"tls_https_port": 8080}, "tls_https_port"),
    # Open WebUI's inputs, and its port held by another process.
    ("webui-url-no-scheme", "cpu", "extra", {"open_webui_url": "chat.example.org"}, "open_webui_url"),
    ("webui-url-malformed", "cpu", "group", {"open_webui_url": "http://chat example.org"}, "open_webui_url"),
    ("webui-version-latest", "cpu", "host", {"open_webui_version": "latest"}, "open_webui_version"),
    ("webui-version-range", "cpu", "extra", {"open_webui_version": ">=0.12"}, "open_webui_version"),
    ("webui-email-no-domain", "cpu", "group", {"open_webui_admin_email": "admin"}, "open_webui_admin_email"),
    (
        "webui-params-string",
        "cpu",
        "host",
        {"open_webui_default_model_params": "temperature=0.2"},
        "open_webui_default_model_params",
    ),
    (
        "webui-sampling-type",
        "cpu",
        "extra",
        {"open_webui_default_model_params": {"temperature": "hot"}},
        "open_webui_default_model_params",
    ),
    ("webui-port-taken", "cpu", "extra", {"open_webui_port": 18080, "hold": 18080}, "open_webui_port"),
    (
        "proxy-port-taken",
        "cpu",
        "group",
        {"reverse_proxy_enabled": True, "reverse_proxy_port": 18001, "hold": 18001},
        "reverse_proxy_port",
    ),
    (
        "proxy-address-not-here",
        "cpu",
        "host",
        {"reverse_proxy_enabled": True, "reverse_proxy_host": "192.0.2.99"},
        "reverse_proxy_host",
    ),
    # Backups (a repository with a password, then one knob wrong; the values of secrets never shown).
    ("backup-repository-relative", "cpu", "extra", {"backup_repository": "backups/llmrig"}, "backup_repository"),
    (
        "backup-repository-scheme",
        "cpu",
        "group",
        {"backup_repository": "b2:pfBucket:llmrig", "backup_password": "pfRepoPassword1"},
        "backup_repository",
    ),
    ("backup-no-password", "cpu", "host", {"backup_repository": "/mnt/nas/llmrig"}, "backup_password"),
    (
        "backup-password-file-readable",
        "cpu",
        "extra",
        {"backup_repository": "/mnt/nas/llmrig", "backup_password_file": "{tmp}/readable-password"},
        "backup_password_file",
    ),
    (
        "backup-password-file-empty",
        "cpu",
        "group",
        {"backup_repository": "/mnt/nas/llmrig", "backup_password_file": "{tmp}/empty-password"},
        "backup_password_file",
    ),
    ("backup-keep-daily-0", "cpu", "host", {"backup_keep_daily": 0}, "backup_keep_daily"),
    ("backup-max-age-negative", "cpu", "extra", {"backup_max_age_h": -1}, "backup_max_age_h"),
    (
        "backup-environment-reserved",
        "cpu",
        "group",
        {
            "backup_repository": "/mnt/nas/llmrig",
            "backup_password": "pfRepoPassword1",
            "backup_environment": {"RESTIC_PASSWORD": "pfOtherPassword2"},
        },
        "backup_environment",
    ),
    (
        "backup-heartbeat-no-scheme",
        "cpu",
        "host",
        {
            "backup_repository": "/mnt/nas/llmrig",
            "backup_password": "pfRepoPassword1",
            "backup_heartbeat_url": "hc-ping.com/pfHeartbeatToken",
        },
        "backup_heartbeat_url",
    ),
    (
        "backup-read-data-subset",
        "cpu",
        "extra",
        {
            "backup_repository": "/mnt/nas/llmrig",
            "backup_password": "pfRepoPassword1",
            "backup_check_read_data_subset": "5",
        },
        "backup_check_read_data_subset",
    ),
    (
        "backup-schedule-empty",
        "cpu",
        "group",
        {"backup_repository": "/mnt/nas/llmrig", "backup_password": "pfRepoPassword1", "backup_schedule": ""},
        "backup_schedule",
    ),
    # An hour systemd has not: systemd-analyze calendar on the host refuses it.
    (
        "backup-schedule-systemd-refuses",
        "cpu",
        "host",
        {
            "backup_repository": "/mnt/nas/llmrig",
            "backup_password": "pfRepoPassword1",
            "backup_check_schedule": "Mon 25:00",
        },
        "backup_check_schedule",
    ),
    (
        "malformed-preset",
        "cpu",
        "extra",
        {"model_presets": {"gemma3-270m": {"family": "gemma3"}}, "model": "gemma3-270m"},
        "model_presets.gemma3-270m",
    ),
]


def _inventory(tmp_path: Path, place: str, variables: dict[str, Any]) -> Path:
    """An inventory of this machine with ``variables`` in group_vars/llmrig.yml or host_vars/localhost.yml."""
    folder = tmp_path / "inventory"
    folder.mkdir()
    shutil.copy(REPO / "ansible" / "inventory" / "hosts.yml", folder / "hosts.yml")
    target = folder / ("group_vars/llmrig.yml" if place == "group" else "host_vars/localhost.yml")
    target.parent.mkdir()
    target.write_text(yaml.safe_dump(variables, sort_keys=False), encoding="utf-8")
    return folder / "hosts.yml"


def _changed_since(marker: Path) -> list[str]:
    """What changed on the host after ``marker`` was touched."""
    newer = ["(", "-newer", str(marker), "-o", "-cnewer", str(marker), ")"]
    found = subprocess.run(
        ["find", *[path for path in WATCHED if Path(path).exists()], *newer, "-print"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout.split()
    found += subprocess.run(
        ["find", "/var/lib", "-maxdepth", "0", *newer, "-print"], capture_output=True, text=True, check=False
    ).stdout.split()
    return found


def _short(message: str) -> bool:
    return len(textwrap.wrap(message, 100)) <= 3


def _run(tmp_path: Path, kind: str, place: str, variables: dict[str, Any]) -> PlaybookRun:
    variables = json.loads(json.dumps(variables).replace("{tmp}", str(tmp_path)))
    hold = variables.pop("hold", None)
    session = variables.pop("session", None)  # SSH_CONNECTION of the run, when not the usual one
    wrapper = OWN_NETWORK + ((sys.executable, "-c", HOLD_PORT, str(hold)) if hold else ())
    inventory = _inventory(tmp_path, place, variables) if place != "extra" else None
    extra = variables if place == "extra" else None
    # gpu-cc86: the same fake GPUs, now Ampere cards without fp8 attention kernels.
    env = {"LLMRIG_FAKE_GPU_CC": "8.6"} if kind == "gpu-cc86" else {}
    if session is not None:
        env["SSH_CONNECTION"] = session
    host = "gpu" if kind == "gpu-cc86" else kind
    return run_playbook(
        PREFLIGHT, extra, host=host, check=False, env=env, tmp_path=tmp_path, inventory=inventory, wrapper=wrapper
    )


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_refused_in_preflight_naming_the_variable_and_nothing_changes(
    case: tuple[str, str, str, dict[str, Any], str], tmp_path: Path
) -> None:
    _, kind, place, variables, variable = case
    (tmp_path / "llama-server").write_text("#!/bin/sh\n", encoding="utf-8")  # not executable
    (tmp_path / "readable-password").write_text("pfFilePassword3\n", encoding="utf-8")
    (tmp_path / "readable-password").chmod(0o644)  # its group and others may read it
    (tmp_path / "empty-password").write_text("\n", encoding="utf-8")
    (tmp_path / "empty-password").chmod(0o600)
    marker = tmp_path / "marker"
    marker.touch()
    run = _run(tmp_path, kind, place, variables)
    assert run.returncode != 0, run.output[-3000:]
    assert run.changed == 0
    assert len(run.failed_tasks) == 1, run.failed_tasks
    name, path, message = run.failed_tasks[0]
    assert name.startswith("preflight : "), name
    assert "/roles/preflight/" in path, path
    lines = json.loads(message)[0]
    assert isinstance(lines, list), lines
    assert len(lines) == 1, lines
    text = lines[0]
    assert text.startswith(f"{variable}: "), text
    assert _short(text), text
    assert _changed_since(marker) == []
    for name in SECRET_KNOBS & set(variables):  # a secret's value is never shown, anywhere in the output
        value = variables[name]
        values = value if isinstance(value, list) else list(value.values()) if isinstance(value, dict) else [value]
        for shown in values:
            assert str(shown).strip() not in run.output, name
    assert "pfFilePassword3" not in run.output  # nor the content of a password file


def test_cases_cover_every_place_and_enough_configurations() -> None:
    assert len(CASES) >= 40
    assert {place for _, _, place, _, _ in CASES} == {"extra", "group", "host"}


def test_a_typo_says_where_it_was_set_and_what_was_meant(tmp_path: Path) -> None:
    run = _run(tmp_path, "cpu", "group", {"inference_engin": "ollama"})
    text = json.loads(run.failed_tasks[0][2])[0][0]
    assert text == (
        f"inference_engin: is not an llmrig knob (set in {tmp_path}/inventory/group_vars/llmrig.yml line 1); "
        "did you mean inference_engine?"
    )


def test_a_type_error_is_one_line_without_the_spec(tmp_path: Path) -> None:
    run = _run(tmp_path, "cpu", "extra", {"vllm_max_num_seqs": "many"})
    assert json.loads(run.failed_tasks[0][2]) == [
        [f"vllm_max_num_seqs: needs a whole number, got 'many' (set in {tmp_path}/extra_vars.json)"]
    ]
    # What an operator sees (Ansible's default output): the line, not the spec after it.
    done = subprocess.run(
        [*OWN_NETWORK, str(BIN / "ansible-playbook"), PREFLIGHT, "-e", "vllm_max_num_seqs=many"],
        cwd=REPO,
        env={**os.environ, "ANSIBLE_STDOUT_CALLBACK": "default", "ANSIBLE_NOCOLOR": "1"},
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode != 0
    assert "vllm_max_num_seqs: needs a whole number, got 'many' (set in extra vars (-e))" in done.stdout
    assert "argument_spec_data" not in done.stdout
    assert "Valid booleans" not in done.stdout


def test_a_taken_port_names_the_process(tmp_path: Path) -> None:
    run = _run(tmp_path, "cpu", "extra", {"vllm_port": 18000, "hold": 18000})
    text = json.loads(run.failed_tasks[0][2])[0][0]
    assert re.fullmatch(
        r"vllm_port: 18000 is already taken on 127\.0\.0\.1 by python3? \(pid \d+\); stop it or choose a free port",
        text,
    ), text


def test_an_error_is_not_followed_by_warnings_computed_from_it(tmp_path: Path) -> None:
    """A context too long for the pool is refused; the KV plan's warnings about the same value stay quiet."""
    run = _run(tmp_path, "gpu", "extra", {"vllm_max_model_len": 262144, "vllm_gpu_memory_utilization": 0.8})
    assert run.returncode != 0
    assert "Show configuration warnings" not in " ".join(run.task_names)


YAML_ERRORS = [
    ("group", "vllm_port: 8000\ninference_engine: ollama: x\n", "group_vars/llmrig.yml line 2 column 25"),
    ("host", "vllm_extra_args: [--swap-space\nvllm_port: 1\n", "host_vars/localhost.yml line 2 column 10"),
]


@pytest.mark.parametrize(("place", "text", "where"), YAML_ERRORS, ids=["group_vars", "host_vars"])
def test_a_yaml_error_names_the_file_and_line(tmp_path: Path, place: str, text: str, where: str) -> None:
    inventory = _inventory(tmp_path, place, {})
    target = inventory.parent / ("group_vars/llmrig.yml" if place == "group" else "host_vars/localhost.yml")
    target.write_text(text, encoding="utf-8")
    marker = tmp_path / "marker"
    marker.touch()
    done = subprocess.run(
        [*OWN_NETWORK, str(BIN / "ansible-playbook"), "-i", str(inventory), PREFLIGHT],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode != 0
    assert f"YAML syntax error in {inventory.parent}/{where}: " in done.stdout + done.stderr, done.stderr
    assert _changed_since(marker) == []


def test_an_inventory_that_does_not_parse_stops_the_run_with_its_line(tmp_path: Path) -> None:
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(
        "all:\n  children:\n    llmrig:\n      hosts:\n        localhost:\n          inference_engine: ollama: x\n",
        encoding="utf-8",
    )
    done = subprocess.run(
        [str(BIN / "ansible-playbook"), "-i", str(inventory), PREFLIGHT],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode != 0
    assert f"Origin: {inventory}:6:" in done.stdout + done.stderr, done.stderr


def test_a_knob_named_with_tokens_shows_its_value_as_any_other(tmp_path: Path) -> None:
    """What is secret is a list of knobs, not a word in a name."""
    run = _run(tmp_path, "cpu", "extra", {"vllm_max_num_batched_tokens": "lots"})
    assert json.loads(run.failed_tasks[0][2]) == [
        [f"vllm_max_num_batched_tokens: needs a whole number, got 'lots' (set in {tmp_path}/extra_vars.json)"]
    ]


EXTRA_VARS_ERRORS = [
    ("vllm_port: 8000\ninference_engine: ollama: x\n", "YAML syntax error in {file} line 2 column 25: "),
    ("- vllm_port\n", "-e @{file}: holds no mapping of variable names to values"),
]


@pytest.mark.parametrize(("text", "last"), EXTRA_VARS_ERRORS, ids=["syntax", "not-a-mapping"])
def test_a_broken_extra_vars_file_is_named_on_the_last_line(tmp_path: Path, text: str, last: str) -> None:
    """Not "Completely failed to parse inventory source": the -e @FILE, with its line."""
    extra = tmp_path / "overrides.yml"
    extra.write_text(text, encoding="utf-8")
    marker = tmp_path / "marker"
    marker.touch()
    done = subprocess.run(
        [*OWN_NETWORK, str(BIN / "ansible-playbook"), PREFLIGHT, "-e", f"@{extra}"],
        cwd=REPO,
        env={**os.environ, "ANSIBLE_STDOUT_CALLBACK": "default", "ANSIBLE_NOCOLOR": "1"},
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode != 0
    lines = [line for line in (done.stdout + done.stderr).splitlines() if line.strip()]
    assert lines[-1].startswith("[ERROR]: " + last.format(file=extra)), lines[-3:]
    assert "Completely failed" not in done.stdout + done.stderr
    assert _changed_since(marker) == []


def test_a_good_extra_vars_file_still_reaches_preflight(tmp_path: Path) -> None:
    """The inventory plugin that steps in for a broken -e @FILE declines a good one."""
    run = _run(tmp_path, "cpu", "extra", {"vllm_max_num_seqs": "many"})
    assert run.failed_tasks[0][0].startswith("preflight : ")
