"""SIGINT, SIGTERM and SIGHUP sent to a real bench process in the middle of its work: every
workload of ``bench run`` files what it measured (``partial``, the signal in ``stopped_because``),
prints its table and ``partial result: PATH`` and exits 128 + the signal's number; ``bench
capacity`` and ``bench probe`` say they filed nothing, with the same status. No traceback."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.fakes.capability_openai_server import CapabilityServer
from tests.helpers import BIN
from tests.result_files import load_result
from tests.scripted import KEY, Scripted, result_files, run_args

# Answers of about 0.4 s (20 ms to the first token, then 8 tokens 50 ms apart): a level of 40
# requests runs for many seconds after the first answers, whatever the machine's load.
SLOW = {"ttft_ms": 20.0, "itl_ms": 50.0, "content_tokens": 8}
WORKLOADS = {
    "single": ["--requests", "40"],
    "sweep": ["--requests", "40", "--concurrency", "1", "2"],
    "rate": ["--requests", "40", "--rate", "2"],
    "context": ["--requests", "40", "--context", "64", "128"],
    "agent": ["--sessions", "20", "--turns", "4", "--system-tokens", "64"],
}
CALIBRATION = 2  # the two one-token requests every run sends first


def _start(
    command: list[str], sigint: signal.Handlers = signal.SIG_DFL, sighup: signal.Handlers = signal.SIG_DFL
) -> subprocess.Popen[str]:
    """bench as a user starts it: Ctrl-C handled (SIG_DFL: Python turns it into KeyboardInterrupt),
    or ignored as in a background job of a script (SIG_IGN); SIGHUP ignored under nohup."""
    # Set in a process that then becomes bench (exec keeps an ignored signal ignored, a default default).
    launcher = (
        f"import os, signal, sys; signal.signal(signal.SIGINT, signal.{sigint.name}); "
        f"signal.signal(signal.SIGHUP, signal.{sighup.name}); os.execv(sys.argv[1], sys.argv[1:])"
    )
    return subprocess.Popen(
        [sys.executable, "-c", launcher, str(BIN / "bench"), *command],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "COLUMNS": "200"},
    )


def _when(condition: Callable[[], bool], process: subprocess.Popen[str], what: str) -> None:
    deadline = time.monotonic() + 120
    while not condition():
        assert process.poll() is None, f"bench ended before {what}: {process.communicate()}"
        assert time.monotonic() < deadline, f"no {what} within 120 s"
        time.sleep(0.05)


def _answered(server: Scripted) -> int:
    return len(server.log.read_text(encoding="utf-8").splitlines()) if server.log.exists() else 0


def _stop_run(
    tmp_path: Path, workload: str, signum: int, sigint: signal.Handlers = signal.SIG_DFL
) -> tuple[int, str, str]:
    server = Scripted(tmp_path, **SLOW)
    try:
        process = _start(run_args(server, tmp_path, workload, *WORKLOADS[workload]), sigint)
        _when(lambda: _answered(server) >= CALIBRATION + 2, process, "two answers after calibration")
        process.send_signal(signum)
        out, err = process.communicate(timeout=120)
    finally:
        server.close()
    return process.returncode, out, err


def _assert_partial(tmp_path: Path, out: str, err: str, reason: str) -> None:
    (path,) = result_files(tmp_path)
    document = load_result(path)
    assert (document["partial"], document["trusted"], document["stopped_because"]) == (True, False, reason)
    assert sum(level["requests"]["successful"] for level in document["levels"]) >= 1
    assert f"partial result: {path}" in out
    assert "Traceback" not in err


@pytest.mark.parametrize("workload", list(WORKLOADS))
def test_sigterm_files_what_every_workload_measured(workload: str, tmp_path: Path) -> None:
    status, out, err = _stop_run(tmp_path, workload, signal.SIGTERM)
    assert status == 143, out + err
    _assert_partial(tmp_path, out, err, "stopped by SIGTERM")


@pytest.mark.parametrize(
    ("signum", "status", "reason"),
    [(signal.SIGINT, 130, "interrupted"), (signal.SIGHUP, 129, "stopped by SIGHUP")],
)
def test_ctrl_c_and_sighup_do_the_same(signum: int, status: int, reason: str, tmp_path: Path) -> None:
    code, out, err = _stop_run(tmp_path, "single", signum)
    assert code == status, out + err
    _assert_partial(tmp_path, out, err, reason)


def test_sigterm_stops_a_run_whose_ctrl_c_is_ignored(tmp_path: Path) -> None:
    """Started as a script's background job, bench ignores SIGINT (inherited); SIGTERM still files
    the partial result."""
    status, out, err = _stop_run(tmp_path, "sweep", signal.SIGTERM, sigint=signal.SIG_IGN)
    assert status == 143, out + err
    _assert_partial(tmp_path, out, err, "stopped by SIGTERM")


def test_under_nohup_a_hangup_leaves_the_run_going(tmp_path: Path) -> None:
    """Started with SIGHUP ignored (nohup), bench keeps it ignored: the run goes on after a hangup
    (more answers come), and SIGTERM still stops it with its partial file."""
    server = Scripted(tmp_path, **SLOW)
    try:
        process = _start(run_args(server, tmp_path, "single", "--requests", "40"), sighup=signal.SIG_IGN)
        _when(lambda: _answered(server) >= CALIBRATION + 2, process, "two answers after calibration")
        process.send_signal(signal.SIGHUP)
        answered = _answered(server)
        _when(lambda: _answered(server) >= answered + 2, process, "two more answers after the hangup")
        process.send_signal(signal.SIGTERM)
        out, err = process.communicate(timeout=120)
    finally:
        server.close()
    assert process.returncode == 143, out + err
    _assert_partial(tmp_path, out, err, "stopped by SIGTERM")


def _sigterm_when(condition: Callable[[], bool], what: str, command: list[str]) -> tuple[int, str, str]:
    """bench started with ``command``, sent SIGTERM once ``condition`` holds: its status, stdout, stderr."""
    process = _start(command)
    _when(condition, process, what)
    process.send_signal(signal.SIGTERM)
    out, err = process.communicate(timeout=120)
    assert "Traceback" not in err
    return process.returncode, out, err


def test_sigterm_stops_capacity_saying_nothing_was_filed(tmp_path: Path) -> None:
    server = Scripted(tmp_path, **SLOW)
    try:
        command = ["capacity", "--base-url", server.base_url, "--api-key", KEY, "--tag", "t", "--no-context"]
        command += ["--results-dir", str(tmp_path / "results"), "--input-tokens", "64", "--output-tokens", "8"]
        answered = lambda: _answered(server) >= CALIBRATION + 2  # noqa: E731
        status, out, err = _sigterm_when(answered, "two answers after calibration", [*command, "--requests", "40"])
    finally:
        server.close()
    assert status == 143, out + err
    assert err.rstrip().endswith("bench: stopped by SIGTERM; nothing written (a search that stops early has no answer)")
    assert not list(tmp_path.glob("results/**/*.json"))


def test_sigterm_stops_probe_saying_nothing_was_filed(tmp_path: Path) -> None:
    """The probe waits on an answer that does not come (the over-context check, hanging): SIGTERM."""
    server = CapabilityServer(over_context="hang")
    try:
        command = ["probe", "--base-url", server.base_url, "--api-key", "test-key", "--tag", "t"]
        asked = lambda: any(len(str(body.get("messages"))) > 2048 for body in server.requests)  # noqa: E731
        status, out, err = _sigterm_when(asked, "the over-context request", [*command, "--results-dir", str(tmp_path)])
    finally:
        server.stop()
    assert status == 143, out + err
    assert err.rstrip().endswith("bench: stopped by SIGTERM; nothing written (a probe that stops early files nothing)")
    assert not list(tmp_path.glob("**/*.json"))
