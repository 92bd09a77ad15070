"""Session fixtures: what Ansible really renders for a CPU host and for a two-GPU box."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.helpers import playbook_dump


def _rendered(host: str, tmp_path: Path) -> dict[str, Any]:
    return playbook_dump("tests/ansible/dump_knobs.yml", "knobs_dump", {}, host=host, tmp_path=tmp_path)


@pytest.fixture(scope="session")
def rendered_cpu(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Knobs, host facts and resolution that preflight renders on this machine (no GPU)."""
    return _rendered("cpu", tmp_path_factory.mktemp("cpu"))


@pytest.fixture(scope="session")
def rendered_gpu(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The same on this machine with the two-GPU nvidia-smi protocol fake in front of PATH."""
    return _rendered("gpu", tmp_path_factory.mktemp("gpu"))
