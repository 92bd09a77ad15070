"""Knob values as Ansible hands them over, one parser per kind for the rules, the vLLM flags
and the KV planner (extra vars on the command line arrive as strings)."""

from __future__ import annotations

from typing import Any

# The strings Ansible itself reads as true (its ``bool`` filter and boolean options), in any case.
TRUE_STRINGS = frozenset(("1", "true", "yes", "on", "y", "t"))
# And as false.
FALSE_STRINGS = frozenset(("0", "false", "no", "off", "n", "f"))
# Bind addresses that mean every interface; a client on the same host dials loopback instead.
WILDCARD_HOSTS = ("0.0.0.0", "::")


def truthy(value: Any) -> bool:
    """``value`` as a bool: a string is true when it is one of :data:`TRUE_STRINGS` (surrounding
    spaces and case ignored), anything else by Python's truth (``None`` and ``0`` are false)."""
    if isinstance(value, str):
        return value.strip().lower() in TRUE_STRINGS
    return bool(value)


def dial_host(address: str, instead: str = "127.0.0.1") -> str:
    """The address a client dials for a server bound to ``address``: ``address`` itself, or
    ``instead`` (loopback, for a client on the same host) when it is a wildcard."""
    return instead if address in WILDCARD_HOSTS else address
