"""The rig's real monitoring daemons (Debian's prometheus and exporters, unpacked by
scripts/testrig prometheus) run for one test on a free loopback port, and the names a
/metrics page exposes."""

from __future__ import annotations

import contextlib
import re
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

from tests.helpers import monitoring_binary

_SAMPLE_NAME = re.compile(r"[A-Za-z_:][A-Za-z0-9_:]*")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def fetch(url: str, key: str | None = None, timeout_s: float = 10) -> str:
    request = urllib.request.Request(url)
    if key is not None:
        request.add_header("Authorization", f"Bearer {key}")
    with urllib.request.urlopen(request, timeout=timeout_s) as response:
        body: bytes = response.read()
        return body.decode()


def exposed_names(page: str) -> set[str]:
    """The sample names of a Prometheus text exposition page (a histogram's _bucket, _sum, _count)."""
    names = set()
    for line in page.splitlines():
        if line and not line.startswith("#") and (match := _SAMPLE_NAME.match(line)):
            names.add(match.group())
    return names


@contextlib.contextmanager
def running(name: str, args: list[str], ready_url: str, log: Path, timeout_s: float = 30) -> Iterator[None]:
    """Run one of the rig's monitoring binaries until the block ends; ready when ``ready_url`` answers 200."""
    with log.open("wb") as sink:
        process = subprocess.Popen([str(monitoring_binary(name)), *args], stdout=sink, stderr=sink)
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            if process.poll() is not None:
                raise AssertionError(f"{name} exited with {process.returncode}:\n{log.read_text()[-3000:]}")
            try:
                fetch(ready_url, timeout_s=2)
                break
            except (urllib.error.URLError, OSError):
                if time.monotonic() > deadline:
                    raise AssertionError(
                        f"{name}: {ready_url} not ready in {timeout_s} s:\n{log.read_text()[-3000:]}"
                    ) from None
                time.sleep(0.2)
        yield
    finally:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=5)
