"""Preflight over a group of engine boxes behind a gateway, through real Ansible: an inventory of
two boxes (both this machine, each its own inventory host) with box1 in llmrig_gateway. Boxes
that disagree are refused in one run, each line naming the box and the knob and never the key;
a group that agrees passes the group check. The rules' every case: tests/unit/rig/test_group.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.helpers import run_playbook

pytestmark = pytest.mark.ansible
PREFLIGHT = "playbooks/preflight.yml"
KEY = "gateway-test-key-0123456789abcdef"


def _inventory(tmp_path: Path, box2: dict[str, Any], both: dict[str, Any]) -> Path:
    """box1 and box2 (this machine), each with ``both``, box2 also with ``box2``: host variables, as
    an inventory's group variables lose to the knobs of group_vars/all."""
    local = {"ansible_connection": "local", "ansible_python_interpreter": "{{ ansible_playbook_python }}", **both}
    hosts = {
        "all": {
            "children": {
                "llmrig": {"hosts": {"box1": dict(local), "box2": {**local, **box2}}},
                "llmrig_gateway": {"hosts": {"box1": None}},
            }
        }
    }
    path = tmp_path / "hosts.yml"
    path.write_text(yaml.safe_dump(hosts, sort_keys=False), encoding="utf-8")
    return path


def test_boxes_that_disagree_are_refused_naming_each_box_and_knob(tmp_path: Path) -> None:
    inventory = _inventory(tmp_path, {"vllm_served_model_name": "another-name"}, {})
    run = run_playbook(PREFLIGHT, check=False, tmp_path=tmp_path, inventory=inventory)
    assert run.returncode != 0
    (failed,) = {message for name, _, message in run.failed_tasks if "disagree" in name}
    for line in (
        "box1: reverse_proxy_enabled: false, but the gateway's front is this box's API proxy",
        "box2: reverse_proxy_enabled: false, but the gateway reaches each box through its API proxy",
        "box2: vllm_served_model_name: is 'another-name', box1's is 'gemma3-270m'",
        "box1: llmrig_api_key: empty, so this box generates a key of its own",
        "box2: llmrig_api_key: empty, so this box generates a key of its own",
    ):
        assert line in failed, failed


def test_a_group_that_agrees_passes_the_group_check(tmp_path: Path) -> None:
    both = {"llmrig_api_key": KEY, "reverse_proxy_enabled": True, "llmrig_allowed_client_cidrs": ["connected"]}
    run = run_playbook(PREFLIGHT, check=False, tmp_path=tmp_path, inventory=_inventory(tmp_path, {}, both))
    assert run.returncode == 0, run.failed_tasks or run.output[-3000:]
    assert "preflight : group | Fail when the boxes behind the gateway disagree" in run.task_names
    assert KEY not in run.output
