"""The gateway's front (roles/reverse_proxy on a host of llmrig_gateway): the role's Caddyfile,
rendered by real Ansible with the gateway on, served by the real caddy in front of three fake
upstreams (the engine, the router, the router's metrics) that report what reached them. On the
front's port, /v1/ with the key reaches the router, /metrics with the key the router's metrics,
/health (no key) the router's /readiness; without the key 401, and the router's admin routes
404 with or without it. The engine's own site beside it is unchanged. The firewall opens the
front's port to the client networks on the gateway host."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from bench.rig.firewall import firewall_rules
from tests.ansible.test_reverse_proxy import KEY, OVER_SSH, PROXY_KNOBS, _caddy, _render, _request, _Upstream
from tests.helpers import free_ports

pytestmark = pytest.mark.ansible

# The router's own routes besides the OpenAI API (vllm-router 0.1.17): none may be reached from the LAN.
ADMIN = ["/workers", "/list_workers", "/add_worker", "/remove_worker", "/get_loads", "/flush_cache", "/readiness",
         "/liveness", "/get_server_info", "/v1", "/"]  # fmt: skip


@pytest.fixture(scope="module")
def front(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """The engine's site and the gateway's front, each a base URL."""
    tmp = tmp_path_factory.mktemp("gateway-front")
    engine, router, metrics = _Upstream("engine"), _Upstream("router"), _Upstream("router-metrics")
    port, front_port = free_ports(2)
    gateway = {
        "_reverse_proxy_gateway": True,
        "gateway_front_port": front_port,
        "gateway_port": router.port,
        "gateway_metrics_port": metrics.port,
    }
    config = tmp / "Caddyfile"
    text = _render("Caddyfile.j2", port, f"127.0.0.1:{engine.port}", extra=gateway)
    config.write_text(text, encoding="utf-8")
    try:
        with _caddy(config, front_port):
            yield {"engine": f"http://127.0.0.1:{port}", "front": f"http://127.0.0.1:{front_port}"}
    finally:
        for upstream in (engine, router, metrics):
            upstream.close()


@pytest.mark.parametrize(("path", "upstream"), [("/v1/chat/completions", "router"), ("/v1/models", "router"),
                                                ("/metrics", "router-metrics")])  # fmt: skip
def test_the_front_forwards_the_api_to_the_router_only_with_the_key(
    front: dict[str, str], path: str, upstream: str
) -> None:
    assert _request(front["front"] + path, None)[0] == 401
    assert _request(front["front"] + path, "wrong-" + KEY)[0] == 401
    status, seen = _request(front["front"] + path, KEY, "POST")
    assert status == 200
    assert seen == {"path": path, "authorization": f"Bearer {KEY}", "upstream": upstream}


def test_health_is_the_routers_readiness_without_the_key(front: dict[str, str]) -> None:
    status, seen = _request(front["front"] + "/health?x=1", None)
    assert (status, seen["path"], seen["upstream"]) == (200, "/readiness", "router")


@pytest.mark.parametrize("path", ADMIN)
def test_the_routers_admin_routes_are_404_with_or_without_the_key(front: dict[str, str], path: str) -> None:
    assert _request(front["front"] + path, None)[0] == 404
    assert _request(front["front"] + path, KEY, "POST")[0] == 404


def test_the_engines_own_site_still_fronts_the_engine(front: dict[str, str]) -> None:
    status, seen = _request(front["engine"] + "/v1/models", KEY)
    assert (status, seen["upstream"]) == (200, "engine")


def test_the_firewall_opens_the_front_on_the_gateway_host() -> None:
    """The front's port from the client networks, beside the box's own API proxy; no front on
    another box."""
    on_gateway = {**OVER_SSH, "gateway": True}
    assert _services(PROXY_KNOBS, on_gateway) == [
        ("reverse_proxy", "192.168.1.0/24", 8001),
        ("gateway", "192.168.1.0/24", 8002),
    ]
    assert _services(PROXY_KNOBS, OVER_SSH) == [("reverse_proxy", "192.168.1.0/24", 8001)]


def test_behind_a_gateway_the_boxes_proxies_admit_only_the_gateway() -> None:
    """An engine box behind a gateway (llama.cpp here): its API proxy from the gateway's address
    only, not the LAN."""
    knobs = {**PROXY_KNOBS, "inference_engine": "llamacpp", "llamacpp_host": "127.0.0.1", "llamacpp_port": 8081}
    behind = {**OVER_SSH, "gateway": False, "gateway_sources": ["192.168.1.50", "fd00::50"]}
    assert _services(knobs, behind) == [
        ("reverse_proxy", "192.168.1.50/32", 8001),
        ("reverse_proxy", "fd00::50/128", 8001),
    ]


def _services(knobs: dict[str, Any], connection: dict[str, Any]) -> list[tuple[str, str, int]]:
    """The firewall's rules other than SSH's, as (name, source, port)."""
    rules = firewall_rules(knobs, connection)
    return [(rule["name"], rule["src"], rule["port"]) for rule in rules if rule["name"] != "ssh"]
