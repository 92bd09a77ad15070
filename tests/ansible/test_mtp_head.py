"""The vllm role refuses vllm_mtp: true for a downloaded checkpoint without MTP tensors, naming the
file it read, before the unit starts (roles/vllm/tasks/mtp_head.yml, run by real Ansible on
checkpoint files written here)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers import PlaybookRun, run_playbook

pytestmark = pytest.mark.ansible

PLAYBOOK = "tests/ansible/check_mtp_head.yml"
INDEX = "model.safetensors.index.json"


def _checkpoint(folder: Path, names: list[str]) -> Path:
    folder.mkdir()
    (folder / "config.json").write_text("{}", encoding="utf-8")
    index = folder / INDEX
    weight_map = dict.fromkeys(names, "model-00001-of-00001.safetensors")
    index.write_text(json.dumps({"weight_map": weight_map}), encoding="utf-8")
    return index


def _run(tmp_path: Path, model_dir: Path, mtp: bool, check: bool = False) -> PlaybookRun:
    return run_playbook(PLAYBOOK, {"__vllm_model_dir": str(model_dir), "vllm_mtp": mtp}, check=check, tmp_path=tmp_path)


def test_a_checkpoint_with_its_mtp_head_passes(tmp_path: Path) -> None:
    _checkpoint(tmp_path / "model", ["model.layers.0.mlp.down_proj.weight", "mtp.fc.weight"])
    run = _run(tmp_path, tmp_path / "model", mtp=True)
    assert (run.returncode, run.failed_tasks, run.changed) == (0, [], 0)


def test_a_checkpoint_without_mtp_tensors_is_refused_naming_the_index(tmp_path: Path) -> None:
    index = _checkpoint(tmp_path / "model", ["model.layers.0.mlp.down_proj.weight", "lm_head.weight"])
    run = _run(tmp_path, tmp_path / "model", mtp=True)
    assert run.returncode != 0
    ((name, _, message),) = run.failed_tasks
    assert name == "vllm : mtp_head | Fail when the checkpoint has no MTP head to draft with (vllm_mtp)"
    assert json.loads(message) == [
        f"vllm_mtp: {index} lists 2 tensors and none of an MTP head (no name with an 'mtp' part): this "
        "checkpoint dropped it, so every draft would be rejected; set vllm_mtp: false"
    ]


def test_nothing_is_read_with_mtp_off_nor_in_check_mode_before_the_download(tmp_path: Path) -> None:
    assert _run(tmp_path, tmp_path / "missing", mtp=False).returncode == 0
    assert _run(tmp_path, tmp_path / "missing", mtp=True, check=True).returncode == 0
    # Outside check mode a missing model is a problem, not a pass.
    refused = _run(tmp_path, tmp_path / "missing", mtp=True)
    assert refused.returncode != 0
    assert "vllm_mtp: cannot tell whether the checkpoint has an MTP head: cannot list" in refused.failed_tasks[0][2]
