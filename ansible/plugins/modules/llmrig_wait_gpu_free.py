#!/usr/bin/python
"""Ansible module: wait until the GPUs hold no process of the engines just stopped and their memory is back."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: llmrig_wait_gpu_free
short_description: Wait until stopped inference engines have left the GPUs
description:
  - After the engine role stops the engines it does not serve with, their processes can hold VRAM for
    seconds (CUDA context teardown, worker processes still exiting); starting the chosen engine then
    fails with out-of-memory.
  - Reads each stopped unit's service user with C(systemctl show UNIT --property=User --value) and polls
    C(nvidia-smi) until no compute process is owned by one of those users (owner of /proc/PID) and every
    GPU's memory.used is at most O(max_used_mib).
  - Units without User= or with User=root (root also owns a desktop's Xorg), units that are not installed
    and users that do not exist are reported in RV(ignored_units); their user is not used. A compute
    process not visible in /proc (another PID namespace) is of unknown owner and only counts through the
    memory limit.
  - Fails at once with nvidia-smi's output when nvidia-smi fails (a broken driver does not get better by
    waiting); on time-out fails with the remaining engine processes and each GPU's memory.
  - Never changes anything.
options:
  units:
    description: systemd units just stopped, e.g. [ollama.service, llamacpp.service].
    type: list
    elements: str
    required: true
  max_used_mib:
    description: A GPU counts as free when its memory.used is at most this many MiB.
    type: int
    default: 1024
  timeout_s:
    description: Seconds to wait in all.
    type: int
    default: 120
  interval_s:
    description: Seconds between polls.
    type: float
    default: 2
  nvidia_smi:
    description: nvidia-smi executable, a name looked up on PATH or a path.
    type: str
    default: nvidia-smi
author: llmrig
"""

RETURN = r"""
elapsed_s:
  description: Seconds the wait took.
  type: float
  returned: always
gpus:
  description: Each GPU's memory when the wait ended.
  type: list
  elements: dict
  returned: always
  contains:
    index: {description: nvidia-smi's GPU index., type: int}
    uuid: {description: GPU UUID., type: str}
    used_mib: {description: memory.used in MiB (0 when nvidia-smi reports N/A)., type: int}
    total_mib: {description: memory.total in MiB (0 when nvidia-smi reports N/A)., type: int}
users:
  description: Service users of the stopped units whose GPU processes were waited for.
  type: list
  elements: str
  returned: always
ignored_units:
  description: Stopped units whose user was not used, each with the reason.
  type: list
  elements: str
  returned: always
"""

import os
import pwd
import subprocess
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any, NamedTuple

from ansible.module_utils.basic import AnsibleModule

APPS_QUERY = "--query-compute-apps=pid,gpu_uuid,used_memory"
GPUS_QUERY = "--query-gpu=index,uuid,memory.used,memory.total"
SMI_TIMEOUT_S = 60


class App(NamedTuple):
    """One compute process as nvidia-smi lists it."""

    pid: int
    gpu_uuid: str
    used_mib: int


class Gpu(NamedTuple):
    """One GPU's memory as nvidia-smi reports it."""

    index: int
    uuid: str
    used_mib: int
    total_mib: int


class SmiError(Exception):
    """nvidia-smi could not be run or exited non-zero."""


def _mib(field: str) -> int:
    """A nounits MiB field; [N/A], [Not Supported] and other non-numbers count as 0."""
    field = field.strip()
    return int(field) if field.isdigit() else 0


def parse_compute_apps(text: str) -> list[App]:
    """Parse `nvidia-smi --query-compute-apps=pid,gpu_uuid,used_memory --format=csv,noheader,nounits`."""
    found = []
    for line in text.splitlines():
        fields = [field.strip() for field in line.split(",")]
        if len(fields) != 3 or not fields[0].isdigit():
            continue  # blank lines, "No running processes found"
        found.append(App(int(fields[0]), fields[1], _mib(fields[2])))
    return found


