"""No module under bench/ is over 300 lines, and the check names each file that is, with its count."""

from __future__ import annotations

from pathlib import Path

from tests.helpers import REPO

LIMIT = 300


def line_counts(package: Path) -> dict[str, int]:
    """Lines of every Python module under ``package``, keyed by its path from the package's parent."""
    return {
        path.relative_to(package.parent).as_posix(): len(path.read_text(encoding="utf-8").splitlines())
        for path in sorted(package.rglob("*.py"))
    }


def over_limit(package: Path) -> list[str]:
    """``path: N lines`` for each module under ``package`` with more than :data:`LIMIT` lines."""
    return [f"{path}: {lines} lines" for path, lines in line_counts(package).items() if lines > LIMIT]


def test_no_bench_module_is_over_300_lines() -> None:
    """Every module of the package, in each of its subpackages, has at most 300 lines."""
    counts = line_counts(REPO / "bench")
    assert {"bench/errors.py", "bench/rig/plan.py", "bench/rig/rules/host.py", "bench/cli/main.py"} <= set(counts)
    assert over_limit(REPO / "bench") == [], f"modules over {LIMIT} lines (split them along a seam)"


def test_the_check_names_the_file_and_its_line_count(tmp_path: Path) -> None:
    """A module of 301 lines is reported with its path and count; one of exactly 300 is not."""
    package = tmp_path / "bench"
    (package / "rig").mkdir(parents=True)
    (package / "rig" / "big.py").write_text("x = 1\n" * 301, encoding="utf-8")
    (package / "fits.py").write_text("x = 1\n" * 300, encoding="utf-8")
    assert over_limit(package) == ["bench/rig/big.py: 301 lines"]
