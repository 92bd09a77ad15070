"""bench.rig.rules.monitoring on its own: each refusal is one line naming its knob, and the
Prometheus port held on the host by another process is refused, by Prometheus itself not."""

from __future__ import annotations

from typing import Any

import pytest

from bench.rig.presets import Preset
from bench.rig.rules.monitoring import rule_monitoring

KNOBS: dict[str, Any] = {
    "monitoring_enabled": True,
    "monitoring_prometheus_host": "127.0.0.1",
    "monitoring_prometheus_port": 9090,
    "monitoring_retention_time": "15d",
    "monitoring_retention_size": "",
    "monitoring_scrape_interval": "15s",
    "monitoring_alert_receivers": [],
    "vllm_port": 8000,
    "ollama_port": 11434,
    "llamacpp_port": 8081,
    "open_webui_enabled": True,
    "open_webui_port": 8080,
    "reverse_proxy_enabled": False,
    "reverse_proxy_port": 8001,
    "llmrig_firewall_enabled": True,
    "tls_enabled": True,
    "tls_https_port": 443,
    "tls_http_port": 80,
}
PRESET: Any = Preset  # the rule does not read the preset


def _lines(overrides: dict[str, Any], host: dict[str, Any] | None = None) -> list[str]:
    return [problem.render() for problem in rule_monitoring({**KNOBS, **overrides}, host or {}, "cpu", PRESET)]


def test_the_defaults_pass() -> None:
    assert _lines({}) == []


@pytest.mark.parametrize(
    ("overrides", "line"),
    [
        (
            {"monitoring_alert_receivers": [{"kind": "email", "url": "https://x.example"}]},
            "monitoring_alert_receivers: receiver 1: kind 'email' is not a receiver kind; choose one of alertmanager",
        ),
        (
            {"monitoring_alert_receivers": [{"kind": "webhook", "url": "https://u:p@hook.example/x"}]},
            "monitoring_alert_receivers: receiver 1: its url carries credentials",
        ),
        (
            {"monitoring_retention_time": "two weeks"},
            "monitoring_retention_time: 'two weeks' is not a Prometheus duration",
        ),
        ({"monitoring_prometheus_port": 9115}, "monitoring_prometheus_port: 9115 is the blackbox exporter's port too"),
        ({"monitoring_scrape_interval": "2m"}, "monitoring_scrape_interval: is 2m: at most 1m"),
        ({"monitoring_scrape_interval": "1m1s"}, "monitoring_scrape_interval: is 1m1s: at most 1m"),
        ({"monitoring_prometheus_port": 11434}, "monitoring_prometheus_port: 11434 is ollama_port's port too"),
        ({"monitoring_prometheus_port": 443}, "monitoring_prometheus_port: 443 is tls_https_port's port too"),
        (
            {"monitoring_prometheus_host": "0.0.0.0", "llmrig_firewall_enabled": False},
            "monitoring_prometheus_host: is 0.0.0.0, off loopback, with llmrig_firewall_enabled false",
        ),
    ],
)
def test_each_refusal_is_one_line_naming_its_knob(overrides: dict[str, Any], line: str) -> None:
    lines = _lines(overrides)
    assert len(lines) == 1, lines
    assert lines[0].startswith(line), lines


def test_monitoring_off_checks_nothing() -> None:
    assert (
        _lines({"monitoring_enabled": False, "monitoring_retention_time": "forever", "monitoring_prometheus_port": 0})
        == []
    )


def test_the_port_on_the_host_is_refused_unless_prometheus_holds_it() -> None:
    """Another process on 9090 (on every interface) is refused; Prometheus' own unit is a re-run."""
    other = {"listeners": [{"address": "0.0.0.0", "port": 9090, "pid": 77, "process": "cockpit", "unit": "x.service"}]}
    lines = _lines({}, other)
    assert len(lines) == 1, lines
    assert lines[0].startswith("monitoring_prometheus_port: 9090 is already taken on 0.0.0.0 by cockpit (pid 77"), lines
    ours = {
        "listeners": [
            {"address": "127.0.0.1", "port": 9090, "pid": 78, "process": "prometheus", "unit": "prometheus.service"}
        ]
    }
    assert _lines({}, ours) == []
