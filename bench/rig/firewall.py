"""The firewall's rules, from the knobs: what the firewall role allows, and which of its old rules go.

Every rule llmrig adds allows TCP to one port from one source network and carries a comment
that starts with ``llmrig`` (:data:`COMMENT`); the role never touches a rule without it. The
rules (:func:`firewall_rules`):

- SSH, on the port Ansible is connected through (the server port of the ``SSH_CONNECTION`` the
  task runs under, else ``ansible_port``, else 22), from ``llmrig_ssh_allowed_cidrs``, or when
  that is empty from ``llmrig_allowed_client_cidrs`` plus the controller's own address (the
  client address of ``SSH_CONNECTION``), so the operator is never locked out;
- the active engine (``inference_engine``) on its own port, when its bind address is off
  loopback, from ``llmrig_allowed_client_cidrs``;
- Open WebUI on ``open_webui_port``, when ``open_webui_enabled`` and its bind address is off
  loopback, from the same networks;
- the API proxy on ``reverse_proxy_port``, when ``reverse_proxy_enabled`` and its bind address is
  off loopback, from the same networks (the engine behind it listens on loopback, so its own port
  gets no rule).

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
from bench.rig.values import truthy

COMMENT = "llmrig"
SSH_DEFAULT_PORT = 22
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


def _networks(values: Any, knob: str) -> list[str]:
    if not isinstance(values, Sequence) or isinstance(values, str):
        raise ConfigError(f"{knob}: must be a list of CIDRs such as 192.168.1.0/24")
    return list(dict.fromkeys(_network(value, knob) for value in values))


def _session(ssh_connection: str) -> tuple[str, int] | None:
    """(client address, server port) from SSH_CONNECTION ("client port server port"), or None
    when it names no real socket (a local connection, or sshd in inetd mode prints UNKNOWN)."""
    fields = ssh_connection.split()
    if len(fields) != 4 or not (fields[1].isdigit() and fields[3].isdigit()):
        return None
    try:
        ipaddress.ip_address(fields[0])
        ipaddress.ip_address(fields[2])
    except ValueError:
        return None
    return fields[0], int(fields[3])


def ssh_port(ansible_port: Any, ssh_connection: str) -> int:
    """The port this session reached sshd on (SSH_CONNECTION's server port, the port on the host
    itself even behind a port forward), else ``ansible_port``, else 22."""
    session = _session(ssh_connection)
    if session is not None:
        return session[1]
    if ansible_port not in (None, ""):
        return int(str(ansible_port))
    return SSH_DEFAULT_PORT


def controller_network(ssh_connection: str) -> str | None:
    """The controller's address as SSH_CONNECTION names it (a /32 or /128), or None without one."""
    session = _session(ssh_connection)
    return str(ipaddress.ip_network(session[0])) if session else None


def _rule(name: str, src: str, port: Any) -> dict[str, Any]:
    return {"name": name, "src": src, "port": int(str(port)), "proto": "tcp", "comment": f"{COMMENT} {name}"}


def firewall_rules(knobs: Mapping[str, Any], connection: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Every rule the firewall role allows, SSH first; ``connection`` holds ``ansible_port`` and
    ``ssh_connection`` (the SSH_CONNECTION of the task's environment, '' for a local connection)."""
    clients = _networks(knobs.get("llmrig_allowed_client_cidrs"), "llmrig_allowed_client_cidrs")
    ssh_sources = _networks(knobs.get("llmrig_ssh_allowed_cidrs") or [], "llmrig_ssh_allowed_cidrs")
    session = str(connection.get("ssh_connection") or "")
    if not ssh_sources:
        controller = controller_network(session)
        ssh_sources = list(dict.fromkeys([*clients, *([controller] if controller else [])]))
    if not ssh_sources:
        raise ConfigError(
            "llmrig_ssh_allowed_cidrs: no network could reach SSH once incoming traffic is denied "
            "(llmrig_allowed_client_cidrs is empty and the connection names no controller address); list one"
        )
    port = ssh_port(connection.get("ansible_port"), session)
    rules = [_rule("ssh", src, port) for src in ssh_sources]
    engine = ENGINES_BY_NAME.get(str(knobs.get("inference_engine")))
    if engine is None:
        raise ConfigError(f"inference_engine: {knobs.get('inference_engine')!r} is not an engine")
    services: list[tuple[str, str, str]] = [(engine.name, engine.host_knob, engine.port_knob)]
    if truthy(knobs.get("open_webui_enabled")):
        services.append(("open_webui", "open_webui_host", "open_webui_port"))
    if truthy(knobs.get("reverse_proxy_enabled")):  # the engine then listens on loopback (preflight)
        services.append(("reverse_proxy", "reverse_proxy_host", "reverse_proxy_port"))
    for name, host_knob, port_knob in services:
        if _off_loopback(knobs.get(host_knob)):
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
