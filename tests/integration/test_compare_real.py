"""bench compare on runs of the real llama.cpp server (pinned to core 1, bench to core 0): the
same configuration measured twice is not told apart, and one slot against two at concurrency 2
is, in the right direction (with one slot the second stream waits for the first: its time to
first token grows by a whole request).

The A/A runs are interleaved (A, A', A, A', ...) on one server, so that a drift of the machine
over the minutes of the test is not mistaken for a difference between the tags.
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


def test_compare_tells_one_slot_from_two_and_not_a_configuration_from_itself(tmp_path: Path) -> None:
    results = tmp_path / "results"
    two = start_llamacpp(tmp_path / "two.log", slots=2)
    try:
        _sweep(two, tmp_path / "warm-up", "warm-up")  # the first requests after a start are slower
        for _ in range(RUNS):
            _sweep(two, results, "two-slots")
            _sweep(two, results, "two-slots-again")
    finally:
        two.stop()
    one = start_llamacpp(tmp_path / "one.log", slots=1)
    try:
        for _ in range(RUNS):
            _sweep(one, results, "one-slot")
    finally:
        one.stop()

    output = _bench("compare", "two-slots", "two-slots-again", "one-slot", "--results-dir", str(results))
    print(output, file=sys.stderr)
    same = _section(output, "two-slots-again against two-slots")
    assert len(same) == 8, output
    assert all(line.startswith("- no significant difference in ") for line in same), same
    changed = _section(output, "one-slot against two-slots")
    assert any(
        line.startswith("* one-slot's TTFT p50 is ") and "higher at 2 streams (worse), significant" in line
        for line in changed
    ), changed
    assert f"tested between runs ({RUNS} and {RUNS} runs; one value per run; Welch t)" in output
