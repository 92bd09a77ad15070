#!/usr/bin/python
"""Ansible module: wait until a systemd-managed service (an engine, Open WebUI) answers its health
URL, or fail with its journal. One task that blocks: no until/retries loop, whose every try
Ansible prints as ``FAILED - RETRYING``."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: llmrig_wait_healthy
short_description: Wait until a service's health URL answers 200, failing early when its unit dies
description:
  - Polls O(url) until it answers HTTP 200, for up to O(timeout_s) seconds (first model loads take minutes).
  - Fails at once when the unit enters the failed state, stops, or systemd restarts it (a crash
    during start-up); fails on time-out. Each failure shows the journal of the start that was waited
    for (its _SYSTEMD_INVOCATION_ID, and systemd's own lines about it), led by its first error found
    anywhere in that start (the first traceback's exception line, or else the first ERROR line, with
    its line number), then its last O(journal_lines) lines.
  - Never changes anything.
options:
  url:
    description: Health URL, e.g. http://127.0.0.1:8000/health.
    type: str
    required: true
  unit:
    description: systemd unit that runs the service.
    type: str
    required: true
  timeout_s:
    description: Seconds to wait in all.
    type: int
    default: 1200
  interval_s:
    description: Seconds between probes.
    type: float
    default: 5
  journal_lines:
    description: Last journal lines of the failed start to include in a failure message, after its first error.
    type: int
    default: 60
  timeout_knob:
    description: The variable that sets O(timeout_s), named in the time-out message as the one to raise.
    type: str
    default: engine_health_timeout_s
  timeout_hint:
    description:
      - What the time-out message tells the operator to do, in place of raising O(timeout_knob) (for a
        service whose health waits on others, such as the gateway's router on its engine boxes).
    type: str
author: llmrig
"""

RETURN = r"""
elapsed_s:
  description: Seconds until the health URL answered 200.
  type: float
  returned: success
healthy_monotonic_us:
  description:
    - The host's CLOCK_MONOTONIC in microseconds (the journal's __MONOTONIC_TIMESTAMP clock) when the
      health URL first answered 200; the engine role times the unit's start-up from it.
  type: int
  returned: success
invocation_id:
  description: The unit's InvocationID when the health URL answered 200 (the start that answered).
  type: str
  returned: success
boot_id:
  description: The host's boot ID, which the monotonic clock belongs to ('' when unreadable).
  type: str
  returned: success
restarts:
  description: systemd's NRestarts of the unit when the wait ended.
  type: int
  returned: always
"""

import json
import re
import subprocess
import time
import urllib.error
import urllib.request
from typing import Any

from ansible.module_utils.basic import AnsibleModule


def unit_state(unit: str) -> dict[str, str]:
    """ActiveState, SubState, NRestarts and InvocationID of ``unit`` from systemctl show."""
    done = subprocess.run(
        ["systemctl", "show", unit, "--property=ActiveState,SubState,NRestarts,InvocationID"],
        capture_output=True,
        text=True,
        check=False,
    )
    return dict(line.split("=", 1) for line in done.stdout.splitlines() if "=" in line)


def _journalctl(*args: str) -> tuple[str, str]:
    """journalctl's stdout and stderr, decoded without newline translation (a carriage return
    inside an entry, a progress bar's, stays inside its line)."""
    done = subprocess.run(["journalctl", "--no-pager", *args], capture_output=True, check=False)
    return done.stdout.decode("utf-8", "replace"), done.stderr.decode("utf-8", "replace")


def newest_invocation(unit: str) -> str:
    """The invocation of ``unit``'s newest journal line (its own output or systemd's about it), or ''."""
    out, _ = _journalctl("--output=json", "-u", unit, "-n", "1")
    for line in reversed(out.split("\n")):
        try:
            entry = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(entry, dict):
            return str(entry.get("_SYSTEMD_INVOCATION_ID") or entry.get("INVOCATION_ID") or "")
    return ""


def invocation_journal(unit: str, invocation: str) -> list[str]:
    """Every line of one start of ``unit``: its own output and systemd's lines about it."""
    if not invocation:
        return []
    out, _ = _journalctl("--output=cat", f"_SYSTEMD_INVOCATION_ID={invocation}", "+", f"INVOCATION_ID={invocation}")
    # One entry a line; vLLM ends its log lines with "\r\n", and a progress bar's "\r" stays inside.
    return [line.removesuffix("\r") for line in out.rstrip("\n").split("\n")] if out.strip() else []


# vLLM's lines: "(EngineCore_DP0 pid=123) " for a worker process, then "ERROR 12-04 10:27:47
# [core.py:1510] " from its logger; a traceback it logs keeps its own indentation after that.
_VLLM_PREFIX = re.compile(
    r"^(?:\([\w.:-]+ pid=\d+\) )?(?:(?P<level>DEBUG|INFO|WARNING|ERROR|CRITICAL) [\d-]+ [\d:.]+ \[[^\]]*\] )?"
)
# A line without a logger level is an error when it says so (llama.cpp: "error loading model").
_PLAIN_ERROR = re.compile(r"^(ERROR|CRITICAL|FATAL)\b|^\w*(Error|Exception)\b.*:|\berror\b")


def _split(line: str) -> tuple[str, str]:
    """The logger level ('' when none) and the text after vLLM's prefixes."""
    found = _VLLM_PREFIX.match(line)
    return (found.group("level") or "", line[found.end() :]) if found else ("", line)


