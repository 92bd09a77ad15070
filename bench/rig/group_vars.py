"""Reading ``group_vars/all`` the way bench needs it: the literal knobs, without Ansible.

``bench run`` (the endpoint to dial) and ``bench plan`` (the settings to plan) both start from
the checkout's defaults. A value that is a Jinja expression is Ansible's to render, so it is left
out here and the caller falls back to its own default or to what the deployment recorded.
"""

from __future__ import annotations

from pathlib import Path

import yaml

from bench.errors import ConfigError


def literal_knobs(config_dir: Path, *names: str) -> dict[str, object]:
    """The knobs set to literal values in ``config_dir`` (a ``group_vars/all``): every ``*.yml``
    in name order, or only the files ``names`` (those that exist), later files winning."""
    paths = [config_dir / name for name in names] if names else sorted(config_dir.glob("*.yml"))
    knobs: dict[str, object] = {}
    for path in paths:
        if not path.is_file():
            continue
        try:
            document = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        except (OSError, yaml.YAMLError) as exc:
            raise ConfigError(f"--config-dir: cannot read {path}: {exc}") from exc
        if not isinstance(document, dict):
            raise ConfigError(f"--config-dir: {path} is not a mapping of variables")
        knobs.update({str(key): value for key, value in document.items() if "{{" not in str(value)})
    return knobs
