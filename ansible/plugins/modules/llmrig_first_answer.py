#!/usr/bin/python
"""Ansible module: send an engine one minimal chat completion and say when it was sent and answered,
on the host's monotonic clock (the journal's), so the engine role can time the unit's start-up to
its first answer (bench.rig.ready)."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: llmrig_first_answer
short_description: Send one minimal chat completion and report when it was sent and answered
description:
  - POSTs one chat completion (one user message, O(max_tokens) tokens, temperature 0, not
    streamed) to O(base_url)/chat/completions for O(model), with the API key read from
    O(api_key_file) on the host when one is named (so it is never a module argument).
  - Reports the host's CLOCK_MONOTONIC, in microseconds, when the request was sent and when the
    whole answer arrived. An engine that does not answer 200 is reported with RV(answered) false
    and why, never as a failure (a measurement must not fail a deploy; the engine role's verify checks
    the chat itself).
  - Never changes anything on the host (the engine may load a model to answer, as Ollama does).
options:
  base_url:
    description: The engine's OpenAI base URL on the host, e.g. http://127.0.0.1:8000/v1.
    type: str
    required: true
  model:
    description: The served model name.
    type: str
    required: true
  api_key_file:
    description: File on the host holding the API key sent as a bearer token; empty = none.
    type: path
    default: ""
  max_tokens:
    description: Tokens to ask for.
    type: int
    default: 1
  timeout_s:
    description: Seconds to wait for the answer.
    type: float
    default: 600
author: llmrig
"""

RETURN = r"""
answered:
  description: Whether the engine answered 200 with a completion.
  type: bool
  returned: always
sent_monotonic_us:
  description: CLOCK_MONOTONIC in microseconds just before the request was sent.
  type: int
  returned: always
answered_monotonic_us:
  description: CLOCK_MONOTONIC in microseconds once the answer was read (0 when none came).
  type: int
  returned: always
msg:
  description: Why there was no answer ('' when there was one).
  type: str
  returned: always
"""

import json
import time
import urllib.error
import urllib.request
from typing import Any

from ansible.module_utils.basic import AnsibleModule


def _key(path: str) -> str:
    if not path:
        return ""
    with open(path, encoding="utf-8") as handle:
        return handle.read().strip()


def _result(sent: int, answered: int, why: str) -> dict[str, Any]:
    return {
        "changed": False,
        "answered": not why,
        "sent_monotonic_us": sent,
        "answered_monotonic_us": 0 if why else answered,
        "msg": why,
    }


def ask(params: dict[str, Any]) -> dict[str, Any]:
    """Send the completion; the module result."""
    body = {
        "model": params["model"],
        "messages": [{"role": "user", "content": "Say OK."}],
        "max_tokens": params["max_tokens"],
        "temperature": 0,
        "stream": False,
    }
    headers = {"Content-Type": "application/json"}
    try:
        key = _key(params["api_key_file"])
    except OSError as exc:
        return _result(0, 0, f"cannot read the API key file {params['api_key_file']}: {exc.strerror}")
    if key:
        headers["Authorization"] = f"Bearer {key}"
    url = params["base_url"].rstrip("/") + "/chat/completions"
    request = urllib.request.Request(url, data=json.dumps(body).encode(), headers=headers, method="POST")
    sent = time.monotonic_ns() // 1000
    why = ""
    try:
        with urllib.request.urlopen(request, timeout=params["timeout_s"]) as response:
            answer = json.loads(response.read() or b"{}")
        if not isinstance(answer, dict) or not answer.get("choices"):
            why = f"{url} answered 200 without choices"
    except urllib.error.HTTPError as exc:
        why = f"{url} answered {exc.code}"
    except (OSError, ValueError) as exc:
        why = f"{url}: {exc}"
    return _result(sent, time.monotonic_ns() // 1000, why)


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "base_url": {"type": "str", "required": True},
            "model": {"type": "str", "required": True},
            "api_key_file": {"type": "path", "default": ""},
            "max_tokens": {"type": "int", "default": 1},
            "timeout_s": {"type": "float", "default": 600},
        },
        supports_check_mode=True,
    )
    if module.check_mode:
        module.exit_json(**_result(0, 0, "check mode"))
    module.exit_json(**ask(module.params))


if __name__ == "__main__":
    main()
