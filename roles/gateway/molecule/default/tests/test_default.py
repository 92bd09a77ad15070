"""Real outcomes of the gateway role under a real systemd: the router runs as its own user with
its hardening, listens on loopback only, sees the stand-in engine box healthy and passes a
request and its key to it."""

from __future__ import annotations

import json
import re
import shlex
from typing import Any

ROUTER = "http://127.0.0.1:8100"
# One HTTP request from inside the container (the image has no curl): URL, key, JSON body or ''.
REQUEST = """
import sys, urllib.request
url, key, body = sys.argv[1:4]
request = urllib.request.Request(url, data=body.encode() or None, headers={"Content-Type": "application/json"})
if key:
    request.add_header("Authorization", "Bearer " + key)
print(urllib.request.urlopen(request, timeout=10).read().decode())
"""


def _request(host: Any, url: str, key: str = "", body: str = "") -> Any:
    args = " ".join(shlex.quote(arg) for arg in (REQUEST, url, key, body))
    return json.loads(host.check_output(f"python3 -c {args}"))


def test_the_router_runs_as_its_own_user_under_systemd(host: Any) -> None:
    service = host.service("llmrig-router.service")
    assert service.is_running
    assert service.is_enabled
    pid = host.check_output("systemctl show -p MainPID --value llmrig-router.service")
    assert host.check_output(f"ps -o user= -p {pid}") == "llmrig-router"


def test_the_router_listens_on_loopback_only(host: Any) -> None:
    listening = host.check_output("ss -ltnH")
    ports = re.findall(r"\s(\S+):(810[01])\s", listening)
    assert sorted(ports) == [("127.0.0.1", "8100"), ("127.0.0.1", "8101")], listening


def test_the_box_is_in_rotation_and_gets_the_request_with_its_key(host: Any) -> None:
    ready = _request(host, f"{ROUTER}/readiness")
    assert (ready["healthy_workers"], ready["total_workers"]) == (1, 1)
    body = json.dumps({"model": "stand-in", "messages": [{"role": "user", "content": "hi"}]})
    answer = _request(host, f"{ROUTER}/v1/chat/completions", "k1", body)
    assert answer["choices"][0]["message"]["content"] == "hello"
    assert host.file("/tmp/answered").content_string.splitlines()[-1] == "Bearer k1"


def test_the_units_hardening_holds_on_a_real_systemd(host: Any) -> None:
    out = host.check_output("systemd-analyze security --no-pager llmrig-router.service")
    found = re.search(r"Overall exposure level for llmrig-router\.service: ([0-9.]+)", out)
    assert found is not None, out[-500:]
    assert float(found.group(1)) <= 1.4
