"""bench compare on runs of the real llama.cpp server (pinned to core 1, bench to core 0): one
slot against two at concurrency 2 is told apart, in the right direction (with one slot the second
stream waits for the first: its time to first token grows by a whole request, about 1.6x).

Both servers run at once (the idle one costs nothing) and the runs alternate in the order
A, B, B, A, A, B, B, A, so that a drift of a shared machine over the minutes of the test (a CI
neighbour, a clock change) falls on both tags alike instead of on whichever ran first.

That the same configuration is not told from itself is a property with a 5% family-wise error
by design, so it is proven on recorded data, not here: the seeded A/A simulations of
tests/unit/measure/compare/test_stats.py (the false-positive rate within three standard errors
of 5%) and tests/unit/measure/compare/test_comparison.py.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import BIN, REPO
from tests.integration.test_real_engines import KEY, Server, start_llamacpp

pytestmark = pytest.mark.integration
RUNS = 4


def _bench(*args: str) -> str:
    done = subprocess.run(
        ["taskset", "-c", "0", str(BIN / "bench"), *args],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
        cwd=REPO,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def _sweep(server: Server, results: Path, tag: str) -> None:
    _bench(
        "run", "sweep", "--concurrency", "2", "--requests", "16", "--input-tokens", "64", "--output-tokens", "16",
        "--base-url", server.base_url, "--api-key", KEY, "--tag", tag, "--results-dir", str(results),
    )  # fmt: skip


def _section(output: str, title: str) -> list[str]:
    """The verdict lines of one comparison's section of ``bench compare``'s output."""
    start = output.index(title)
    end = output.find(" against ", start + len(title))
    lines = output[start : end if end != -1 else None].splitlines()
    return [line.strip() for line in lines if line.strip().startswith(("- ", "* "))]


def test_compare_tells_one_slot_from_two_in_the_right_direction(tmp_path: Path) -> None:
    results = tmp_path / "results"
    servers: dict[str, Server] = {}
    try:
        servers["two-slots"] = start_llamacpp(tmp_path / "two.log", slots=2)
        servers["one-slot"] = start_llamacpp(tmp_path / "one.log", slots=1)
        for server in servers.values():
            _sweep(server, tmp_path / "warm-up", "warm-up")  # the first requests after a start are slower
        for tag in ["two-slots", "one-slot", "one-slot", "two-slots"] * (RUNS // 2):
            _sweep(servers[tag], results, tag)
    finally:
        for server in servers.values():
            server.stop()

    output = _bench("compare", "two-slots", "one-slot", "--results-dir", str(results))
    print(output, file=sys.stderr)
    changed = _section(output, "one-slot against two-slots")
    assert len(changed) == 8, output
    assert any(
        line.startswith("* one-slot's TTFT p50 is ") and "higher at 2 streams (worse), significant" in line
        for line in changed
    ), changed
    assert not any("TTFT" in line and "lower" in line for line in changed), changed
    assert f"tested between runs ({RUNS} and {RUNS} runs; one value per run; Welch t)" in output
