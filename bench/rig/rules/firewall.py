"""Rules on what the firewall is built from: the SSH networks against this run's own session,
and the line that says which networks the firewall admits (``connected`` spelled out)."""

from __future__ import annotations

from bench.errors import ConfigError
from bench.rig.firewall import CLIENTS, SSH, ssh_problem
from bench.rig.networks import CONNECTED, list_problem, resolve, session
from bench.rig.presets import Preset
from bench.rig.problems import Problem
from bench.rig.rules.knobs import Host, Knobs, as_bool, err

# The host facts the preflight role adds for these rules: SSH_CONNECTION read without become,
# and the networks of the box's interfaces (bench.rig.networks.connected_networks).
SESSION_FACT = "ssh_connection"
NETWORKS_FACT = "networks"


def host_networks(host: Host) -> list[str]:
    """The networks the box's interfaces are on, as the preflight role read them."""
    return [str(network) for network in host.get(NETWORKS_FACT) or []]


def rule_ssh_session(knobs: Knobs, host: Host, device: str, preset: Preset) -> list[Problem]:
    """llmrig_ssh_allowed_cidrs is a list of CIDRs; with the firewall on, it contains this run's
    SSH session, and it is given when the session cannot be read."""
    problem = list_problem(knobs.get(SSH))
    if problem is not None:
        return err(SSH, problem)
    if not as_bool(knobs, "llmrig_firewall_enabled"):
        return []
    wanted = resolve(knobs.get(SSH), SSH, host_networks(host))
    refused = ssh_problem(wanted, session(host.get(SESSION_FACT)))
    return err(SSH, refused.split(": ", 1)[1]) if refused else []


def rule_firewall_plan(knobs: Knobs, host: Host, device: str, preset: Preset) -> list[Problem]:
    """One line for the report: the networks the firewall admits clients and SSH from."""
    if not as_bool(knobs, "llmrig_firewall_enabled"):
        return [Problem("llmrig_firewall_enabled", "Firewall: left alone (llmrig_firewall_enabled is false)", "info")]
    connected = host_networks(host)
    try:
        clients = resolve(knobs.get(CLIENTS), CLIENTS, connected)
        ssh = resolve(knobs.get(SSH), SSH, connected)
    except ConfigError:
        return []  # rule_network and rule_ssh_session name it
    found = session(host.get(SESSION_FACT))
    where = " (connected: the networks of this box's interfaces)" if CONNECTED in knobs.get(CLIENTS, []) else ""
    ssh_from = ", ".join(ssh) if ssh else ", ".join([*clients, *([f"{found.network} (this session)"] if found else [])])
    return [
        Problem(
            CLIENTS,
            f"Firewall: clients from {', '.join(clients) or 'no network'}{where}; SSH from {ssh_from}",
            "info",
        )
    ]
