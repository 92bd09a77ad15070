"""The workloads of ``bench run``, one class each, in a registry the CLI builds its help and
flags from.

A workload declares its own flags (:class:`Option`), turns the run's options into its levels
(:class:`~bench.measure.run.loops.LevelSpec`), and drives one level (:mod:`bench.measure.run.loops`).
Adding one means a new class here with ``@register`` and its test; the CLI, the run and the
result file's ``options`` (every workload's flags, so each file has the same keys) follow from
the registry.

- ``single``: one stream, closed loop;
- ``sweep``: closed-loop levels of concurrency (``--concurrency``, each a number of streams);
- ``rate``: open loop, Poisson arrivals at each ``--rate``, at most ``--max-in-flight`` at once;
- ``context``: one stream at each prompt length of ``--context``;
- ``agent``: coding-agent sessions resending a growing history, with the model's own tool calls,
  think times and staggered starts, ``--concurrency`` sessions at once (:mod:`bench.measure.run.agent`).
- ``trace``: a request trace replayed on its timestamps (:mod:`bench.measure.run.trace_replay`).
"""

from __future__ import annotations

import types
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar, Protocol

from bench.errors import ConfigError
from bench.measure.metrics import RequestRecord
from bench.measure.run.loops import LevelRun, LevelSpec, run_level
from bench.measure.run.prompts import Calibration, PromptFactory
from bench.measure.stream.client import ChatClient

OptionValue = int | float | str | tuple[int, ...] | tuple[float, ...]


class RunOptions(Protocol):
    """What a workload reads of a run's options. :class:`bench.measure.run.options.RunOptions` is
    the one a run passes; the options module imports this registry, so this side names only the
    shape it needs (no import cycle)."""

    @property
    def requests(self) -> int: ...
    @property
    def input_tokens(self) -> int: ...
    @property
    def output_tokens(self) -> int: ...
    @property
    def fixed_output(self) -> bool: ...
    @property
    def temperature(self) -> float: ...
    @property
    def seed(self) -> int: ...
    def ints(self, key: str) -> tuple[int, ...]: ...
    def floats(self, key: str) -> tuple[float, ...]: ...
    def integer(self, key: str) -> int: ...
    def flag(self, key: str) -> bool: ...
    def text(self, key: str) -> str: ...


DEFAULT_CONTEXTS = (1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072)


@dataclass(frozen=True, slots=True)
class Option:
    """One flag of a workload. ``key`` names it in :attr:`RunOptions.settings` and in the result
    file's ``options``; ``unused`` is what a run of another workload records (default: ``default``),
    and with ``refused_elsewhere`` a workload that does not take the flag refuses any other value."""

    key: str
    flag: str
    kind: type[int] | type[float] | type[bool] | type[str]  # bool: a switch, --flag / --no-flag
    default: OptionValue
    help: str
    many: bool = False  # one value or more (nargs="+")
    unused: OptionValue | None = None
    refused_elsewhere: str | None = None  # the hint of that refusal
    others: str = ""  # what the workloads that do not take it do, for the help

    @property
    def value_type(self) -> object:
        """The type of its value: ``kind``, or a tuple of them for a flag that takes several."""
        return types.GenericAlias(tuple, (self.kind, ...)) if self.many else self.kind

    @property
    def recorded_elsewhere(self) -> OptionValue:
        return self.default if self.unused is None else self.unused


@dataclass(frozen=True, slots=True)
class Driver:
    """What a workload drives a level with: the client, the prompts, and where to report."""

    client: ChatClient
    prompts: PromptFactory
    calibration: Calibration
    options: RunOptions
    metrics_url: str | None
    first_index: int  # request numbers of this level start here (prompts differ across levels)
    on_done: Callable[[RequestRecord], None] | None = None


