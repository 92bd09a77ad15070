"""The report tests' result files: two tags of known figures (tests/synthetic_runs.report_results)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.synthetic_runs import report_results


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A results folder with the tags "base" and "mtp"; each module gets its own copy to change."""
    folder = tmp_path_factory.mktemp("results")
    report_results(folder)
    return folder
