"""bench.rig.inputs: names, types and ranges, checked before any rule reads a value."""

from __future__ import annotations

import math

import pytest

from bench.rig.inputs import (
    PUBLISHED_FACTS,
    Range,
    candidates,
    check_input,
    parse_range,
    range_problems,
    type_problems,
    unknown_names,
)
from bench.rig.rules.secrets import SECRET_KNOBS
from tests.helpers import knob_spec

SPEC = {
    "vllm_port": {"type": "int", "description": "TCP port. Range: 1 to 65535."},
    "vllm_gpu_memory_utilization": {"type": "float", "description": "Fraction. Range: above 0, at most 1."},
    "llmrig_disk_headroom_gib": {"type": "int", "description": "GiB left free. Range: at least 0."},
    "inference_engine": {"type": "str", "choices": ["vllm", "ollama"], "description": "Engine."},
    "model": {"type": "str", "description": "Preset."},
}


@pytest.mark.parametrize(
    ("description", "expected"),
    [
        ("Port. Range: 1 to 65535.", Range("1 to 65535", low=1, high=65535)),
        ("Range: at least 0.", Range("at least 0", low=0)),
        ("Range: above 0, at most 1.", Range("above 0, at most 1", low=0, low_open=True, high=1)),
        ("Range: above -1.5, below 2.", Range("above -1.5, below 2", low=-1.5, low_open=True, high=2, high_open=True)),
        ("No range here.", None),
        ("Range: plenty.", None),
    ],
)
def test_parse_range(description: str, expected: Range | None) -> None:
    assert parse_range(description) == expected


@pytest.mark.parametrize(
    ("allowed", "inside", "outside"),
    [
        (Range("1 to 65535", low=1, high=65535), [1, 8000, 65535], [0, 65536, -1]),
        (Range("above 0, at most 1", low=0, low_open=True, high=1), [0.01, 1], [0, 1.01, -0.5]),
        (Range("at least 0", low=0), [0, 10**9], [-50]),
        (Range("below 2", high=2, high_open=True), [1.99, -math.inf], [2]),
    ],
)
def test_range_holds(allowed: Range, inside: list[float], outside: list[float]) -> None:
    assert all(allowed.holds(value) for value in inside)
    assert not any(allowed.holds(value) for value in outside)


def test_candidates_are_model_and_the_prefixed_names() -> None:
    names = [
        "model",
        "models",
        "vllm_port",
        "inference_engin",
        "ansible_host",
        "_engine_unit",
        "vault_x",
        "open_webui_x",
    ]
    assert candidates(names) == ["inference_engin", "model", "open_webui_x", "vllm_port"]


def test_a_typo_names_the_closest_knob_and_where_it_was_set() -> None:
    problems = unknown_names(
        ["vllm_gpu_memory_utilisation", "inference_engin", "vllm_port", *PUBLISHED_FACTS],
        SPEC,
        {"inference_engin": "inventory/group_vars/all.yml line 3"},
    )
    assert [p.render() for p in problems] == [
        "inference_engin: is not an llmrig knob (set in inventory/group_vars/all.yml line 3); "
        "did you mean inference_engine?",
        "vllm_gpu_memory_utilisation: is not an llmrig knob; did you mean vllm_gpu_memory_utilization?",
    ]


def test_a_name_close_to_nothing_points_at_the_reference() -> None:
    problems = unknown_names(["vllm_frobnicate"], SPEC, {})
    assert [p.render() for p in problems] == [
        "vllm_frobnicate: is not an llmrig knob; see the variable reference in docs/variables.md"
    ]


def test_ansibles_argument_errors_become_one_short_line_each() -> None:
    errors = [
        "argument 'vllm_port' is of type str and we were unable to convert to int: \"'many'\" cannot be converted",
        "argument 'vllm_mtp' is of type str and we were unable to convert to bool: The value 'maybe' is not a "
        "valid boolean. Valid booleans include: 'yes', 1, 0",
        "value of inference_engine must be one of: vllm, ollama, got: docker",
        "missing required arguments: model",
    ]
    values = {"vllm_port": "many", "vllm_mtp": "maybe", "inference_engine": "docker"}
    rendered = [p.render() for p in type_problems(errors, values, {"vllm_port": "extra vars (-e)"})]
    assert rendered == [
        "vllm_port: needs a whole number, got 'many' (set in extra vars (-e))",
        "vllm_mtp: needs true or false, got 'maybe'",
        "inference_engine: must be one of vllm, ollama; got 'docker'",
        "model: is not set; group_vars/all defines it, so was that file changed?",
    ]


