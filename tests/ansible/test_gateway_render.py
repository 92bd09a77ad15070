"""The gateway role's rendering through real Ansible (tasks/args.yml): the router's command line,
read back by vLLM Router's own argument parser (the pinned vllm-router that scripts/testrig
installs, as on the box), and the gateway's part of deployment.json, read through bench's typed
record. The real router runs with this command line in tests/integration/test_gateway.py."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from bench.codec import read_as, to_json
from bench.rig.gateway_record import Gateway
from tests.helpers import REPO, playbook_dump

pytestmark = pytest.mark.ansible
ROUTER_PYTHON = REPO / "build" / "testrig" / "router" / "bin" / "python"
PARSE = (
    "import json, sys\n"
    "from vllm_router.launch_router import parse_router_args\n"
    "args = parse_router_args(json.load(sys.stdin))\n"
    "names = ['host', 'port', 'worker_urls', 'policy', 'balance_abs_threshold', 'balance_rel_threshold',\n"
    "         'health_check_endpoint', 'health_check_interval_secs', 'health_check_timeout_secs',\n"
    "         'health_failure_threshold', 'health_success_threshold', 'cb_failure_threshold',\n"
    "         'cb_success_threshold', 'cb_timeout_duration_secs',\n"
    "         'retry_max_retries', 'prometheus_host', 'prometheus_port']\n"
    "print(json.dumps({name: getattr(args, name) for name in names}))\n"
)


def _render(tmp_path: Path, knobs: dict[str, Any]) -> dict[str, Any]:
    return playbook_dump("tests/ansible/render_gateway_args.yml", "args_dump", knobs, tmp_path=tmp_path)


def _parsed(args: list[str]) -> dict[str, Any]:
    assert ROUTER_PYTHON.exists(), "no vllm-router venv: run scripts/testrig router (scripts/test does)"
    done = subprocess.run(
        [str(ROUTER_PYTHON), "-c", PARSE],
        input=json.dumps(args),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    parsed: dict[str, Any] = json.loads(done.stdout)
    return parsed


def test_the_defaults_route_to_every_box_of_the_group_by_cache(tmp_path: Path) -> None:
    """The inventory's group llmrig (this machine, as localhost) at its API proxy; vLLM Router reads
    back the policy, the health checks, the circuit breaker and loopback-only addresses."""
    rendered = _render(tmp_path, {})
    assert _parsed(rendered["args"]) == {
        "host": "127.0.0.1",
        "port": 8100,
        "worker_urls": ["http://localhost:8001"],
        "policy": "cache_aware",
        "balance_abs_threshold": 1,
        "balance_rel_threshold": 1.0,
        "health_check_endpoint": "/health",
        "health_check_interval_secs": 5,
        "health_check_timeout_secs": 3,
        "health_failure_threshold": 2,
        "health_success_threshold": 2,
        "cb_failure_threshold": 1,
        "cb_success_threshold": 1,
        "cb_timeout_duration_secs": 10,
        "retry_max_retries": 3,
        "prometheus_host": "127.0.0.1",
        "prometheus_port": 8101,
    }
    assert rendered["out_of_rotation_s"] == 5 * 2 + 3
    assert rendered["back_in_rotation_s"] == 5 * 2


def test_the_record_names_the_front_and_each_box(tmp_path: Path) -> None:
    """Listed backends and the proxy on one address: the record reads through bench's types; its
    front is that address at the front's port, and a listed box that is no inventory host is kept
    by its URL."""
    knobs = {
        "gateway_backends": ["http://10.0.0.11:8001", "http://10.0.0.12:8001"],
        "gateway_policy": "round_robin",
        "reverse_proxy_host": "10.0.0.11",
        "gateway_front_port": 9002,
    }
    rendered = _render(tmp_path, knobs)
    assert _parsed(rendered["args"])["worker_urls"] == knobs["gateway_backends"]
    record = read_as(Gateway, rendered["record"], "gateway")
    assert to_json(record) == rendered["record"]
    assert (record.base_url, record.metrics_url) == (
        "http://10.0.0.11:9002/v1",
        "http://10.0.0.11:9002/metrics",
    )
    assert (record.local_base_url, record.policy, record.router_version) == (
        "http://127.0.0.1:8100/v1",
        "round_robin",
        "0.1.17",
    )
    assert [(box.host, box.base_url, box.engine) for box in record.backends] == [
        ("", "http://10.0.0.11:8001/v1", ""),
        ("", "http://10.0.0.12:8001/v1", ""),
    ]
