"""Ansible's own check of each role's entry point, in a real playbook: including a role with the
real group_vars passes its meta/argument_specs.yml, and a knob its spec refuses stops the role
before its first task, naming the knob (preflight checked the same knobs before, as the union)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.helpers import run_playbook

pytestmark = pytest.mark.ansible

PLAYBOOK = "tests/ansible/role_specs.yml"
ROLES = [
    "firewall",
    "nvidia_driver",
    "engine",
    "vllm",
    "ollama",
    "llamacpp",
    "watchdog",
    "reverse_proxy",
    "secrets",
    "grafana",
    "monitoring",
]
BAD = [
    ("nvidia_driver", "nvidia_driver_source", "debian"),
    ("engine", "llmrig_pip_no_index", "perhaps"),
    ("vllm", "vllm_mtp_tokens", "two"),
    ("ollama", "ollama_kv_cache_type", "q2_k"),
    ("llamacpp", "llamacpp_parallel", "many"),
    ("watchdog", "watchdog_enabled", "sometimes"),
    ("reverse_proxy", "reverse_proxy_port", "eight thousand"),
    ("firewall", "llmrig_firewall_enabled", "maybe"),
    ("engine", "llmrig_secret_length", "long"),
    ("grafana", "grafana_port", "three thousand"),
    ("monitoring", "monitoring_prometheus_port", "ninety ninety"),
]


def _run(tmp_path: Path, **extra_vars: Any) -> Any:
    return run_playbook(PLAYBOOK, extra_vars, flags=("--tags", "role_specs"), tmp_path=tmp_path)


def test_every_role_passes_its_own_argument_spec(tmp_path: Path) -> None:
    """Each role, included after preflight on this host, passes Ansible's check of entry point main."""
    run = _run(tmp_path, roles_under_test=ROLES)
    assert run.returncode == 0, run.failed_tasks or run.output[-3000:]
    assert run.changed == 0
    for role in ROLES:
        assert any(name.startswith(f"{role} : Validating arguments against arg spec 'main'") for name in run.task_names)


@pytest.mark.parametrize(("role", "knob", "value"), BAD, ids=[role for role, _, _ in BAD])
def test_a_value_the_role_spec_refuses_stops_the_role(role: str, knob: str, value: str, tmp_path: Path) -> None:
    """A bad value that reaches the role (set after preflight) fails the role's argument check, naming the knob."""
    run = _run(tmp_path, roles_under_test=[role], bad_knob=knob, bad_value=value)
    assert run.returncode != 0
    assert run.changed == 0
    assert len(run.failed_tasks) == 1, run.failed_tasks
    name, _, message = run.failed_tasks[0]
    assert name.startswith(f"{role} : Validating arguments against arg spec 'main'"), name
    assert knob in message, message


def test_site_with_tags_preflight_runs_the_checks_only(tmp_path: Path) -> None:
    """`site.yml --tags preflight` runs preflight and the roles' argument checks (tagged always) and
    nothing else; every value those checks read exists at that point (no registered result of a skipped task)."""
    run = run_playbook("site.yml", flags=("--tags", "preflight"), tmp_path=tmp_path)
    assert run.returncode == 0, run.failed_tasks or run.output[-3000:]
    assert run.changed == 0
    checks = [name for name in run.task_names if name.startswith("preflight : ") or "Validating arguments" in name]
    assert checks == run.task_names
    assert any(name.startswith("watchdog : Validating arguments") for name in run.task_names)
