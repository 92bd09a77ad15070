"""Capacity files: what ``bench capacity`` found for a tag, one JSON document per search under
``results/<tag>/capacity/<time>.json``, schema-versioned and written atomically through
:data:`CAPACITY_FILE` (:mod:`bench.documents`), as run results are.

:class:`CapacityResult` holds the criteria, every level the searches measured in the order they
were measured (:class:`Probe`, with the level's full numbers), and the two answers
(:class:`Answer`). :func:`latest_capacity` reads the newest file of a tag. The JSON Schema
generated from these types is committed as ``capacity.schema.json`` beside this module
(``python -m bench.cli.schemas`` writes it again).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from bench.documents import Document
from bench.measure.capacity.search import Outcome
from bench.measure.run.results import LevelResult

Axis = Literal["concurrency", "context"]


@dataclass(frozen=True, slots=True)
class Criteria:
    """What a level must do to pass: the slow streams' decode speed (the ``decode_percentile``
    of per-request decode tok/s) at least ``min_decode_tps``, TTFT at its ``ttft_percentile`` at
    most ``max_ttft_ms`` (concurrency levels only), and no request failed, the level trusted."""

    min_decode_tps: float
    decode_percentile: float
    max_ttft_ms: float
    ttft_percentile: float


@dataclass(frozen=True, slots=True)
class Shape:
    """The requests of the levels: prompt and output tokens, and how many per level."""

    input_tokens: int  # concurrency levels; a context level's prompt is its value
    output_tokens: int
    requests: int  # a concurrency level of c streams sends max(requests, 4 x c)
    context_requests: int  # each context level (one stream)


@dataclass(frozen=True, slots=True)
class Probe:
    """One measured level of a search: its value (streams, or prompt tokens), the two figures
    the criteria judge, and whether it passed; ``failed_because`` lists why it did not."""

    axis: Axis
    value: int
    decode_tps_low: float | None  # the decode_percentile of per-request decode tok/s
    ttft_ms_high: float | None  # the ttft_percentile of TTFT
    passed: bool
    failed_because: list[str]
    level: LevelResult


@dataclass(frozen=True, slots=True)
class Answer:
    """The answer of one search (see :class:`~bench.measure.capacity.search.SearchAnswer`):
    ``value`` passed and ``first_failed`` did not; ``lowest`` and ``cap`` bound the search."""

    outcome: Outcome
    value: int | None
    first_failed: int | None
    lowest: int
    cap: int


@dataclass(frozen=True, slots=True)
class CapacityResult:
    """One ``bench capacity`` search: the tag's capability card figures and how they were found."""

    schema_version: int
    tag: str
    started_at: str
    base_url: str
    model: str
    engine: str
    served_context: int | None  # /v1/models' max_model_len (llama.cpp: n_ctx); None when unsaid
    criteria: Criteria
    shape: Shape
    probes: list[Probe]
    max_users: Answer
    longest_context: Answer | None  # None with --no-context


CAPACITY_FILE: Document[CapacityResult] = Document(
    CapacityResult,
    version=1,
    name="capacity",
    title="bench capacity result",
    noun="bench capacity",
    schema_file=Path(__file__).with_name("capacity.schema.json"),
)


def describe(answer: Answer, axis: Axis) -> str:
    """One line for an answer: "4 (5 failed)", "not reached even at 1", "at least 64 (the cap)"."""
    unit = "" if axis == "concurrency" else " prompt tokens"
    if answer.outcome == "not_reached":
        return f"not reached even at {answer.lowest:,}{unit}"
    if answer.outcome == "cap_passed":
        return f"at least {answer.cap:,}{unit} (the cap passed)"
    return f"{answer.value:,}{unit} ({answer.first_failed:,} failed)"


def capacity_dir(results_dir: Path, tag: str) -> Path:
    """Where the capacity files of ``tag`` go."""
    return results_dir / tag / "capacity"


def latest_capacity(results_dir: Path, tag: str) -> CapacityResult | None:
    """The newest capacity file of ``tag`` (file names are UTC times); None when there is none."""
    files = sorted(capacity_dir(results_dir, tag).glob("*.json"))
    return CAPACITY_FILE.read(files[-1]) if files else None
