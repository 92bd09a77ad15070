"""llmrig_wait_gpu_free: the engine switch waits until the stopped engines have left the GPUs.

nvidia-smi is the protocol fake in tests/fakes/gpu-box (its process list comes from a JSON file
the test writes), `systemctl show --property=User --value` the one in tests/fakes/gpu-wait. The
"engine" is a real `sleep` process, so whether a PID belongs to a stopped engine is the module's
real check of who owns /proc/PID.
"""

from __future__ import annotations

import json
import os
import pwd
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import FAKES, REPO, load_file_module

MODULE = load_file_module(REPO / "ansible" / "plugins" / "modules" / "llmrig_wait_gpu_free.py", "llmrig_wait_gpu_free")

UUID0 = "GPU-00000000-0000-4000-8000-000000000000"
# Above the largest pid_max Linux allows (2**22), so never a process in /proc.
INVISIBLE_PID = 2**22 + 7


class Box:
    """The fakes' inputs: which user each unit runs as, and the GPUs' processes and memory."""

    def __init__(self, tmp_path: Path) -> None:
        self.users_file = tmp_path / "unit-users.json"
        self.procs_file = tmp_path / "gpu-procs.json"
        self.users({})

    def users(self, mapping: dict[str, str]) -> None:
        self.users_file.write_text(json.dumps(mapping), encoding="utf-8")

    def procs(self, apps: list[dict[str, Any]], used_mib: list[int]) -> None:
        self.procs_file.write_text(json.dumps({"apps": apps, "used_mib": used_mib}), encoding="utf-8")