def test_values_out_of_range_are_refused_naming_the_range() -> None:
    values = {"vllm_port": 0, "vllm_gpu_memory_utilization": "1.5", "llmrig_disk_headroom_gib": -50}
    rendered = [p.render() for p in range_problems(values, SPEC, {"vllm_port": "host_vars/box.yml line 2"})]
    assert rendered == [
        "vllm_port: must be 1 to 65535; got 0 (set in host_vars/box.yml line 2)",
        "vllm_gpu_memory_utilization: must be above 0, at most 1; got '1.5'",
        "llmrig_disk_headroom_gib: must be at least 0; got -50",
    ]
    assert (
        range_problems({"vllm_port": 8000, "vllm_gpu_memory_utilization": 1, "llmrig_disk_headroom_gib": 0}, SPEC, {})
        == []
    )


def test_a_value_with_a_type_error_is_not_also_out_of_range() -> None:
    """'many' for vllm_port is one finding (its type), not two; names come first."""
    problems = check_input(
        SPEC,
        {"vllm_port": "many", "vllm_prot": 1, "llmrig_disk_headroom_gib": -1},
        ["argument 'vllm_port' is of type str and we were unable to convert to int: cannot"],
        {},
    )
    assert [p.variable for p in problems] == ["vllm_prot", "vllm_port", "llmrig_disk_headroom_gib"]


def test_a_secrets_value_is_never_quoted() -> None:
    spec = {**SPEC, "llmrig_api_key": {"type": "str", "no_log": True, "description": "Key."}}
    errors = [
        "argument 'llmrig_api_key' is of type dict and we were unable to convert to str: {'k': 'pfSecret9x'}",
        "argument 'llmrig_hf_token' is of type dict and we were unable to convert to str: x",
        "some future message about llmrig_api_key quoting pfSecret9x",
    ]
    values = {"llmrig_api_key": {"k": "pfSecret9x"}, "llmrig_hf_token": {"t": "hf_pfTok"}}
    rendered = " ".join(p.render() for p in check_input(spec, values, errors, {}))
    assert "llmrig_api_key: needs str, got (a value not shown: it is secret)" in rendered
    assert "llmrig_api_key: has the wrong type or value (not shown: it is secret)" in rendered
    assert "pfSecret9x" not in rendered
    assert "hf_pfTok" not in rendered


def test_a_roles_own_variable_is_no_typo() -> None:
    problems = unknown_names(["nvidia_driver_test_no_kernel", "vllm_user"], [*SPEC, "nvidia_driver_test_no_kernel"], {})
    assert [p.variable for p in problems] == ["vllm_user"]
    assert check_input(SPEC, {"vllm_user": "vllm"}, [], {}, {"vllm_user": {"type": "str", "default": "vllm"}}) == []


def test_a_roles_own_variable_keeps_to_its_range() -> None:
    own = {"nvidia_driver_reboot_timeout_s": {"type": "int", "default": 900, "description": "S. Range: at least 60."}}
    problems = check_input(SPEC, {"nvidia_driver_reboot_timeout_s": 0}, [], {}, own)
    assert [p.render() for p in problems] == ["nvidia_driver_reboot_timeout_s: must be at least 60; got 0"]


def test_a_knob_named_like_a_secret_is_not_one() -> None:
    """What is secret is the list of secret knobs: a knob with ``tokens`` (or key, auth, pass) in its
    name has its value shown and its range checked."""
    spec = {
        **SPEC,
        "vllm_max_num_batched_tokens": {"type": "int", "description": "Tokens. Range: at least 1."},
        "vllm_mtp_tokens": {"type": "int", "description": "Draft tokens. Range: 1 to 4."},
    }
    errors = ["argument 'vllm_max_num_batched_tokens' is of type str and we were unable to convert to int: x"]
    problems = check_input(spec, {"vllm_max_num_batched_tokens": "many", "vllm_mtp_tokens": 9}, errors, {})
    assert [p.render() for p in problems] == [
        "vllm_max_num_batched_tokens: needs a whole number, got 'many'",
        "vllm_mtp_tokens: must be 1 to 4; got 9",
    ]


def test_the_secret_list_is_the_knobs_the_specs_mark_no_log() -> None:
    assert {name for name, option in knob_spec().items() if option.get("no_log")} == SECRET_KNOBS


def test_a_urls_credentials_are_not_quoted() -> None:
    spec = {**SPEC, "llmrig_pip_find_links": {"type": "list", "elements": "str", "description": "Links."}}
    errors = ["argument 'llmrig_pip_find_links' is of type str and we were unable to convert to list: x"]
    values = {"llmrig_pip_find_links": "https://me:pfPass9@mirror.example/wh"}
    rendered = " ".join(p.render() for p in check_input(spec, values, errors, {}))
    assert rendered == "llmrig_pip_find_links: needs a list, got 'https://***@mirror.example/wh'"
