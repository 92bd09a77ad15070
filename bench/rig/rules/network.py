"""Rules on what listens: ports, bind addresses and client CIDRs, and what may listen off loopback
without the firewall (the secrets' rules are in :mod:`~bench.rig.rules.secrets`)."""

from __future__ import annotations

import ipaddress

from bench.rig.engines import ENGINES, ENGINES_BY_NAME
from bench.rig.networks import CONNECTED, list_problem, resolve
from bench.rig.presets import Preset
from bench.rig.problems import Problem
from bench.rig.rules.knobs import Host, Knobs, as_bool, as_int, as_str, err

# Every service that listens: the engines of the table, then Open WebUI.
PORT_KNOBS = (*(engine.port_knob for engine in ENGINES), "open_webui_port")
HOST_KNOBS = (*(engine.host_knob for engine in ENGINES), "open_webui_host")


ENGINE_PORT_KNOBS = frozenset(engine.port_knob for engine in ENGINES)


def rule_ports(knobs: Knobs, host: Host, device: str, preset: Preset) -> list[Problem]:
    """Every service that runs beside another has its own port (Open WebUI's only while
    open_webui_enabled: off, nothing listens there). The engines may share one: the
    engine role stops every other engine before it starts the chosen one, so one published port
    reaches whichever engine serves (the demo box does that)."""
    problems: list[Problem] = []
    owners: dict[int, str] = {}
    for knob in PORT_KNOBS:
        if knob == "open_webui_port" and not as_bool(knobs, "open_webui_enabled"):
            continue  # nothing listens there
        port = as_int(knobs, knob)
        if port is None or not 1 <= port <= 65535:
            problems += err(knob, f"must be a TCP port (1-65535), got {knobs.get(knob)!r}")
            continue
        owner = owners.get(port)
        if owner is not None and not {owner, knob} <= ENGINE_PORT_KNOBS:
            problems += err(knob, f"port {port} is already taken by {owner}; give {knob} another port")
        owners.setdefault(port, knob)
    return problems


def is_loopback(address: str) -> bool:
    """Whether a bind address knob names loopback (``localhost`` or a loopback IP; a name or a wildcard does not)."""
    if address == "localhost":
        return True
    try:
        return ipaddress.ip_address(address).is_loopback
    except ValueError:
        return False


def rule_network(knobs: Knobs, host: Host, device: str, preset: Preset) -> list[Problem]:
    """Bind addresses parse; anything off loopback is limited to the allowed client CIDRs."""
    problems: list[Problem] = []
    cidrs = knobs.get("llmrig_allowed_client_cidrs")
    problem = list_problem(cidrs)
    if problem is not None:
        return err("llmrig_allowed_client_cidrs", problem)
    clients = resolve(cidrs, "llmrig_allowed_client_cidrs", [str(net) for net in host.get("networks") or []])
    exposed = []
    for knob in HOST_KNOBS:
        address = as_str(knobs, knob)
        if knob == "vllm_host" and not is_loopback(address):
            continue  # refused whatever it is (bench.rig.rules.proxy.rule_vllm_loopback), never exposed
        if address != "localhost":
            try:
                ipaddress.ip_address(address)
            except ValueError:
                problems += err(
                    knob, f"{address!r} is not an IP address (use 127.0.0.1, 0.0.0.0 or an address of this host)"
                )
                continue
        if not is_loopback(address):
            exposed.append(f"{knob} is {address}")
    if exposed and not clients:
        empty = "is empty" if not cidrs else f"names no network (the box is on none but loopback: {CONNECTED})"
        problems += err(
            "llmrig_allowed_client_cidrs",
            f"{empty} but {' and '.join(exposed)}, off loopback; list the client networks, or bind to 127.0.0.1",
        )
    return problems


def rule_firewall(knobs: Knobs, host: Host, device: str, preset: Preset) -> list[Problem]:
    """With llmrig_firewall_enabled false nothing filters what reaches the active engine or the API
    proxy but their units' address filters: one bound off loopback needs llmrig_allow_unfiltered:
    true (/health answers without the key), and an engine without authentication (Ollama) off
    loopback is refused outright. vLLM never listens off loopback
    (:func:`bench.rig.rules.proxy.rule_vllm_loopback`)."""
    if as_bool(knobs, "llmrig_firewall_enabled"):
        return []
    engine = ENGINES_BY_NAME.get(as_str(knobs, "inference_engine"))
    if engine is None:
        return []
    address = as_str(knobs, engine.host_knob)
    if not engine.api_key and not is_loopback(address):
        return err(
            engine.host_knob,
            f"is {address} with llmrig_firewall_enabled false, and {engine.title} has no authentication: every network "
            "that reaches the box could use it; bind it to 127.0.0.1 or set llmrig_firewall_enabled: true",
        )
    exposed = [(engine.host_knob, address)]
    if as_bool(knobs, "reverse_proxy_enabled"):
        exposed.append(("reverse_proxy_host", as_str(knobs, "reverse_proxy_host")))
    for knob, bind in exposed:
        if not is_loopback(bind) and not as_bool(knobs, "llmrig_allow_unfiltered"):
            return err(
                "llmrig_allow_unfiltered",
                f"{knob} is {bind} and llmrig_firewall_enabled is false: nothing filters its clients; "
                "enable the firewall, bind to 127.0.0.1, or set this true",
            )
    return []


CIDR_KNOBS = ("llmrig_allowed_client_cidrs", "llmrig_ssh_allowed_cidrs")


def rule_exposure(knobs: Knobs, host: Host, device: str, preset: Preset) -> list[Problem]:
    """A client or SSH network of every address (0.0.0.0/0, ::/0) needs llmrig_allow_any_network:
    true; an engine without authentication (Ollama) bound off loopback gets a loud warning."""
    problems: list[Problem] = []
    for knob in CIDR_KNOBS:
        value = knobs.get(knob)
        for cidr in value if isinstance(value, list) else []:
            try:
                network = ipaddress.ip_network(str(cidr), strict=False)
            except ValueError:
                continue  # rule_network names it
            if network.prefixlen == 0 and not as_bool(knobs, "llmrig_allow_any_network"):
                problems += err(
                    knob,
                    f"{cidr} admits every address on the internet; list your own networks, or set "
                    "llmrig_allow_any_network: true if that is really meant",
                )
    engine = ENGINES_BY_NAME.get(as_str(knobs, "inference_engine"))
    address = as_str(knobs, engine.host_knob) if engine else ""
    if engine is not None and not engine.api_key and address and not is_loopback(address):
        problems.append(
            Problem(
                engine.host_knob,
                f"is {address}, off loopback: {engine.title} has no authentication, so every client in "
                "llmrig_allowed_client_cidrs can use, pull and delete its models; bind it to 127.0.0.1 "
                "unless that is meant",
                "warning",
            )
        )
    return problems