class Workload(ABC):
    """One way of loading the server: its flags, its levels, and how it drives one."""

    name: ClassVar[str]
    summary: ClassVar[str]  # one line for `bench run --help`
    options: ClassVar[tuple[Option, ...]] = ()

    def check(self, options: RunOptions) -> None:  # noqa: B027 (most workloads check nothing more)
        """Refuse settings of this workload that no level could run (a ConfigError naming the flag)."""

    @abstractmethod
    def levels(self, options: RunOptions) -> list[LevelSpec]:
        """The levels of a run, in order."""

    async def drive(self, level: LevelRun, driver: Driver) -> None:
        """Run one level, filling ``level`` as requests finish (closed or open loop by its spec)."""
        await run_level(
            driver.client,
            driver.prompts,
            driver.calibration,
            level,
            metrics_url=driver.metrics_url,
            first_index=driver.first_index,
            on_done=driver.on_done,
        )


WORKLOADS: dict[str, Workload] = {}


def register(cls: type[Workload]) -> type[Workload]:
    """Add a workload to the registry, in the order the help lists them."""
    WORKLOADS[cls.name] = cls()
    return cls


def spec(
    options: RunOptions,
    input_tokens: int,
    *,
    requests: int | None = None,
    streams: int = 1,
    rate: float | None = None,
    max_in_flight: int | None = None,
    sessions_at_once: int | None = None,
) -> LevelSpec:
    """A level with the run's request shape (``requests`` defaults to ``--requests``); the other
    keywords say how many requests it keeps in flight (see LevelSpec)."""
    return LevelSpec(
        requests=options.requests if requests is None else requests,
        input_tokens=input_tokens,
        output_tokens=options.output_tokens,
        fixed_output=options.fixed_output,
        temperature=options.temperature,
        seed=options.seed,
        streams=streams,
        rate=rate,
        max_in_flight=max_in_flight,
        sessions_at_once=sessions_at_once,
    )


def at_least_one(flag: str, values: tuple[int, ...] | tuple[float, ...], what: str) -> None:
    if any(value < 1 for value in values):
        raise ConfigError(f"{flag}: every {what} must be at least 1, got {list(values)}")


@register
class Single(Workload):
    name = "single"
    summary = "one stream"

    def levels(self, options: RunOptions) -> list[LevelSpec]:
        return [spec(options, options.input_tokens, streams=1, requests=max(options.requests, 4))]


CONCURRENCY_HINT = "use sweep for levels"


@register
class Sweep(Workload):
    name = "sweep"
    summary = "closed-loop concurrency levels"
    options = (
        Option(
            "concurrency",
            "--concurrency",
            int,
            (1, 2, 4, 8),
            "the levels",
            many=True,
            unused=(1,),  # the other workloads run one stream (agent: one session at a time)
            refused_elsewhere=CONCURRENCY_HINT,
            others="the others run one stream",
        ),
    )

    def levels(self, options: RunOptions) -> list[LevelSpec]:
        streams = options.ints("concurrency")
        at_least_one("--concurrency", streams, "level")
        return [spec(options, options.input_tokens, streams=c, requests=max(options.requests, 4 * c)) for c in streams]


@register
class Rate(Workload):
    name = "rate"
    summary = "open loop, Poisson arrivals"
    options = (
        Option("rates", "--rate", float, (0.5, 1.0, 2.0), "rate levels, requests per second", many=True),
        Option("max_in_flight", "--max-in-flight", int, 256, "cap on requests in flight"),
    )

    def levels(self, options: RunOptions) -> list[LevelSpec]:
        rates = options.floats("rates")
        if any(rate <= 0 for rate in rates):
            raise ConfigError(f"--rate: every rate must be above 0 requests per second, got {list(rates)}")
        cap = options.integer("max_in_flight")
        return [spec(options, options.input_tokens, rate=rate, max_in_flight=cap) for rate in rates]


@register
class Context(Workload):
    name = "context"
    summary = "one stream as the prompt grows"
    options = (
        Option(
            "contexts",
            "--context",
            int,
            DEFAULT_CONTEXTS,
            "context levels, prompt tokens (levels beyond the server's max_model_len are skipped and listed)",
            many=True,
        ),
    )

    def levels(self, options: RunOptions) -> list[LevelSpec]:
        lengths = options.ints("contexts")
        at_least_one("--context", lengths, "prompt length")
        return [spec(options, length, streams=1) for length in lengths]


# The agent workload lives in its own module (its loop and script beside it); importing it registers it.
from bench.measure.run import agent as _agent  # noqa: E402, F401
