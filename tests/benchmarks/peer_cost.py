"""CPU cost per streamed token of bench, AIPerf and GuideLLM, measured the same way for each.

Part of the scripts/bench-peers benchmark (not a test). Each tool runs pinned to core 0 inside
a cgroup of its own, so the CPU of every process it starts is counted (AIPerf starts about
eight). It runs the same requests twice, at a short and at a long answer; the cost per streamed
token is the difference in CPU over the difference in tokens the server streamed to it, so the
tool's start-up and its per-request work cancel out and what is left is the cost of an event;
each pair is run three times and the median slope taken. Against a slow server, where the
tokens a run can stream in minutes cannot outweigh the second or more by which a peer's start-up
varies, :func:`steady` instead reads the tool's CPU at the end of each answer while it runs.
The tokens are the server's count: the scripted server's send log, llama.cpp's
``tokens_predicted_total``.
"""

from __future__ import annotations

import contextlib
import json
import os
import resource
import statistics
import subprocess
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

CGROUP_V1 = Path("/sys/fs/cgroup/cpuacct")
CGROUP_V2 = Path("/sys/fs/cgroup")
SAMPLE_S = 0.05  # how often the steady-state measurement looks at the server's token count


@dataclass(frozen=True, slots=True)
class Workload:
    """What every tool sends: ``requests`` one at a time, ``output_tokens`` each."""

    base_url: str  # http://127.0.0.1:PORT, no /v1
    model: str
    requests: int
    input_tokens: int
    output_tokens: int


Runner = Callable[[Workload, Path], list[str]]  # the command line of one tool for a workload


class CpuMeter:
    """CPU seconds of a command and every process it starts: a cgroup (v1 cpuacct or v2) when
    this machine lets us make one, else the rusage of waited-for children (which misses
    processes that outlive their parent); :attr:`how` says which."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.how = "rusage of child processes"
        for root, counter in ((CGROUP_V1, "cpuacct.usage"), (CGROUP_V2, "cpu.stat")):
            if (root / counter).exists() and os.access(root, os.W_OK):
                self.root, self.counter = root, counter
                self.how = f"cgroup {'v1 cpuacct' if counter == 'cpuacct.usage' else 'v2 cpu.stat'}"
                return

    def run(self, command: list[str], **kwargs: Any) -> float:
        """Run ``command`` pinned to core 0; its CPU seconds, all processes included."""
        pinned = ["taskset", "-c", "0", *command]
        if self.how.startswith("rusage"):
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            _check(subprocess.run(pinned, capture_output=True, text=True, check=False, **kwargs), command)
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        with self._group(pinned) as (group, wrapped):
            _check(subprocess.run(wrapped, capture_output=True, text=True, check=False, **kwargs), command)
            return self._usage(group)

    @contextlib.contextmanager
    def _group(self, pinned: list[str]) -> Iterator[tuple[Path, list[str]]]:
        """A fresh cgroup, and ``pinned`` wrapped to run inside it; the group is removed after."""
        group = self.root / f"llmrig-cost-{self.name}-{os.getpid()}"
        group.mkdir()
        try:
            # The shell joins the group, then becomes the tool: nothing of it runs outside.
            yield group, ["sh", "-c", 'echo $$ > "$0/cgroup.procs" && exec "$@"', str(group), *pinned]
        finally:
            group.rmdir()

    def run_sampled(
        self, command: list[str], tokens: Callable[[], int], log: Path, **kwargs: Any
    ) -> list[tuple[float, int]]:
        """Run ``command`` pinned to core 0 in a cgroup (its output to ``log``); each time the
        server's token count grows while it runs, note the group's CPU seconds and that count."""
        if self.how.startswith("rusage"):
            raise SystemExit("the steady-state cost needs a cgroup (v1 cpuacct or v2) this user may create")
        samples: list[tuple[float, int]] = []
        with (
            self._group(["taskset", "-c", "0", *command]) as (group, wrapped),
            log.open("wb") as sink,
            subprocess.Popen(wrapped, stdout=sink, stderr=sink, **kwargs) as tool,
        ):
            last = tokens()
            while tool.poll() is None:
                time.sleep(SAMPLE_S)
                if (now := tokens()) != last:
                    samples.append((self._usage(group), now))
                    last = now
        if tool.returncode != 0:
            text = log.read_text(encoding="utf-8", errors="replace")
            raise SystemExit(f"{command[0]} failed ({tool.returncode}):\n{text[-3000:]}")
        return samples

    def _usage(self, group: Path) -> float:
        text = (group / self.counter).read_text(encoding="utf-8")
        if self.counter == "cpuacct.usage":
            return int(text) / 1e9
        fields = dict(line.split() for line in text.splitlines())
        return int(fields["usage_usec"]) / 1e6


def _check(done: subprocess.CompletedProcess[str], command: list[str]) -> None:
    if done.returncode != 0:
        raise SystemExit(f"{command[0]} failed ({done.returncode}):\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")


def scripted_tokens(event_log: Path) -> Callable[[], int]:
    """Tokens the scripted server sent so far, from its send log (one JSON line per answer)."""

    def count() -> int:
        if not event_log.exists():
            return 0
        lines = event_log.read_text(encoding="utf-8").splitlines()
        return sum(sent[1] for line in lines if line for sent in json.loads(line)["sent"])

    return count


def llamacpp_tokens(base_url: str) -> Callable[[], int]:
    """Tokens llama.cpp generated so far (``llamacpp:tokens_predicted_total`` of its /metrics)."""

    def count() -> int:
        with urllib.request.urlopen(f"{base_url}/metrics", timeout=10) as response:
            text = response.read().decode()
        for line in text.splitlines():
            if line.startswith("llamacpp:tokens_predicted_total"):
                return round(float(line.split()[-1]))
        raise SystemExit(f"{base_url}/metrics has no llamacpp:tokens_predicted_total (is --metrics on?)")

    return count


@dataclass(frozen=True, slots=True)
class Pair:
    """One tool's CPU seconds and streamed tokens at the short and then the long answer."""

    cpu_short_s: float
    cpu_long_s: float
    tokens_short: int
    tokens_long: int

    @property
    def per_token_us(self) -> float:
        return (self.cpu_long_s - self.cpu_short_s) / (self.tokens_long - self.tokens_short) * 1e6


