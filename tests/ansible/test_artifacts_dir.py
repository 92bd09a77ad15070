"""The controller's artifacts directory: Ansible (the engine role) and bench apply one rule,
bench.rig.artifacts_dir, relative to the repository root, wherever the inventory lives."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from bench.measure.target import find_deployment
from bench.rig import artifacts_dir
from tests.helpers import GROUP_VARS, REPO, group_vars, playbook_dump


def _inventory_outside(tmp_path: Path) -> Path:
    """A localhost inventory in a directory of its own, not ansible/inventory/."""
    folder = tmp_path / "elsewhere" / "inventories" / "lab"
    folder.mkdir(parents=True)
    host = {"ansible_connection": "local", "ansible_python_interpreter": "{{ ansible_playbook_python }}"}
    (folder / "hosts.yml").write_text(yaml.safe_dump({"llmrig": {"hosts": {"localhost": host}}}), encoding="utf-8")
    return folder / "hosts.yml"


def _ansible_dir(tmp_path: Path, extra: dict[str, Any]) -> Path:
    dumped = playbook_dump(
        "tests/ansible/artifacts_dir.yml",
        "artifacts_dump",
        extra,
        tmp_path=tmp_path,
        inventory=_inventory_outside(tmp_path),
    )
    return Path(dumped["dir"])


@pytest.mark.parametrize("value", [None, "out/artifacts", "/var/tmp/llmrig-artifacts"])
def test_ansible_and_bench_agree_with_an_inventory_outside_the_repository(value: str | None, tmp_path: Path) -> None:
    extra = {} if value is None else {"llmrig_artifacts_dir": value}
    knob = value or group_vars()["engine"]["llmrig_artifacts_dir"]
    ansible = _ansible_dir(tmp_path, extra)
    assert ansible == artifacts_dir(GROUP_VARS.parent.parent, knob) / "localhost"
    if value is None:
        assert ansible == REPO / "artifacts" / "localhost"


@pytest.mark.parametrize("value", ["artifacts", "runs/lab"])
def test_bench_finds_deployment_json_where_ansible_puts_it(value: str, tmp_path: Path) -> None:
    """find_deployment reads llmrig_artifacts_dir from group_vars/all/engine.yml of the tree."""
    config_dir = tmp_path / "repo" / "group_vars" / "all"
    config_dir.mkdir(parents=True)
    engine = yaml.safe_load((GROUP_VARS / "engine.yml").read_text(encoding="utf-8"))
    (config_dir / "engine.yml").write_text(yaml.safe_dump({**engine, "llmrig_artifacts_dir": value}), encoding="utf-8")
    shutil.copy(GROUP_VARS / "endpoint.yml", config_dir / "endpoint.yml")
    deployment = artifacts_dir(tmp_path / "repo", value) / "gpu-box" / "deployment.json"
    deployment.parent.mkdir(parents=True)
    deployment.write_text("{}", encoding="utf-8")
    assert find_deployment(None, config_dir) == deployment
