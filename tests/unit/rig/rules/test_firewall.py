"""Preflight's firewall rules (bench.rig.rules.firewall): SSH's networks against this run's own
session, read without become, for IPv4 and IPv6, and the line that names the networks."""

from __future__ import annotations

from typing import Any

import pytest

from bench.rig.presets import parse_preset
from bench.rig.rules.firewall import rule_firewall_plan, rule_ssh_session
from tests.helpers import group_vars

LAN = {"ssh_connection": "192.168.1.20 50022 192.168.1.50 22", "networks": ["192.168.1.0/24"]}
LAN6 = {"ssh_connection": "2001:db8:9::20 50022 2001:db8:1::50 22", "networks": ["2001:db8:1::/64"]}
CONSOLE = {"ssh_connection": "", "networks": ["192.168.1.0/24"]}
INETD = {"ssh_connection": "UNKNOWN 65535 UNKNOWN 65535", "networks": ["10.88.0.0/16"]}


def _knobs(**changes: Any) -> dict[str, Any]:
    merged: dict[str, Any] = {}
    for values in group_vars().values():
        merged.update(values or {})
    return {**merged, **changes}


def _run(rule: Any, host: dict[str, Any], **changes: Any) -> list[tuple[str, str, str]]:
    knobs = _knobs(**changes)
    preset = parse_preset("gemma3-270m", knobs["model_presets"]["gemma3-270m"])
    return [(p.variable, p.severity, p.message) for p in rule(knobs, host, "cpu", preset)]


@pytest.mark.parametrize(
    ("host", "ssh", "refused"),
    [
        (LAN, [], False),  # SSH from the clients plus the session
        (LAN, ["192.168.1.0/24"], False),
        (LAN, ["connected"], False),
        (LAN, ["10.0.0.0/8"], True),
        (LAN, ["2001:db8::/32"], True),  # an IPv6 network never holds an IPv4 session
        (LAN6, [], False),
        (LAN6, ["2001:db8:9::/48"], False),
        (LAN6, ["192.168.1.0/24"], True),
        (LAN6, ["connected"], True),  # the session is not on the box's own network
        (CONSOLE, [], True),  # nothing to read the session from, and no SSH networks named
        (CONSOLE, ["192.168.1.0/24"], False),
        (INETD, [], True),
        (INETD, ["10.88.0.0/16"], False),
    ],
)
def test_ssh_networks_must_hold_the_session(host: dict[str, Any], ssh: list[str], refused: bool) -> None:
    found = _run(rule_ssh_session, host, llmrig_ssh_allowed_cidrs=ssh)
    assert [variable for variable, _, _ in found] == (["llmrig_ssh_allowed_cidrs"] if refused else [])


def test_the_refusals_say_why_in_one_line() -> None:
    assert _run(rule_ssh_session, LAN, llmrig_ssh_allowed_cidrs=["10.0.0.0/8"]) == [
        (
            "llmrig_ssh_allowed_cidrs",
            "error",
            "does not contain 192.168.1.20, the address this run's SSH session comes from, "
            "so the firewall would cut it off; add it or its network",
        )
    ]
    assert _run(rule_ssh_session, CONSOLE) == [
        (
            "llmrig_ssh_allowed_cidrs",
            "error",
            "is empty and this run's SSH session cannot be read (a local run, or sshd in inetd mode); "
            "list the networks SSH may come from, so the firewall cannot shut SSH out",
        )
    ]


def test_without_the_firewall_the_session_is_not_checked_but_the_list_is() -> None:
    assert _run(rule_ssh_session, CONSOLE, llmrig_firewall_enabled=False) == []
    assert [v for v, _, _ in _run(rule_ssh_session, CONSOLE, llmrig_firewall_enabled=False,
                                  llmrig_ssh_allowed_cidrs="10.0.0.0/8")] == ["llmrig_ssh_allowed_cidrs"]  # fmt: skip


def test_the_plan_line_spells_out_connected() -> None:
    assert _run(rule_firewall_plan, LAN6) == [
        (
            "llmrig_allowed_client_cidrs",
            "info",
            "Firewall: clients from 2001:db8:1::/64 (connected: the networks of this box's interfaces); "
            "SSH from 2001:db8:1::/64, 2001:db8:9::20/128 (this session)",
        )
    ]
    listed = _run(
        rule_firewall_plan,
        LAN,
        llmrig_allowed_client_cidrs=["10.8.0.0/24"],
        llmrig_ssh_allowed_cidrs=["192.168.1.0/24"],
    )
    assert listed[0][2] == "Firewall: clients from 10.8.0.0/24; SSH from 192.168.1.0/24"
    assert _run(rule_firewall_plan, LAN, llmrig_allowed_client_cidrs="10.8.0.0/24") == []  # rule_network names it
