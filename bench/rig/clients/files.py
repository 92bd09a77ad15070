"""Writing the client configurations into a folder without losing anyone's edits.

The folder keeps a manifest (:data:`MANIFEST`): the SHA-256 of each file as ``bench clients``
last wrote it. A file is written when it is new, when it still holds what bench wrote (its hash
matches), or with ``force``; a file someone edited since, or that bench never wrote, is refused,
by name, before any file is written (nothing half-applied). Each file is written aside and
renamed into place.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from pathlib import Path

from bench.documents import write_bytes_atomic
from bench.errors import ConfigError

MANIFEST = ".llmrig-clients.json"


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _manifest(folder: Path) -> dict[str, str]:
    path = folder / MANIFEST
    if not path.is_file():
        return {}
    try:
        recorded = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise ConfigError(f"--out: {path} is not bench's manifest ({exc.__class__.__name__}); remove it") from exc
    files = recorded.get("files") if isinstance(recorded, dict) else None
    if not isinstance(files, dict):
        raise ConfigError(f"--out: {path} is not bench's manifest (no files); remove it")
    return {str(name): str(digest) for name, digest in files.items()}


def write_files(folder: Path, files: Mapping[str, str], *, force: bool = False) -> list[str]:
    """Write ``files`` (relative path to text) under ``folder``; the paths written, in order."""
    if folder.exists() and not folder.is_dir():
        raise ConfigError(f"--out: {folder} is a file, not a folder")
    recorded = _manifest(folder) if folder.is_dir() else {}
    refused = []
    for name in files:
        path = folder / name
        if path.exists() and not path.is_file():
            raise ConfigError(f"--out: {path} is not a file")
        if path.is_file() and not force and recorded.get(name) != _digest(path.read_bytes()):
            refused.append(name)
    if refused:
        raise ConfigError(
            f"--out: {', '.join(refused)} in {folder} changed since bench wrote it (or bench never did); "
            "nothing was written; move it away, or pass --force to overwrite"
        )
    for name, text in files.items():
        data = text.encode("utf-8")
        write_bytes_atomic(folder / name, data, mode=0o644)
        recorded[name] = _digest(data)
    manifest = {"written_by": "bench clients", "files": dict(sorted(recorded.items()))}
    write_bytes_atomic(folder / MANIFEST, (json.dumps(manifest, indent=2) + "\n").encode("utf-8"), mode=0o644)
    return list(files)
