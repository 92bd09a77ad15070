"""Session fixtures: what Ansible really renders for a CPU host and for a two-GPU box; the check
of every result file a test leaves in its ``tmp_path``; and the ``pinned`` mark on every test
that pins processes to cores at real-time priority (the ``isolated`` fixture), so that
scripts/test runs those one at a time, beside no other test."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import playbook_dump
from tests.result_files import check_results_under


def _rendered(host: str, tmp_path: Path) -> dict[str, Any]:
    return playbook_dump("tests/ansible/dump_knobs.yml", "knobs_dump", {}, host=host, tmp_path=tmp_path)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark each test that uses the ``isolated`` fixture (pinned cores, SCHED_FIFO) ``pinned``."""
    for item in items:
        if "isolated" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.pinned)


@pytest.fixture(scope="session")
def rendered_cpu(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Knobs, host facts and resolution that preflight renders on this machine (no GPU)."""
    return _rendered("cpu", tmp_path_factory.mktemp("cpu"))


@pytest.fixture(scope="session")
def rendered_gpu(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The same on this machine with the two-GPU nvidia-smi protocol fake in front of PATH."""
    return _rendered("gpu", tmp_path_factory.mktemp("gpu"))


@pytest.fixture(autouse=True)
def _result_files_match_the_schema(request: pytest.FixtureRequest) -> Iterator[None]:
    """After a test that used ``tmp_path``, every result file ``bench run`` left there matches
    the committed schema and reads back through bench's types (tests/result_files.py)."""
    tmp_path = request.getfixturevalue("tmp_path") if "tmp_path" in request.fixturenames else None
    yield
    if tmp_path is not None:
        check_results_under(tmp_path)
