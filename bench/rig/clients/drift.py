"""Written client configurations against the deployed server: the stale fields, by name.

:func:`stale_fields` reads each file a client writer would write that is present in a folder
(a team's repository, or ``bench clients``' own output), and compares every value the writer
sets, field by field, with what it would write for the server as deployed now. Fields the file
adds of its own are not ours to judge and are left alone; a field the writer sets that the file
lacks or holds another value for is stale, and so is a file that no longer parses.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from bench.rig.clients.target import ClientTarget
from bench.rig.clients.writers import WRITERS


@dataclass(frozen=True, slots=True)
class Stale:
    """One field of one written file that no longer matches the server."""

    file: str  # relative to the checked folder
    field: str  # dotted path; list items by index (``models.0.apiBase``)
    written: str  # what the file holds ('(missing)' when it lacks the field)
    deployed: str  # what the server needs now

    def line(self) -> str:
        return f"{self.file}: {self.field} is {self.written}, the server now needs {self.deployed}"


def _parse(name: str, text: str) -> Any:
    if name.endswith(".json"):
        return json.loads(text)
    if name.endswith((".yml", ".yaml")):
        return yaml.safe_load(text)
    values: dict[str, str] = {}  # a dotenv file: NAME=VALUE lines, comments skipped
    for line in text.splitlines():
        if line.strip() and not line.lstrip().startswith("#") and "=" in line:
            key, _, value = line.partition("=")
            values[key.strip()] = value.strip()
    return values


def _flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(value, Mapping):
        items: list[tuple[str, Any]] = [(str(key), item) for key, item in value.items()]
    elif isinstance(value, list) and any(isinstance(item, Mapping | list) for item in value):
        items = [(str(index), item) for index, item in enumerate(value)]
    else:
        return {prefix: value}
    flat: dict[str, Any] = {}
    for key, item in items:
        flat.update(_flatten(item, f"{prefix}.{key}" if prefix else key))
    return flat


def _shown(value: Any) -> str:
    return json.dumps(value) if not isinstance(value, str) else repr(value)


def stale_fields(
    folder: Path, target: ClientTarget, clients: tuple[str, ...] = tuple(WRITERS)
) -> tuple[list[str], list[Stale]]:
    """The files of ``clients`` found in ``folder`` (relative paths) and their stale fields."""
    checked: list[str] = []
    stale: list[Stale] = []
    for client in clients:
        for name, text in WRITERS[client](target).items():
            path = folder / name
            if not path.is_file():
                continue
            checked.append(name)
            want = _flatten(_parse(name, text))
            try:
                have = _flatten(_parse(name, path.read_text(encoding="utf-8")))
            except (OSError, UnicodeDecodeError, ValueError, yaml.YAMLError) as exc:
                stale.append(
                    Stale(name, "(the file)", f"unreadable ({exc.__class__.__name__})", "a file bench can read")
                )
                continue
            for field, value in want.items():
                if field not in have:
                    stale.append(Stale(name, field, "(missing)", _shown(value)))
                elif have[field] != value:
                    stale.append(Stale(name, field, _shown(have[field]), _shown(value)))
    return checked, stale
