"""The llmrig filter plugin: the same rules as bench, reachable even without an installed bench."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from bench.errors import ConfigError
from tests import deployments
from tests.helpers import REPO, load_file_module

PLUGIN = REPO / "ansible" / "plugins" / "filter" / "llmrig.py"


def test_plugin_falls_back_to_the_checkout(tmp_path: Path) -> None:
    """With no installed bench on the path (site disabled), the plugin imports bench from the checkout."""
    script = (
        "import importlib.util, sys\n"
        "assert importlib.util.find_spec('bench') is None, 'bench must not be importable before the plugin loads'\n"
        f"spec = importlib.util.spec_from_file_location('llmrig_filters', {str(PLUGIN)!r})\n"
        "module = importlib.util.module_from_spec(spec); spec.loader.exec_module(module)\n"
        "print(sorted(module.FilterModule().filters()))\n"
        "print(sys.modules['bench'].__file__)\n"
    )
    yaml_dir = str(Path(yaml.__file__).resolve().parents[1])
    done = subprocess.run(
        [sys.executable, "-S", "-c", script],
        cwd=tmp_path,
        env={"PYTHONPATH": yaml_dir},
        capture_output=True,
        text=True,
        check=True,
    )
    names, origin = done.stdout.splitlines()
    assert names == str(
        sorted(
            [
                "llmrig_artifacts_path",
                "llmrig_gateway_sources",
                "llmrig_group_problems",
                "llmrig_check_input",
                "llmrig_knob_candidates",
                "llmrig_engine_has_metrics",
                "llmrig_role_variables",
                "llmrig_check",
                "llmrig_dial_host",
                "llmrig_ip_allow",
                "llmrig_disk_errors",
                "llmrig_engine_units",
                "llmrig_engine_knobs",
                "llmrig_engine_authenticates",
                "llmrig_deployment",
                "llmrig_deployment_read",
                "llmrig_native_tools",
                "llmrig_env_file",
                "llmrig_firewall_rules",
                "llmrig_firewall_stale",
                "llmrig_firewall_missing",
                "llmrig_connected_networks",
                "llmrig_ufw_settled",
                "llmrig_knob_spec",
                "llmrig_nvidia_hardware",
                "llmrig_nvidia_state",
                "llmrig_public_env",
                "llmrig_resolve",
                "llmrig_vllm_args",
                "llmrig_vllm_env",
                "llmrig_vllm_startup_facts",
                "llmrig_engine_ready",
                "llmrig_mtp_refusal",
                "llmrig_open_webui_env",
                "llmrig_pip_config",
                "llmrig_url_parts",
                "llmrig_redact_url",
            ]
        )
    )
    assert origin == str(REPO / "bench" / "__init__.py")


def test_plugin_loads_nothing_of_the_harness_or_the_cli(tmp_path: Path) -> None:
    """Loading the plugin, and with it bench's package root, imports no module of bench.measure or bench.cli."""
    script = (
        "import importlib.util, sys\n"
        f"spec = importlib.util.spec_from_file_location('llmrig_filters', {str(PLUGIN)!r})\n"
        "module = importlib.util.module_from_spec(spec); spec.loader.exec_module(module)\n"
        "print(sorted(name for name in sys.modules if name.startswith(('bench.measure', 'bench.cli'))))\n"
        "print(sorted(name for name in sys.modules if name.startswith('bench.rig')))\n"
    )
    done = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True, check=True)
    outside, rig = done.stdout.splitlines()
    assert outside == "[]"
    assert "'bench.rig.rules.host'" in rig


def test_filters_render_problems(rendered_gpu: dict[str, Any]) -> None:
    """llmrig_check returns rendered 'variable: message' lines split by severity."""
    llmrig = load_file_module(PLUGIN, "llmrig_filters")
    knobs = {**rendered_gpu["knobs"], "vllm_port": 8080, "vllm_model_revision": "main", "vllm_max_num_seqs": 2}
    result = llmrig.llmrig_check(knobs, rendered_gpu["host"])
    assert result["errors"] == [
        "open_webui_port: port 8080 is already taken by vllm_port; give open_webui_port another port"
    ]
    assert [line.split(":")[0] for line in result["warnings"]] == ["vllm_model_revision"]
    assert result["notes"] == []  # the KV plan stays quiet once another rule found an error
    fine = llmrig.llmrig_check({**knobs, "vllm_port": 8000}, rendered_gpu["host"])
    assert fine["errors"] == []
    assert [line.split(" tokens")[0] for line in fine["notes"]] == ["KV plan: 226,645"]
    resolved = llmrig.llmrig_resolve(knobs, rendered_gpu["host"])
    assert (resolved["device"], resolved["model"], resolved["errors"]) == ("cuda", "qwen3.8-27b-w4a16", [])
    assert resolved["preset"]["served_name"] == "qwen3.8-27b"


def test_the_engine_table_filters() -> None:
    """llmrig_engine_knobs lists a row's knobs for the YAML side, llmrig_native_tools asks the row
    whether the engine takes tools; an unknown engine is refused naming inference_engine."""
    llmrig = load_file_module(PLUGIN, "llmrig_filters")
    assert llmrig.llmrig_engine_knobs("all", "endpoint")[:2] == ["vllm_host", "vllm_port"]
    assert llmrig.llmrig_engine_knobs("ollama", "gpus") == []
    assert [llmrig.llmrig_engine_authenticates(name) for name in ("vllm", "llamacpp", "ollama")] == [True, True, False]
    knobs = {"vllm_tool_call_parser": "hermes", "vllm_enable_auto_tool_choice": True}
    assert llmrig.llmrig_native_tools("vllm", knobs, "") is True
    assert llmrig.llmrig_native_tools("llamacpp", knobs, "") is False
    with pytest.raises(ConfigError, match="inference_engine: 'tgi' is not an engine"):
        llmrig.llmrig_native_tools("tgi", {}, "")


def test_the_deployment_filters_write_and_read_the_typed_record() -> None:
    """llmrig_deployment adds the schema_version to the role's parts and refuses a part that does
    not fit; llmrig_deployment_read gives a record of schema_version 1 its empty local URL."""
    llmrig = load_file_module(PLUGIN, "llmrig_filters")
    parts = {key: value for key, value in deployments.record().items() if key != "schema_version"}
    written = llmrig.llmrig_deployment(parts)
    assert written == {"schema_version": 3, **parts}
    with pytest.raises(
        ConfigError, match=r"deployment\.json: not a deployment record of schema_version 3: unit: missing"
    ):
        llmrig.llmrig_deployment({key: value for key, value in parts.items() if key != "unit"})
    old = {**written, "schema_version": 1, "endpoint": {**parts["endpoint"]}}
    del old["endpoint"]["local_base_url"]
    read = llmrig.llmrig_deployment_read(old, "/etc/llmrig/deployment.json")
    assert (read["schema_version"], read["endpoint"]["local_base_url"]) == (3, "")