@dataclass(frozen=True, slots=True)
class Cost:
    """One tool's pairs of runs; its cost per extra token is the median over the pairs (a tool
    that starts several processes varies by a second or more of CPU from one start to the next)."""

    tool: str
    pairs: tuple[Pair, ...]

    @property
    def per_token_us(self) -> float:
        return statistics.median(pair.per_token_us for pair in self.pairs)

    @property
    def spread_us(self) -> tuple[float, float]:
        slopes = [pair.per_token_us for pair in self.pairs]
        return min(slopes), max(slopes)


def measure(
    tool: str,
    runner: Runner,
    workloads: tuple[Workload, Workload],
    *,
    tokens: Callable[[], int],
    workdir: Path,
    env: dict[str, str] | None = None,
    repeats: int = 3,
) -> Cost:
    """``tool``'s CPU for the short and the long workload (the same requests, longer answers),
    ``repeats`` times in turn."""
    slug = tool.split(maxsplit=1)[0].lower()
    meter = CpuMeter(slug)
    pairs = []
    for repeat in range(repeats):
        figures = []
        for label, workload in zip(("short", "long"), workloads, strict=True):
            folder = workdir / f"{slug}-{label}-{repeat}"
            folder.mkdir(parents=True)
            before = tokens()
            cpu = meter.run(runner(workload, folder), stdin=subprocess.DEVNULL, env=env)
            figures.append((cpu, tokens() - before))
        (cpu_short, tokens_short), (cpu_long, tokens_long) = figures
        pairs.append(Pair(cpu_short, cpu_long, tokens_short, tokens_long))
    return Cost(tool, tuple(pairs))


@dataclass(frozen=True, slots=True)
class Steady:
    """One tool's CPU while it streams whole answers from a slow server: (cpu_s, tokens) each
    time the server's count grew, and the answer length. Only steps of a whole answer count (not
    the one-token calibration requests); the first sample comes after the first answer, so
    start-up is out, and work a tool leaves until after the run is out too."""

    tool: str
    samples: tuple[tuple[float, int], ...]
    answer_tokens: int

    @property
    def slopes_us(self) -> list[float]:
        steps = zip(self.samples, self.samples[1:], strict=False)
        return [
            (cpu - cpu_before) / (tokens - tokens_before) * 1e6
            for (cpu_before, tokens_before), (cpu, tokens) in steps
            if tokens - tokens_before >= self.answer_tokens // 2
        ]

    @property
    def per_token_us(self) -> float:
        return statistics.median(self.slopes_us)

    @property
    def spread_us(self) -> tuple[float, float]:
        return min(self.slopes_us), max(self.slopes_us)


def steady(
    tool: str,
    runner: Runner,
    workload: Workload,
    *,
    tokens: Callable[[], int],
    workdir: Path,
    env: dict[str, str] | None = None,
) -> Steady:
    """``tool``'s CPU per streamed token while it runs ``workload``: the median over its answers
    of the CPU between two answers' ends over the tokens in between (llama.cpp counts an
    answer's tokens when it ends)."""
    slug = tool.split(maxsplit=1)[0].lower()
    folder = workdir / f"{slug}-steady"
    folder.mkdir(parents=True)
    command = runner(workload, folder)
    samples = CpuMeter(slug).run_sampled(command, tokens, folder / "output.log", env=env, stdin=subprocess.DEVNULL)
    found = Steady(tool, tuple(samples), workload.output_tokens)
    if len(found.slopes_us) < 2:
        raise SystemExit(f"{tool}: {len(samples)} answers seen, too few for a steady-state cost")
    return found


def accounting() -> str:
    """How CPU is counted on this machine (a cgroup, or the rusage fallback)."""
    return CpuMeter("probe").how