@pytest.fixture
def box(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Box:
    state = Box(tmp_path)
    monkeypatch.setenv("LLMRIG_FAKE_UNIT_USERS", str(state.users_file))
    monkeypatch.delenv("LLMRIG_FAKE_GPU_PROCS", raising=False)
    monkeypatch.delenv("LLMRIG_FAKE_NO_DRIVER", raising=False)
    monkeypatch.delenv("LLMRIG_FAKE_GPU_COUNT", raising=False)
    monkeypatch.setenv("PATH", f"{FAKES / 'gpu-wait'}:{FAKES / 'gpu-box'}:/usr/bin:/bin")
    return state


@pytest.fixture
def engine() -> Iterator[tuple[subprocess.Popen[bytes], str]]:
    """A live process of the "stopped engine" and its user: this user, or nobody when the tests run as root
    (the module ignores root, which also owns a desktop's Xorg)."""
    uid = os.getuid() if os.getuid() != 0 else pwd.getpwnam("nobody").pw_uid
    process = subprocess.Popen(["sleep", "30"], user=uid if os.getuid() == 0 else None)
    yield process, pwd.getpwuid(uid).pw_name
    process.kill()
    process.wait()


def _params(**changes: Any) -> dict[str, Any]:
    return {
        "units": ["ollama.service", "llamacpp.service"],
        "max_used_mib": 1024,
        "timeout_s": 5,
        "interval_s": 0.05,
        "nvidia_smi": "nvidia-smi",
        **changes,
    }


def test_parsers_read_real_nvidia_smi_output() -> None:
    """Spaces trimmed; [N/A] and [Not Supported] memory count as 0; chatter and blank lines skipped."""
    apps = MODULE.parse_compute_apps(
        f"2345, {UUID0}, 9012\n"
        "  2399 , GPU-5d3e1f0a-8b2c-4d6e-9f01-23456789abcd , [N/A] \n"
        "\n"
        "2400, GPU-5d3e1f0a-8b2c-4d6e-9f01-23456789abcd, [Not Supported]\n"
    )
    assert apps == [
        MODULE.App(2345, UUID0, 9012),
        MODULE.App(2399, "GPU-5d3e1f0a-8b2c-4d6e-9f01-23456789abcd", 0),
        MODULE.App(2400, "GPU-5d3e1f0a-8b2c-4d6e-9f01-23456789abcd", 0),
    ]
    assert MODULE.parse_compute_apps("No running processes found\n") == []
    gpus = MODULE.parse_gpus(f"0, {UUID0}, 9305, 16311\n1, GPU-5d3e, [N/A], [N/A]\nNo devices were found\n")
    assert gpus == [MODULE.Gpu(0, UUID0, 9305, 16311), MODULE.Gpu(1, "GPU-5d3e", 0, 0)]


def test_fake_answers_the_modules_queries(box: Box) -> None:
    """The fake's answers to the module's own queries parse: two idle 16 GB cards, no processes."""
    gpus = MODULE.parse_gpus(MODULE.query("nvidia-smi", MODULE.GPUS_QUERY))
    assert gpus == [MODULE.Gpu(0, UUID0, 2, 16311), MODULE.Gpu(1, "GPU-00000000-0000-4000-8000-000000000001", 2, 16311)]
    assert MODULE.parse_compute_apps(MODULE.query("nvidia-smi", MODULE.APPS_QUERY)) == []


def test_blocking_counts_engine_processes_and_memory_only() -> None:
    """An engine uid's process blocks; an invisible PID or another user's does not, except through memory."""
    gpus = [MODULE.Gpu(0, UUID0, 900, 16311), MODULE.Gpu(1, "GPU-1", 300, 16311)]
    apps = [MODULE.App(10, UUID0, 800), MODULE.App(11, "GPU-1", 200), MODULE.App(12, "GPU-1", 100)]
    owners = {10: 1001, 11: None, 12: 1000}
    assert MODULE.blocking(apps, gpus, {1001: "ollama"}, owners.get, 1024) == [
        "pid 10 (user ollama) holds 800 MiB on GPU 0"
    ]
    assert MODULE.blocking(apps, gpus, {4242: "vllm"}, owners.get, 1024) == []
    assert MODULE.blocking(apps, gpus, {4242: "vllm"}, owners.get, 512) == [
        "GPU 0: 900 / 16311 MiB used (more than 512)"
    ]


def test_unit_users_resolve_and_root_or_unknown_are_reported(box: Box, engine: tuple[Any, str]) -> None:
    """Engine users become uids; no User=, User=root, a missing unit and a missing user are reported, not used."""
    _, user = engine
    box.users({"ollama.service": user, "vllm.service": "root", "llamacpp.service": "no-such-user-llmrig"})
    uids, ignored = MODULE.resolve_users(["ollama.service", "vllm.service", "llamacpp.service", "gone.service"])
    assert uids == {pwd.getpwnam(user).pw_uid: user}
    assert ignored == [
        "vllm.service: runs as root",
        "llamacpp.service: user no-such-user-llmrig does not exist on this host",
        "gone.service: no User= (runs as root, or is not installed)",
    ]


def test_free_at_once(box: Box, engine: tuple[Any, str]) -> None:
    """No engine process and idle memory: success on the first poll, nothing changed."""
    _, user = engine
    box.users({"ollama.service": user})
    result = MODULE.wait(_params())
    assert "failed" not in result
    assert result["changed"] is False
    assert result["users"] == [user]
    assert result["ignored_units"] == ["llamacpp.service: no User= (runs as root, or is not installed)"]
    assert result["gpus"][0] == {"index": 0, "uuid": UUID0, "used_mib": 2, "total_mib": 16311}
    assert result["elapsed_s"] < 2


def test_waits_until_the_engine_process_is_gone(
    box: Box, engine: tuple[subprocess.Popen[bytes], str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A live process of the stopped engine's user blocks, though memory is under the limit; once it exits
    (nvidia-smi may still list its PID for a moment) the GPUs are free."""
    process, user = engine
    box.users({"ollama.service": user})
    box.procs([{"pid": process.pid, "gpu": 0, "used_mib": 900}], [1000, 2])
    monkeypatch.setenv("LLMRIG_FAKE_GPU_PROCS", str(box.procs_file))
    owners: list[int | None] = []
    real_owner = MODULE.proc_owner

    def owner(pid: int) -> int | None:
        if len(owners) == 3:
            process.kill()
            process.wait()  # reaped: /proc/PID is gone, as when systemd's stop has finished
        owners.append(real_owner(pid))
        return owners[-1]

    monkeypatch.setattr(MODULE, "proc_owner", owner)
    result = MODULE.wait(_params())
    assert "failed" not in result, result
    assert owners == [pwd.getpwnam(user).pw_uid] * 3 + [None]


def test_waits_until_memory_is_back(box: Box, monkeypatch: pytest.MonkeyPatch) -> None:
    """Memory above max_used_mib blocks until the driver has released it."""
    box.procs([], [9300, 2])
    monkeypatch.setenv("LLMRIG_FAKE_GPU_PROCS", str(box.procs_file))
    calls: list[str] = []
    real_query = MODULE.query

    def query(nvidia_smi: str, what: str) -> str:
        calls.append(what)
        if len(calls) == 5:  # the third poll starts
            box.procs([], [700, 2])
        return real_query(nvidia_smi, what)

    monkeypatch.setattr(MODULE, "query", query)
    result = MODULE.wait(_params())
    assert "failed" not in result, result
    assert len(calls) == 6  # three polls of two queries: two see 9300 MiB, the third 700
    assert result["gpus"][0]["used_mib"] == 700


def test_timeout_lists_what_holds_the_gpus_and_names_the_knobs(
    box: Box, engine: tuple[Any, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Memory that stays high: fail after timeout_s with the engine PID, every GPU's memory and both knobs."""
    process, user = engine
    box.users({"ollama.service": user})
    box.procs(
        [{"pid": process.pid, "gpu": 0, "used_mib": 9000}, {"pid": INVISIBLE_PID, "gpu": 1, "used_mib": "[N/A]"}],
        [9300, 300],
    )
    monkeypatch.setenv("LLMRIG_FAKE_GPU_PROCS", str(box.procs_file))
    result = MODULE.wait(_params(timeout_s=0.3))
    assert result["failed"] is True
    message = result["msg"]
    assert "not free within 0.3 s after stopping ollama.service, llamacpp.service" in message
    assert f"pid {process.pid} (user {user}) holds 9000 MiB on GPU 0" in message
    assert "GPU 0: 9300 / 16311 MiB used" in message
    assert "GPU 1: 300 / 16311 MiB used" in message
    assert f"pid {INVISIBLE_PID} (owner unknown" in message
    assert "engine_gpu_free_timeout_s" in message
    assert "engine_gpu_free_mib" in message
    assert result["gpus"][0]["used_mib"] == 9300
    assert result["elapsed_s"] >= 0.3


@pytest.mark.parametrize("how", ["driver not loaded", "no nvidia-smi"])
def test_nvidia_smi_failing_fails_at_once(box: Box, monkeypatch: pytest.MonkeyPatch, how: str) -> None:
    """A broken driver does not get better by waiting: fail on the first poll with nvidia-smi's output."""
    params = _params(timeout_s=60)
    if how == "driver not loaded":
        monkeypatch.setenv("LLMRIG_FAKE_NO_DRIVER", "1")
    else:
        params["nvidia_smi"] = str(FAKES / "gpu-wait" / "nvidia-smi")
    result = MODULE.wait(params)
    assert result["failed"] is True
    assert result["elapsed_s"] < 5
    expected = "couldn't communicate with the NVIDIA driver" if how == "driver not loaded" else "not found"
    assert expected in result["msg"]
