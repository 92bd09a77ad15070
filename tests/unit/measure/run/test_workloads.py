"""bench.measure.run.workloads: each workload's levels from its flags, the flag a workload does not
take, and the registry the CLI, the run options and the result schema are built from."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from bench.cli.main import build_parser
from bench.codec import to_json
from bench.errors import ConfigError
from bench.measure.run.loops import LevelSpec
from bench.measure.run.options import RunOptions, settings_for
from bench.measure.run.results import RESULT_FILE
from bench.measure.run.workloads import WORKLOADS, Option, Workload, register, spec


def _options(workload: str, requests: int = 20, **settings: object) -> RunOptions:
    return RunOptions(workload, requests, 512, 128, Path("results"), settings=settings)  # type: ignore[arg-type]


def test_the_registry_holds_the_six_workloads_in_help_order() -> None:
    """single, sweep, rate, context, agent and trace, each with a one-line summary."""
    assert list(WORKLOADS) == ["single", "sweep", "rate", "context", "agent", "trace"]
    assert all(workload.summary for workload in WORKLOADS.values())


@pytest.mark.parametrize(
    ("workload", "settings", "levels"),
    [
        ("single", {}, [(1, 1, None, 20)]),
        ("sweep", {}, [(1, 1, None, 20), (2, 2, None, 20), (4, 4, None, 20), (8, 8, None, 32)]),
        ("rate", {"rates": (0.5, 2.0)}, [(1, 256, 0.5, 20), (1, 256, 2.0, 20)]),
        ("context", {"contexts": (128, 4096)}, [(1, 1, None, 20), (1, 1, None, 20)]),
        ("agent", {"concurrency": (2,), "sessions": 3, "turns": 5}, [(1, 2, None, 15)]),
    ],
)
def test_each_workload_makes_its_levels(
    workload: str, settings: dict[str, object], levels: list[tuple[int, int, float | None, int]]
) -> None:
    """(streams, requests in flight, rate, requests) of every level: the three meanings of
    "concurrency" are streams (closed loop), max_in_flight (open loop) and sessions_at_once."""
    made = _options(workload, **settings).levels()
    assert [(s.streams, s.in_flight, s.rate, s.requests) for s in made] == levels
    if workload == "agent":
        assert made[0].sessions_at_once == 2
    if workload == "rate":
        assert {s.max_in_flight for s in made} == {256}
    if workload == "context":
        assert [s.input_tokens for s in made] == [128, 4096]


def test_a_workload_refuses_concurrency_it_does_not_take() -> None:
    """--concurrency belongs to sweep and agent; the others accept only their one stream."""
    with pytest.raises(ConfigError, match=r"^--concurrency: the rate workload does not take it; use sweep for levels$"):
        settings_for("rate", {"concurrency": (2,)})
    assert settings_for("single", {"concurrency": (1,), "rates": None}) == {"concurrency": (1,)}


def test_the_record_holds_every_workloads_flags() -> None:
    """The options of a single run record every workload's flag at its usual value."""
    record = to_json(_options("single"))
    assert isinstance(record, dict)
    keys = ("concurrency", "rates", "contexts", "max_in_flight", "sessions", "trace", "speedup", "trace_block_size")
    assert {key: record[key] for key in keys} == {
        "concurrency": [1],
        "rates": [0.5, 1.0, 2.0],
        "contexts": [1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072],
        "max_in_flight": 256,
        "sessions": 4,
        "trace": "",
        "speedup": 1.0,
        "trace_block_size": 512,
    }


def test_a_text_flag_is_parsed_recorded_and_schemad_as_a_string() -> None:
    """--trace is a path kept as the string given; the schema types it, the record reads back."""
    args = build_parser().parse_args(["run", "trace", "--trace", "a b.jsonl", "--speedup", "2.5"])
    assert (args.trace, args.speedup) == ("a b.jsonl", 2.5)
    options = _options("trace", trace="a b.jsonl", speedup=2.5)
    assert options.text("trace") == "a b.jsonl"
    properties = RESULT_FILE.schema()["$defs"]["RunOptions"]["properties"]  # type: ignore[index]
    assert properties["trace"] == {"type": "string"}
    assert properties["speedup"] == {"type": "number"}


class _Burst(Workload):
    """A seventh workload, registered by this test only: all --burst requests at once."""

    name = "burst"
    summary = "every request at once"
    options = (Option("burst", "--burst", int, 16, "burst: requests sent at once"),)

    def levels(self, options: RunOptions) -> list[LevelSpec]:
        size = options.integer("burst")
        return [spec(options, options.input_tokens, streams=size, requests=size)]


@pytest.fixture
def burst() -> Iterator[None]:
    register(_Burst)
    yield
    del WORKLOADS["burst"]


@pytest.mark.usefixtures("burst")
def test_a_new_workload_needs_only_its_class(capsys: pytest.CaptureFixture[str]) -> None:
    """Registered, a workload is a choice of `bench run` with its flag and help, its flag lands in
    the run options and the result schema, and its levels run from them."""
    with pytest.raises(SystemExit):
        build_parser().parse_args(["run", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "burst: every request at once" in text
    assert "--burst BURST burst: requests sent at once (default: 16)" in text
    args = build_parser().parse_args(["run", "burst", "--burst", "3"])
    assert (args.workload, args.burst) == ("burst", 3)
    options = _options("burst", burst=3)
    assert [(s.streams, s.requests) for s in options.levels()] == [(3, 3)]
    assert RESULT_FILE.schema()["$defs"]["RunOptions"]["properties"]["burst"] == {"type": "integer"}  # type: ignore[index]
