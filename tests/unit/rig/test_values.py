"""bench.rig.values: one reading of a boolean knob and of a wildcard address, for every consumer."""

from __future__ import annotations

from typing import Any

import pytest

from bench.rig import dial_host
from bench.rig.plan_inputs import setup_from_knobs
from bench.rig.rules.knobs import as_bool
from bench.rig.values import TRUE_STRINGS, truthy
from bench.rig.vllm_flags import serve_args

TRUE = ["1", "true", "yes", "on", "y", "t", "True", "YES", " On ", True, 1]
FALSE = ["0", "false", "no", "off", "n", "f", "", "enabled", "2", False, 0, None]
PLAN_KNOBS = {
    "vllm_max_model_len": 4096,
    "vllm_max_num_seqs": 2,
    "vllm_max_num_batched_tokens": 4096,
    "vllm_tensor_parallel_size": 1,
    "vllm_kv_cache_dtype": "auto",
    "vllm_gpu_memory_utilization": 0.9,
    "vllm_mtp_tokens": 2,
    "vllm_cpu_kvcache_space_gib": 1,
    "vllm_kv_cache_memory_bytes": "",
}


def test_the_true_strings_are_ansibles() -> None:
    """Exactly the strings Ansible's bool filter reads as true."""
    assert frozenset(("1", "true", "yes", "on", "y", "t")) == TRUE_STRINGS


@pytest.mark.parametrize("value", TRUE)
def test_true_values(value: Any) -> None:
    """A true string in any case and with spaces around it, True and 1 are true."""
    assert truthy(value) is True


@pytest.mark.parametrize("value", FALSE)
def test_false_values(value: Any) -> None:
    """Every other string, False, 0 and None are false."""
    assert truthy(value) is False


@pytest.mark.parametrize("value", TRUE + FALSE)
def test_rules_flags_and_planner_agree(rendered_gpu: dict[str, Any], value: Any) -> None:
    """The rules, the vLLM command line and the KV planner read one knob value the same way."""
    expected = truthy(value)
    assert as_bool({"vllm_enforce_eager": value}, "vllm_enforce_eager") is expected
    args = serve_args(
        {**rendered_gpu["knobs"], "vllm_enforce_eager": value}, device="cuda", model_path="/m", chat_template_path=""
    )
    assert ("--enforce-eager" in args) is expected
    setup = setup_from_knobs({**PLAN_KNOBS, "vllm_enforce_eager": value}, "cuda", 1.0, [{"memory_mib": 16000}])
    assert setup.enforce_eager is expected


@pytest.mark.parametrize(
    ("address", "instead", "dialled"),
    [
        ("0.0.0.0", "127.0.0.1", "127.0.0.1"),
        ("::", "127.0.0.1", "127.0.0.1"),
        ("0.0.0.0", "gpu-box", "gpu-box"),
        ("127.0.0.1", "gpu-box", "127.0.0.1"),
        ("192.168.1.50", "127.0.0.1", "192.168.1.50"),
        ("localhost", "127.0.0.1", "localhost"),
    ],
)
def test_dial_host(address: str, instead: str, dialled: str) -> None:
    """A wildcard bind address is dialled as ``instead`` (loopback by default); any other as it is."""
    assert dial_host(address, instead) == dialled
    if instead == "127.0.0.1":
        assert dial_host(address) == dialled
