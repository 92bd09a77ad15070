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
from bench.measure.capacity.attainment import Verdict
from bench.measure.capacity.search import Outcome
from bench.measure.run.results import LevelResult

Axis = Literal["concurrency", "context"]


@dataclass(frozen=True, slots=True)
class Criteria:
    """What a level must do to pass. A request meets the service level when it decodes at
    ``min_decode_tps`` or faster and, on the concurrency axis, its TTFT is at most
    ``max_ttft_ms``; a level passes when the Wilson interval (at ``confidence``) of the fraction
    of its requests that met it lies at or above ``target_attainment``, fails when it lies below,
    and is inconclusive in between. A level with a failed request, untrusted, or saturated fails
    whatever its attainment."""

    min_decode_tps: float
    max_ttft_ms: float
    target_attainment: float
    confidence: float


@dataclass(frozen=True, slots=True)
class Shape:
    """The requests of the levels: prompt and output tokens, how many per batch of a level, and
    the limits on sampling: requests per level, and per search (the budget)."""

    input_tokens: int  # concurrency levels; a context level's prompt is its value
    output_tokens: int
    requests: int  # a concurrency batch of c streams sends max(requests, 4 x c)
    context_requests: int  # each context batch (one stream)
    max_requests_per_level: int  # no further batch once a level's next one would pass this
    budget_requests: int  # each search: no batch once the next one would pass this


@dataclass(frozen=True, slots=True)
class Probe:
    """One measured level of a search, over all its batches: its value (streams, or prompt
    tokens), how many of its measured requests met the service level and the interval of that
    fraction, its verdict and why (a failure's reasons, or why an inconclusive level's sampling
    stopped); the slow streams' decode (p10) and TTFT p95 are shown, not judged; each batch is a
    whole level of ``bench run sweep``."""

    axis: Axis
    value: int
    requests_measured: int
    requests_met: int
    attainment: float | None  # requests_met / requests_measured; None when none was measured
    interval_low: float | None
    interval_high: float | None
    verdict: Verdict
    because: list[str]
    decode_tps_low: float | None  # p10 of per-request decode tok/s over every batch
    ttft_ms_high: float | None  # p95 of TTFT over every batch
    batches: list[LevelResult]

    @property
    def requests_sent(self) -> int:
        return sum(batch.requests.total for batch in self.batches)


@dataclass(frozen=True, slots=True)
class Answer:
    """The answer of one search (see :class:`~bench.measure.capacity.search.SearchAnswer`):
    ``value`` passed, ``first_failed`` failed, ``undecided`` is what the answer could not get past
    (an inconclusive level, or the level the budget could not pay for); ``lowest`` and ``cap``
    bound the search; ``requests_sent`` is what it spent of its ``budget_requests``."""

    outcome: Outcome
    value: int | None
    first_failed: int | None
    undecided: int | None
    lowest: int
    cap: int
    requests_sent: int


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
    version=2,
    name="capacity",
    title="bench capacity result",
    noun="bench capacity",
    schema_file=Path(__file__).with_name("capacity.schema.json"),
)


def capacity_dir(results_dir: Path, tag: str) -> Path:
    """Where the capacity files of ``tag`` go."""
    return results_dir / tag / "capacity"


def latest_capacity(results_dir: Path, tag: str) -> CapacityResult | None:
    """The newest capacity file of ``tag`` (file names are UTC times); None when there is none."""
    files = sorted(capacity_dir(results_dir, tag).glob("*.json"))
    return CAPACITY_FILE.read(files[-1]) if files else None
