"""The firewall's rules from the knobs and the connection (bench.rig.firewall), table-driven:
what SSH, the active engine and Open WebUI are allowed from, and which old llmrig rules go."""

from __future__ import annotations

from typing import Any

import pytest

from bench.errors import ConfigError
from bench.rig.firewall import (
    controller_network,
    firewall_rules,
    missing_rules,
    ssh_port,
    stale_rules,
    ufw_settled,
)

KNOBS: dict[str, Any] = {
    "inference_engine": "vllm",
    "vllm_host": "0.0.0.0",
    "vllm_port": 8000,
    "ollama_host": "127.0.0.1",
    "ollama_port": 11434,
    "llamacpp_host": "127.0.0.1",
    "llamacpp_port": 8081,
    "open_webui_enabled": True,
    "open_webui_host": "0.0.0.0",
    "open_webui_port": 8080,
    "llmrig_allowed_client_cidrs": ["192.168.1.0/24", "10.0.0.0/8"],
    "llmrig_ssh_allowed_cidrs": [],
}
# SSH_CONNECTION as sshd sets it: client address, client port, server address, server port.
OVER_SSH = {"ansible_port": "", "ssh_connection": "192.168.1.20 50022 192.168.1.50 22"}
LOCAL = {"ansible_port": "", "ssh_connection": ""}


def _allowed(rules: list[dict[str, Any]]) -> list[tuple[str, str, int]]:
    return [(rule["name"], rule["src"], rule["port"]) for rule in rules]


