"""Role variables that the filter plugin derives from the rig core, rendered by real Ansible:
the engine role's units (the engine table) and the engines' dialled addresses (dial_host)."""

from __future__ import annotations

import pytest
import yaml

from bench.rig import ENGINES
from tests.helpers import REPO, ansible_render

pytestmark = pytest.mark.ansible


def _render(expression: str, **extra_vars: str) -> object:
    """``expression`` (a role variable's value) templated by ansible on localhost."""
    return ansible_render(expression, dict(extra_vars))


def _role_vars(role: str) -> dict[str, str]:
    return dict(yaml.safe_load((REPO / "roles" / role / "vars" / "main.yml").read_text(encoding="utf-8")))


def test_the_engine_role_takes_its_units_from_the_table() -> None:
    """roles/engine/vars/main.yml's _engine_units, templated by ansible, is the table's name-to-unit map."""
    expression = _role_vars("engine")["_engine_units"]
    assert "llmrig_engine_units" in expression  # derived, not a literal list
    rendered = _render(expression)
    assert rendered == {engine.name: engine.unit for engine in ENGINES}
    assert rendered == {"vllm": "vllm.service", "ollama": "ollama.service", "llamacpp": "llamacpp.service"}


@pytest.mark.parametrize(
    ("bind", "local", "client"), [("0.0.0.0", "127.0.0.1", "gpu-box"), ("192.168.1.50", "192.168.1.50", "192.168.1.50")]
)
def test_engines_dial_a_wildcard_bind_by_one_rule(bind: str, local: str, client: str) -> None:
    """Each engine role's health URL dials loopback and its client address the inventory host
    when the engine binds every interface, and the bind address itself otherwise."""
    for engine in ENGINES:
        role = _role_vars(engine.name)
        knobs = {engine.host_knob: bind, engine.port_knob: str(engine.default_port), "ansible_host": "gpu-box"}
        if engine.name == "ollama":  # its health URL is _ollama_api, built on _ollama_local
            dialled, expected = role["_ollama_local"], local
        else:
            dialled, expected = role[f"_{engine.name}_health_url"], f"http://{local}:{engine.default_port}/health"
        assert "llmrig_dial_host" in dialled
        assert _render(dialled, **knobs) == expected
        assert _render(role[f"_{engine.name}_client_host"], **knobs) == client


def test_the_firewall_takes_every_engines_endpoint_knobs_from_the_table() -> None:
    """roles/firewall/vars/main.yml's _firewall_knobs: its shared knobs, then each engine's host and port."""
    role = _role_vars("firewall")
    assert "llmrig_engine_knobs('endpoint')" in role["_firewall_knobs"]
    rendered = ansible_render(
        "{{ _firewall_knobs }}", {name: role[name] for name in ("_firewall_knobs", "_firewall_shared_knobs")}
    )
    endpoint = [knob for engine in ENGINES for knob in (engine.host_knob, engine.port_knob)]
    assert rendered == [*role["_firewall_shared_knobs"], *endpoint]


@pytest.mark.parametrize(("engine", "needed"), [("vllm", 2), ("llamacpp", 1), ("ollama", 1)])
def test_verify_counts_the_gpus_by_the_engines_gpus_knob(engine: str, needed: int) -> None:
    """roles/engine/tasks/verify.yml: vLLM needs vllm_tensor_parallel_size GPUs, an engine whose row
    names no GPUs knob one."""
    tasks = yaml.safe_load((REPO / "roles" / "engine" / "tasks" / "verify.yml").read_text(encoding="utf-8"))
    (check,) = [task for task in tasks if task["name"].startswith("verify | The GPUs the engine needs")]
    variables = {**check["vars"], "inference_engine": engine, "vllm_tensor_parallel_size": 2}
    assert int(str(ansible_render("{{ __engine_gpus_needed }}", variables))) == needed


@pytest.mark.parametrize(
    ("engine", "knobs", "preset_parser", "native"),
    [
        ("vllm", {"vllm_tool_call_parser": "hermes", "vllm_enable_auto_tool_choice": True}, "", True),
        ("vllm", {"vllm_tool_call_parser": "", "vllm_enable_auto_tool_choice": False}, "hermes", False),
        ("llamacpp", {"vllm_tool_call_parser": "hermes", "vllm_enable_auto_tool_choice": True}, "", False),
        ("ollama", {"vllm_tool_call_parser": "", "vllm_enable_auto_tool_choice": False}, "hermes", True),
    ],
)
def test_open_webui_asks_the_table_whether_the_engine_takes_tools(
    engine: str, knobs: dict[str, object], preset_parser: str, native: bool
) -> None:
    """roles/open_webui/vars/main.yml's _open_webui_native_tools: the engine's tool knobs from the
    table (vLLM's), else the preset's tool-call parser."""
    role = _role_vars("open_webui")
    variables = {
        "_open_webui_tool_knobs": role["_open_webui_tool_knobs"],
        "_open_webui_native_tools": role["_open_webui_native_tools"],
        "__open_webui_engine": {"name": engine},
        "llmrig_preset": {"tool_call_parser": preset_parser},
        **knobs,
    }
    assert ansible_render("{{ _open_webui_native_tools }}", variables) is native
