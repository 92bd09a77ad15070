"""bench.rig.engines: the one engine table, and every place that must agree with it."""

from __future__ import annotations

import re
from typing import Any

import pytest
import yaml

from bench.errors import ConfigError
from bench.rig import DEFAULT_ENGINE, ENGINE_NAMES, ENGINES, ENGINES_BY_NAME
from bench.rig.engines import engine_units
from bench.rig.rules.network import HOST_KNOBS, PORT_KNOBS
from tests.helpers import REPO, group_vars, knob_spec


def _load(path: str) -> Any:
    return yaml.safe_load((REPO / path).read_text(encoding="utf-8"))


def test_the_table_holds_the_three_engines() -> None:
    """vllm, ollama and llamacpp, in that order, each once; the lookup finds each by name."""
    assert ENGINE_NAMES == ("vllm", "ollama", "llamacpp")
    assert [ENGINES_BY_NAME[name] for name in ENGINE_NAMES] == list(ENGINES)


def test_knobs_and_default_ports_equal_group_vars() -> None:
    """Each engine's host and port knobs are in group_vars/all/endpoint.yml, the port there is the table's."""
    endpoint = group_vars()["endpoint"]
    for engine in ENGINES:
        assert engine.host_knob in endpoint
        assert endpoint[engine.port_knob] == engine.default_port


def test_the_default_engine_is_group_vars_inference_engine() -> None:
    """With nothing naming an engine, bench assumes the one group_vars/all/engine.yml sets."""
    assert group_vars()["engine"]["inference_engine"] == DEFAULT_ENGINE.name == "vllm"


def test_the_preflight_spec_offers_exactly_the_table() -> None:
    """The knob spec's choices for inference_engine (literal, as Ansible needs) are the table's names."""
    assert tuple(knob_spec()["inference_engine"]["choices"]) == ENGINE_NAMES


@pytest.mark.parametrize("engine", ENGINES, ids=ENGINE_NAMES)
def test_each_role_publishes_the_table(engine: Any) -> None:
    """The engine's role names the table's unit, and its health URL ends in the table's health path."""
    role_vars = _load(f"roles/{engine.name}/vars/main.yml")
    assert role_vars[f"_{engine.name}_unit"] == engine.unit
    publish = _load(f"roles/{engine.name}/tasks/publish.yml")[0]["ansible.builtin.set_fact"]["llmrig_engine"]
    health = str(publish["health_url"])
    if health.startswith("{{ _") and health.endswith("}}"):  # a var of the role, e.g. _vllm_health_url
        health = str(role_vars[health.removeprefix("{{ ").removesuffix(" }}")])
    assert health.endswith(f"}}}}{engine.health_path}"), health
    assert bool(publish["api_key_file"]) is engine.api_key
    assert bool(publish["metrics_url"]) is bool(engine.metrics_prefix)


def test_the_rules_check_every_engine_endpoint() -> None:
    """The port and address rules cover every engine of the table, then Open WebUI."""
    assert (*(engine.port_knob for engine in ENGINES), "open_webui_port") == PORT_KNOBS
    assert (*(engine.host_knob for engine in ENGINES), "open_webui_host") == HOST_KNOBS


def test_engine_units() -> None:
    """'all' maps every engine to its unit, a name maps that one alone, anything else is a ConfigError."""
    assert engine_units("all") == {"vllm": "vllm.service", "ollama": "ollama.service", "llamacpp": "llamacpp.service"}
    assert engine_units("ollama") == {"ollama": "ollama.service"}
    with pytest.raises(ConfigError, match=re.escape("'tgi' is not an engine; choose one of vllm, ollama, llamacpp")):
        engine_units("tgi")
