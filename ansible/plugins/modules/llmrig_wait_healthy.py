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
  - Fails at once, with the unit's last journal lines, when the unit enters the failed state or
    systemd restarts it (a crash during start-up); fails with the same lines on time-out.
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
    description: Journal lines to include in a failure message.
    type: int
    default: 60
  timeout_knob:
    description: The variable that sets O(timeout_s), named in the time-out message as the one to raise.
    type: str
    default: engine_health_timeout_s
author: llmrig
"""

RETURN = r"""
elapsed_s:
  description: Seconds until the health URL answered 200.
  type: float
  returned: success
restarts:
  description: systemd's NRestarts of the unit when the wait ended.
  type: int
  returned: always
"""

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


def journal_tail(unit: str, lines: int) -> str:
    """The unit's last ``lines`` journal lines, or why they could not be read."""
    done = subprocess.run(
        ["journalctl", "--no-pager", "--output=cat", "-u", unit, "-n", str(lines)],
        capture_output=True,
        text=True,
        check=False,
    )
    return done.stdout.strip() or done.stderr.strip() or "(journal empty)"


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
    while True:
        state = unit_state(unit)
        restarts = int(state.get("NRestarts", "0") or 0)
        if state.get("ActiveState") == "failed" or restarts > restarts_at_start:
            why = "failed" if state.get("ActiveState") == "failed" else "was restarted by systemd after a crash"
            return {
                "failed": True,
                "restarts": restarts,
                "msg": f"{unit} {why} while starting. Last journal lines:\n"
                f"{journal_tail(unit, params['journal_lines'])}",
            }
        if state.get("ActiveState") == "inactive" and state.get("SubState") == "dead":
            return {
                "failed": True,
                "restarts": restarts,
                "msg": f"{unit} is not running (inactive). Last journal lines:\n"
                f"{journal_tail(unit, params['journal_lines'])}",
            }
        last_status = probe(params["url"])
        elapsed = time.monotonic() - started
        if last_status == 200:
            return {"changed": False, "elapsed_s": round(elapsed, 1), "restarts": restarts}
        if elapsed >= params["timeout_s"]:
            return {
                "failed": True,
                "restarts": restarts,
                "msg": f"{params['url']} did not answer 200 within {params['timeout_s']} s "
                f"(last answer: {last_status or 'no connection'}); raise {params['timeout_knob']} if it is "
                f"still starting (a first model load takes minutes). Last journal lines of {unit}:\n"
                f"{journal_tail(unit, params['journal_lines'])}",
            }
        time.sleep(params["interval_s"])


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "url": {"type": "str", "required": True},
            "unit": {"type": "str", "required": True},
            "timeout_s": {"type": "int", "default": 1200},
            "interval_s": {"type": "float", "default": 5},
            "journal_lines": {"type": "int", "default": 60},
            "timeout_knob": {"type": "str", "default": "engine_health_timeout_s"},
        },
        supports_check_mode=True,
    )
    result = wait(module.params)
    if result.pop("failed", False):
        module.fail_json(**result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
