"""Grafana's knobs (``grafana_*``): with ``grafana_enabled``, the monitoring role on (Prometheus is
its data source), an IP address to bind and a port of its own, apart from every engine's, Open
WebUI's, the API proxy's, the HTTPS site's, Prometheus's and the exporters', and free on the host
unless Grafana holds it."""

from __future__ import annotations

import ipaddress

from bench.rig.engines import ENGINES
from bench.rig.presets import Preset
from bench.rig.problems import Problem
from bench.rig.rules.knobs import Host, Knobs, as_bool, as_int, as_str, err
from bench.rig.rules.monitoring import EXPORTER_PORTS
from bench.rig.rules.resources import port_holder
from bench.rig.tls import tls_on

GRAFANA_UNIT = "grafana-server.service"  # roles/grafana: it may hold its own port (a re-run)

# Services whose port Grafana must not take: the knob, and the knob that turns the service on
# (None: always there, as every engine is once switched to). Prometheus's knob is the monitoring
# role's; a tree without it has nothing to compare.
_NEIGHBOURS: tuple[tuple[str, str | None], ...] = (
    *((engine.port_knob, None) for engine in ENGINES),
    ("open_webui_port", "open_webui_enabled"),
    ("reverse_proxy_port", "reverse_proxy_enabled"),
    ("monitoring_prometheus_port", None),
    ("tls_https_port", "tls_enabled"),
    ("tls_http_port", "tls_enabled"),
)


def rule_grafana(knobs: Knobs, host: Host, device: str, preset: Preset) -> list[Problem]:
    """With grafana_enabled: grafana_host is an IP address, grafana_port a TCP port no other
    llmrig service uses."""
    if not as_bool(knobs, "grafana_enabled"):
        return []
    problems: list[Problem] = []
    if not as_bool(knobs, "monitoring_enabled"):
        problems += err(
            "grafana_enabled",
            "is true with monitoring_enabled false: Grafana's data source is the monitoring role's Prometheus; "
            "turn monitoring on or Grafana off",
        )
    address = as_str(knobs, "grafana_host")
    try:
        ipaddress.ip_address(address)
    except ValueError:
        problems += err(
            "grafana_host", f"{address!r} is not an IP address (127.0.0.1: reach Grafana through an SSH tunnel)"
        )
    port = as_int(knobs, "grafana_port")
    if port is None or not 1 <= port <= 65535:
        return problems + err("grafana_port", f"must be a TCP port (1-65535), got {knobs.get('grafana_port')!r}")
    for knob, switch in _NEIGHBOURS:
        on = switch is None or (tls_on(knobs) if switch == "tls_enabled" else as_bool(knobs, switch))
        if as_int(knobs, knob) == port and on:
            return problems + err("grafana_port", f"{port} is {knob}'s port too; choose another")
    for exporter, exporter_port in EXPORTER_PORTS.items():
        if exporter_port == port:
            return problems + err("grafana_port", f"{port} is {exporter}'s port; choose another")
    if holder := port_holder(host, port, address, {GRAFANA_UNIT}):
        problems += err("grafana_port", holder)
    return problems
