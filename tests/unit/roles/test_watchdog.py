"""llmrig-watchdog: restart the engine after N failed checks, give up after M restarts, spare a loading engine.

Most tests drive the pure ``decide`` function tick by tick. The end-to-end tests run the real
script with the systemctl protocol fake in tests/fakes/watchdog and a loopback HTTP server
playing the engine's /health, its CLOCK_MONOTONIC fixed (tests/fakes/watchdog/fixed-clock) so
that no result depends on the machine's uptime or on how long a tick takes.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.helpers import FAKES, REPO, HealthEngine, monitoring_binary

SCRIPT = REPO / "roles" / "watchdog" / "files" / "llmrig-watchdog"
FAKE_SYSTEMCTL = FAKES / "watchdog" / "systemctl"
FAKE_JOURNALCTL = FAKES / "watchdog" / "journalctl"
FIXED_CLOCK = FAKES / "watchdog" / "fixed-clock"


def load_script(path: Path, name: str) -> ModuleType:
    """Import a Python script without a .py suffix (and without leaving a __pycache__ next to it)."""
    module = ModuleType(name)
    module.__file__ = str(path)
    sys.modules[name] = module  # dataclasses look their module up while the class is created
    exec(compile(path.read_text(encoding="utf-8"), str(path), "exec"), module.__dict__)
    return module


WD = load_script(SCRIPT, "llmrig_watchdog")

UNIT = "vllm.service"
CONFIG = WD.Config(
    unit=UNIT,
    engine="vllm",
    health_url="http://127.0.0.1:8000/health",
    failures_before_restart=3,
    max_restarts=2,
    window_s=600,
    load_grace_s=300,
    check_timeout_s=5.0,
)
WALL = 1_750_000_000.0
BOOTED_US = 10_000 * 1_000_000  # CLOCK_MONOTONIC of "now" (decide tests, end-to-end ticks): 10 000 s after boot
HEALTHY = WD.Probe(True, "HTTP 200")
UNHEALTHY = WD.Probe(False, "HTTP 503")
RESTART = (WD.Action(("reset-failed", UNIT), False), WD.Action(("restart", "--no-block", UNIT), True))


def now(after_s: float = 0) -> Any:
    return WD.Now(WALL + after_s, BOOTED_US + int(after_s * 1_000_000))


def props(active: str = "active", result: str = "success", *, started_s_ago: float = 3600, **changes: str):
    """`systemctl show` properties of the engine unit, started ``started_s_ago`` before now()."""
    started = str(BOOTED_US - int(started_s_ago * 1_000_000))
    return {
        "LoadState": "loaded",
        "ActiveState": active,
        "SubState": {"active": "running", "failed": "failed"}.get(active, "dead"),
        "Result": result,
        "InvocationID": "inv-1",
        "ActiveEnterTimestampMonotonic": started,
        "ExecMainStartTimestampMonotonic": started,
        **changes,
    }


def texts(decision: Any) -> list[tuple[int, str]]:
    return [(line.priority, line.text) for line in decision.lines]


def state(**changes: Any) -> Any:
    return WD.State(unit=UNIT, healthy_invocation="inv-1", **changes)


# ---------------------------------------------------------------------------------------------
# decide: one tick at a time


def test_healthy_resets_failures_and_remembers_the_start() -> None:
    decision = WD.decide(state(failures=2, gave_up=True, notice="x"), CONFIG, props(), HEALTHY, now())
    assert decision.state == WD.State(unit=UNIT, failures=0, healthy_invocation="inv-1", gave_up=False, notice="")
    assert decision.actions == ()
    assert texts(decision) == [(WD.NOTICE, "vllm.service healthy again")]


def test_first_healthy_answer_of_a_start_is_logged_once() -> None:
    fresh = WD.State(unit=UNIT)
    first = WD.decide(fresh, CONFIG, props(started_s_ago=95), HEALTHY, now())
    assert texts(first) == [(WD.INFO, "vllm.service is healthy (95 s after start)")]
    assert first.state.healthy_invocation == "inv-1"
    assert WD.decide(first.state, CONFIG, props(started_s_ago=125), HEALTHY, now(30)).lines == ()


def test_loading_within_grace_is_not_counted() -> None:
    fresh = WD.State(unit=UNIT)
    decision = WD.decide(fresh, CONFIG, props(started_s_ago=120), WD.Probe(False, "connection refused"), now())
    assert decision.state == fresh
    assert decision.actions == ()
    assert texts(decision) == [
        (WD.INFO, "vllm.service is loading (120s since start, never healthy yet; grace 300 s); not counting")
    ]


def test_unhealthy_after_grace_is_counted() -> None:
    decision = WD.decide(WD.State(unit=UNIT), CONFIG, props(started_s_ago=301), UNHEALTHY, now())
    assert decision.state.failures == 1
    assert decision.actions == ()
    assert texts(decision) == [(WD.WARNING, "health check failed (1/3): HTTP 503")]


def test_a_start_that_was_healthy_once_counts_at_once() -> None:
    """Within the grace period, but this start has answered 200 before: no more loading excuse."""
    decision = WD.decide(state(), CONFIG, props(started_s_ago=60), WD.Probe(False, "timed out after 5 s"), now())
    assert decision.state.failures == 1
    assert texts(decision) == [(WD.WARNING, "health check failed (1/3): timed out after 5 s")]


def test_n_failures_restart_once_without_blocking() -> None:
    decision = WD.decide(state(failures=2), CONFIG, props(), UNHEALTHY, now())
    assert decision.actions == RESTART
    assert decision.state == state(failures=0, restarts=(WALL,))
    assert texts(decision) == [
        (WD.WARNING, "health check failed (3/3): HTTP 503"),
        (WD.NOTICE, "restarting vllm.service after 3 failed health checks (restart 1 of 2 in 600 s)"),
    ]


def test_the_restarted_engine_gets_its_load_grace() -> None:
    """After the watchdog's restart, a new InvocationID that never answered 200 is loading, not failing."""
    restarted = WD.decide(state(failures=2), CONFIG, props(), UNHEALTHY, now()).state
    loading = WD.decide(restarted, CONFIG, props(InvocationID="inv-2", started_s_ago=30), UNHEALTHY, now(30))
    assert loading.actions == ()
    assert loading.state.failures == 0
    assert loading.state.healthy_invocation == "inv-1"


