"""Rules on the gateway's ports (docs/gateway.md): its front on the LAN, the router and the
router's metrics on loopback are three ports of their own, none an engine's, Open WebUI's, the
API proxy's or the HTTPS site's. Checked on every box, gateway or not, so that naming a box in
the inventory group llmrig_gateway later finds no clash. What spans the boxes of a group:
:mod:`bench.rig.group`."""

from __future__ import annotations

from bench.rig.engines import ENGINES
from bench.rig.presets import Preset
from bench.rig.problems import Problem
from bench.rig.rules.knobs import Host, Knobs, as_bool, as_int, err

GATEWAY_PORTS = ("gateway_front_port", "gateway_port", "gateway_metrics_port")


def _others(knobs: Knobs) -> list[str]:
    """The port knobs the gateway's must not equal: every engine's, and the services that run."""
    others = [engine.port_knob for engine in ENGINES]
    if as_bool(knobs, "reverse_proxy_enabled"):
        others.append("reverse_proxy_port")
    if as_bool(knobs, "open_webui_enabled"):
        others.append("open_webui_port")
    if as_bool(knobs, "tls_enabled"):
        others += ["tls_https_port", "tls_http_port"]
    if as_bool(knobs, "monitoring_enabled"):
        others.append("monitoring_prometheus_port")
    return others


def rule_gateway_ports(knobs: Knobs, host: Host, device: str, preset: Preset) -> list[Problem]:
    """Each gateway port is its own: not another gateway port, not a port of another service."""
    taken: dict[int, str] = {}
    for knob in _others(knobs):
        port = as_int(knobs, knob)
        if port is not None:
            taken.setdefault(port, knob)
    problems: list[Problem] = []
    for knob in GATEWAY_PORTS:
        port = as_int(knobs, knob)
        if port is None:
            continue
        if port in taken:
            problems += err(knob, f"{port} is {taken[port]}'s port too; choose another")
        else:
            taken[port] = knob
    return problems
