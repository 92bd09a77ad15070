#!/usr/bin/python
"""Ansible module: wait until Prometheus has scraped each of its active targets at least once
since the module started, then report each target's health as Prometheus sees it (its
/api/v1/targets). One task that blocks: no until/retries loop."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: llmrig_prometheus_targets
short_description: Read every active scrape target's health from Prometheus once each was scraped anew
description:
  - Reads O(url)/api/v1/targets?state=active until every active target's last scrape is later than
    the moment the module started (so a target's health is this check's, not an older scrape's),
    for up to O(timeout_s) seconds; fails on time-out naming the targets not scraped since.
  - Returns every target with its job, instance, health and last error, and those not up in RV(down).
    It does not fail on a target that is down; the caller decides.
  - Never changes anything.
options:
  url:
    description: Prometheus' base URL on the host, e.g. http://127.0.0.1:9090.
    type: str
    required: true
  timeout_s:
    description: Seconds to wait in all.
    type: int
    default: 120
  interval_s:
    description: Seconds between reads.
    type: float
    default: 1
author: llmrig
"""

RETURN = r"""
targets:
  description: Every active target, each with job, instance, health (up, down), last_error and line (one line of text).
  type: list
  returned: success
down:
  description: The targets whose health is not up.
  type: list
  returned: success
elapsed_s:
  description: Seconds until every target was scraped anew.
  type: float
  returned: success
"""

import datetime
import json
import re
import time
import urllib.error
import urllib.request
from typing import Any

from ansible.module_utils.basic import AnsibleModule

# Prometheus writes nanoseconds; Python's datetime reads at most microseconds.
_FRACTION = re.compile(r"(\.\d{6})\d+")


def parse_time(text: str) -> float:
    """An RFC 3339 time of Prometheus' API as a Unix time (0 for its zero time, never scraped)."""
    value = _FRACTION.sub(r"\1", str(text)).replace("Z", "+00:00")
    try:
        return max(datetime.datetime.fromisoformat(value).timestamp(), 0.0)
    except ValueError:
        return 0.0


def read_targets(url: str) -> list[dict[str, Any]]:
    """The active targets of Prometheus at ``url``: job, instance, health, last_error, last_scrape."""
    with urllib.request.urlopen(f"{url.rstrip('/')}/api/v1/targets?state=active", timeout=10) as answer:
        document = json.load(answer)
    found = []
    for target in document.get("data", {}).get("activeTargets", []):
        labels = target.get("labels") or {}
        job, instance, health = labels.get("job", ""), labels.get("instance", ""), target.get("health", "unknown")
        error = target.get("lastError") or ""
        found.append(
            {
                "job": job,
                "instance": instance,
                "health": health,
                "last_error": error,
                "last_scrape": parse_time(target.get("lastScrape", "")),
                "line": f"{job} {instance}: {health}" + (f" ({error})" if error else ""),
            }
        )
    return found


def wait(params: dict[str, Any]) -> dict[str, Any]:
    """Poll until every active target was scraped after the start; the module result."""
    started_wall, started = time.time(), time.monotonic()
    url, last_problem, targets = params["url"], "", []
    while True:
        try:
            targets = read_targets(url)
            stale = [target for target in targets if target["last_scrape"] < started_wall]
            last_problem = (
                "Prometheus has no active target"
                if not targets
                else "not scraped since the check started: " + ", ".join(f"{t['job']} {t['instance']}" for t in stale)
            )
            if targets and not stale:
                for target in targets:
                    target.pop("last_scrape")
                return {
                    "changed": False,
                    "targets": targets,
                    "down": [target for target in targets if target["health"] != "up"],
                    "elapsed_s": round(time.monotonic() - started, 1),
                }
        except (OSError, ValueError) as exc:  # not listening yet, or an answer that is not JSON
            last_problem = f"{url}/api/v1/targets did not answer: {exc}"
        if time.monotonic() - started >= params["timeout_s"]:
            return {"failed": True, "msg": f"Prometheus at {url}, after {params['timeout_s']} s: {last_problem}"}
        time.sleep(params["interval_s"])


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "url": {"type": "str", "required": True},
            "timeout_s": {"type": "int", "default": 120},
            "interval_s": {"type": "float", "default": 1},
        },
        supports_check_mode=True,
    )
    result = wait(module.params)
    if result.pop("failed", False):
        module.fail_json(**result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
