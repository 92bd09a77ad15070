"""bench.rig.ready: the unit's start to its first answer, from the journal's and the waits' monotonic
timestamps (journalctl --output=json lines in the form journald writes them)."""

from __future__ import annotations

import json
from typing import Any

from bench.rig.ready import journal_start_us, ready_facts

INVOCATION = "5f0c1e2d3a4b45c6a7d8e9f0a1b2c3d4"
BOOT = "9a8b7c6d5e4f40312a2b3c4d5e6f7a8b"


def _line(monotonic_us: int, own: bool, invocation: str = INVOCATION, boot: str = BOOT) -> str:
    """One line of ``journalctl --output=json --output-fields=_SYSTEMD_INVOCATION_ID,INVOCATION_ID``:
    the unit's own output (``_SYSTEMD_INVOCATION_ID``) or systemd's line about it (``INVOCATION_ID``)."""
    field = "_SYSTEMD_INVOCATION_ID" if own else "INVOCATION_ID"
    return json.dumps(
        {
            "__CURSOR": f"s=0a1b;i={monotonic_us:x};b={boot};m={monotonic_us:x};t=6442d1a0;x=1f",
            "__REALTIME_TIMESTAMP": str(1_764_842_400_000_000 + monotonic_us),
            "__MONOTONIC_TIMESTAMP": str(monotonic_us),
            "_BOOT_ID": boot,
            "__SEQNUM": "4181",
            "__SEQNUM_ID": "0a1b",
            field: invocation,
        }
    )


JOURNAL = "\n".join(
    [
        _line(4_000_000_000, own=False, invocation="0" * 32),  # an earlier start of the unit
        _line(5_000_000_000, own=False),  # systemd: "Started vllm.service"
        _line(5_000_120_000, own=True),  # the engine's first line
        _line(5_090_000_000, own=True),
    ]
)
WAIT = {"invocation_id": INVOCATION, "boot_id": BOOT, "healthy_monotonic_us": 5_095_300_000, "elapsed_s": 95.1}
ANSWER = {"answered": True, "sent_monotonic_us": 5_101_000_000, "answered_monotonic_us": 5_101_420_000, "msg": ""}


def _parts(**changes: Any) -> dict[str, Any]:
    parts = {
        "invocation": INVOCATION,
        "started": True,
        "wait": WAIT,
        "journal": JOURNAL,
        "exec_start_us": "5000000400",
        "answer": ANSWER,
        "previous": "",
    }
    return {**parts, **changes}


def test_the_first_line_of_the_invocation_is_the_start() -> None:
    """systemd's own line about the start comes first; another invocation's lines are not this start's."""
    assert journal_start_us(JOURNAL, INVOCATION) == 5_000_000_000
    assert journal_start_us(JOURNAL, INVOCATION, BOOT) == 5_000_000_000
    assert journal_start_us("-- No entries --\n", INVOCATION) is None


def test_a_line_of_another_boot_does_not_count() -> None:
    """The monotonic clock restarts at every boot: a line stamped on another boot is left out."""
    other = _line(1_000, own=True, boot="f" * 32)
    assert journal_start_us(other + "\n" + JOURNAL, INVOCATION, BOOT) == 5_000_000_000
    assert journal_start_us(other, INVOCATION, BOOT) is None


def test_a_start_this_run_made_is_timed_to_its_first_answer() -> None:
    """Health at 95.3 s after the journal's first line, the first completion 0.42 s: ready at 95.72 s."""
    assert ready_facts(_parts()) == {"ready_s": 95.72, "health_s": 95.3, "first_answer_s": 0.42, "ready_reason": None}


def test_without_journal_lines_systemd_start_of_the_main_process_stands_in() -> None:
    """A journal that kept no line of the start: ExecMainStartTimestampMonotonic, 400 us later."""
    facts = ready_facts(_parts(journal=""))
    assert facts == {"ready_s": 95.72, "health_s": 95.3, "first_answer_s": 0.42, "ready_reason": None}
    assert ready_facts(_parts(journal="", exec_start_us="5095000000"))["health_s"] == 0.3


def test_no_start_time_anywhere_is_null_with_why() -> None:
    facts = ready_facts(_parts(journal="", exec_start_us="0"))
    assert facts["ready_s"] is None
    assert facts["ready_reason"] == f"neither the journal nor systemd holds when invocation {INVOCATION} started"


def test_an_engine_that_answers_health_but_not_a_completion_has_health_only() -> None:
    """No first answer: ready_s null, saying why; the health figure stays."""
    failed = {
        "answered": False,
        "sent_monotonic_us": 5_101_000_000,
        "answered_monotonic_us": 0,
        "msg": "x answered 404",
    }
    assert ready_facts(_parts(answer=failed)) == {
        "ready_s": None,
        "health_s": 95.3,
        "first_answer_s": None,
        "ready_reason": "the health URL answered, but the first chat completion did not: x answered 404",
    }


def test_a_restart_after_the_wait_is_not_timed() -> None:
    facts = ready_facts(_parts(invocation="1" * 32))
    assert facts["ready_s"] is None
    assert facts["ready_reason"] == (
        f"the health wait saw invocation {INVOCATION} answer, not {'1' * 32} (the unit restarted after it answered)"
    )


def test_a_run_that_did_not_start_the_unit_keeps_the_figures_of_the_same_start() -> None:
    """The second site.yml run: the record's figures for this invocation, unchanged (idempotence)."""
    previous = json.dumps(
        {"startup": {"invocation_id": INVOCATION, "ready_s": 95.72, "health_s": 95.3, "first_answer_s": 0.42}}
    )
    facts = ready_facts(_parts(started=False, wait={"invocation_id": INVOCATION}, previous=previous))
    assert facts == {"ready_s": 95.72, "health_s": 95.3, "first_answer_s": 0.42, "ready_reason": None}


def test_a_start_made_outside_the_run_is_null_with_why() -> None:
    """The watchdog restarted the engine since the record was written: its first answer was never seen."""
    previous = json.dumps({"startup": {"invocation_id": "0" * 32, "ready_s": 95.72}})
    for earlier in (previous, "", "not json"):
        facts = ready_facts(_parts(started=False, previous=earlier))
        assert facts["ready_s"] is None
        assert facts["ready_reason"] == (
            f"invocation {INVOCATION} was started outside site.yml (the watchdog, or by hand), "
            "so its first answer was not timed"
        )


def test_a_record_of_the_same_start_from_before_timing_says_so() -> None:
    previous = json.dumps({"startup": {"invocation_id": INVOCATION, "kv_cache_tokens": 5}})
    facts = ready_facts(_parts(started=False, previous=previous))
    assert facts["ready_reason"] == f"invocation {INVOCATION} was recorded before start-ups were timed"
