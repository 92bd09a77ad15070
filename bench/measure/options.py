"""The options of ``bench run`` (what the CLI parses its flags into) and the levels they make."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from bench.errors import ConfigError
from bench.measure.runner import LevelSpec

WORKLOADS = ("single", "sweep", "rate", "context", "agent")
DEFAULT_CONTEXTS = (1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072)


@dataclass(frozen=True, slots=True)
class RunOptions:
    """Everything a run needs besides the target."""

    workload: str
    concurrency: tuple[int, ...]
    requests: int
    input_tokens: int
    output_tokens: int
    results_dir: Path
    fixed_output: bool = True
    temperature: float = 0.0
    seed: int = 0
    read_timeout_s: float = 300.0  # the longest gap between two reads of one answer (the first token included)
    request_timeout_s: float = 600.0  # the longest one request may take, from dispatch to its last event
    weight_bytes_per_gpu: float | None = None  # for the decode bandwidth bound (preset weights / TP)
    gpu_telemetry: bool = True
    rates: tuple[float, ...] = (0.5, 1.0, 2.0)  # rate workload: requests per second, one level each
    contexts: tuple[int, ...] = DEFAULT_CONTEXTS  # context workload: prompt lengths, one level each
    max_in_flight: int = 256  # rate workload: cap on concurrent requests (the rest wait, as client queue)
    sessions: int = 4  # agent workload: sessions, run concurrency[0] at a time
    turns: int = 6  # agent workload: turns per session
    system_tokens: int = 2048  # agent workload: system prompt with tool schemas, shared by every session

    def levels(self) -> list[LevelSpec]:
        """One level per concurrency; at least ``requests`` and at least 4 per stream."""
        if self.workload not in WORKLOADS:
            raise ConfigError(f"workload: {self.workload!r} is not one of {', '.join(WORKLOADS)}")
        self._check_shape()
        if self.requests < 2:
            raise ConfigError(f"--requests: at least 2 are needed for a window, got {self.requests}")
        if any(c < 1 for c in self.concurrency):
            raise ConfigError(f"--concurrency: every level must be at least 1, got {list(self.concurrency)}")
        if self.workload == "rate":
            if any(r <= 0 for r in self.rates):
                raise ConfigError(f"--rate: every rate must be above 0 requests per second, got {list(self.rates)}")
            return [self._spec(self.max_in_flight, self.requests, self.input_tokens, rate) for rate in self.rates]
        if self.workload == "agent":
            if self.sessions < 1 or self.turns < 1:
                raise ConfigError(f"--sessions/--turns: at least 1 each, got {self.sessions} and {self.turns}")
            return [self._spec(self.concurrency[0], self.sessions * self.turns, self.input_tokens)]
        if self.workload == "context":
            if any(length < 1 for length in self.contexts):
                raise ConfigError(f"--context: every prompt length must be at least 1, got {list(self.contexts)}")
            return [self._spec(1, self.requests, length) for length in self.contexts]
        return [self._spec(c, max(self.requests, 4 * c), self.input_tokens) for c in self.concurrency]

    def _check_shape(self) -> None:
        for name, value in (("--input-tokens", self.input_tokens), ("--output-tokens", self.output_tokens)):
            if value < 1:
                raise ConfigError(f"{name}: must be at least 1, got {value}")
        for name, seconds in (("--read-timeout", self.read_timeout_s), ("--request-timeout", self.request_timeout_s)):
            if seconds <= 0:
                raise ConfigError(f"{name}: must be above 0 seconds, got {seconds:g}")

    def _spec(self, concurrency: int, requests: int, input_tokens: int, rate: float | None = None) -> LevelSpec:
        return LevelSpec(
            concurrency,
            requests,
            input_tokens,
            self.output_tokens,
            fixed_output=self.fixed_output,
            temperature=self.temperature,
            rate=rate,
            seed=self.seed,
        )
