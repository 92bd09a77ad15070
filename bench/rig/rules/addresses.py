"""The rule on bind addresses against the host: the active engine, Open WebUI, the API proxy and
Prometheus when they run, bind an address this host has (preflight's ``llmrig_host_facts`` tries
to bind each and reports ``addresses`` in the host facts; absent: nothing to check)."""

from __future__ import annotations

from bench.rig.engines import ENGINES, ENGINES_BY_NAME
from bench.rig.presets import Preset
from bench.rig.problems import Problem
from bench.rig.rules.knobs import Host, Knobs, as_bool, as_str, err

# Every bind address knob; roles/preflight/tasks/facts.yml probes exactly these (a test keeps the two in step).
ADDRESS_KNOBS = (
    *(engine.host_knob for engine in ENGINES),
    "open_webui_host",
    "reverse_proxy_host",
    "monitoring_prometheus_host",
)


def rule_bind_addresses(knobs: Knobs, host: Host, device: str, preset: Preset) -> list[Problem]:
    """The services that will start can bind their address on this host."""
    engine = ENGINES_BY_NAME.get(as_str(knobs, "inference_engine"))
    # vLLM off loopback is refused whatever the address (bench.rig.rules.proxy.rule_vllm_loopback).
    used = [engine.host_knob] if engine and engine.host_knob != "vllm_host" else []
    if as_bool(knobs, "open_webui_enabled"):
        used.append("open_webui_host")
    if as_bool(knobs, "reverse_proxy_enabled"):
        used.append("reverse_proxy_host")
    if as_bool(knobs, "monitoring_enabled"):
        used.append("monitoring_prometheus_host")
    probes = host.get("addresses") or {}
    problems: list[Problem] = []
    for knob in used:
        probe = probes.get(knob) or {}
        if probe and not probe.get("bindable"):
            problems += err(
                knob,
                f"{probe.get('address')} is no address of this host ({probe.get('error')}); "
                "use 127.0.0.1, 0.0.0.0 or one it has",
            )
    return problems
