"""The host probes of preflight's llmrig_host_facts module (ansible/plugins/module_utils/llmrig_probe.py)
and the rules that read what they find (bench/rig/rules/resources.py). The module itself runs in
the preflight playbook tests."""

from __future__ import annotations

import os
import socket
import stat
from pathlib import Path
from typing import Any

import pytest
import yaml

from bench.rig.presets import load_presets
from bench.rig.rules.addresses import ADDRESS_KNOBS, rule_bind_addresses
from bench.rig.rules.resources import PATH_KNOBS, rule_paths, rule_port_free
from tests.helpers import REPO, load_file_module

probe = load_file_module(REPO / "ansible" / "plugins" / "module_utils" / "llmrig_probe.py", "llmrig_probe")
PRESET = load_presets(REPO / "group_vars" / "all" / "models.yml")["gemma3-270m"]

# /proc/net/tcp and tcp6 as the kernel prints them (addresses are little-endian words): a
# listener on 127.0.0.1:8000, one on 0.0.0.0:22, an established connection, and [::]:11434.
TCP = """\
  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:1F40 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 41001 1 0000 100 0 0 10 0
   1: 00000000:0016 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 41002 1 0000 100 0 0 10 0
   2: 0100007F:1F40 0100007F:D2F0 01 00000000:00000000 00:00000000 00000000     0        0 41003 1 0000 20 4 30 10 -1
"""
TCP6 = """\
  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 00000000000000000000000000000000:2CAA 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000   998        0 41004 1 0000 100 0 0 10 0
   1: 00000000000000000000000001000000:1F91 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 41005 1 0000 100 0 0 10 0
"""  # noqa: E501


def test_listening_sockets_of_proc_net_tcp() -> None:
    assert probe.parse_proc_net_tcp(TCP) == [("127.0.0.1", 8000, "41001"), ("0.0.0.0", 22, "41002")]
    assert probe.parse_proc_net_tcp(TCP6) == [("::", 11434, "41004"), ("::1", 8081, "41005")]


@pytest.mark.parametrize(
    ("cgroup", "unit"),
    [
        ("0::/system.slice/vllm.service\n", "vllm.service"),
        ("0::/system.slice/ollama.service/payload\n", "ollama.service"),
        ("0::/user.slice/user-0.slice/session-3.scope\n", "session-3.scope"),
        ("12:pids:/\n0::/\n", ""),
    ],
)
def test_unit_of_a_process(cgroup: str, unit: str) -> None:
    assert probe.unit_of(cgroup) == unit


