"""Whether ``bench compare`` may rank a tag: its latest ``bench probe`` (under
``RESULTS_DIR/<tag>/probes/``) passed every check. A tag without a probe on record is ranked
with a note saying so, and saying what a probe would change: once one fails any check (a check the
deployment said would fail included, as on a model without a tool-call parser), the tag is shown but
not ranked unless ``--include-failing``."""

from __future__ import annotations

from pathlib import Path

from bench.measure.compare.comparison import Gate
from bench.measure.probe.result import latest_probe

NO_PROBE = (
    "no probe on record, so ranked unchecked (bench probe --tag TAG checks tool calls, reasoning and limits; "
    "once a probe fails any check, an expected failure included, the tag is not ranked without --include-failing)"
)


def probe_gate(results_dir: Path, tag: str, include_failing: bool) -> Gate:
    """The gate of ``tag``: not ranked when its latest probe failed a check, unless ``include_failing``."""
    probe = latest_probe(results_dir, tag)
    if probe is None:
        return Gate(tag, None, NO_PROBE)
    failed = [check.name for check in probe.failed]
    if not failed:
        return Gate(tag, None, f"probes passed ({probe.started_at[:16]})")
    what = f"failed probes: {', '.join(failed)} ({probe.started_at[:16]})"
    if include_failing:
        return Gate(tag, None, f"{what}; ranked anyway (--include-failing)")
    return Gate(tag, f"{what}; --include-failing to rank it anyway", what)