def test_m_restarts_in_the_window_give_up_once() -> None:
    tired = state(failures=2, restarts=(WALL - 500, WALL - 100))
    first = WD.decide(tired, CONFIG, props("failed", "signal"), None, now())
    assert first.actions == ()
    assert first.state.gave_up is True
    assert first.state.failures == 3
    assert texts(first) == [
        (WD.WARNING, "health check failed (3/3): unit failed (Result=signal)"),
        (
            WD.ERR,
            "giving up on vllm.service: 2 restarts in the last 600 s did not bring it back (last: unit failed "
            "(Result=signal)); fix it, then `systemctl restart vllm.service` or run site.yml",
        ),
    ]
    second = WD.decide(first.state, CONFIG, props("failed", "signal"), None, now(30))
    assert second.actions == ()
    assert second.lines == ()
    assert second.state.gave_up is True
    assert second.state.failures == 4


def test_restarts_older_than_the_window_are_forgotten() -> None:
    old = state(failures=2, restarts=(WALL - 900, WALL - 601, WALL - 10))
    decision = WD.decide(old, CONFIG, props(), UNHEALTHY, now())
    assert decision.actions == RESTART
    assert decision.state.restarts == (WALL - 10, WALL)
    assert "(restart 2 of 2 in 600 s)" in decision.lines[-1].text


def test_given_up_restarts_again_once_the_window_has_room() -> None:
    given_up = state(failures=7, gave_up=True, restarts=(WALL - 700, WALL - 100))
    decision = WD.decide(given_up, CONFIG, props("failed", "exit-code"), None, now())
    assert decision.actions == RESTART
    assert texts(decision) == [
        (WD.NOTICE, "restarting vllm.service after 8 failed health checks (restart 2 of 2 in 600 s)")
    ]


STOP_JOB = WD.Ending("stopped", "a stop job stopped it")
SELF_EXIT = WD.Ending("exited", "its process ended by itself with exit status 0, no stop job")