@pytest.mark.parametrize(
    ("overrides", "connection", "expected"),
    [
        (  # defaults: SSH from the clients (the controller is among them), vLLM and Open WebUI
            {},
            OVER_SSH,
            [
                ("ssh", "192.168.1.0/24", 22),
                ("ssh", "10.0.0.0/8", 22),
                ("ssh", "192.168.1.20/32", 22),
                ("vllm", "192.168.1.0/24", 8000),
                ("vllm", "10.0.0.0/8", 8000),
                ("open_webui", "192.168.1.0/24", 8080),
                ("open_webui", "10.0.0.0/8", 8080),
            ],
        ),
        (  # engine and Open WebUI on loopback: only SSH is opened
            {"vllm_host": "127.0.0.1", "open_webui_host": "localhost", "llmrig_allowed_client_cidrs": ["10.1.0.0/16"]},
            {"ansible_port": "", "ssh_connection": "203.0.113.9 40000 10.1.0.5 2222"},
            [("ssh", "10.1.0.0/16", 2222), ("ssh", "203.0.113.9/32", 2222)],
        ),
        (  # only the active engine's port: llama.cpp's, not vLLM's; Open WebUI disabled
            {"inference_engine": "llamacpp", "llamacpp_host": "10.1.0.5", "open_webui_enabled": False},
            OVER_SSH,
            [
                ("ssh", "192.168.1.0/24", 22),
                ("ssh", "10.0.0.0/8", 22),
                ("ssh", "192.168.1.20/32", 22),
                ("llamacpp", "192.168.1.0/24", 8081),
                ("llamacpp", "10.0.0.0/8", 8081),
            ],
        ),
        (  # Prometheus off loopback gets its port from the client networks; on loopback (the default) none
            {
                "vllm_host": "127.0.0.1",
                "open_webui_enabled": False,
                "monitoring_enabled": True,
                "monitoring_prometheus_host": "0.0.0.0",
                "monitoring_prometheus_port": 9090,
                "llmrig_allowed_client_cidrs": ["10.1.0.0/16"],
            },
            {"ansible_port": "", "ssh_connection": "10.1.0.9 40000 10.1.0.5 22"},
            [("ssh", "10.1.0.0/16", 22), ("ssh", "10.1.0.9/32", 22), ("prometheus", "10.1.0.0/16", 9090)],
        ),
        (
            {
                "vllm_host": "127.0.0.1",
                "open_webui_enabled": False,
                "monitoring_enabled": True,
                "monitoring_prometheus_host": "127.0.0.1",
                "monitoring_prometheus_port": 9090,
                "llmrig_allowed_client_cidrs": ["10.1.0.0/16"],
            },
            {"ansible_port": "", "ssh_connection": "10.1.0.9 40000 10.1.0.5 22"},
            [("ssh", "10.1.0.0/16", 22), ("ssh", "10.1.0.9/32", 22)],
        ),
        (  # llmrig_ssh_allowed_cidrs replaces the default sources; ansible_port without a session
            {"llmrig_ssh_allowed_cidrs": ["198.51.100.7"], "open_webui_enabled": "false", "vllm_host": "127.0.0.1"},
            {"ansible_port": "2200", "ssh_connection": ""},
            [("ssh", "198.51.100.7/32", 2200)],
        ),
        (  # Ollama off loopback, a local run with SSH's networks named: SSH on 22 from them only
            {
                "inference_engine": "ollama",
                "ollama_host": "0.0.0.0",
                "open_webui_enabled": False,
                "llmrig_ssh_allowed_cidrs": ["192.168.1.0/24"],
            },
            LOCAL,
            [("ssh", "192.168.1.0/24", 22), ("ollama", "192.168.1.0/24", 11434), ("ollama", "10.0.0.0/8", 11434)],
        ),
        (  # login ops, become, sshd on 2222, clients that miss the controller: SSH on 2222 from the session
            {"llmrig_allowed_client_cidrs": ["198.51.100.0/28"], "open_webui_enabled": False},
            {"ansible_port": "", "ssh_connection": "10.88.0.1 41000 10.88.0.7 2222"},
            [("ssh", "198.51.100.0/28", 2222), ("ssh", "10.88.0.1/32", 2222), ("vllm", "198.51.100.0/28", 8000)],
        ),
        (  # an IPv6 session gets an IPv6 SSH rule; IPv6 client networks beside IPv4 ones
            {"llmrig_allowed_client_cidrs": ["192.168.1.0/24", "2001:db8:1::/64"], "open_webui_enabled": False},
            {"ansible_port": "", "ssh_connection": "2001:db8:9::20 50022 2001:db8:1::50 22"},
            [
                ("ssh", "192.168.1.0/24", 22),
                ("ssh", "2001:db8:1::/64", 22),
                ("ssh", "2001:db8:9::20/128", 22),
                ("vllm", "192.168.1.0/24", 8000),
                ("vllm", "2001:db8:1::/64", 8000),
            ],
        ),
        (  # an IPv6 session inside an IPv6 SSH network
            {"llmrig_ssh_allowed_cidrs": ["2001:db8:9::/48"], "vllm_host": "127.0.0.1", "open_webui_enabled": False},
            {"ansible_port": "", "ssh_connection": "2001:db8:9::20 50022 2001:db8:1::50 22"},
            [("ssh", "2001:db8:9::/48", 22)],
        ),
        (  # "connected": the networks of the box's interfaces, beside a listed one
            {"llmrig_allowed_client_cidrs": ["connected", "10.8.0.0/24"], "open_webui_enabled": False},
            {**OVER_SSH, "networks": ["192.168.1.0/24", "fd00:1::/64"]},
            [
                ("ssh", "192.168.1.0/24", 22),
                ("ssh", "fd00:1::/64", 22),
                ("ssh", "10.8.0.0/24", 22),
                ("ssh", "192.168.1.20/32", 22),
                ("vllm", "192.168.1.0/24", 8000),
                ("vllm", "fd00:1::/64", 8000),
                ("vllm", "10.8.0.0/24", 8000),
            ],
        ),
    ],
)
def test_rules(overrides: dict[str, Any], connection: dict[str, Any], expected: list[tuple[str, str, int]]) -> None:
    """SSH comes first; each service bound off loopback is allowed on its own port from the client networks."""
    rules = firewall_rules({**KNOBS, **overrides}, connection)
    assert _allowed(rules) == expected
    assert all(rule["proto"] == "tcp" and rule["comment"] == f"llmrig {rule['name']}" for rule in rules)


