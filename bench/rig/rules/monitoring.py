"""Rules on the monitoring knobs (``monitoring_*``): alert receivers of a known kind at a plain
http(s) URL without credentials, Prometheus durations and sizes, a Prometheus port of its own
(no other llmrig service's, and free on the host unless Prometheus holds it), and Prometheus
(which has no authentication) off loopback only behind the firewall."""

from __future__ import annotations

import ipaddress
import re
import urllib.parse
from collections.abc import Mapping

from bench.rig.engines import ENGINES
from bench.rig.presets import Preset
from bench.rig.problems import Problem
from bench.rig.rules.knobs import Host, Knobs, as_bool, as_int, as_str, err
from bench.rig.rules.network import is_loopback
from bench.rig.rules.resources import port_holder
from bench.rig.tls import tls_on

RECEIVER_KINDS = ("alertmanager", "webhook")
# Prometheus' unit (roles/monitoring/vars/main.yml, _monitoring_units): it may hold its own port (a re-run).
PROMETHEUS_UNIT = "prometheus.service"
# The exporters' ports on loopback (roles/monitoring/vars/main.yml: _monitoring_node_address,
# _monitoring_blackbox_address, _monitoring_gpu_address, _monitoring_alertmanager_address).
EXPORTER_PORTS: Mapping[str, int] = {
    "the node exporter": 9100,
    "the blackbox exporter": 9115,
    "the GPU exporter": 9835,
    "the Alertmanager": 9093,
}
# Prometheus' duration (model.ParseDuration) and size (units.Base2Bytes) syntax.
_DURATION = re.compile(r"^(\d+y)?(\d+w)?(\d+d)?(\d+h)?(\d+m)?(\d+s)?(\d+ms)?$")
_SIZE = re.compile(r"^\d+(B|KB|MB|GB|TB|PB|EB)$")
_UNIT_SECONDS = {"y": 365 * 86400, "w": 7 * 86400, "d": 86400, "h": 3600, "m": 60, "s": 1, "ms": 0.001}
# The alerts hold for 2 minutes and read rates over 5: a scrape at least every minute gives each
# window several samples (and verify.yml waits two minutes for a scrape of every target).
MAX_SCRAPE_INTERVAL_S = 60


def duration_seconds(value: str) -> float:
    """A Prometheus duration that :data:`_DURATION` matched, in seconds."""
    return sum(int(number) * _UNIT_SECONDS[unit] for number, unit in re.findall(r"(\d+)(ms|[ywdhms])", value))


def _duration(knobs: Knobs, name: str) -> list[Problem]:
    value = as_str(knobs, name)
    if value and _DURATION.match(value) and any(char in "123456789" for char in value):
        return []
    return err(name, f"{knobs.get(name)!r} is not a Prometheus duration above zero (such as 15d, 12h, 30s)")


def _receivers(knobs: Knobs) -> list[Problem]:
    receivers = knobs.get("monitoring_alert_receivers")
    if receivers in (None, ""):
        return []
    if not isinstance(receivers, list):
        return err("monitoring_alert_receivers", "must be a list of {kind: alertmanager|webhook, url: http(s)://...}")
    problems: list[Problem] = []
    for number, receiver in enumerate(receivers, 1):
        where = f"receiver {number}"
        if not isinstance(receiver, Mapping):
            problems += err("monitoring_alert_receivers", f"{where} is not a mapping of kind and url")
            continue
        kind = str(receiver.get("kind", ""))
        if kind not in RECEIVER_KINDS:
            problems += err(
                "monitoring_alert_receivers",
                f"{where}: kind {kind!r} is not a receiver kind; choose one of {', '.join(RECEIVER_KINDS)}",
            )
        url = str(receiver.get("url", ""))
        parts = urllib.parse.urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            problems += err("monitoring_alert_receivers", f"{where}: url {url!r} is not an http(s) URL")
        elif parts.username is not None or parts.password is not None:
            # Prometheus' and Alertmanager's configuration files are world-readable (0644).
            problems += err(
                "monitoring_alert_receivers",
                f"{where}: its url carries credentials, which would land in a world-readable configuration file; "
                "use a URL without user:password@",
            )
    return problems


def port_owner(knobs: Knobs, port: int) -> str:
    """The llmrig service other than Prometheus whose port ``port`` is (its knob, or the exporter),
    or '': every engine's, Open WebUI's and the API proxy's while enabled, the HTTPS site's two
    while on, and the exporters'. Grafana's rule asks it too."""
    others = [(engine.port_knob, as_int(knobs, engine.port_knob)) for engine in ENGINES]
    if as_bool(knobs, "open_webui_enabled"):
        others.append(("open_webui_port", as_int(knobs, "open_webui_port")))
    if as_bool(knobs, "reverse_proxy_enabled"):
        others.append(("reverse_proxy_port", as_int(knobs, "reverse_proxy_port")))
    if tls_on(knobs):  # Caddy's HTTPS site in front of Open WebUI, and its redirect
        others += [(knob, as_int(knobs, knob)) for knob in ("tls_https_port", "tls_http_port")]
    others += list(EXPORTER_PORTS.items())
    return next((name for name, other in others if other == port), "")


def rule_monitoring(knobs: Knobs, host: Host, device: str, preset: Preset) -> list[Problem]:
    """With monitoring_enabled: the receivers, the durations and the size parse, Prometheus' port
    is no other service's, and Prometheus listens off loopback only with the firewall on."""
    if not as_bool(knobs, "monitoring_enabled"):
        return []
    problems = _receivers(knobs)
    problems += _duration(knobs, "monitoring_retention_time")
    interval = _duration(knobs, "monitoring_scrape_interval")
    if not interval and duration_seconds(as_str(knobs, "monitoring_scrape_interval")) > MAX_SCRAPE_INTERVAL_S:
        interval = err(
            "monitoring_scrape_interval",
            f"is {as_str(knobs, 'monitoring_scrape_interval')}: at most 1m, so that the alerts' 2-minute "
            "and 5-minute windows hold several samples",
        )
    problems += interval
    size = as_str(knobs, "monitoring_retention_size")
    if size and not _SIZE.match(size):
        problems += err(
            "monitoring_retention_size",
            f"{size!r} is not a Prometheus size (such as 10GB, 512MB; '' for no limit but the retention time)",
        )
    port = as_int(knobs, "monitoring_prometheus_port")
    if port is None or not 1 <= port <= 65535:
        problems += err(
            "monitoring_prometheus_port",
            f"must be a TCP port (1-65535), got {knobs.get('monitoring_prometheus_port')!r}",
        )
    elif clash := port_owner(knobs, port):
        problems += err("monitoring_prometheus_port", f"{port} is {clash}'s port too; choose another")
    elif holder := port_holder(host, port, as_str(knobs, "monitoring_prometheus_host"), {PROMETHEUS_UNIT}):
        problems += err("monitoring_prometheus_port", holder)
    address = as_str(knobs, "monitoring_prometheus_host")
    try:
        ipaddress.ip_address(address)
    except ValueError:
        problems += err(
            "monitoring_prometheus_host",
            f"{address!r} is not an IP address (use 127.0.0.1, or 0.0.0.0 with the firewall)",
        )
    else:
        if not is_loopback(address) and not as_bool(knobs, "llmrig_firewall_enabled"):
            problems += err(
                "monitoring_prometheus_host",
                f"is {address}, off loopback, with llmrig_firewall_enabled false: Prometheus has no authentication and "
                "every network that reaches the box could read it; bind it to 127.0.0.1 or enable the firewall",
            )
    return problems
