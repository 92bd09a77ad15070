"""The scripted OpenAI-compatible server (a protocol fake) in its own process, and a reader of
the summary table that ``bench run`` prints, for the tests of bench's output and errors."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tests.helpers import FAKES

SERVER = FAKES / "scripted_openai_server.py"
KEY = "test-key"
FAST = {"ttft_ms": 20.0, "itl_ms": 2.0, "content_tokens": 8}


class Scripted:
    """The scripted server on a free loopback port; ``scenario`` as its module docstring says.
    ``prefix`` goes before the server's command line (taskset, chrt); the fake logs what it sent
    to ``log``, read back by ``answered``."""

    def __init__(self, tmp_path: Path, prefix: Sequence[str] = (), **scenario: Any) -> None:
        self.log = tmp_path / "events.jsonl"
        self.scenario = {"api_key": KEY, "event_log": str(self.log), **scenario}
        path = tmp_path / "scenario.json"
        path.write_text(json.dumps(self.scenario), encoding="utf-8")
        command = [*prefix, sys.executable, str(SERVER), str(path)]
        self.process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
        self.bench_prefix: list[str] = []  # how bench runs when it runs as its own process
        assert self.process.stdout is not None
        self.port = int(self.process.stdout.readline().strip())
        self.base_url = f"http://127.0.0.1:{self.port}/v1"

    def answered(self) -> dict[str, dict[str, Any]]:
        """The fake's log of answered requests, by the first eleven words of their prompt."""
        lines = self.log.read_text(encoding="utf-8").splitlines()
        return {entry["key"]: entry for entry in map(json.loads, lines)}

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
        self.process.wait(timeout=10)
        assert self.process.stdout is not None
        self.process.stdout.close()


@contextmanager
def scripted(tmp_path: Path, **scenario: Any) -> Iterator[Scripted]:
    """A running scripted server, stopped on exit."""
    server = Scripted(tmp_path, **scenario)
    try:
        yield server
    finally:
        server.close()


def run_args(server: Scripted, tmp_path: Path, workload: str = "single", *flags: str) -> list[str]:
    """``bench run WORKLOAD`` against ``server`` with small requests, results under tmp_path."""
    base = ["run", workload, "--base-url", server.base_url, "--api-key", KEY, "--tag", "t"]
    base += ["--input-tokens", "40", "--output-tokens", "8", "--results-dir", str(tmp_path / "results")]
    return [*base, *flags]


def result_files(tmp_path: Path) -> list[Path]:
    return sorted((tmp_path / "results").glob("*/*.json"))


def read_table(out: str, first_column: str = "level") -> tuple[list[str], list[list[str]]]:
    """The header and rows of the table whose header line starts with ``first_column``: cells are
    separated by two or more spaces (rich's padding), never by one (headers have single spaces)."""
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip().startswith(first_column + " "))
    header = re.split(r"\s{2,}", lines[start].strip())
    assert set(lines[start + 1].strip()) == {"─"}, lines[start + 1]
    rows = []
    for line in lines[start + 2 :]:
        cells = re.split(r"\s{2,}", line.strip())
        if len(cells) != len(header):
            break  # the caption or the next paragraph
        rows.append(cells)
    return header, rows
