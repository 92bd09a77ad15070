"""The networks the firewall is made of: CIDR lists as operators write them, the word
``connected`` (the networks the box's own interfaces are on), and the SSH session a run comes in on.

- :func:`list_problem` says in one line what is wrong with a CIDR list knob (a string instead of
  a list, a malformed CIDR, a CIDR with host bits set such as 192.168.1.77/24: refused, naming
  the network and the address it could have meant, since either may be meant);
- :func:`resolve` turns a valid list into networks, ``connected`` replaced by the box's networks;
- :func:`connected_networks` reads those from Ansible's network facts (loopback and link-local
  left out), IPv4 and IPv6;
- :func:`session` reads ``SSH_CONNECTION`` ("client port server port") as the login user sees it
  (sudo drops it, so the preflight role reads it without become); an IPv4-mapped IPv6 address
  counts as its IPv4 address.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from bench.errors import ConfigError

CONNECTED = "connected"
EXAMPLE = "192.168.1.0/24"
IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


@dataclass(frozen=True, slots=True)
class Session:
    """The SSH session a run came in on: the client's address and the port sshd took it on."""

    address: str
    port: int

    @property
    def network(self) -> str:
        """The client's address as a network of one (a /32 or a /128)."""
        return str(ipaddress.ip_network(self.address))


def _address(text: str) -> IPAddress | None:
    try:
        found = ipaddress.ip_address(text)
    except ValueError:
        return None
    if isinstance(found, ipaddress.IPv6Address) and found.ipv4_mapped is not None:
        return found.ipv4_mapped
    return found


def session(ssh_connection: Any) -> Session | None:
    """The session ``SSH_CONNECTION`` names, or None when it names no real socket (unset on a
    local run, UNKNOWN when sshd runs in inetd mode on a pipe)."""
    fields = str(ssh_connection or "").split()
    if len(fields) != 4 or not (fields[1].isdigit() and fields[3].isdigit()):
        return None
    client, server = _address(fields[0]), _address(fields[2])
    if client is None or server is None:
        return None
    return Session(str(client), int(fields[3]))


def cidr_problem(value: Any) -> str | None:
    """What is wrong with one CIDR (a bare address is its /32 or /128), or None."""
    text = value.strip() if isinstance(value, str) else ""
    try:
        network = ipaddress.ip_network(text, strict=False)
    except ValueError:
        return f"{value!r} is not a CIDR such as {EXAMPLE}"
    try:
        ipaddress.ip_network(text)
    except ValueError:
        single = f"{ipaddress.ip_interface(text).ip}/{network.max_prefixlen}"
        return f"{text} has host bits set: write {network} for its network, or {single} for one host"
    return None


def list_problem(values: Any) -> str | None:
    """What is wrong with a list of CIDRs (the word ``connected`` may stand among them), or None."""
    if isinstance(values, str):
        return f"must be a list such as [{EXAMPLE}], not the string {values!r}"
    if not isinstance(values, Sequence):
        return f"must be a list of CIDRs such as [{EXAMPLE}], got {values!r}"
    for value in values:
        problem = None if value == CONNECTED else cidr_problem(value)
        if problem:
            return problem
    return None


def resolve(values: Any, knob: str, connected: Sequence[str]) -> list[str]:
    """The networks ``values`` names, ``connected`` replaced by ``connected``'s networks, each
    once; a list :func:`list_problem` refuses raises :class:`ConfigError` naming ``knob``."""
    problem = list_problem(values)
    if problem is not None:
        raise ConfigError(f"{knob}: {problem}")
    found: list[str] = []
    for value in values:
        found += list(connected) if value == CONNECTED else [str(ipaddress.ip_network(value.strip()))]
    return list(dict.fromkeys(found))


def contains(networks: Sequence[str], address: str) -> bool:
    """Whether ``address`` lies in one of ``networks`` (IPv4 or IPv6; families never mix)."""
    found = ipaddress.ip_address(address)
    return any(found in ipaddress.ip_network(network) for network in networks)


def _interface_networks(data: Mapping[str, Any]) -> list[str]:
    found: list[str] = []
    ipv4 = [data.get("ipv4"), *(data.get("ipv4_secondaries") or [])]
    for entry in ipv4:
        if isinstance(entry, Mapping) and entry.get("address") and entry.get("netmask"):
            found.append(str(ipaddress.ip_interface(f"{entry['address']}/{entry['netmask']}").network))
    for entry in data.get("ipv6") or []:
        if isinstance(entry, Mapping) and entry.get("address") and entry.get("prefix"):
            network = ipaddress.ip_interface(f"{entry['address']}/{entry['prefix']}").network
            if not (network.is_link_local or network.is_loopback):
                found.append(str(network))
    return found


def connected_networks(facts: Mapping[str, Any]) -> list[str]:
    """The networks of the box's interfaces from Ansible's network facts (``setup`` with the
    network subset: ``interfaces`` and one entry per interface), loopback and link-local left out."""
    found: list[str] = []
    for name in facts.get("interfaces") or []:
        data = facts.get(str(name)) or facts.get(str(name).replace("-", "_").replace(":", "_"))
        if isinstance(data, Mapping) and data.get("type") != "loopback":
            found += _interface_networks(data)
    return list(dict.fromkeys(found))
