"""CIDR lists as operators write them, the word "connected", and the SSH session
(bench.rig.networks), table-driven."""

from __future__ import annotations

from typing import Any

import pytest

from bench.errors import ConfigError
from bench.rig.networks import Session, connected_networks, contains, list_problem, resolve, session


@pytest.mark.parametrize(
    ("values", "problem"),
    [
        (["192.168.1.0/24", "2001:db8::/32", "198.51.100.7", "connected"], None),
        ([], None),
        ("10.0.0.0/8", "must be a list such as [192.168.1.0/24], not the string '10.0.0.0/8'"),
        ({"lan": "10.0.0.0/8"}, "must be a list of CIDRs such as [192.168.1.0/24], got {'lan': '10.0.0.0/8'}"),
        (["10.0.0.300/8"], "'10.0.0.300/8' is not a CIDR such as 192.168.1.0/24"),
        (["office"], "'office' is not a CIDR such as 192.168.1.0/24"),
        ([10], "10 is not a CIDR such as 192.168.1.0/24"),
        (
            ["192.168.1.77/24"],
            "192.168.1.77/24 has host bits set: write 192.168.1.0/24 for its network, or 192.168.1.77/32 for one host",
        ),
        (
            ["2001:db8::5/64"],
            "2001:db8::5/64 has host bits set: write 2001:db8::/64 for its network, or 2001:db8::5/128 for one host",
        ),
    ],
)
def test_list_problem_says_what_is_wrong_in_one_line(values: Any, problem: str | None) -> None:
    assert list_problem(values) == problem


def test_resolve_replaces_connected_and_names_the_knob() -> None:
    connected = ["10.88.0.0/16", "fd00:1::/64"]
    assert resolve(["connected", "10.88.0.0/16", "198.51.100.7"], "k", connected) == [
        "10.88.0.0/16",
        "fd00:1::/64",
        "198.51.100.7/32",
    ]
    assert resolve(["connected"], "k", []) == []
    with pytest.raises(ConfigError, match=r"^llmrig_ssh_allowed_cidrs: 192\.168\.1\.77/24 has host bits set"):
        resolve(["192.168.1.77/24"], "llmrig_ssh_allowed_cidrs", connected)


@pytest.mark.parametrize(
    ("networks", "address", "inside"),
    [
        (["192.168.1.0/24"], "192.168.1.20", True),
        (["192.168.1.0/24"], "192.168.2.20", False),
        (["2001:db8::/32"], "2001:db8:9::20", True),
        (["2001:db8::/32"], "2001:db9::20", False),
        (["192.168.1.0/24"], "::ffff:c0a8:114", False),  # families never mix; session() unmaps first
        (["0.0.0.0/0"], "fd00::1", False),
        (["10.0.0.0/8", "fd00::/8"], "fd00::1", True),
    ],
)
def test_contains_works_for_both_families(networks: list[str], address: str, inside: bool) -> None:
    assert contains(networks, address) is inside


@pytest.mark.parametrize(
    ("ssh_connection", "expected"),
    [
        ("192.168.1.20 50022 192.168.1.50 22", Session("192.168.1.20", 22)),
        ("2001:db8::20 50022 2001:db8::50 2222", Session("2001:db8::20", 2222)),
        ("::ffff:192.168.1.20 50022 ::ffff:192.168.1.50 22", Session("192.168.1.20", 22)),
        ("UNKNOWN 65535 UNKNOWN 65535", None),
        ("", None),
        (None, None),
        ("192.168.1.20 50022 192.168.1.50", None),
    ],
)
def test_session_reads_ssh_connection(ssh_connection: Any, expected: Session | None) -> None:
    assert session(ssh_connection) == expected


# Ansible's network facts (setup, gather_subset network) as a podman box and a LAN box show them.
FACTS: dict[str, Any] = {
    "interfaces": ["lo", "eth0", "wg-vpn"],
    "lo": {"type": "loopback", "ipv4": {"address": "127.0.0.1", "netmask": "255.0.0.0"}, "ipv6": []},
    "eth0": {
        "type": "ether",
        "ipv4": {"address": "10.88.0.7", "netmask": "255.255.0.0", "network": "10.88.0.0"},
        "ipv4_secondaries": [{"address": "192.168.1.50", "netmask": "255.255.255.0"}],
        "ipv6": [
            {"address": "fe80::1c2d:3eff:fe4f:5a6b", "prefix": "64", "scope": "link"},
            {"address": "2001:db8:1::50", "prefix": "64", "scope": "global"},
        ],
    },
    "wg_vpn": {"type": "unknown", "ipv4": {"address": "10.8.0.2", "netmask": "255.255.255.0"}},
    "docker0": {"type": "bridge", "ipv4": {"address": "172.17.0.1", "netmask": "255.255.0.0"}},  # not listed
}


def test_connected_networks_are_the_interfaces_networks_without_loopback_or_link_local() -> None:
    assert connected_networks(FACTS) == ["10.88.0.0/16", "192.168.1.0/24", "2001:db8:1::/64", "10.8.0.0/24"]
    assert connected_networks({"interfaces": ["lo"], "lo": FACTS["lo"]}) == []
    assert connected_networks({}) == []