def test_an_operators_stop_is_respected_and_said_once() -> None:
    assert WD.needs_ending(props("inactive", "success"))
    first = WD.decide(
        state(failures=2, gave_up=True), CONFIG, props("inactive", "success"), None, now(), ended=STOP_JOB
    )
    message = (
        "vllm.service was stopped (a stop job stopped it); not restarting it "
        "(start it, or run site.yml, to resume watching)"
    )
    assert texts(first) == [(WD.NOTICE, message)]
    assert first.actions == ()
    assert first.state.failures == 0
    assert first.state.gave_up is False
    second = WD.decide(first.state, CONFIG, props("inactive", "success"), None, now(30), ended=STOP_JOB)
    assert second.lines == ()
    assert second.actions == ()


def test_a_process_that_ends_by_itself_with_status_0_is_restarted_like_a_crash() -> None:
    """vLLM's API server exits 0 when its engine core dies: inactive, Result=success, and no stop
    job in the journal. It counts as a failed check, and the crash-loop policy restarts it."""
    inactive = props("inactive", "success")
    first = WD.decide(state(), CONFIG, inactive, None, now(), ended=SELF_EXIT)
    reason = "unit inactive: its process ended by itself with exit status 0, no stop job"
    assert texts(first) == [(WD.WARNING, f"health check failed (1/3): {reason}")]
    assert first.actions == ()
    third = WD.decide(state(failures=2), CONFIG, inactive, None, now(), ended=SELF_EXIT)
    assert third.actions == RESTART
    assert texts(third)[-1] == (
        WD.NOTICE,
        "restarting vllm.service after 3 failed health checks (restart 1 of 2 in 600 s)",
    )


def test_self_exits_give_up_under_the_same_crash_loop_policy() -> None:
    inactive = props("inactive", "success")
    decision = WD.decide(
        state(failures=2, restarts=(WALL - 100, WALL - 50)), CONFIG, inactive, None, now(), ended=SELF_EXIT
    )
    assert decision.actions == ()
    assert decision.state.gave_up is True
    assert texts(decision)[-1][0] == WD.ERR
    assert texts(decision)[-1][1].startswith("giving up on vllm.service: 2 restarts in the last 600 s")


@pytest.mark.parametrize("ended", [None, WD.Ending("unknown", "journalctl exited 1: No journal files were found.")])
def test_an_inactive_unit_the_journal_cannot_explain_is_left_alone(ended: Any) -> None:
    decision = WD.decide(state(failures=1), CONFIG, props("inactive", "success"), None, now(), ended=ended)
    assert decision.actions == ()
    assert decision.state.failures == 0
    why = ended.reason if ended else "the journal was not read"
    assert texts(decision) == [
        (WD.NOTICE, f"vllm.service is inactive and the journal does not say why ({why}); not restarting it")
    ]


def _entry(message_id: str, job: str = "") -> str:
    fields = {"MESSAGE_ID": message_id, "UNIT": UNIT, "_PID": "1", "MESSAGE": "..."}
    return json.dumps({**fields, **({"JOB_TYPE": job} if job else {})}) + "\n"


@pytest.mark.parametrize(
    ("text", "how"),
    [
        (_entry(WD.STOPPING, "stop"), "stopped"),
        (_entry(WD.STOPPED, "stop"), "stopped"),
        (_entry(WD.STARTED, "start"), "exited"),
        (_entry(WD.STARTING, "start"), "exited"),
        ("", "unknown"),
        ("{not json\n", "unknown"),
        (_entry("7ad2d189f7e94e70a38c781354912448"), "unknown"),
    ],
)
def test_the_newest_start_or_stop_line_tells_how_the_unit_ended(text: str, how: str) -> None:
    assert WD.ending_from_journal(text).how == how


