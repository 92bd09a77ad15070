"""Time ``bench compare`` and ``bench report`` over synthetic result files (tests/synthetic_runs.py):
two tags, ten runs each, every run a sweep of 1 and 4 streams (40 and 80 requests). Each command
runs ``--repeat`` times as a subprocess; the table gives the median and the slowest wall time."""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tests.synthetic_runs import Shape, deployment, file_run, make_run

REPO = Path(__file__).resolve().parents[2]

BENCH = REPO / ".venv" / "bin" / "bench"
TARGETS = {"compare": 2.0, "report": 10.0}  # seconds, from the issue that asked for them


def results_under(folder: Path, runs: int) -> None:
    """``runs`` result files a tag under ``folder``: tag b decodes twice as fast as tag a."""
    for tag, tpot, kv in (("a", 20.0, "auto"), ("b", 10.0, "fp8")):
        for seed in range(runs):
            shapes = [Shape(100.0, tpot, requests=40), Shape(200.0, tpot * 1.5, concurrency=4, requests=80)]
            started = f"2026-11-0{1 if tag == 'a' else 2}T10:{seed:02d}:00+00:00"
            run = make_run(
                tag, shapes, seed + 100 * (tag == "b"), started_at=started, deployment=deployment(kv_cache_dtype=kv)
            )
            file_run(folder, run)


def _time(command: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(command, check=True, capture_output=True, cwd=REPO)
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=10, help="runs per tag (default: 10)")
    parser.add_argument("--repeat", type=int, default=5, help="times each command runs (default: 5)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        results = Path(scratch) / "results"
        results_under(results, args.runs)
        commands = {
            "compare": [str(BENCH), "compare", "a", "b", "--results-dir", str(results)],
            "report": [str(BENCH), "report", "a", "b", "--results-dir", str(results), "--out", f"{scratch}/report"],
        }
        print(f"| command ({args.runs} runs a tag) | median s | slowest s | target s |")
        print("|---|---|---|---|")
        for name, command in commands.items():
            times = [_time(command) for _ in range(args.repeat)]
            print(f"| bench {name} | {statistics.median(times):.2f} | {max(times):.2f} | {TARGETS[name]:g} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