def test_the_module_sees_a_real_listener_and_its_process() -> None:
    """A socket this test listens on is listed with this process (the module reads /proc)."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]
        mine = [entry for entry in probe.listeners() if entry["port"] == port]
    assert [(entry["address"], entry["pid"]) for entry in mine] == [("127.0.0.1", os.getpid())]


def test_probe_path_kinds(tmp_path: Path) -> None:
    tool = tmp_path / "tool"
    tool.write_text("#!/bin/sh\n", encoding="utf-8")
    data = tmp_path / "data.gguf"
    data.write_text("", encoding="utf-8")
    tool.chmod(tool.stat().st_mode | stat.S_IXUSR)
    assert probe.probe_path(str(tool))["executable"] is True
    assert probe.probe_path(str(data))["executable"] is False
    assert probe.probe_path(str(tmp_path))["kind"] == "dir"
    missing = probe.probe_path(str(tmp_path / "a" / "b"))
    assert (missing["kind"], missing["parent"], missing["parent_writable"]) == ("missing", str(tmp_path), True)
    under_file = probe.probe_path(str(data / "models"))
    assert (under_file["parent"], under_file["parent_kind"], under_file["parent_writable"]) == (
        str(data),
        "file",
        False,
    )
    assert probe.probe_path("models")["absolute"] is False


def _knobs(**changes: Any) -> dict[str, Any]:
    base = dict.fromkeys(PATH_KNOBS, "")
    base.update(llmrig_models_dir="/srv/m", llmrig_config_dir="/etc/llmrig", ollama_models_dir="/srv/m/ollama")
    base.update(open_webui_data_dir="/var/lib/open-webui", open_webui_enabled=True, inference_engine="vllm")
    base.update(vllm_host="127.0.0.1", vllm_port=8000, ollama_host="0.0.0.0", ollama_port=11434)
    base.update(changes)
    return base


def _path_facts(tmp_path: Path, knobs: dict[str, Any]) -> dict[str, Any]:
    return {"paths": {name: probe.probe_path(str(knobs[name])) for name in PATH_KNOBS if knobs[name]}}


def _rendered(problems: list[Any]) -> list[str]:
    return [problem.render() for problem in problems]


def test_path_rules(tmp_path: Path) -> None:
    file = tmp_path / "file"
    file.write_text("x", encoding="utf-8")
    knobs = _knobs(
        llmrig_models_dir=str(file),
        llmrig_config_dir=str(file / "sub"),
        open_webui_data_dir="var/lib/open-webui",
        vllm_model_local_dir=str(tmp_path / "absent"),
    )
    assert _rendered(rule_paths(knobs, _path_facts(tmp_path, knobs), "cpu", PRESET)) == [
        f"llmrig_models_dir: {file} exists but is not a directory",
        f"llmrig_config_dir: {file}/sub cannot be created: {file} is not a directory",
        "open_webui_data_dir: 'var/lib/open-webui' must be an absolute path on the host",
        f"vllm_model_local_dir: {tmp_path}/absent does not exist on the host",
    ]


def test_path_rules_check_the_active_engines_paths_only(tmp_path: Path) -> None:
    plain = tmp_path / "llama-server"
    plain.write_text("", encoding="utf-8")
    knobs = _knobs(
        llmrig_models_dir=str(tmp_path / "models"),
        llmrig_config_dir=str(tmp_path / "etc"),
        ollama_models_dir=str(tmp_path / "ollama"),
        open_webui_data_dir=str(tmp_path / "webui"),
        vllm_model_local_dir=str(tmp_path / "absent"),
        llamacpp_server_binary=str(plain),
        llamacpp_model_local_file=str(tmp_path),
        inference_engine="llamacpp",
    )
    assert _rendered(rule_paths(knobs, _path_facts(tmp_path, knobs), "cpu", PRESET)) == [
        f"llamacpp_model_local_file: {tmp_path} is not a file",
        f"llamacpp_server_binary: {plain} is not executable; chmod +x it or set another",
    ]
    knobs["inference_engine"] = "vllm"
    assert _rendered(rule_paths(knobs, _path_facts(tmp_path, knobs), "cpu", PRESET)) == [
        f"vllm_model_local_dir: {tmp_path}/absent does not exist on the host"
    ]


LISTENING = [
    {"address": "0.0.0.0", "port": 22, "pid": 10, "process": "sshd", "unit": "ssh.service"},
    {"address": "127.0.0.1", "port": 8000, "pid": 11, "process": "python3", "unit": "vllm.service"},
    {"address": "::", "port": 11434, "pid": 12, "process": "nc", "unit": "session-3.scope"},
    {"address": "0.0.0.0", "port": 8001, "pid": 13, "process": "caddy", "unit": "llmrig-proxy.service"},
]


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        ({}, []),  # vllm's own unit holds its port: a re-run or an update
        ({"vllm_port": 22}, ["vllm_port: 22 is already taken on 0.0.0.0 by sshd (pid 10, unit ssh.service)"]),
        (
            {"inference_engine": "ollama"},
            ["ollama_port: 11434 is already taken on :: by nc (pid 12, unit session-3.scope)"],
        ),
        ({"inference_engine": "ollama", "ollama_port": 8000}, []),  # vllm.service: the engine role stops it first
        ({"vllm_port": 9000}, []),
        # The API proxy's port: its own unit may hold it (a re-run); nothing else may.
        ({"reverse_proxy_enabled": True, "reverse_proxy_host": "0.0.0.0", "reverse_proxy_port": 8001}, []),
        (
            {"reverse_proxy_enabled": True, "reverse_proxy_host": "0.0.0.0", "reverse_proxy_port": 22},
            ["reverse_proxy_port: 22 is already taken on 0.0.0.0 by sshd (pid 10, unit ssh.service)"],
        ),
        ({"reverse_proxy_enabled": False, "reverse_proxy_host": "0.0.0.0", "reverse_proxy_port": 22}, []),
    ],
)
def test_port_rule(changes: dict[str, Any], expected: list[str]) -> None:
    rendered = _rendered(rule_port_free(_knobs(**changes), {"listeners": LISTENING}, "cpu", PRESET))
    assert [line.split("; stop it")[0] for line in rendered] == expected


def test_a_holder_preflight_cannot_see_is_still_refused() -> None:
    hidden = [{"address": "0.0.0.0", "port": 8000, "pid": 0, "process": "", "unit": ""}]
    assert _rendered(rule_port_free(_knobs(), {"listeners": hidden}, "cpu", PRESET)) == [
        "vllm_port: 8000 is already taken on 0.0.0.0 by a process preflight cannot see (run it as root); "
        "stop it or choose a free port"
    ]


def test_preflight_probes_exactly_the_path_knobs() -> None:
    tasks = yaml.safe_load((REPO / "roles/preflight/tasks/facts.yml").read_text(encoding="utf-8"))
    probes = [task["llmrig_host_facts"]["paths"] for task in tasks if "llmrig_host_facts" in task]
    assert len(probes) == 1
    assert probes[0] == {name: f"{{{{ {name} }}}}" for name in PATH_KNOBS}


def test_preflight_probes_exactly_the_address_knobs() -> None:
    tasks = yaml.safe_load((REPO / "roles/preflight/tasks/facts.yml").read_text(encoding="utf-8"))
    probes = [task["llmrig_host_facts"]["addresses"] for task in tasks if "llmrig_host_facts" in task]
    assert probes == [{name: f"{{{{ {name} }}}}" for name in ADDRESS_KNOBS}]


def test_probe_address_binds_what_the_host_has_and_says_why_not() -> None:
    assert probe.probe_address("127.0.0.1") == {"address": "127.0.0.1", "bindable": True, "error": ""}
    assert probe.probe_address("0.0.0.0")["bindable"] is True
    # 192.0.2.0/24 is TEST-NET-1 (RFC 5737): no host has it.
    assert probe.probe_address("192.0.2.10") == {
        "address": "192.0.2.10",
        "bindable": False,
        "error": "Cannot assign requested address",
    }


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        ({}, []),
        ({"vllm_host": "192.0.2.10"}, []),  # vLLM off loopback: rule_vllm_loopback refuses any such address
        (
            {"inference_engine": "llamacpp", "llamacpp_host": "192.0.2.10"},
            ["llamacpp_host: 192.0.2.10 is no address of this host (Cannot assign requested address); "
             "use 127.0.0.1, 0.0.0.0 or one it has"],
        ),
        ({"inference_engine": "ollama", "llamacpp_host": "192.0.2.10"}, []),  # llama.cpp does not start
        ({"reverse_proxy_host": "192.0.2.10"}, []),  # the proxy is off
        (
            {"reverse_proxy_host": "192.0.2.10", "reverse_proxy_enabled": True},
            ["reverse_proxy_host: 192.0.2.10 is no address of this host (Cannot assign requested address); "
             "use 127.0.0.1, 0.0.0.0 or one it has"],
        ),
        ({"open_webui_host": "192.0.2.10", "open_webui_enabled": False}, []),
        ({"monitoring_prometheus_host": "192.0.2.10"}, []),  # monitoring is off
        (
            {"monitoring_prometheus_host": "192.0.2.10", "monitoring_enabled": True},
            ["monitoring_prometheus_host: 192.0.2.10 is no address of this host (Cannot assign requested address); "
             "use 127.0.0.1, 0.0.0.0 or one it has"],
        ),
        (
            {"open_webui_host": "192.0.2.10", "open_webui_enabled": True},
            ["open_webui_host: 192.0.2.10 is no address of this host (Cannot assign requested address); "
             "use 127.0.0.1, 0.0.0.0 or one it has"],
        ),
    ],
)  # fmt: skip
def test_bind_address_rule(changes: dict[str, Any], expected: list[str]) -> None:
    knobs = {"inference_engine": "vllm", "open_webui_enabled": False, "reverse_proxy_enabled": False,
             "monitoring_enabled": False, **dict.fromkeys(ADDRESS_KNOBS, "127.0.0.1")}  # fmt: skip
    knobs |= changes
    host = {"addresses": {name: probe.probe_address(str(knobs[name])) for name in ADDRESS_KNOBS}}
    assert _rendered(rule_bind_addresses(knobs, host, "cpu", PRESET)) == expected