def parse_gpus(text: str) -> list[Gpu]:
    """Parse `nvidia-smi --query-gpu=index,uuid,memory.used,memory.total --format=csv,noheader,nounits`."""
    found = []
    for line in text.splitlines():
        fields = [field.strip() for field in line.split(",")]
        if len(fields) != 4 or not fields[0].isdigit():
            continue
        found.append(Gpu(int(fields[0]), fields[1], _mib(fields[2]), _mib(fields[3])))
    return found


def _gpu_name(uuid: str, gpus: Iterable[Gpu]) -> str:
    return next((str(gpu.index) for gpu in gpus if gpu.uuid == uuid), uuid or "?")


def processes(
    apps: Iterable[App], gpus: Iterable[Gpu], uids: Mapping[int, str], owner_of: Callable[[int], int | None]
) -> tuple[list[str], list[str]]:
    """Compute processes, one line each: those owned by the stopped engines' uids, and the others
    (context for a time-out; a PID not visible in /proc has an unknown owner)."""
    gpus = list(gpus)
    engine: list[str] = []
    other: list[str] = []
    for app in apps:
        uid = owner_of(app.pid)
        if uid is not None and uid in uids:
            owner, into = f"user {uids[uid]}", engine
        elif uid is None:
            owner, into = "owner unknown: not visible in /proc, another PID namespace or gone", other
        else:
            try:
                owner = f"user {pwd.getpwuid(uid).pw_name}"
            except KeyError:
                owner = f"uid {uid}"
            into = other
        into.append(f"pid {app.pid} ({owner}) holds {app.used_mib} MiB on GPU {_gpu_name(app.gpu_uuid, gpus)}")
    return engine, other


def blocking(
    apps: Iterable[App],
    gpus: Iterable[Gpu],
    uids: Mapping[int, str],
    owner_of: Callable[[int], int | None],
    max_used_mib: int,
) -> list[str]:
    """Why the GPUs are not free yet, one line per reason; empty when they are.

    ``uids`` maps the stopped engines' uids to their user names; ``owner_of`` gives the uid owning a PID,
    or None when the PID is not visible (gone, or in another PID namespace): such a process counts only
    through its GPU's memory.
    """
    gpus = list(gpus)
    reasons = processes(apps, gpus, uids, owner_of)[0]
    for gpu in gpus:
        if gpu.used_mib > max_used_mib:
            reasons.append(f"GPU {gpu.index}: {gpu.used_mib} / {gpu.total_mib} MiB used (more than {max_used_mib})")
    return reasons


def proc_owner(pid: int) -> int | None:
    """uid owning /proc/PID, or None when this PID namespace does not show the process."""
    try:
        return os.stat(f"/proc/{pid}").st_uid
    except OSError:
        return None


def unit_user(unit: str) -> str:
    """User= of ``unit``; '' for root (no User=) and for a unit that is not installed."""
    try:
        done = subprocess.run(
            ["systemctl", "show", unit, "--property=User", "--value"],
            capture_output=True,
            text=True,
            check=False,
            timeout=30,
        )
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return done.stdout.strip() if done.returncode == 0 else ""


def resolve_users(units: Iterable[str]) -> tuple[dict[int, str], list[str]]:
    """uid -> user of the units' service users, and the units whose user is not used (with why)."""
    uids: dict[int, str] = {}
    ignored = []
    for unit in units:
        user = unit_user(unit)
        if not user:
            ignored.append(f"{unit}: no User= (runs as root, or is not installed)")
            continue
        try:
            entry = pwd.getpwuid(int(user)) if user.isdigit() else pwd.getpwnam(user)
        except KeyError:
            ignored.append(f"{unit}: user {user} does not exist on this host")
            continue
        if entry.pw_uid == 0:
            ignored.append(f"{unit}: runs as root")
            continue
        uids[entry.pw_uid] = entry.pw_name
    return uids, ignored


