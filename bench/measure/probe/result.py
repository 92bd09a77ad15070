"""Capability probes of a served endpoint: their result types and files.

``bench probe`` asks the endpoint a few questions whose answers decide whether a comparison of
tags is fair (tool calls, reasoning, context limits, structured output; the checks themselves
are in :mod:`~bench.measure.probe.checks`). Their result is one :class:`ProbeResult` per probe,
filed as JSON under ``RESULTS_DIR/<tag>/probes/<started_at>.json`` with a ``schema_version``,
written atomically (a temporary file in the same directory, then a rename).

A check that did not pass is in :attr:`ProbeResult.failed` even when the deployment said it
would fail (``expected_failure``): an expected failure is reported as such, never hidden, and it
still keeps the tag out of a ranking. A check that could not run (``ran`` false: what it compares
with is not known) is neither passed nor failed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from bench.codec import OMIT_IF_NONE
from bench.documents import Document

PROBES_DIR = "probes"
TTFO_RUNS = 3


@dataclass(frozen=True, slots=True)
class CheckResult:
    """One check: whether it passed, one short line saying what came back, and whether the
    deployment said the capability is absent (``expected_failure``). ``ran`` is false for a
    check that could not be made (``passed`` is then false too and ``detail`` says why)."""

    name: str
    passed: bool
    detail: str
    expected_failure: bool
    ran: bool = True

    @property
    def verdict(self) -> str:
        """PASS, FAIL, expected FAIL, or not run."""
        if not self.ran:
            return "not run"
        if self.passed:
            return "PASS"
        return "expected FAIL" if self.expected_failure else "FAIL"


@dataclass(frozen=True, slots=True)
class ProbeResult:
    """One ``bench probe`` of an endpoint, filed under its tag; ``started_at`` is ISO 8601 UTC."""

    tag: str
    started_at: str
    base_url: str
    model: str
    checks: list[CheckResult]
    # Time to the first answer token, median of TTFO_RUNS streamed requests, with thinking
    # switched on and off per request (chat_template_kwargs); None when no answer came.
    ttfo_thinking_on_ms: float | None = field(default=None, metadata=OMIT_IF_NONE)
    ttfo_thinking_off_ms: float | None = field(default=None, metadata=OMIT_IF_NONE)
    # The agent clients' recorded requests replayed (bench.measure.probe.clients), one result per
    # client; None when none was replayed. They say which clients the deployment serves, and do
    # not decide whether the tag is ranked.
    clients: list[CheckResult] | None = field(default=None, metadata=OMIT_IF_NONE)

    @property
    def failed(self) -> list[CheckResult]:
        """The checks that ran and did not pass, expected failures included."""
        return [check for check in self.checks if check.ran and not check.passed]

    @property
    def unexpected(self) -> list[CheckResult]:
        """The failed checks that the deployment did not say would fail."""
        return [check for check in self.failed if not check.expected_failure]

    @property
    def clients_served(self) -> list[str]:
        """The clients whose replayed requests were served correctly."""
        return [client.name for client in self.clients or [] if client.passed]


PROBE_FILE: Document[ProbeResult] = Document(
    ProbeResult,
    version=1,
    name="probe",
    title="bench probe result",
    noun="bench probe",
    schema_file=Path(__file__).with_name("probe.schema.json"),
)
"""Probe files: read, written and schema-checked through this (:mod:`bench.documents`)."""


def probe_path(results_dir: Path, result: ProbeResult) -> Path:
    """Where ``result`` is filed: ``results_dir/<tag>/probes/<compact started_at>.json``."""
    stamp = "".join(char for char in result.started_at if char.isalnum())
    return results_dir / result.tag / PROBES_DIR / f"{stamp}.json"


def write_probe(results_dir: Path, result: ProbeResult) -> Path:
    """Write ``result`` as JSON under its tag through a temporary file and a rename; its path."""
    path = probe_path(results_dir, result)
    return PROBE_FILE.write(path, result)


def latest_probe(results_dir: Path, tag: str) -> ProbeResult | None:
    """The newest probe filed under ``tag`` (file names sort by their start time), or None."""
    found = sorted((results_dir / tag / PROBES_DIR).glob("*.json"))
    return PROBE_FILE.read(found[-1]) if found else None
