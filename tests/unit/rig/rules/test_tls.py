"""Preflight's HTTPS rule (bench.rig.rules.tls) on the shipped knobs: the proxy's ports free on the
host or held by its own unit, and which names ACME can issue for (bench.rig.tls)."""

from __future__ import annotations

from typing import Any

import pytest

from bench.rig.open_webui import behind_https
from bench.rig.presets import parse_preset
from bench.rig.rules.resources import PROXY_UNIT
from bench.rig.rules.tls import rule_tls
from bench.rig.tls import acme_name_problem, https_url
from tests.helpers import group_vars

KNOBS: dict[str, Any] = {name: value for document in group_vars().values() for name, value in (document or {}).items()}
PRESET = parse_preset("gemma3-270m", KNOBS["model_presets"]["gemma3-270m"])


def _found(listeners: list[dict[str, Any]] | None = None, **changes: Any) -> list[str]:
    host = {"listeners": listeners or []}
    return [problem.render() for problem in rule_tls({**KNOBS, **changes}, host, "cpu", PRESET)]


def _listener(port: int, unit: str, process: str = "nginx") -> dict[str, Any]:
    return {"address": "0.0.0.0", "port": port, "pid": 4242, "process": process, "unit": unit}


def test_the_shipped_values_pass() -> None:
    assert KNOBS["tls_enabled"] is True
    assert _found() == []


def test_a_port_held_by_another_process_is_refused_and_the_proxys_own_is_not() -> None:
    assert _found([_listener(80, "nginx.service")]) == [
        "tls_http_port: 80 is already taken on 0.0.0.0 by nginx (pid 4242, unit nginx.service); "
        "stop it or choose a free port"
    ]
    assert _found([_listener(443, PROXY_UNIT, "caddy"), _listener(80, PROXY_UNIT, "caddy")]) == []
    assert _found([_listener(80, "nginx.service")], tls_enabled=False, open_webui_host="0.0.0.0") == []


@pytest.mark.parametrize("name", ["chat.example.org", "llm.home.example.net", "box.duckdns.org"])
def test_acme_issues_for_public_names(name: str) -> None:
    assert acme_name_problem(name) == ""


@pytest.mark.parametrize(
    "name", ["", "192.168.1.50", "fd00::5", "gpu-box", "localhost", "box.lan", "box.local", "box.home.arpa", "x y.org"]
)
def test_acme_cannot_issue_for_addresses_private_or_bad_names(name: str) -> None:
    assert acme_name_problem(name) != ""


@pytest.mark.parametrize(
    ("name", "problem"),
    [
        ("fd00::5", "tls_server_name: 'fd00::5' is an IPv6 address; give the box a DNS name (or its IPv4 address)"),
        ("my box", "tls_server_name: 'my box' is no DNS name (letters, digits, '-' and dots) or IPv4 address"),
    ],
)
def test_a_name_caddy_cannot_serve_is_refused_naming_the_knob(name: str, problem: str) -> None:
    assert _found(tls_server_name=name) == [problem]


@pytest.mark.parametrize("name", ["gpu-box", "192.168.1.50", "box.lan", "box.fritz.box"])
def test_lan_names_and_addresses_get_caddys_own_ca(name: str) -> None:
    assert _found(tls_server_name=name) == []


def test_acme_for_the_api_site_alone_is_refused() -> None:
    found = _found(
        tls_enabled=False,
        open_webui_host="0.0.0.0",
        reverse_proxy_enabled=True,
        reverse_proxy_host="0.0.0.0",
        reverse_proxy_tls=True,
        tls_server_name="chat.example.org",
        tls_acme_email="ops@example.org",
    )
    assert found == [
        "tls_acme_email: is set with tls_enabled off: ACME for the API site alone is not built (the CA's "
        "challenges come to ports 80 and 443, which only the Open WebUI site serves); turn tls_enabled on "
        "or leave tls_acme_email empty (tls internal)"
    ]


def test_the_url_and_origin_clients_use() -> None:
    assert https_url("gpu-box", 443) == "https://gpu-box"
    assert https_url("gpu-box", "8443") == "https://gpu-box:8443"
    assert behind_https("https://gpu-box:8443") == {
        "WEBUI_URL": "https://gpu-box:8443",
        "CORS_ALLOW_ORIGIN": "https://gpu-box:8443",
        "WEBUI_SESSION_COOKIE_SECURE": "True",
        "WEBUI_AUTH_COOKIE_SECURE": "True",
        "FORWARDED_ALLOW_IPS": "127.0.0.1",
    }