def _is_error(line: str) -> bool:
    level, body = _split(line)
    return level in ("ERROR", "CRITICAL") if level else bool(_PLAIN_ERROR.search(body))


def root_cause(lines: list[str]) -> tuple[int, list[str]] | None:
    """The first error of a start: the exception line that ends its first traceback, with the first
    error line before it, or else the first error line; (its 1-based line number, the lines to
    show), or None when the start logged no error."""
    bodies = [_split(line)[1] for line in lines]
    first_error = next((index for index, line in enumerate(lines) if _is_error(line)), None)
    start = next(
        (index for index, body in enumerate(bodies) if body.startswith("Traceback (most recent call last)")), None
    )
    if start is None:
        return None if first_error is None else (first_error + 1, [lines[first_error]])
    for index in range(start + 1, len(bodies)):
        body = bodies[index]
        if body and not body[0].isspace() and not body.startswith("Traceback"):
            cause = [lines[index]]
            if first_error is not None and first_error < start:
                cause.insert(0, lines[first_error])
            return index + 1, cause
    return start + 1, [lines[start]]


def journal_report(unit: str, invocation: str, lines: int) -> str:
    """This start's first error (where in its journal) and its last ``lines`` lines."""
    invocation = invocation or newest_invocation(unit)
    journal = invocation_journal(unit, invocation)
    if not journal:
        out, err = _journalctl("--output=cat", "-u", unit, "-n", str(lines))
        tail = out.strip() or err.strip() or "(journal empty)"
        return f"No journal lines of this start of {unit} were found; its last journal lines:\n{tail}"
    parts = []
    cause = root_cause(journal)
    if cause is not None:
        number, cause_lines = cause
        where = f"line {number} of {len(journal)} of this start's journal (invocation {invocation})"
        parts.append(f"First error, {where}:\n" + "\n".join(cause_lines))
    parts.append(
        f"Last {min(lines, len(journal))} of its {len(journal)} journal lines:\n" + "\n".join(journal[-lines:])
    )
    return "\n".join(parts)


def boot_id() -> str:
    """This boot's ID (the journal's _BOOT_ID, undashed), or '' when the kernel does not say."""
    try:
        with open("/proc/sys/kernel/random/boot_id", encoding="ascii") as handle:
            return handle.read().strip().replace("-", "")
    except OSError:
        return ""


def probe(url: str) -> int | None:
    """HTTP status of a GET on ``url``, or None when nothing answers."""
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return int(response.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)
    except (OSError, ValueError):
        return None


def wait(params: dict[str, Any]) -> dict[str, Any]:
    """Poll until healthy; return the module result (``failed`` set on failure)."""
    unit, started = params["unit"], time.monotonic()
    first = unit_state(unit)
    restarts_at_start = int(first.get("NRestarts", "0") or 0)
    last_status: int | None = None
    # The start being waited for: a restart by systemd replaces it, and its journal is the one to show.
    invocation = first.get("InvocationID", "")
    while True:
        state = unit_state(unit)
        restarts = int(state.get("NRestarts", "0") or 0)
        if state.get("ActiveState") == "failed" or restarts > restarts_at_start:
            why = "failed" if state.get("ActiveState") == "failed" else "was restarted by systemd after a crash"
            if restarts == restarts_at_start:
                invocation = state.get("InvocationID") or invocation
            return {
                "failed": True,
                "restarts": restarts,
                "msg": f"{unit} {why} while starting. {journal_report(unit, invocation, params['journal_lines'])}",
            }
        if state.get("ActiveState") == "inactive" and state.get("SubState") == "dead":
            return {
                "failed": True,
                "restarts": restarts,
                "msg": f"{unit} is not running (inactive). {journal_report(unit, invocation, params['journal_lines'])}",
            }
        invocation = state.get("InvocationID") or invocation
        last_status = probe(params["url"])
        answered_ns = time.monotonic_ns()  # CLOCK_MONOTONIC on Linux, as systemd's and the journal's
        elapsed = time.monotonic() - started
        if last_status == 200:
            return {
                "changed": False,
                "elapsed_s": round(elapsed, 1),
                "restarts": restarts,
                "healthy_monotonic_us": answered_ns // 1000,
                "invocation_id": invocation,
                "boot_id": boot_id(),
            }
        if elapsed >= params["timeout_s"]:
            return {
                "failed": True,
                "restarts": restarts,
                "msg": f"{params['url']} did not answer 200 within {params['timeout_s']} s "
                f"(last answer: {last_status or 'no connection'}); {_timeout_hint(params)} "
                f"{journal_report(unit, invocation, params['journal_lines'])}",
            }
        time.sleep(params["interval_s"])


def _timeout_hint(params: dict[str, Any]) -> str:
    """What to do about a time-out: the caller's hint, else raise the time-out's knob."""
    hint = params.get("timeout_hint")
    if hint:
        return str(hint)
    return f"raise {params['timeout_knob']} if it is still starting (a first model load takes minutes)."


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "url": {"type": "str", "required": True},
            "unit": {"type": "str", "required": True},
            "timeout_s": {"type": "int", "default": 1200},
            "interval_s": {"type": "float", "default": 5},
            "journal_lines": {"type": "int", "default": 60},
            "timeout_knob": {"type": "str", "default": "engine_health_timeout_s"},
            "timeout_hint": {"type": "str"},
        },
        supports_check_mode=True,
    )
    result = wait(module.params)
    if result.pop("failed", False):
        module.fail_json(**result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
