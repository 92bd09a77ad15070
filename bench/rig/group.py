"""The engine boxes behind a gateway, checked together: the preflight rules that span hosts.

The gateway (the hosts of the inventory group ``llmrig_gateway``, docs/gateway.md) sends any
request to any engine box of the group ``llmrig``, so every box must serve the same model under
the same name with the same engine, and accept the same API key: the router passes the client's
key on to whichever box it picks. Each finding names the box and the knob to change there
(:func:`group_problems`). Preflight calls it once per run, on the controller, with what each box
resolved (the ``llmrig_group_problems`` filter); the API key arrives as its SHA-256, never itself.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from bench.errors import ConfigError
from bench.rig.engines import ENGINES_BY_NAME
from bench.rig.values import truthy

GATEWAY_GROUP = "llmrig_gateway"
ENGINE_GROUP = "llmrig"


@dataclass(frozen=True, slots=True)
class Box:
    """What one engine box resolved: its engine, preset, served name, key digest and proxy."""

    name: str
    engine: str
    model: str
    served_name: str
    api_key_sha256: str  # '' when llmrig_api_key is empty (the box generates a key of its own)
    reverse_proxy_enabled: bool
    reverse_proxy_tls: bool

    @classmethod
    def read(cls, name: str, facts: Mapping[str, Any]) -> Box:
        try:
            return cls(
                name=name,
                engine=str(facts["engine"]),
                model=str(facts["model"]),
                served_name=str(facts["served_name"]),
                api_key_sha256=str(facts.get("api_key_sha256") or ""),
                reverse_proxy_enabled=truthy(facts.get("reverse_proxy_enabled")),
                reverse_proxy_tls=truthy(facts.get("reverse_proxy_tls")),
            )
        except KeyError as missing:
            raise ConfigError(f"llmrig_group_problems: box {name} lacks {missing.args[0]}") from None


def _served_name_knob(engine: str) -> str:
    found = ENGINES_BY_NAME.get(engine)
    return found.served_name_knob if found and found.served_name_knob else "inference_engine"


def _agreement(boxes: Sequence[Box]) -> list[str]:
    """Every box against the first (by name): engine, model, served name, API key."""
    first, problems = boxes[0], []
    for box in boxes[1:]:
        if box.engine != first.engine:
            problems.append(
                f"{box.name}: inference_engine: is {box.engine}, {first.name}'s is {first.engine}: every engine box "
                "behind the gateway serves with the same engine; set it for the whole group llmrig"
            )
            continue  # the model and name follow from the engine; one line per box is enough
        if box.model != first.model:
            problems.append(
                f"{box.name}: model: resolves to {box.model} here, {first.name} serves {first.model}: the gateway "
                "sends any request to any box; set model to one preset for the whole group (model: auto picks by "
                "each box's GPUs)"
            )
        knob = _served_name_knob(box.engine)
        if box.served_name != first.served_name:
            problems.append(
                f"{box.name}: {knob}: is {box.served_name!r}, {first.name}'s is {first.served_name!r}: clients send "
                "one model name through the gateway"
            )
    keyed = [box for box in boxes if box.api_key_sha256]
    for box in boxes:
        if not box.api_key_sha256:
            problems.append(
                f"{box.name}: llmrig_api_key: empty, so this box generates a key of its own, which the gateway's "
                "clients do not send; set one key for the whole group (vault_llmrig_api_key in group_vars)"
            )
    if keyed:
        reference = keyed[0]
        problems += [
            f"{box.name}: llmrig_api_key: differs from {reference.name}'s: the gateway passes the client's key on to "
            "whichever box it picks; set one key for the whole group"
            for box in keyed[1:]
            if box.api_key_sha256 != reference.api_key_sha256
        ]
    return problems


def group_problems(
    facts: Mapping[str, Mapping[str, Any]],
    gateways: Sequence[str],
    engine_boxes: Sequence[str],
    backends: Sequence[str],
) -> list[str]:
    """One line per finding, box first, then the knob: ``facts`` by box name (the boxes of this run),
    ``gateways`` and ``engine_boxes`` the inventory groups, ``backends`` gateway_backends."""
    if not gateways:
        return []
    problems = [
        f"{gateway}: {GATEWAY_GROUP}: this host is not in the group {ENGINE_GROUP}; the gateway's front is served "
        f"by an engine box's API proxy, so name a box of {ENGINE_GROUP} in {GATEWAY_GROUP} (a gateway on a host of "
        "its own is not built yet)"
        for gateway in gateways
        if gateway not in engine_boxes
    ]
    boxes = [Box.read(name, facts[name]) for name in sorted(facts) if name in engine_boxes]
    for box in boxes:
        if not box.reverse_proxy_enabled and (box.name in gateways or not backends):
            problems.append(
                f"{box.name}: reverse_proxy_enabled: false, but "
                + ("the gateway's front is this box's API proxy" if box.name in gateways else "the gateway reaches "
                   "each box through its API proxy")
                + "; set it true on every box of the group"
            )  # fmt: skip
        if box.reverse_proxy_tls:
            problems.append(
                f"{box.name}: reverse_proxy_tls: true, but HTTPS behind a gateway is not built yet: the router "
                "reaches each box's API proxy over plain HTTP, and the gateway's front serves plain HTTP; set it "
                "false on every box of the group"
            )
    if boxes:
        problems += _agreement(boxes)
    return problems


def gateway_sources(addresses: Mapping[str, str]) -> list[str]:
    """The addresses the engine boxes' firewalls admit to their API proxies: each gateway host's
    ``ansible_host`` (else its inventory name), a name resolved on the controller to all its
    addresses. ``addresses`` maps each host of llmrig_gateway to that value."""
    found: list[str] = []
    for host, value in sorted(addresses.items()):
        text = str(value).strip()
        try:
            found.append(str(ipaddress.ip_address(text)))
            continue
        except ValueError:
            pass
        try:
            infos = socket.getaddrinfo(text, None, proto=socket.IPPROTO_TCP)
        except OSError as exc:
            raise ConfigError(
                f"{host}: {GATEWAY_GROUP}: cannot resolve {text!r} to the address the engine boxes' firewalls must "
                f"admit ({exc.strerror or exc}); set this host's ansible_host to its LAN address"
            ) from None
        found += [str(info[4][0]) for info in infos]
    return list(dict.fromkeys(found))