@pytest.mark.parametrize(
    ("active", "result", "reason"),
    [
        ("failed", "signal", "unit failed (Result=signal)"),
        ("failed", "exit-code", "unit failed (Result=exit-code)"),
        ("inactive", "core-dump", "unit inactive (Result=core-dump)"),
    ],
)
def test_failed_or_killed_unit_counts_without_a_probe(active: str, result: str, reason: str) -> None:
    assert not WD.needs_probe(props(active, result))
    decision = WD.decide(state(failures=2), CONFIG, props(active, result), None, now())
    assert decision.actions == RESTART
    assert texts(decision)[0] == (WD.WARNING, f"health check failed (3/3): {reason}")


@pytest.mark.parametrize("active", ["activating", "reloading", "deactivating"])
def test_transitions_are_waited_out(active: str) -> None:
    decision = WD.decide(state(failures=1), CONFIG, props(active), None, now())
    assert decision.state == state(failures=1)
    assert decision.actions == ()
    assert texts(decision) == [(WD.DEBUG, f"vllm.service is {active}; waiting")]


def test_not_installed_unit_is_said_once() -> None:
    missing = {"LoadState": "not-found", "ActiveState": "inactive", "Result": "success", "InvocationID": ""}
    assert not WD.needs_probe(missing)
    first = WD.decide(WD.State(), CONFIG, missing, None, now())
    assert texts(first) == [(WD.NOTICE, "vllm.service is not installed; nothing to watch")]
    assert first.actions == ()
    assert first.state.unit == UNIT
    second = WD.decide(first.state, CONFIG, missing, None, now(30))
    assert second.lines == ()
    assert second.state == first.state


def test_engine_switch_resets_the_state() -> None:
    ollama = WD.State(unit="ollama.service", failures=2, restarts=(WALL - 10,), healthy_invocation="o", gave_up=True)
    decision = WD.decide(ollama, CONFIG, props(started_s_ago=1000), UNHEALTHY, now())
    assert decision.state == WD.State(unit=UNIT, failures=1)
    assert texts(decision) == [
        (WD.INFO, "now watching vllm.service (was ollama.service); starting with a fresh state"),
        (WD.WARNING, "health check failed (1/3): HTTP 503"),
    ]


def test_a_whole_episode() -> None:
    """Healthy, three failed checks, restart, load, healthy again: one restart, nothing else."""
    current, calls = WD.State(unit=UNIT), []
    ticks = [
        (props(), HEALTHY),
        (props(), UNHEALTHY),
        (props(), WD.Probe(False, "connection refused")),
        (props("failed", "signal"), None),
        (props("activating", InvocationID="inv-2", started_s_ago=0), None),
        (props(InvocationID="inv-2", started_s_ago=30), WD.Probe(False, "connection refused")),
        (props(InvocationID="inv-2", started_s_ago=60), HEALTHY),
    ]
    for index, (unit_props, result) in enumerate(ticks):
        decision = WD.decide(current, CONFIG, unit_props, result, now(30 * index))
        current = decision.state
        calls += decision.actions
    assert calls == list(RESTART)
    assert current == WD.State(unit=UNIT, restarts=(WALL + 90,), healthy_invocation="inv-2")


# ---------------------------------------------------------------------------------------------
# Files, probe and systemctl


def test_parse_show_keeps_equals_signs_in_values() -> None:
    assert WD.parse_show("LoadState=loaded\nResult=\nX=a=b\n\nnoise\n") == {
        "LoadState": "loaded",
        "Result": "",
        "X": "a=b",
    }


@pytest.mark.parametrize("text", ["{not json", "[]", '{"failures": "many"}', '{"restarts": ["yesterday"]}'])
def test_corrupt_state_means_a_fresh_start(tmp_path: Path, text: str) -> None:
    path = tmp_path / "state.json"
    path.write_text(text, encoding="utf-8")
    loaded, lines = WD.load_state(path)
    assert loaded == WD.State()
    assert [line.priority for line in lines] == [WD.WARNING]


def test_state_round_trips_atomically_into_a_new_private_directory(tmp_path: Path) -> None:
    path = tmp_path / "lib" / "state.json"
    saved = state(failures=1, restarts=(WALL,), notice="n")
    WD.save_state(path, saved)
    assert WD.load_state(path) == (saved, [])
    assert os.listdir(path.parent) == ["state.json"]
    assert (path.parent.stat().st_mode & 0o777) & ~0o700 == 0
    assert WD.load_state(tmp_path / "missing.json") == (WD.State(), [])