@pytest.mark.parametrize(
    ("ansible_port", "session", "port", "controller"),
    [
        ("", "192.168.1.20 50022 192.168.1.50 22", 22, "192.168.1.20/32"),
        ("2222", "192.168.1.20 50022 10.0.0.5 22", 22, "192.168.1.20/32"),  # a port forward: the host's own port
        ("2222", "", 2222, None),
        ("", "", 22, None),
        ("", "UNKNOWN 65535 UNKNOWN 65535", 22, None),  # sshd in inetd mode on a pipe
        ("", "fd00::20 50022 fd00::50 22", 22, "fd00::20/128"),
        ("", "::ffff:192.168.1.20 50022 ::ffff:192.168.1.50 2222", 2222, "192.168.1.20/32"),  # IPv4-mapped
    ],
)
def test_the_ssh_port_and_the_controller_come_from_the_session(
    ansible_port: str, session: str, port: int, controller: str | None
) -> None:
    """SSH_CONNECTION names the port sshd really took the session on, else ansible_port, else 22."""
    assert ssh_port(ansible_port, session) == port
    assert controller_network(session) == controller


@pytest.mark.parametrize(
    ("overrides", "connection", "knob"),
    [
        (
            {"llmrig_allowed_client_cidrs": [], "vllm_host": "127.0.0.1", "open_webui_enabled": False},
            LOCAL,
            "llmrig_ssh_allowed_cidrs",
        ),
        ({}, LOCAL, "llmrig_ssh_allowed_cidrs"),  # no session to read, no SSH networks named
        ({}, {"ansible_port": "", "ssh_connection": "UNKNOWN 65535 UNKNOWN 65535"}, "llmrig_ssh_allowed_cidrs"),
        ({"llmrig_ssh_allowed_cidrs": ["10.0.0.0/8"]}, OVER_SSH, "llmrig_ssh_allowed_cidrs"),  # misses the session
        (  # an IPv6 session outside the IPv4 network of the same digits
            {"llmrig_ssh_allowed_cidrs": ["192.168.1.0/24"]},
            {"ansible_port": "", "ssh_connection": "fd00::20 50022 fd00::50 22"},
            "llmrig_ssh_allowed_cidrs",
        ),
        ({"llmrig_allowed_client_cidrs": ["10.0.0.300/8"]}, OVER_SSH, "llmrig_allowed_client_cidrs"),
        ({"llmrig_allowed_client_cidrs": "10.0.0.0/8"}, OVER_SSH, "llmrig_allowed_client_cidrs"),
        ({"llmrig_allowed_client_cidrs": ["192.168.1.77/24"]}, OVER_SSH, "llmrig_allowed_client_cidrs"),
        ({"llmrig_ssh_allowed_cidrs": ["office"]}, OVER_SSH, "llmrig_ssh_allowed_cidrs"),
        ({"inference_engine": "tgi"}, OVER_SSH, "inference_engine"),
    ],
)
def test_rules_that_cannot_be_made_name_the_knob(
    overrides: dict[str, Any], connection: dict[str, Any], knob: str
) -> None:
    """A lock-out (no session and no SSH networks, or SSH networks that miss the session), a bad
    CIDR list or engine: a ConfigError naming the knob (preflight refuses each first)."""
    with pytest.raises(ConfigError, match=f"^{knob}: "):
        firewall_rules({**KNOBS, **overrides}, connection)


SHOW_ADDED = """Added user rules (see 'ufw status' for running firewall):
ufw allow from 192.168.1.0/24 to any port 22 proto tcp comment 'llmrig ssh'
ufw allow from 192.168.1.20 to any port 22 proto tcp comment 'llmrig ssh'
ufw allow from 192.168.1.0/24 to any port 8000 proto tcp comment 'llmrig vllm'
ufw allow from 172.16.0.0/12 to any port 8000 proto tcp comment 'llmrig vllm'
ufw allow from 192.168.1.0/24 to any port 8081 proto tcp comment 'llmrig llamacpp'
ufw allow from 192.168.1.0/24 to any port 9100 proto tcp comment 'node exporter'
ufw allow 9999/tcp
"""


