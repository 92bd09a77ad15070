"""llmrig_wait_healthy: the health wait that fails early, with the journal, when the engine dies.

A real HTTP server on loopback plays the engine's /health; `systemctl show` and `journalctl`
are the protocol fakes in tests/fakes/systemd (the real ones run in the end-to-end tier).
"""

from __future__ import annotations

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
    result = MODULE.wait(_params(engine.url))
    assert result == {"changed": False, "elapsed_s": result["elapsed_s"], "restarts": 0}
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


def test_timeout_names_the_knob_it_is_given(unit_state: Path) -> None:
    """Open WebUI's wait names open_webui_ready_timeout_s, not the engine's knob."""
    params = _params("http://127.0.0.1:9/ready", timeout_s=0.2, unit="open-webui.service")
    result = MODULE.wait({**params, "timeout_knob": "open_webui_ready_timeout_s"})
    assert result["failed"] is True
    assert "raise open_webui_ready_timeout_s if it is still starting" in result["msg"]
    assert "engine_health_timeout_s" not in result["msg"]