@pytest.fixture
def engine() -> Iterator[HealthEngine]:
    server = HealthEngine()
    yield server
    server.close()


def test_probe_reasons(engine: HealthEngine) -> None:
    assert WD.probe(engine.url, 2) == WD.Probe(True, "HTTP 200")
    engine.status = 503
    assert WD.probe(engine.url, 2) == WD.Probe(False, "HTTP 503")
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    assert WD.probe(f"http://127.0.0.1:{port}/health", 2) == WD.Probe(False, "connection refused")
    with socket.socket() as silent:  # accepts the connection in the kernel, never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(1)
        url = f"http://127.0.0.1:{silent.getsockname()[1]}/health"
        assert WD.probe(url, 0.2) == WD.Probe(False, "timed out after 0.2 s")


@pytest.fixture
def fake_unit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The fake systemctl's unit state file (an active, long-running vllm.service)."""
    unit = tmp_path / "unit.json"
    unit.write_text(json.dumps(props()), encoding="utf-8")  # started 3600 s before BOOTED_US
    # The script and the fake systemctl read CLOCK_MONOTONIC as BOOTED_US: the same at any uptime.
    monkeypatch.setenv("LLMRIG_FAKE_MONOTONIC_US", str(BOOTED_US))
    monkeypatch.setenv("LLMRIG_SYSTEMCTL", str(FAKE_SYSTEMCTL))
    monkeypatch.setenv("LLMRIG_FAKE_SYSTEMCTL_STATE", str(unit))
    monkeypatch.setenv("LLMRIG_FAKE_SYSTEMCTL_LOG", str(tmp_path / "calls.jsonl"))
    monkeypatch.setenv("LLMRIG_JOURNALCTL", str(FAKE_JOURNALCTL))
    monkeypatch.setenv("LLMRIG_FAKE_JOURNAL", str(tmp_path / "journal.jsonl"))
    monkeypatch.setenv("LLMRIG_FAKE_JOURNAL_LOG", str(tmp_path / "journalctl.jsonl"))
    return unit


def calls(tmp_path: Path) -> list[list[str]]:
    log = tmp_path / "calls.jsonl"
    return [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()] if log.exists() else []


