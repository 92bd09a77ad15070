"""bench.rig.engines: the one engine table, and every place that must agree with it."""

from __future__ import annotations

import re
from typing import Any

import pytest
import yaml

from bench.errors import ConfigError
from bench.rig import DEFAULT_ENGINE, ENGINE_NAMES, ENGINES, ENGINES_BY_NAME
from bench.rig.engines import engine_knobs, engine_units
from bench.rig.inputs import KNOB_PREFIXES
from bench.rig.rules.network import HOST_KNOBS, PORT_KNOBS
from bench.rig.rules.resources import PATH_KNOBS
from bench.rig.vllm_flags import OWNED_FLAGS
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
    """A name maps that engine alone, anything else is a ConfigError ('all', every engine, is the
    engine role's _engine_units, rendered by Ansible in tests/ansible/test_engine_units.py)."""
    assert engine_units("ollama") == {"ollama": "ollama.service"}
    with pytest.raises(ConfigError, match=re.escape("'tgi' is not an engine; choose one of vllm, ollama, llamacpp")):
        engine_units("tgi")


def test_every_knob_a_row_names_is_a_knob_with_a_spec() -> None:
    """Each engine's context, extra-arguments, path, GPU and tool knobs are knobs of group_vars/all,
    typed in a role's argument spec, and carry the engine's knob prefix."""
    spec = knob_spec()
    for engine in ENGINES:
        named = [engine.context_knob, engine.extra_args_knob, *engine.path_knobs, engine.gpus_knob, *engine.tool_knobs]
        for knob in filter(None, named):
            assert knob in spec, (engine.name, knob)
            assert knob.startswith(engine.knob_prefix), (engine.name, knob)
        assert spec[engine.context_knob]["type"] == "int"
        if engine.extra_args_knob:
            assert spec[engine.extra_args_knob]["type"] == "list"


def test_the_rows_hold_what_each_engine_does() -> None:
    """vLLM splits a model over GPUs and takes tools through two knobs; Ollama takes no key and no
    extra arguments and needs the preset's ollama_tag; llama.cpp needs its gguf_file."""
    vllm, ollama, llamacpp = (ENGINES_BY_NAME[name] for name in ("vllm", "ollama", "llamacpp"))
    assert (vllm.gpus_knob, vllm.tool_knobs) == (
        "vllm_tensor_parallel_size",
        ("vllm_tool_call_parser", "vllm_enable_auto_tool_choice"),
    )
    assert (ollama.api_key, ollama.extra_args_knob, ollama.owned_flags, ollama.metrics) == (False, "", {}, None)
    assert (ollama.preset_needs, llamacpp.preset_needs, vllm.preset_needs) == ("ollama_tag", "gguf_file", "")
    assert [engine.title for engine in (vllm, ollama, llamacpp)] == ["vLLM", "Ollama", "llama.cpp"]


def test_owned_flags_are_found_however_they_are_spelled() -> None:
    """owner_of: ``--max_model_len=4096`` is vLLM's --max-model-len; a value or an unowned flag has no owner."""
    vllm, ollama, llamacpp = (ENGINES_BY_NAME[name] for name in ("vllm", "ollama", "llamacpp"))
    assert vllm.owned_flags is OWNED_FLAGS
    assert vllm.owner_of("--max_model_len=4096") == "vllm_max_model_len"
    assert vllm.owner_of("-tp") == "vllm_tensor_parallel_size"
    assert llamacpp.owner_of("-c") == llamacpp.context_knob == "llamacpp_ctx_size"
    assert llamacpp.owner_of("--ctx-size=4096") == "llamacpp_ctx_size"
    assert vllm.owner_of("--swap-space") is None
    assert vllm.owner_of("4096") is None
    assert ollama.owner_of("--port") is None


def test_the_rules_and_the_knob_prefixes_come_from_the_rows() -> None:
    """Every engine's path knobs are preflight's, owned by it; its knob prefix marks a knob."""
    for engine in ENGINES:
        for knob, (kind, need) in engine.path_knobs.items():
            assert PATH_KNOBS[knob] == (kind, need, engine.name)
        assert engine.knob_prefix in KNOB_PREFIXES
    assert set(PATH_KNOBS) - {knob for engine in ENGINES for knob in engine.path_knobs} == {
        "llmrig_models_dir",
        "llmrig_config_dir",
        "open_webui_data_dir",
    }


def test_each_metrics_family_names_samples_of_its_own_prefix() -> None:
    """An engine's Prometheus samples all start with its prefix, which tells bench the engine."""
    for engine in ENGINES:
        if engine.metrics is None:
            assert engine.metrics_prefix == ""
            continue
        samples = [
            *engine.metrics.counters.values(),
            *engine.metrics.gauges.values(),
            *engine.metrics.histograms.values(),
        ]
        assert samples
        assert all(sample.startswith(engine.metrics_prefix) for sample in samples), samples


@pytest.mark.parametrize(
    ("scope", "kind", "knobs"),
    [
        ("all", "endpoint", ["vllm_host", "vllm_port", "ollama_host", "ollama_port", "llamacpp_host", "llamacpp_port"]),
        ("all", "extra_args", ["vllm_extra_args", "llamacpp_extra_args"]),
        ("all", "context", ["vllm_max_model_len", "ollama_context_length", "llamacpp_ctx_size"]),
        ("vllm", "gpus", ["vllm_tensor_parallel_size"]),
        ("llamacpp", "gpus", []),
        ("vllm", "tools", ["vllm_tool_call_parser", "vllm_enable_auto_tool_choice"]),
        ("ollama", "paths", ["ollama_models_dir"]),
    ],
)
def test_engine_knobs_hand_the_rows_to_the_yaml_side(scope: str, kind: str, knobs: list[str]) -> None:
    """The llmrig_engine_knobs filter's lists, for every engine or one."""
    assert engine_knobs(scope, kind) == knobs


def test_engine_knobs_refuses_an_unknown_kind_or_engine() -> None:
    """A kind that is none, or an engine that is none, is a ConfigError saying what there is."""
    with pytest.raises(ConfigError, match="'ports' is not a kind of knob; choose one of endpoint, context"):
        engine_knobs("all", "ports")
    with pytest.raises(ConfigError, match="inference_engine: 'tgi' is not an engine"):
        engine_knobs("tgi", "endpoint")
