"""The firewall's rules, from the knobs: what the firewall role allows, and which of its old rules go.

Every rule llmrig adds allows TCP to one port from one source network and carries a comment
that starts with ``llmrig`` (:data:`COMMENT`); the role never touches a rule without it. The
rules (:func:`firewall_rules`):

- SSH, on the port this run's session reached sshd on (the server port of ``SSH_CONNECTION`` as
  the login user sees it, else ``ansible_port``, else 22), from ``llmrig_ssh_allowed_cidrs``, or
  when that is empty from ``llmrig_allowed_client_cidrs`` plus the session's own address, so the
  operator is never locked out; a list that misses the session, or no session and no list, is
  refused (preflight refuses both first: :mod:`bench.rig.rules.firewall`);
- the active engine (``inference_engine``) on its own port, when its bind address is off
  loopback, from ``llmrig_allowed_client_cidrs``;
- Open WebUI on ``open_webui_port``, when ``open_webui_enabled`` and its bind address is off
  loopback, from the same networks;
- the API proxy on ``reverse_proxy_port``, when ``reverse_proxy_enabled`` and its bind address is
  off loopback, from the same networks (the engine behind it listens on loopback, so its own port
  gets no rule); behind a gateway (``connection["gateway_sources"]``, the addresses of the hosts of
  the inventory group ``llmrig_gateway``), from those addresses only, so clients reach the boxes
  through the gateway alone;
- on a gateway host (``connection["gateway"]``), the gateway's front on ``gateway_front_port``,
  served by the same proxy, from the client networks;
- Prometheus on ``monitoring_prometheus_port``, when ``monitoring_enabled`` and its bind address is
  off loopback, from the same networks (preflight refuses it off loopback with the firewall off);
- the HTTPS site in front of Open WebUI on ``tls_https_port`` and its redirect on ``tls_http_port``,
  when ``tls_enabled`` and ``open_webui_enabled``, from the same networks (Open WebUI then listens
  on loopback, so its own port gets no rule).

Either list may hold the word ``connected``: the networks the box's interfaces are on
(:mod:`bench.rig.networks`); IPv4 and IPv6 networks and sessions alike.

:func:`stale_rules` reads ``ufw show added`` and returns the llmrig rules no longer wanted (a
changed port, a network taken off the list, an engine switched away from); :func:`missing_rules`
returns the wanted rules it lacks, and :func:`ufw_settled` reads ``ufw status verbose`` for the
policies, logging level and state already in place, so that a run with nothing to change calls
ufw once per read instead of once per rule and setting.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Mapping, Sequence
from typing import Any

from bench.errors import ConfigError
from bench.rig.engines import ENGINES_BY_NAME
from bench.rig.networks import Session, contains, resolve, session
from bench.rig.tls import tls_on
from bench.rig.values import truthy

COMMENT = "llmrig"
SSH_DEFAULT_PORT = 22
CLIENTS = "llmrig_allowed_client_cidrs"
SSH = "llmrig_ssh_allowed_cidrs"
# One llmrig rule as `ufw show added` prints it (ufw 0.36, Ubuntu 24.04 and Debian 12).
ADDED = re.compile(
    r"^ufw allow from (?P<src>\S+) to any port (?P<port>\d+) proto tcp comment '(?P<comment>llmrig[^']*)'$"
)


def _network(value: Any, knob: str) -> str:
    """``value`` as a network in one spelling (a bare address is its /32 or /128)."""
    try:
        return str(ipaddress.ip_network(str(value).strip(), strict=False))
    except ValueError as exc:
        raise ConfigError(f"{knob}: {value!r} is not a CIDR such as 192.168.1.0/24") from exc


def _off_loopback(address: Any) -> bool:
    text = str(address).strip()
    if text == "localhost":
        return False
    try:
        return not ipaddress.ip_address(text).is_loopback
    except ValueError:
        return True  # a name: preflight refuses it, and the firewall must not assume loopback


def ssh_port(ansible_port: Any, ssh_connection: str) -> int:
    """The port this session reached sshd on (SSH_CONNECTION's server port, the port on the host
    itself even behind a port forward), else ``ansible_port``, else 22."""
    found = session(ssh_connection)
    if found is not None:
        return found.port
    if ansible_port not in (None, ""):
        return int(str(ansible_port))
    return SSH_DEFAULT_PORT


def controller_network(ssh_connection: str) -> str | None:
    """The controller's address as SSH_CONNECTION names it (a /32 or /128), or None without one."""
    found = session(ssh_connection)
    return found.network if found else None


def ssh_problem(ssh_sources: Sequence[str], found: Session | None) -> str | None:
    """Why SSH's networks (``llmrig_ssh_allowed_cidrs`` resolved) would cut this run's session
    off, or None: no session to read and no list, or a list without the session's address."""
    if found is None and not ssh_sources:
        return (
            f"{SSH}: is empty and this run's SSH session cannot be read (a local run, or sshd in inetd mode); "
            "list the networks SSH may come from, so the firewall cannot shut SSH out"
        )
    if found is not None and ssh_sources and not contains(ssh_sources, found.address):
        return (
            f"{SSH}: does not contain {found.address}, the address this run's SSH session comes from, "
            "so the firewall would cut it off; add it or its network"
        )
    return None