def test_failed_restart_is_an_err_line_with_its_stderr(
    fake_unit: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LLMRIG_FAKE_SYSTEMCTL_RESTART_ERROR", "Failed to restart vllm.service: Access denied")
    lines = WD.act(RESTART)
    assert calls(tmp_path) == [["reset-failed", UNIT], ["restart", "--no-block", UNIT]]
    assert [(line.priority, line.text) for line in lines] == [
        (
            WD.ERR,
            "systemctl restart --no-block vllm.service failed (exit 1: Failed to restart vllm.service: Access denied)",
        )
    ]


# ---------------------------------------------------------------------------------------------
# End to end: the real script, the fake systemctl, a loopback /health


def write_config(tmp_path: Path, url: str, **changes: Any) -> Path:
    config = {
        "unit": UNIT,
        "engine": "vllm",
        "health_url": url,
        "failures_before_restart": 2,
        "max_restarts": 3,
        "window_s": 600,
        "load_grace_s": 300,
        "check_timeout_s": 2,
        **changes,
    }
    path = tmp_path / "watchdog.json"
    path.write_text(json.dumps(config), encoding="utf-8")
    return path


def run_tick(config: Path, state_file: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    """One tick of the real script, with CLOCK_MONOTONIC fixed at BOOTED_US (as the fake systemctl's)."""
    command = [sys.executable, str(FIXED_CLOCK), str(SCRIPT), "--config", str(config), "--state", str(state_file)]
    command += extra
    env = dict(os.environ, LLMRIG_FAKE_MONOTONIC_US=str(BOOTED_US))
    return subprocess.run(command, capture_output=True, text=True, timeout=30, check=False, env=env)


def test_e2e_two_failed_checks_restart_the_engine_which_then_loads(
    engine: HealthEngine, fake_unit: Path, tmp_path: Path
) -> None:
    config, state_file = write_config(tmp_path, engine.url), tmp_path / "lib" / "state.json"
    first = run_tick(config, state_file)
    assert (first.returncode, first.stdout, first.stderr) == (
        0,
        "<6>vllm.service is healthy (3600 s after start)\n",
        "",
    )
    engine.status = 503
    second = run_tick(config, state_file)
    assert second.stdout == "<4>health check failed (1/2): HTTP 503\n"
    assert calls(tmp_path) == []
    third = run_tick(config, state_file)
    assert third.returncode == 0
    assert third.stdout == (
        "<4>health check failed (2/2): HTTP 503\n"
        "<5>restarting vllm.service after 2 failed health checks (restart 1 of 3 in 600 s)\n"
    )
    assert calls(tmp_path) == [["reset-failed", UNIT], ["restart", "--no-block", UNIT]]
    saved = json.loads(state_file.read_text(encoding="utf-8"))
    assert saved["failures"] == 0
    assert saved["healthy_invocation"] == "inv-1"
    assert len(saved["restarts"]) == 1
    assert abs(saved["restarts"][0] - time.time()) < 30
    unit = json.loads(fake_unit.read_text(encoding="utf-8"))
    assert unit["InvocationID"] != "inv-1"
    fourth = run_tick(config, state_file)  # the new start is still loading: 503 does not count
    assert fourth.stdout.startswith("<6>vllm.service is loading (0s since start, never healthy yet; grace 300 s)")
    assert len(calls(tmp_path)) == 2
    engine.status = 200
    fifth = run_tick(config, state_file)
    assert fifth.stdout == "<6>vllm.service is healthy (0 s after start)\n"
    assert json.loads(state_file.read_text(encoding="utf-8"))["healthy_invocation"] == unit["InvocationID"]
    assert engine.probes == 5


def test_e2e_killed_engine_gives_up_once_and_exits_0(engine: HealthEngine, fake_unit: Path, tmp_path: Path) -> None:
    fake_unit.write_text(json.dumps(props("failed", "signal")), encoding="utf-8")
    config = write_config(tmp_path, engine.url, failures_before_restart=1, max_restarts=1)
    state_file = tmp_path / "state.json"
    state_file.write_text(json.dumps({"unit": UNIT, "failures": 0, "restarts": [time.time() - 60]}), encoding="utf-8")
    first = run_tick(config, state_file)
    assert first.returncode == 0
    assert first.stdout.splitlines() == [
        "<4>health check failed (1/1): unit failed (Result=signal)",
        "<3>giving up on vllm.service: 1 restarts in the last 600 s did not bring it back (last: unit failed "
        "(Result=signal)); fix it, then `systemctl restart vllm.service` or run site.yml",
    ]
    second = run_tick(config, state_file)
    assert (second.returncode, second.stdout, second.stderr) == (0, "", "")
    assert calls(tmp_path) == []
    assert engine.probes == 0
    assert json.loads(state_file.read_text(encoding="utf-8"))["gave_up"] is True


def test_e2e_bad_config_names_file_and_key_and_exits_2(fake_unit: Path, tmp_path: Path) -> None:
    config = write_config(tmp_path, "http://127.0.0.1:9/health", max_restarts=0)
    done = run_tick(config, tmp_path / "state.json")
    assert done.returncode == 2
    assert (
        done.stderr
        == f"<3>llmrig-watchdog: configuration error: {config}: key 'max_restarts' must be at least 1, got 0\n"
    )
    assert not (tmp_path / "state.json").exists()


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"unit": None}, "missing key 'unit'"),
        ({"failures_before_restart": True}, "key 'failures_before_restart' must be an integer, got True"),
        ({"health_url": "127.0.0.1:8000/health"}, "key 'health_url' must be an http:// or https:// URL"),
        ({"check_timeout_s": 0}, "key 'check_timeout_s' must be a number of seconds above 0, got 0"),
    ],
)
def test_config_errors_name_file_and_key(tmp_path: Path, changes: dict[str, Any], message: str) -> None:
    path = write_config(tmp_path, "http://127.0.0.1:8000/health", **changes)
    config = json.loads(path.read_text(encoding="utf-8"))
    path.write_text(json.dumps({key: value for key, value in config.items() if value is not None}), encoding="utf-8")
    with pytest.raises(WD.ConfigError, match=f"^{path}: ") as caught:
        WD.load_config(path)
    assert message in str(caught.value)
    with pytest.raises(WD.ConfigError, match="cannot read it"):
        WD.load_config(tmp_path / "missing.json")


