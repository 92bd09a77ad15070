"""A protocol fake of a bad Open WebUI release: a wheel named ``open-webui`` at a version that
does not exist upstream, whose ``open-webui`` command says it cannot start and exits 1. The
end-to-end tier pins it to prove that a release that does not come up is rolled back.

``python tests/fakes/open_webui_bad_release.py DIR VERSION`` writes the wheel into DIR.
"""

from __future__ import annotations

import base64
import hashlib
import sys
import zipfile
from pathlib import Path

MAIN = '''"""A fake bad Open WebUI release (llmrig's end-to-end tier): it cannot start."""
import sys


def main() -> None:
    print("open-webui: this fake bad release cannot start", file=sys.stderr)
    sys.exit(1)
'''


def _record_line(name: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def build(directory: Path, version: str) -> Path:
    """The wheel ``open_webui-VERSION-py3-none-any.whl`` in ``directory``."""
    info = f"open_webui-{version}.dist-info"
    files = {
        "open_webui/__init__.py": MAIN.encode(),
        f"{info}/METADATA": f"Metadata-Version: 2.1\nName: open-webui\nVersion: {version}\n".encode(),
        f"{info}/WHEEL": b"Wheel-Version: 1.0\nGenerator: llmrig-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
        f"{info}/entry_points.txt": b"[console_scripts]\nopen-webui = open_webui:main\n",
    }
    record = "\n".join([*(_record_line(name, data) for name, data in files.items()), f"{info}/RECORD,,"]) + "\n"
    directory.mkdir(parents=True, exist_ok=True)
    wheel = directory / f"open_webui-{version}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in files.items():
            archive.writestr(name, data)
        archive.writestr(f"{info}/RECORD", record)
    return wheel


if __name__ == "__main__":
    print(build(Path(sys.argv[1]), sys.argv[2]))
