"""Preflight's port rule: engines may share one port (only one of them runs at a time), and no
engine shares Open WebUI's."""

from __future__ import annotations

from typing import Any

from bench.rig.engines import ENGINES
from bench.rig.presets import parse_preset
from bench.rig.rules.network import rule_ports
from tests.helpers import group_vars


def _knobs(**changes: Any) -> dict[str, Any]:
    merged: dict[str, Any] = {}
    for values in group_vars().values():
        merged.update(values or {})
    return {**merged, **changes}


def _ports(**changes: Any) -> list[tuple[str, str]]:
    knobs = _knobs(**changes)
    preset = parse_preset("gemma3-270m", knobs["model_presets"]["gemma3-270m"])
    return [(problem.variable, problem.message) for problem in rule_ports(knobs, {}, "cpu", preset)]


def test_the_defaults_give_every_service_its_own_port() -> None:
    """group_vars/all as shipped: nothing to say."""
    assert _ports() == []


def test_every_engine_on_one_port_passes() -> None:
    """The demo box's setting: vLLM, llama.cpp and Ollama all on 8000, whichever serves."""
    assert _ports(**{engine.port_knob: 8000 for engine in ENGINES}) == []


def test_an_engine_on_open_webuis_port_is_refused() -> None:
    """Open WebUI runs beside the engine: an engine on its port is an error naming the knob to change."""
    assert _ports(llamacpp_port=8080) == [
        ("open_webui_port", "port 8080 is already taken by llamacpp_port; give open_webui_port another port")
    ]
    shared = {engine.port_knob: 8080 for engine in ENGINES}
    assert [variable for variable, _ in _ports(**shared)] == ["open_webui_port"]


def test_an_engine_on_open_webuis_port_passes_while_open_webui_is_off() -> None:
    """With open_webui_enabled false nothing listens on open_webui_port: each engine may have it."""
    for engine in ENGINES:
        assert _ports(**{engine.port_knob: 8080, "open_webui_enabled": False}) == []
    assert _ports(**{engine.port_knob: 8080 for engine in ENGINES}, open_webui_enabled="false") == []