def test_e2e_systemctl_failure_is_an_internal_error_exit_1(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LLMRIG_SYSTEMCTL", str(tmp_path / "no-systemctl"))
    done = run_tick(write_config(tmp_path, "http://127.0.0.1:9/health"), tmp_path / "state.json")
    assert done.returncode == 1
    assert done.stderr.startswith("<3>llmrig-watchdog: internal error: FileNotFoundError: ")
    assert done.stderr.count("\n") == 1


def test_e2e_an_engine_that_exited_0_by_itself_is_restarted_and_a_stopped_one_is_not(
    engine: HealthEngine, fake_unit: Path, tmp_path: Path
) -> None:
    """The real script reads systemd's newest start/stop line about the unit, from PID 1 only, in
    this boot: after a start line (the process ended by itself) it restarts the unit after
    `failures_before_restart` ticks; after a stop line it restarts nothing."""
    fake_unit.write_text(json.dumps(props("inactive", "success")), encoding="utf-8")
    journal = tmp_path / "journal.jsonl"
    journal.write_text(_entry(WD.STARTED, "start"), encoding="utf-8")
    config, state_file = write_config(tmp_path, engine.url), tmp_path / "state.json"
    first = run_tick(config, state_file)
    reason = "unit inactive: its process ended by itself with exit status 0, no stop job"
    assert (first.returncode, first.stdout, first.stderr) == (0, f"<4>health check failed (1/2): {reason}\n", "")
    second = run_tick(config, state_file)
    assert second.stdout.endswith("<5>restarting vllm.service after 2 failed health checks (restart 1 of 3 in 600 s)\n")
    assert calls(tmp_path) == [["reset-failed", UNIT], ["restart", "--no-block", UNIT]]
    (query, *_) = [
        json.loads(line) for line in (tmp_path / "journalctl.jsonl").read_text(encoding="utf-8").splitlines()
    ]
    assert {"--boot", "--reverse", "--lines=1", "--output=json", f"UNIT={UNIT}", "_PID=1"} <= set(query)
    assert {f"MESSAGE_ID={WD.STARTING}", f"MESSAGE_ID={WD.STARTED}", f"MESSAGE_ID={WD.STOPPING}"} <= set(query)
    # An operator's `systemctl stop` now: the newest line is the stop job's.
    fake_unit.write_text(json.dumps(props("inactive", "success")), encoding="utf-8")
    journal.write_text(_entry(WD.STOPPED, "stop"), encoding="utf-8")
    for _ in range(3):
        run_tick(config, state_file)
    assert len(calls(tmp_path)) == 2
    assert engine.probes == 0


# ---------------------------------------------------------------------------------------------
# The give-up state as a metric for node exporter's textfile collector


def gave_up_samples(path: Path) -> dict[str, float]:
    """The file parsed as Prometheus' text format: unit label to value of llmrig_watchdog_gave_up."""
    families = list(text_string_to_metric_families(path.read_text(encoding="utf-8")))
    assert [(family.name, family.type) for family in families] == [("llmrig_watchdog_gave_up", "gauge")]
    return {sample.labels["unit"]: sample.value for sample in families[0].samples}


def test_e2e_the_give_up_state_lands_in_the_textfile_directory_and_clears_on_recovery(
    engine: HealthEngine, fake_unit: Path, tmp_path: Path
) -> None:
    textfiles = tmp_path / "node-exporter"
    textfiles.mkdir()
    metric = textfiles / "llmrig-watchdog.prom"
    fake_unit.write_text(json.dumps(props("failed", "signal")), encoding="utf-8")
    config = write_config(tmp_path, engine.url, failures_before_restart=1, max_restarts=1)
    state_file = tmp_path / "state.json"
    state_file.write_text(json.dumps({"unit": UNIT, "failures": 0, "restarts": [time.time() - 60]}), encoding="utf-8")
    first = run_tick(config, state_file, "--textfile", str(metric))
    assert first.returncode == 0
    assert "<3>giving up on vllm.service" in first.stdout
    assert gave_up_samples(metric) == {UNIT: 1.0}
    assert metric.read_text(encoding="utf-8").endswith('\nllmrig_watchdog_gave_up{unit="vllm.service"} 1\n')
    assert metric.stat().st_mode & 0o777 == 0o644  # node exporter runs as another user
    inode = metric.stat().st_ino
    second = run_tick(config, state_file, "--textfile", str(metric))  # still given up: the file is left as it is
    assert (second.returncode, second.stdout) == (0, "")
    assert metric.stat().st_ino == inode
    # The operator fixes it and starts it: healthy again, the metric goes back to 0 (a new file, renamed in).
    fake_unit.write_text(json.dumps(props(InvocationID="inv-2")), encoding="utf-8")
    third = run_tick(config, state_file, "--textfile", str(metric))
    assert third.stdout == "<5>vllm.service healthy again\n"
    assert gave_up_samples(metric) == {UNIT: 0.0}
    assert metric.stat().st_ino != inode
    assert os.listdir(textfiles) == ["llmrig-watchdog.prom"]  # no temporary file left behind


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def node_exporter_scrape(textfiles: Path) -> str:
    """Debian's real node exporter, textfile collector only, reading ``textfiles``: one scrape."""
    port = free_port()
    command = [
        str(monitoring_binary("prometheus-node-exporter")),
        "--collector.disable-defaults",
        "--collector.textfile",
        f"--collector.textfile.directory={textfiles}",
        f"--web.listen-address=127.0.0.1:{port}",
    ]
    with subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE) as exporter:
        try:
            deadline = time.monotonic() + 20
            while True:
                try:
                    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as response:
                        return str(response.read().decode("utf-8"))
                except OSError:
                    assert exporter.poll() is None, exporter.stderr.read() if exporter.stderr else ""
                    assert time.monotonic() < deadline, "node exporter did not answer in 20 s"
                    time.sleep(0.1)
        finally:
            exporter.terminate()
            exporter.wait(timeout=10)


