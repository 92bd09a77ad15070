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
    """Every contract is kept by the package as it is, and there are four of them."""
    done = _lint_imports(REPO)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Contracts: 4 kept, 0 broken." in done.stdout


@pytest.mark.parametrize(
    ("module", "line", "contract", "finding"),
    [
        (
            "rig/presets.py",
            "from bench.measure import config as _config",
            "The rig core imports neither the harness nor the CLI",
            "bench.rig.presets -> bench.measure.config",
        ),
        (
            "rig/plan.py",
            "from bench.cli import main as _main",
            "The rig core imports neither the harness nor the CLI",
            "bench.rig.plan -> bench.cli",
        ),
        (
            "measure/metrics.py",
            "from bench.cli import main as _main",
            "The harness never imports the CLI",
            "bench.measure.metrics -> bench.cli",
        ),
        (
            "measure/config.py",
            "from bench.rig.presets import load_presets as _load_presets",
            "The harness uses only the names bench.rig exports",
            "bench.measure.config -> bench.rig.presets",
        ),
        (
            "errors.py",
            "from bench.rig import artifacts_dir as _artifacts_dir",
            "The exception tree imports nothing of bench",
            "bench.errors -> bench.rig",
        ),
    ],
)
def test_a_contract_bites(tmp_path: Path, module: str, line: str, contract: str, finding: str) -> None:
    """One import that breaks a contract makes lint-imports fail, naming that contract and the import."""
    shutil.copytree(REPO / "bench", tmp_path / "bench", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy2(REPO / "pyproject.toml", tmp_path / "pyproject.toml")
    target = tmp_path / "bench" / module
    target.write_text(target.read_text(encoding="utf-8") + f"\n{line}\n", encoding="utf-8")
    done = _lint_imports(tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    assert f"{contract} BROKEN" in done.stdout
    assert "Contracts: 3 kept, 1 broken." in done.stdout
    assert finding in done.stdout
