"""The addresses a service's unit may exchange packets with: systemd's ``IPAddressAllow=`` after
``IPAddressDeny=any`` (the engines', Open WebUI's and the watchdog's units).

Loopback always. The client networks (``llmrig_allowed_client_cidrs``, ``connected`` standing for
the networks of the host's interfaces as preflight read them) when the service listens off
loopback: its answers to them are packets too, and the firewall admits the same networks.
Each address the service dials that is not loopback (an engine bound to a LAN address, which
Open WebUI then calls there). Nothing else: the models are on disk before a unit starts.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Sequence
from typing import Any

from bench.errors import ConfigError
from bench.rig import networks

LOOPBACK = "localhost"  # systemd's name for 127.0.0.0/8 and ::1/128


def off_loopback(address: Any) -> bool:
    """Whether a bind or dial address is anything but loopback (a wildcard or a name counts as off)."""
    text = str(address).strip()
    if text == "localhost":
        return False
    try:
        return not ipaddress.ip_address(text).is_loopback
    except ValueError:
        return True


def _network(value: Any, knob: str) -> str:
    try:
        return str(ipaddress.ip_network(str(value).strip(), strict=False))
    except ValueError as exc:
        raise ConfigError(f"{knob}: {value!r} is not a CIDR such as 192.168.1.0/24") from exc


def ip_address_allow(
    bind: Any, client_cidrs: Any, dialled: Iterable[Any] = (), connected: Sequence[str] | None = None
) -> list[str]:
    """``IPAddressAllow=`` entries for a service bound to ``bind`` that dials ``dialled``;
    ``connected`` is what the word ``connected`` among the client networks stands for (None: not
    read, which such a list then cannot do without)."""
    allowed = [LOOPBACK]
    if off_loopback(bind):
        knob = "llmrig_allowed_client_cidrs"
        if connected is None and isinstance(client_cidrs, list | tuple) and networks.CONNECTED in client_cidrs:
            raise ConfigError(
                f"{knob}: 'connected' stands for the host's networks, which the preflight role reads; run it first"
            )
        allowed += networks.resolve(client_cidrs, knob, connected or ())
    for address in dialled:
        if off_loopback(address) and str(address).strip() not in ("0.0.0.0", "::"):
            allowed.append(_network(address, "the address the service dials"))
    return list(dict.fromkeys(allowed))