def test_e2e_the_real_node_exporter_serves_the_give_up_metric(
    engine: HealthEngine, fake_unit: Path, tmp_path: Path
) -> None:
    textfiles = tmp_path / "node-exporter"
    textfiles.mkdir()
    fake_unit.write_text(json.dumps(props("failed", "signal")), encoding="utf-8")
    config = write_config(tmp_path, engine.url, failures_before_restart=1, max_restarts=1)
    state_file = tmp_path / "state.json"
    state_file.write_text(json.dumps({"unit": UNIT, "failures": 0, "restarts": [time.time() - 60]}), encoding="utf-8")
    assert run_tick(config, state_file, "--textfile", str(textfiles / "llmrig-watchdog.prom")).returncode == 0
    samples = {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(node_exporter_scrape(textfiles))
        for sample in family.samples
    }
    assert samples[("llmrig_watchdog_gave_up", (("unit", UNIT),))] == 1
    assert samples[("node_textfile_scrape_error", ())] == 0


def test_e2e_without_the_textfile_directory_nothing_is_written(
    engine: HealthEngine, fake_unit: Path, tmp_path: Path
) -> None:
    metric = tmp_path / "node-exporter" / "llmrig-watchdog.prom"
    done = run_tick(write_config(tmp_path, engine.url), tmp_path / "state.json", "--textfile", str(metric))
    assert (done.returncode, done.stdout, done.stderr) == (0, "<6>vllm.service is healthy (3600 s after start)\n", "")
    assert not metric.parent.exists()


def test_the_metric_escapes_the_unit_label() -> None:
    state = WD.State(unit='odd"\\unit\n.service', gave_up=True)
    path_text = WD.gave_up_metric(state)
    families = list(text_string_to_metric_families(path_text))
    assert families[0].samples[0].labels == {"unit": 'odd"\\unit\n.service'}
    assert families[0].samples[0].value == 1.0