def test_stale_rules_are_the_llmrig_rules_no_longer_wanted() -> None:
    """A network taken off the list and the engine switched away from go, spelled as ufw prints
    them (a /32 without its suffix); the operator's own rules, with no llmrig comment, stay."""
    wanted = firewall_rules(
        {**KNOBS, "llmrig_allowed_client_cidrs": ["192.168.1.0/24"], "open_webui_enabled": False}, OVER_SSH
    )
    assert stale_rules(SHOW_ADDED, wanted) == [
        {"src": "172.16.0.0/12", "port": 8000, "proto": "tcp", "comment": "llmrig vllm"},
        {"src": "192.168.1.0/24", "port": 8081, "proto": "tcp", "comment": "llmrig llamacpp"},
    ]
    assert stale_rules("Added user rules (see 'ufw status' for running firewall):\n", wanted) == []


def test_missing_rules_are_the_wanted_rules_ufw_lacks_ssh_first() -> None:
    """A wanted rule held with the same network (a /32 as ufw prints it), port and comment is not
    added again; one held under another comment (the operator's) is, so it gets llmrig's."""
    wanted = firewall_rules(
        {**KNOBS, "llmrig_allowed_client_cidrs": ["192.168.1.0/24", "10.8.0.0/16"], "open_webui_enabled": False},
        OVER_SSH,
    )
    assert [(rule["name"], rule["src"]) for rule in wanted] == [
        ("ssh", "192.168.1.0/24"), ("ssh", "10.8.0.0/16"), ("ssh", "192.168.1.20/32"),
        ("vllm", "192.168.1.0/24"), ("vllm", "10.8.0.0/16"),
    ]  # fmt: skip
    assert missing_rules(SHOW_ADDED, wanted) == [wanted[1], wanted[4]]
    assert missing_rules("Added user rules (see 'ufw status' for running firewall):\n", wanted) == wanted
    assert missing_rules(SHOW_ADDED.replace("'llmrig vllm'", "'mine'"), wanted) == [wanted[1], wanted[3], wanted[4]]


# `ufw status verbose` as ufw 0.36 prints it, active (with rules) and before it was ever enabled.
STATUS_ACTIVE = """Status: active
Logging: on (low)
Default: deny (incoming), allow (outgoing), disabled (routed)
New profiles: skip

To                         Action      From
--                         ------      ----
22/tcp                     ALLOW IN    192.168.1.0/24             # llmrig ssh
8000/tcp                   ALLOW IN    2001:db8::/32              # llmrig vllm
"""


@pytest.mark.parametrize(
    ("status", "logging", "settled"),
    [
        (STATUS_ACTIVE, "low", {"active": True, "incoming": True, "outgoing": True, "logging": True}),
        (STATUS_ACTIVE, "medium", {"active": True, "incoming": True, "outgoing": True, "logging": False}),
        (STATUS_ACTIVE, "off", {"active": True, "incoming": True, "outgoing": True, "logging": False}),
        (
            STATUS_ACTIVE.replace("Logging: on (low)", "Logging: off").replace("deny (incoming)", "allow (incoming)"),
            "off",
            {"active": True, "incoming": False, "outgoing": True, "logging": True},
        ),
        ("Status: inactive\n", "low", {"active": False, "incoming": False, "outgoing": False, "logging": False}),
        ("", "low", {"active": False, "incoming": False, "outgoing": False, "logging": False}),
    ],
)
def test_ufw_settled_reads_what_is_already_in_place(status: str, logging: str, settled: dict[str, bool]) -> None:
    """Only what the status shows counts as in place; an inactive ufw shows no policy, so the
    role sets every one (the ufw module itself then reports whether anything changed)."""
    assert ufw_settled(status, logging) == settled
