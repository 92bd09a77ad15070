"""The import-linter contracts of pyproject.toml hold for bench, and each one fails on an import
that breaks it (run against a copy of the package with that one import added)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from tests.helpers import BIN, REPO


def _lint_imports(root: Path) -> subprocess.CompletedProcess[str]:
    """``lint-imports`` as scripts/lint runs it, in ``root`` (which holds bench/ and pyproject.toml)."""
    return subprocess.run(
        [str(BIN / "lint-imports"), "--no-cache", "--no-logo", "--config", str(root / "pyproject.toml")],
        cwd=root,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )


def test_the_contracts_hold_for_bench() -> None:
    """Every contract is kept by the package as it is, and there are six of them."""
    done = _lint_imports(REPO)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Contracts: 6 kept, 0 broken." in done.stdout


@pytest.mark.parametrize(
    ("module", "line", "contract", "finding", "broken"),
    [
        (
            "rig/presets.py",
            "from bench.measure import target as _target",
            "The rig core imports neither the harness nor the CLI",
            "bench.rig.presets -> bench.measure.target",
            1,
        ),
        (
            "rig/plan.py",
            "from bench.cli import main as _main",
            "The rig core imports neither the harness nor the CLI",
            "bench.rig.plan -> bench.cli",
            1,
        ),
        (
            "measure/metrics.py",
            "from bench.cli import main as _main",
            "The harness never imports the CLI",
            "bench.measure.metrics -> bench.cli",
            2,
        ),
        (
            "measure/target.py",
            "from bench.rig.presets import load_presets as _load_presets",
            "The harness uses only the names bench.rig exports",
            "bench.measure.target -> bench.rig.presets",
            1,
        ),
        (
            "errors.py",
            "from bench.rig import artifacts_dir as _artifacts_dir",
            "The exception tree imports nothing of bench",
            "bench.errors -> bench.rig",
            2,
        ),
        (
            "documents.py",
            "from bench.measure import metrics as _metrics",
            "The shared ground imports only the exception tree",
            "bench.documents -> bench.measure.metrics",
            3,
        ),
        (
            "measure/run/results.py",
            "from bench.measure.compare import store as _store",
            "The harness is a staircase of floors",
            "bench.measure.run.results -> bench.measure.compare.store",
            1,
        ),
        (
            "measure/probe/expect.py",
            "from bench.measure.capacity import search as _search",
            "The harness is a staircase of floors",
            "bench.measure.probe.expect -> bench.measure.capacity.search",
            1,
        ),
        (
            "measure/stream/sse.py",
            "from bench.measure.telemetry import gpu as _gpu",
            "The harness is a staircase of floors",
            "bench.measure.stream.sse -> bench.measure.telemetry.gpu",
            1,
        ),
    ],
)
def test_a_contract_bites(tmp_path: Path, *, module: str, line: str, contract: str, finding: str, broken: int) -> None:
    """One import that breaks a contract makes lint-imports fail, naming that contract and the import
    (an import of the CLI from the harness's floor, or of the core from the exception tree under the
    shared ground, breaks the staircase or the ground as well: two contracts; one of the harness from
    the shared ground breaks the rig core's and the staircase too, since the core, and through it the
    harness's ground floor, read the deployment record with it: three)."""
    shutil.copytree(REPO / "bench", tmp_path / "bench", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy2(REPO / "pyproject.toml", tmp_path / "pyproject.toml")
    target = tmp_path / "bench" / module
    target.write_text(target.read_text(encoding="utf-8") + f"\n{line}\n", encoding="utf-8")
    done = _lint_imports(tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    assert f"{contract} BROKEN" in done.stdout
    assert f"Contracts: {6 - broken} kept, {broken} broken." in done.stdout
    assert finding in done.stdout