def _rule(name: str, src: str, port: Any) -> dict[str, Any]:
    return {"name": name, "src": src, "port": int(str(port)), "proto": "tcp", "comment": f"{COMMENT} {name}"}


def firewall_rules(knobs: Mapping[str, Any], connection: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Every rule the firewall role allows, SSH first; ``connection`` holds ``ansible_port``,
    ``ssh_connection`` (SSH_CONNECTION as the login user sees it, '' without one),
    ``networks`` (the box's own, for the word ``connected``), and behind a gateway ``gateway``
    (whether this host is one) and ``gateway_sources`` (the gateway hosts' addresses)."""
    connected = [str(network) for network in connection.get("networks") or []]
    clients = resolve(knobs.get(CLIENTS), CLIENTS, connected)
    wanted = resolve(knobs.get(SSH) or [], SSH, connected)
    ssh_connection = str(connection.get("ssh_connection") or "")
    found = session(ssh_connection)
    problem = ssh_problem(wanted, found)
    if problem is not None:
        raise ConfigError(problem)
    ssh_sources = wanted or list(dict.fromkeys([*clients, *([found.network] if found else [])]))
    port = ssh_port(connection.get("ansible_port"), ssh_connection)
    rules = [_rule("ssh", src, port) for src in ssh_sources]
    engine = ENGINES_BY_NAME.get(str(knobs.get("inference_engine")))
    if engine is None:
        raise ConfigError(f"inference_engine: {knobs.get('inference_engine')!r} is not an engine")
    services: list[tuple[str, str, str]] = [(engine.name, engine.host_knob, engine.port_knob)]
    if truthy(knobs.get("open_webui_enabled")):
        services.append(("open_webui", "open_webui_host", "open_webui_port"))
    if truthy(knobs.get("reverse_proxy_enabled")):  # the engine then listens on loopback (preflight)
        services.append(("reverse_proxy", "reverse_proxy_host", "reverse_proxy_port"))
    if truthy(knobs.get("monitoring_enabled")):
        services.append(("prometheus", "monitoring_prometheus_host", "monitoring_prometheus_port"))
    gateways = [_network(source, "llmrig_gateway") for source in connection.get("gateway_sources") or []]
    for name, host_knob, port_knob in services:
        if _off_loopback(knobs.get(host_knob)):
            sources = gateways if name == "reverse_proxy" and gateways else clients
            rules += [_rule(name, src, knobs.get(port_knob)) for src in sources]
    proxied = truthy(knobs.get("reverse_proxy_enabled")) and _off_loopback(knobs.get("reverse_proxy_host"))
    if truthy(connection.get("gateway")) and proxied:  # the front is a site of the same proxy
        rules += [_rule("gateway", src, knobs.get("gateway_front_port")) for src in clients]
    if tls_on(knobs):  # Caddy on every interface; Open WebUI behind it on loopback (preflight)
        for name, port_knob in (("https", "tls_https_port"), ("http", "tls_http_port")):
            rules += [_rule(name, src, knobs.get(port_knob)) for src in clients]
    return rules


def _added(show_added: str) -> list[re.Match[str]]:
    """The llmrig rules of ``show_added`` (the output of ``ufw show added``), as ufw spelled them."""
    return [found for line in show_added.splitlines() if (found := ADDED.match(line.strip()))]


def stale_rules(show_added: str, wanted: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The llmrig rules in ``show_added`` (the output of ``ufw show added``) that ``wanted`` lacks,
    spelled as ufw printed them, so that deleting them matches."""
    keep = {(_network(rule["src"], "src"), int(rule["port"])) for rule in wanted}
    return [
        {"src": found["src"], "port": int(found["port"]), "proto": "tcp", "comment": found["comment"]}
        for found in _added(show_added)
        if (_network(found["src"], "src"), int(found["port"])) not in keep
    ]


def missing_rules(show_added: str, wanted: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The rules of ``wanted`` that ``show_added`` (the output of ``ufw show added``) does not hold
    with the same network, port and comment, in ``wanted``'s order (SSH first)."""
    held = {(_network(found["src"], "src"), int(found["port"]), found["comment"]) for found in _added(show_added)}
    return [
        dict(rule) for rule in wanted if (_network(rule["src"], "src"), int(rule["port"]), rule["comment"]) not in held
    ]


def ufw_settled(status_verbose: str, logging: str) -> dict[str, bool]:
    """What ``ufw status verbose`` shows already in place: ``active``, ``incoming`` (default deny),
    ``outgoing`` (default allow) and ``logging`` (at the level ``firewall_ufw_logging`` asks for).
    An inactive ufw prints no policies, so those read as not settled and the role sets them."""
    fields = (line.partition(":") for line in status_verbose.splitlines())
    lines = {key.strip(): value.strip() for key, _, value in fields}
    default = lines.get("Default", "")
    level = lines.get("Logging", "")
    return {
        "active": lines.get("Status") == "active",
        "incoming": "deny (incoming)" in default,
        "outgoing": "allow (outgoing)" in default,
        "logging": level == "off" if logging == "off" else level == f"on ({logging})",
    }
