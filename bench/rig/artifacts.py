"""Where ``llmrig_artifacts_dir`` lies on the controller: one rule for the engine role and bench.

The engine role fetches deployment.json there (through the filter plugin), and ``bench run``
and ``bench plan`` look for it there (:func:`bench.measure.target.find_deployment`).
"""

from __future__ import annotations

from pathlib import Path

from bench.errors import ConfigError


def artifacts_dir(repo_root: Path, value: str) -> Path:
    """The one rule for ``llmrig_artifacts_dir``, used by the engine role (through the filter
    plugin) and by bench: an absolute path as it is, a relative one under the repository root,
    the directory that holds ``group_vars/`` (and ``ansible.cfg``), never under the inventory."""
    if not value or "{{" in value:
        raise ConfigError(f"llmrig_artifacts_dir: {value!r} must be a literal path (bench reads it too)")
    path = Path(value).expanduser()
    return path if path.is_absolute() else repo_root / path
