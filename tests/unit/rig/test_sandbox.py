"""bench.rig.sandbox: the IPAddressAllow= entries of a unit."""

from __future__ import annotations

import pytest

from bench.errors import ConfigError
from bench.rig.sandbox import ip_address_allow, off_loopback


@pytest.mark.parametrize(
    ("address", "off"),
    [("127.0.0.1", False), ("127.0.1.1", False), ("::1", False), ("localhost", False), ("0.0.0.0", True),
     ("::", True), ("192.168.1.50", True), ("gpu-box", True)],
)  # fmt: skip
def test_off_loopback(address: str, off: bool) -> None:
    assert off_loopback(address) is off


def test_a_service_on_loopback_reaches_loopback_only() -> None:
    assert ip_address_allow("127.0.0.1", ["192.168.1.0/24"]) == ["localhost"]


def test_a_service_off_loopback_also_reaches_its_clients_each_once() -> None:
    assert ip_address_allow("0.0.0.0", ["192.168.1.0/24", "fd00::/64", "192.168.1.0/24", "10.1.2.3"]) == [
        "localhost",
        "192.168.1.0/24",
        "fd00::/64",
        "10.1.2.3/32",
    ]


def test_connected_stands_for_the_networks_preflight_read() -> None:
    """The default client list, [connected], becomes the host's own networks (as the firewall's)."""
    lan = ["192.168.1.0/24", "fd00::/64"]
    allowed = ip_address_allow("0.0.0.0", ["connected", "10.8.0.0/16"], connected=lan)
    assert allowed == ["localhost", *lan, "10.8.0.0/16"]
    # Not read (the preflight role did not run): refused with the knob's name, not an empty allow-list.
    with pytest.raises(ConfigError, match="llmrig_allowed_client_cidrs: 'connected' stands for"):
        ip_address_allow("0.0.0.0", ["connected"])
    assert ip_address_allow("127.0.0.1", ["connected"]) == ["localhost"]  # on loopback: not needed


def test_a_dialled_address_off_loopback_is_allowed_a_wildcard_or_loopback_adds_nothing() -> None:
    assert ip_address_allow("127.0.0.1", [], ["192.168.1.50", "127.0.0.1", "0.0.0.0"]) == [
        "localhost",
        "192.168.1.50/32",
    ]


@pytest.mark.parametrize("cidrs", ["192.168.1.0/24", ["192.168.1.0/33"], ["192.168.1.77/24"], None])
def test_bad_client_networks_name_the_knob(cidrs: object) -> None:
    with pytest.raises(ConfigError, match="llmrig_allowed_client_cidrs"):
        ip_address_allow("0.0.0.0", cidrs)