def query(nvidia_smi: str, what: str) -> str:
    """Output of one nvidia-smi CSV query; SmiError when it cannot run or exits non-zero."""
    try:
        done = subprocess.run(
            [nvidia_smi, what, "--format=csv,noheader,nounits"],
            capture_output=True,
            text=True,
            check=False,
            timeout=SMI_TIMEOUT_S,
        )
    except FileNotFoundError as exc:
        raise SmiError(f"{nvidia_smi} not found: {exc}") from exc
    except subprocess.TimeoutExpired as exc:
        raise SmiError(f"{nvidia_smi} {what} did not answer within {SMI_TIMEOUT_S} s") from exc
    except OSError as exc:
        raise SmiError(f"{nvidia_smi} could not run: {exc}") from exc
    if done.returncode != 0:
        output = (done.stdout + done.stderr).strip() or "(no output)"
        raise SmiError(f"{nvidia_smi} {what} failed with exit status {done.returncode}:\n{output}")
    return done.stdout


def _gpu_dicts(gpus: Iterable[Gpu]) -> list[dict[str, Any]]:
    return [gpu._asdict() for gpu in gpus]


def wait(params: dict[str, Any]) -> dict[str, Any]:
    """Poll until the GPUs are free; return the module result (``failed`` set on failure)."""
    started = time.monotonic()
    uids, ignored = resolve_users(params["units"])
    users = sorted(uids.values())
    base: dict[str, Any] = {"changed": False, "users": users, "ignored_units": ignored}
    while True:
        try:
            apps = parse_compute_apps(query(params["nvidia_smi"], APPS_QUERY))
            gpus = parse_gpus(query(params["nvidia_smi"], GPUS_QUERY))
        except SmiError as exc:
            return {
                **base,
                "failed": True,
                "gpus": [],
                "elapsed_s": round(time.monotonic() - started, 1),
                "msg": f"The GPUs cannot be checked, so not waiting: {exc}",
            }
        reasons = blocking(apps, gpus, uids, proc_owner, params["max_used_mib"])
        elapsed = time.monotonic() - started
        result = {**base, "gpus": _gpu_dicts(gpus), "elapsed_s": round(elapsed, 1)}
        if not reasons:
            return result
        if elapsed >= params["timeout_s"]:
            return {**result, "failed": True, "msg": timeout_message(params, users, apps, gpus, uids)}
        time.sleep(params["interval_s"])


def timeout_message(
    params: dict[str, Any], users: list[str], apps: list[App], gpus: list[Gpu], uids: Mapping[int, str]
) -> str:
    """The time-out failure: what still holds the GPUs, each GPU's memory, and which knobs to change."""
    engine, other = processes(apps, gpus, uids, proc_owner)
    lines = [
        f"The GPUs were not free within {params['timeout_s']} s after stopping {', '.join(params['units'])} "
        f"(engine users: {', '.join(users) or 'none'}).",
        "Processes of the stopped engines still on the GPUs:",
        *(f"  {line}" for line in engine or ["none"]),
        f"GPU memory (free means at most {params['max_used_mib']} MiB used):",
        *(f"  GPU {gpu.index}: {gpu.used_mib} / {gpu.total_mib} MiB used" for gpu in gpus),
    ]
    if other:
        lines += ["Other compute processes:", *(f"  {line}" for line in other)]
    lines.append(
        "Raise engine_gpu_free_timeout_s to wait longer; if something else legitimately holds GPU memory "
        "(e.g. a desktop session), raise engine_gpu_free_mib above what it uses."
    )
    return "\n".join(lines)


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "units": {"type": "list", "elements": "str", "required": True},
            "max_used_mib": {"type": "int", "default": 1024},
            "timeout_s": {"type": "int", "default": 120},
            "interval_s": {"type": "float", "default": 2},
            "nvidia_smi": {"type": "str", "default": "nvidia-smi"},
        },
        supports_check_mode=True,
    )
    result = wait(module.params)
    if result.pop("failed", False):
        module.fail_json(**result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
