"""Grafana's knobs (``grafana_*``): with ``grafana_enabled``, the monitoring role on (Prometheus is
its data source), an IP address to bind and a port of its own, apart from every engine's, Open
WebUI's, the API proxy's, the HTTPS site's, Prometheus's and the exporters', and free on the host
unless Grafana holds it."""

from __future__ import annotations

import ipaddress

from bench.rig.presets import Preset
from bench.rig.problems import Problem
from bench.rig.rules.knobs import Host, Knobs, as_bool, as_int, as_str, err
from bench.rig.rules.monitoring import port_owner
from bench.rig.rules.resources import port_holder

GRAFANA_UNIT = "grafana-server.service"  # roles/grafana: it may hold its own port (a re-run)


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
    owner = port_owner(knobs, port)
    if not owner and as_int(knobs, "monitoring_prometheus_port") == port:
        owner = "monitoring_prometheus_port"
    if owner:
        return problems + err("grafana_port", f"{port} is {owner}'s port too; choose another")
    if holder := port_holder(host, port, address, {GRAFANA_UNIT}):
        problems += err("grafana_port", holder)
    return problems
