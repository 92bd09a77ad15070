#!/usr/bin/env python3
"""Pack the Ollama protocol fake (tests/fakes/ollama/ollama) like Ollama's real release archive.

Usage: build_release.py OUTDIR VERSION [VERSION...]

For each VERSION it writes, mirroring a GitHub release of ollama/ollama::

    OUTDIR/v<VERSION>/ollama-linux-amd64.tar.zst   bin/ollama (0755, the fake), lib/ollama/VERSION,
                                                   lib/ollama/README.llmrig-fake; root:root
    OUTDIR/v<VERSION>/sha256sum.txt                "<sha256>  ./ollama-linux-amd64.tar.zst"

so that an HTTP server rooted at OUTDIR answers ``http://127.0.0.1:PORT/v0.32.15/ollama-linux-amd64.tar.zst``
where Ollama's is ``https://github.com/ollama/ollama/releases/download/v0.32.15/ollama-linux-amd64.tar.zst``
(and ``.../v0.32.15/sha256sum.txt`` beside it). The tar is compressed by the ``zstd`` command.
Rebuilding a version gives the same bytes: sorted members, a fixed mtime, no owner names.
"""

from __future__ import annotations

import hashlib
import io
import subprocess
import sys
import tarfile
from pathlib import Path

FAKE = Path(__file__).resolve().parent / "ollama"
ARCHIVE = "ollama-linux-amd64.tar.zst"
MTIME = 1_700_000_000  # 2023-11-14: any fixed time, so that rebuilds are identical
USAGE = "usage: build_release.py OUTDIR VERSION [VERSION...]"
README = "llmrig protocol fake of Ollama (tests/fakes/ollama/ollama): not Ollama, not an LLM.\n"


def members(version: str) -> dict[str, tuple[bytes, int]]:
    """The archive's files: path -> (content, mode)."""
    return {
        "bin/ollama": (FAKE.read_bytes(), 0o755),
        "lib/ollama/README.llmrig-fake": (README.encode(), 0o644),
        "lib/ollama/VERSION": (f"{version}\n".encode(), 0o644),
    }


def tar_bytes(version: str) -> bytes:
    """An uncompressed GNU tar of the members, sorted, owned by root:root, with a fixed mtime."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.GNU_FORMAT) as archive:
        for path, (content, mode) in sorted(members(version).items()):
            info = tarfile.TarInfo(path)
            info.size, info.mode, info.mtime = len(content), mode, MTIME
            info.uid = info.gid = 0
            info.uname = info.gname = "root"
            archive.addfile(info, io.BytesIO(content))
    return buffer.getvalue()


def zstd(data: bytes) -> bytes:
    """Compress through the ``zstd`` command (a zstd frame holds no timestamp or file name)."""
    done = subprocess.run(["zstd", "-q", "-19", "--no-progress", "-c"], input=data, capture_output=True, check=True)
    return done.stdout


def build(outdir: Path, version: str) -> Path:
    """Write ``v<version>/ollama-linux-amd64.tar.zst`` and its ``sha256sum.txt``; the archive's path."""
    folder = outdir / f"v{version}"
    folder.mkdir(parents=True, exist_ok=True)
    data = zstd(tar_bytes(version))
    (folder / ARCHIVE).write_bytes(data)
    (folder / "sha256sum.txt").write_text(f"{hashlib.sha256(data).hexdigest()}  ./{ARCHIVE}\n", encoding="utf-8")
    return folder / ARCHIVE


def main(argv: list[str]) -> int:
    """``build_release.py OUTDIR VERSION [VERSION...]``; prints each archive's path."""
    if len(argv) < 2:
        print(USAGE, file=sys.stderr)
        return 2
    outdir = Path(argv[0])
    for version in argv[1:]:
        print(build(outdir, version.removeprefix("v")))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
