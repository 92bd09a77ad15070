"""Start-up as a measured quantity: seconds from an engine unit's start to its first answer.

The engine role (``roles/engine/tasks/start.yml`` and ``record.yml``) gathers, on the host:

- the journal of the unit's running start (its invocation) as ``journalctl --output=json`` lines:
  the first line of that invocation on this boot (systemd's own line about starting the unit, or
  the engine's first output) is the unit's start, by its ``__MONOTONIC_TIMESTAMP``; systemd's
  ``ExecMainStartTimestampMonotonic`` stands in when the journal kept no line of it;
- what ``llmrig_wait_healthy`` returned: the invocation it waited for, the boot, and the
  ``CLOCK_MONOTONIC`` moment (microseconds, the journal's clock) its health probe first got 200;
- what ``llmrig_first_answer`` returned: the moments one minimal chat completion (one token) was
  sent and answered;
- whether this run's start task started the unit, and the record the host already had.

:func:`ready_facts` turns them into deployment.json's ``startup`` figures:

- ``health_s``: the unit's start to its health URL's first 200 (to within the probe interval,
  ``engine_health_interval_s``);
- ``first_answer_s``: the first chat completion's own time, sent to answered (Ollama loads the
  model on its first request, so this holds its load);
- ``ready_s = health_s + first_answer_s``: the unit's start to its first answer. What the play does
  between the two (reading the engine's description, Ollama pulling a missing model) is not the
  engine's start-up and is left out;
- ``ready_reason``: why ``ready_s`` is null, when it is ('' is never written).

The figures belong to one start: a run that did not start the unit keeps the figures the host's
record holds for the same invocation, and records null with a reason for a start it did not make
(the watchdog's restart, a restart by hand), whose first answer it never saw.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

READY_KEYS = ("ready_s", "health_s", "first_answer_s", "ready_reason")
_MICROSECONDS = 1_000_000


def journal_start_us(journal: str, invocation: str, boot_id: str = "") -> int | None:
    """The ``__MONOTONIC_TIMESTAMP`` (microseconds) of the first line of ``invocation`` in
    ``journal`` (``journalctl --output=json`` lines: the unit's own, ``_SYSTEMD_INVOCATION_ID``,
    and systemd's about it, ``INVOCATION_ID``), on boot ``boot_id`` when given; None when none."""
    found: int | None = None
    for line in journal.splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if not isinstance(entry, dict) or invocation not in (
            entry.get("_SYSTEMD_INVOCATION_ID"),
            entry.get("INVOCATION_ID"),
        ):
            continue
        if boot_id and entry.get("_BOOT_ID", boot_id) != boot_id:
            continue
        stamp = str(entry.get("__MONOTONIC_TIMESTAMP", ""))
        if stamp.isdigit() and (found is None or int(stamp) < found):
            found = int(stamp)
    return found


def _microseconds(value: object) -> int | None:
    """A monotonic timestamp in microseconds as a module or systemctl gave it; None when unset."""
    text = str(value if value is not None else "").strip()
    return int(text) if text.isdigit() and int(text) > 0 else None


def _seconds(microseconds: int) -> float:
    return round(microseconds / _MICROSECONDS, 2)


def _null(reason: str, health_s: float | None = None) -> dict[str, Any]:
    return {"ready_s": None, "health_s": health_s, "first_answer_s": None, "ready_reason": reason}


def _kept(invocation: str, previous: str) -> dict[str, Any]:
    """The figures the host's record (``previous``, its JSON text) holds for ``invocation``."""
    try:
        document = json.loads(previous) if previous.strip() else {}
    except ValueError:
        document = {}
    startup = document.get("startup") if isinstance(document, dict) else None
    if isinstance(startup, dict) and startup.get("invocation_id") == invocation:
        if "ready_s" in startup:
            return {key: startup.get(key) for key in READY_KEYS}
        return _null(f"invocation {invocation} was recorded before start-ups were timed")
    return _null(
        f"invocation {invocation} was started outside site.yml (the watchdog, or by hand), so its first "
        "answer was not timed"
    )


def measured(
    invocation: str, wait: Mapping[str, Any], journal: str, exec_start_us: object, answer: Mapping[str, Any]
) -> dict[str, Any]:
    """The figures of a start this run made: from its first journal line (or systemd's start of its
    main process) to the health wait's first 200, plus the first chat completion's own time."""
    healthy = _microseconds(wait.get("healthy_monotonic_us"))
    if healthy is None or wait.get("invocation_id") != invocation:
        return _null(
            f"the health wait saw invocation {wait.get('invocation_id') or 'none'} answer, not {invocation} "
            "(the unit restarted after it answered)"
        )
    start = journal_start_us(journal, invocation, str(wait.get("boot_id") or "")) or _microseconds(exec_start_us)
    if start is None or start > healthy:
        return _null(f"neither the journal nor systemd holds when invocation {invocation} started")
    health_s = _seconds(healthy - start)
    sent, answered = _microseconds(answer.get("sent_monotonic_us")), _microseconds(answer.get("answered_monotonic_us"))
    if sent is None or answered is None or answered < sent or not answer.get("answered"):
        why = answer.get("msg") or "it was not sent"
        return _null(f"the health URL answered, but the first chat completion did not: {why}", health_s)
    return {
        "ready_s": _seconds(healthy - start + answered - sent),
        "health_s": health_s,
        "first_answer_s": _seconds(answered - sent),
        "ready_reason": None,
    }


def ready_facts(parts: Mapping[str, Any]) -> dict[str, Any]:
    """deployment.json's start-up figures (:data:`READY_KEYS`) from what the engine role gathered:
    ``invocation``, ``started`` (this run's start task started the unit), ``wait``, ``journal``,
    ``exec_start_us``, ``answer`` and ``previous`` (the host's deployment.json, '' when none)."""
    invocation = str(parts.get("invocation") or "")
    if not parts.get("started"):
        return _kept(invocation, str(parts.get("previous") or ""))
    return measured(
        invocation,
        parts.get("wait") or {},
        str(parts.get("journal") or ""),
        parts.get("exec_start_us"),
        parts.get("answer") or {},
    )
