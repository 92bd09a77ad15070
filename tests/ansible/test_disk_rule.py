"""Preflight's disk rule and the vllm role's check before a download are one rule: both pass a
resumed partial download that the free space alone would not hold, and both refuse a disk that
is too small even with what is already there."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.rig.presets import load_presets
from bench.rig.rules.host import rule_disk
from bench.rig.rules.knobs import GIB
from tests.helpers import GROUP_VARS, group_vars, run_playbook

PRESET = "qwen3.8-27b-w4a16"


def _host(free: int, used: int) -> dict[str, object]:
    return {"disk": {"path": "/srv/llmrig/models", "probe_path": "/srv", "free_bytes": free, "used_bytes": used}}


@pytest.mark.parametrize(
    ("free_gib", "used_gib", "fits"),
    [
        (200, 0, True),  # a fresh download with room to spare
        (3, 21, True),  # resumed: most of the weights are there, little free space is left
        (3, 0, False),  # the same free space with nothing downloaded yet
        (1, 2, False),  # too small even with the partial download
    ],
)
def test_preflight_and_the_role_agree(free_gib: int, used_gib: int, fits: bool, tmp_path: Path) -> None:
    models = group_vars()["models"]
    preset = load_presets(GROUP_VARS / "models.yml")[PRESET]
    knobs = {"llmrig_disk_headroom_gib": models["llmrig_disk_headroom_gib"]}
    host = _host(free_gib * GIB, used_gib * GIB)
    preflight = rule_disk(knobs, host, "cuda", preset)
    assert (preflight == []) == fits, preflight
    run = run_playbook(
        "tests/ansible/check_disk.yml",
        {"llmrig_host": host, "llmrig_preset": models["model_presets"][PRESET], "llmrig_model": PRESET},
        check=False,
        tmp_path=tmp_path,
    )
    assert (run.returncode == 0) == fits, run.failed_tasks
    if not fits:
        assert [message for _, _, message in run.failed_tasks] != []
        assert preflight[0].render() in run.failed_tasks[0][2]
