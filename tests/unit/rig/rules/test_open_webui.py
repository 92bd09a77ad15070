"""Preflight's Open WebUI rules: its URL, pinned release, admin e-mail and model parameters, and
its port on the host; each checked only while open_webui_enabled."""

from __future__ import annotations

from typing import Any

import pytest

from bench.rig.presets import parse_preset
from bench.rig.rules.open_webui import OPEN_WEBUI_UNIT, rule_open_webui, rule_open_webui_port_free
from tests.helpers import REPO, group_vars

KNOBS: dict[str, Any] = {name: value for document in group_vars().values() for name, value in (document or {}).items()}
PRESET = parse_preset("gemma3-270m", KNOBS["model_presets"]["gemma3-270m"])


def _found(**changes: Any) -> list[str]:
    return [problem.render() for problem in rule_open_webui({**KNOBS, **changes}, {}, "cpu", PRESET)]


def test_the_shipped_values_pass() -> None:
    assert _found() == []


@pytest.mark.parametrize(
    "url",
    ["http://chat.example.org", "https://chat.example.org:8443/", "http://192.168.1.50:8080", "http://[fd00::5]:8080"],
)
def test_a_public_url_with_a_scheme_and_a_host_passes(url: str) -> None:
    assert _found(open_webui_url=url) == []


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("chat.example.org", "needs http:// or https:// in front"),
        ("ftp://chat.example.org", "needs http:// or https:// in front"),
        ("http://", "needs a host"),
        ("https://user:pw@chat.example.org", "needs a host and no user name"),
        ("http://chat example.org", "has a space in it"),
        ("http://chat.example.org:99999", "is not a URL"),
        ("http://chat.example.org:port", "is not a URL"),
        ("http://chat_example!.org", "has a host that is no name or address"),
        ("http://chat.example.org/?a=1", "must not have a query or a fragment"),
    ],
)
def test_a_url_without_a_scheme_or_malformed_is_refused(url: str, why: str) -> None:
    (line,) = _found(open_webui_url=url)
    assert line.startswith(f"open_webui_url: {url.rstrip('/')!r} {why}"), line


@pytest.mark.parametrize("version", ["latest", ">=0.12", "0.12.*", "==0.12.4", "~=0.12", "", None, 0.12])
def test_an_unpinned_release_is_refused(version: Any) -> None:
    assert _found(open_webui_version=version) == [
        f"open_webui_version: {version!r} must be one exact release such as 0.12.4 (no latest, range or wildcard)"
    ]


@pytest.mark.parametrize("version", ["0.12.4", "0.13.0rc1", "1.0.0.post2"])
def test_an_exact_release_passes(version: str) -> None:
    assert _found(open_webui_version=version) == []


@pytest.mark.parametrize("email", ["admin", "admin@", "@example.org", "admin@example", "ad min@example.org", 42])
def test_an_admin_email_without_a_domain_is_refused(email: Any) -> None:
    assert _found(open_webui_admin_email=email) == [
        f"open_webui_admin_email: {email!r} must be an e-mail address with a domain, such as admin@example.org"
    ]


@pytest.mark.parametrize("email", ["admin@llmrig.example", "ops@localhost", "a.b+c@mail.example.org"])
def test_an_address_open_webui_takes_passes(email: str) -> None:
    assert _found(open_webui_admin_email=email) == []


@pytest.mark.parametrize(
    ("params", "line"),
    [
        ("temperature=0.2", "must be a mapping such as {temperature: 0.7}, not str"),
        (["temperature"], "must be a mapping such as {temperature: 0.7}, not list"),
        ({"temperature": "hot"}, "temperature must be a number, got 'hot'"),
        ({"temperature": True}, "temperature must be a number, got True"),
        ({"top_p": "0.9"}, "top_p must be a number, got '0.9'"),
        ({"max_tokens": 1.5}, "max_tokens must be a whole number, got 1.5"),
        ({"top_k": "40"}, "top_k must be a whole number, got '40'"),
        ({"stop": "\n"}, "stop must be a list of strings, got '\\n'"),
        ({"stop": ["END", 3]}, "stop must be a list of strings, got ['END', 3]"),
        ({"function_calling": "auto"}, "function_calling must be native or legacy, got 'auto'"),
    ],
)
def test_model_parameters_of_the_wrong_type_are_refused(params: Any, line: str) -> None:
    assert _found(open_webui_default_model_params=params) == [f"open_webui_default_model_params: {line}"]


def test_model_parameters_of_the_right_types_pass() -> None:
    params = {"temperature": 0, "top_p": 0.9, "max_tokens": 512, "stop": ["END"], "custom": "anything"}
    assert _found(open_webui_default_model_params=params) == []


def test_nothing_is_checked_while_open_webui_is_off() -> None:
    bad = {"open_webui_url": "chat", "open_webui_version": "latest", "open_webui_admin_email": "admin"}
    assert _found(open_webui_enabled=False, **bad) == []


def _listener(port: int, unit: str = "", address: str = "0.0.0.0") -> dict[str, Any]:
    return {"address": address, "port": port, "pid": 4242 if unit != "?" else 0, "process": "nginx", "unit": unit}


def _port(listeners: list[dict[str, Any]], **changes: Any) -> list[str]:
    knobs = {**KNOBS, **changes}
    return [problem.render() for problem in rule_open_webui_port_free(knobs, {"listeners": listeners}, "cpu", PRESET)]


def test_open_webuis_port_held_by_another_process_is_refused() -> None:
    assert _port([_listener(8080, "nginx.service")]) == [
        "open_webui_port: 8080 is already taken on 0.0.0.0 by nginx (pid 4242, unit nginx.service); "
        "stop it or choose a free port"
    ]
    assert _port([_listener(8080, "?", "127.0.0.1")]) == [
        "open_webui_port: 8080 is already taken on 127.0.0.1 by a process preflight cannot see (run it as root); "
        "stop it or choose a free port"
    ]


def test_open_webui_itself_on_its_port_another_port_or_open_webui_off_pass() -> None:
    assert _port([_listener(8080, OPEN_WEBUI_UNIT)]) == []
    assert _port([_listener(8081, "nginx.service")]) == []
    assert _port([_listener(8080, "nginx.service", "192.168.1.9")], open_webui_host="127.0.0.1") == []
    assert _port([_listener(8080, "nginx.service")], open_webui_enabled=False) == []


def test_the_unit_the_rule_spares_is_the_roles() -> None:
    role_vars = (REPO / "roles" / "open_webui" / "vars" / "main.yml").read_text(encoding="utf-8")
    assert f"_open_webui_unit: {OPEN_WEBUI_UNIT}\n" in role_vars
