"""Preflight's secret rules: each secret knob is '' or a string of its length and alphabet, and a
message names the knob and the rule, never the value."""

from __future__ import annotations

from typing import Any

import pytest

from bench.rig.presets import parse_preset
from bench.rig.rules.secrets import SECRET_KNOBS, rule_secrets
from tests.helpers import group_vars

PRINTABLE = "printable characters, no line break or tab"
GOOD = {
    "llmrig_api_key": "Abc-123._~+/=xyz0",
    "open_webui_secret_key": "q" * 16,
    "open_webui_admin_password": "correct horse €$\"'",
    "llmrig_hf_token": "hf_" + "a1B2_c3-" * 3,
}


def _knobs(**changes: Any) -> dict[str, Any]:
    merged: dict[str, Any] = {}
    for values in group_vars().values():
        merged.update(values or {})
    return {**merged, **dict.fromkeys(SECRET_KNOBS, ""), **changes}


def _found(**changes: Any) -> list[str]:
    knobs = _knobs(**changes)
    preset = parse_preset("gemma3-270m", knobs["model_presets"]["gemma3-270m"])
    return [problem.render() for problem in rule_secrets(knobs, {}, "cpu", preset)]


def test_empty_secrets_and_good_ones_pass() -> None:
    assert _found() == []
    assert _found(**GOOD) == []


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("llmrig_api_key", "pfc", "needs 16 to 512 characters, or '' to generate one (value not shown)"),
        ("llmrig_api_key", "pfKey0123456789;x", "may hold only letters, digits and - . _ ~ + / = (value not shown)"),
        ("llmrig_api_key", "pfKey0123456789 x", "may hold only letters, digits and - . _ ~ + / = (value not shown)"),
        ("llmrig_api_key", "pfKey0123456789x\n", "may hold only letters, digits and - . _ ~ + / = (value not shown)"),
        ("llmrig_api_key", "pfKey0123456789é", "may hold only letters, digits and - . _ ~ + / = (value not shown)"),
        ("llmrig_api_key", ["pfKey0123456789xx"], "must be a string, got a list (value not shown)"),
        ("open_webui_secret_key", "pf", "needs 16 to 512 characters, or '' to generate one (value not shown)"),
        ("open_webui_admin_password", "pfPassword12\nx", f"may hold only {PRINTABLE} (value not shown)"),
        ("open_webui_admin_password", {"p": "pfPassword123"}, "must be a string, got a mapping (value not shown)"),
        ("llmrig_hf_token", "hf_pf", "needs 16 to 256 characters, or '' for anonymous downloads (value not shown)"),
        ("llmrig_hf_token", "hf_pfToken0123456=", "may hold only letters, digits, _ and - (value not shown)"),
    ],
)  # fmt: skip
def test_a_bad_secret_names_the_knob_and_the_rule_never_the_value(name: str, value: Any, message: str) -> None:
    found = _found(**{name: value})
    assert found == [f"{name}: {message}"]
    assert "pf" not in found[0]  # every test value carries it


def test_a_secret_flag_in_extra_args_is_refused() -> None:
    assert _found(vllm_extra_args=["--hf-token=pfTok0123456789"]) == [
        "vllm_extra_args: --hf-token would put a secret on the command line (ps, the journal, deployment.json); "
        "set llmrig_api_key / llmrig_hf_token instead, which reach the engine from 0600 files"
    ]
