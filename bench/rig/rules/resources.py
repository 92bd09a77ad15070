"""Rules on what the configuration will use on the host: the paths its knobs name and the port
the engine binds, checked against the ``paths`` and ``listeners`` that preflight's
``llmrig_host_facts`` module reports in the host facts (both absent: nothing to check)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from bench.rig.engines import ENGINES, ENGINES_BY_NAME
from bench.rig.presets import Preset
from bench.rig.problems import Problem
from bench.rig.rules.knobs import Host, Knobs, as_bool, as_int, as_str, err

# The API proxy's unit (roles/reverse_proxy/vars/main.yml, _reverse_proxy_unit).
PROXY_UNIT = "llmrig-proxy.service"

# Knob -> (what it must be, whether it must exist already or is created by a role, the engine
# it belongs to: checked only when that engine is the active one; None = always): the shared
# ones here, each engine's from its row of the table. roles/preflight/tasks/facts.yml probes
# exactly these (a test keeps the two in step).
PATH_KNOBS: Mapping[str, tuple[str, str, str | None]] = {
    "llmrig_models_dir": ("dir", "create", None),
    "llmrig_config_dir": ("dir", "create", None),
    "open_webui_data_dir": ("dir", "create", None),
    **{knob: (kind, need, engine.name) for engine in ENGINES for knob, (kind, need) in engine.path_knobs.items()},
}
_NAMES = {"dir": "a directory", "file": "a file", "executable": "an executable file"}
WILDCARDS = ("0.0.0.0", "::", "")


def _path_problem(name: str, kind: str, need: str, probe: Mapping[str, Any]) -> str:
    """What is wrong with one probed path ('' when nothing is)."""
    found = str(probe.get("kind", "missing"))
    if need == "exist":
        if found == "missing":
            return f"{probe['path']} does not exist on the host"
        if (kind == "dir") != (found == "dir") or found == "other":
            return f"{probe['path']} is not {_NAMES[kind]}"
        if kind == "executable" and not probe.get("executable"):
            return f"{probe['path']} is not executable; chmod +x it or set another"
        return ""
    if found not in ("dir", "missing"):
        return f"{probe['path']} exists but is not a directory"
    if found == "missing" and not probe.get("parent_writable"):
        parent = probe.get("parent") or "/"
        what = "is not a directory" if probe.get("parent_kind") != "dir" else "is not writable"
        return f"{probe['path']} cannot be created: {parent} {what}"
    return ""


def rule_paths(knobs: Knobs, host: Host, device: str, preset: Preset) -> list[Problem]:
    """Every path knob is absolute; one that must exist exists and is of the right kind, one that
    a role creates is a directory or can be created."""
    problems: list[Problem] = []
    engine = as_str(knobs, "inference_engine")
    probes = host.get("paths") or {}
    for name, (kind, need, owner) in PATH_KNOBS.items():
        value = as_str(knobs, name)
        if owner not in (None, engine) or (name == "open_webui_data_dir" and not as_bool(knobs, "open_webui_enabled")):
            continue
        if not value:
            if need == "create":
                problems += err(name, "is empty; set an absolute directory on the host")
            continue
        if not value.startswith("/"):
            problems += err(name, f"{value!r} must be an absolute path on the host")
            continue
        if name in probes and (message := _path_problem(name, kind, need, probes[name])):
            problems += err(name, message)
    return problems


def _overlaps(bind: str, listening: str) -> bool:
    return bind in WILDCARDS or listening in WILDCARDS or bind == listening


def port_holder(host: Host, port: int | None, bind: str, ours: frozenset[str] | set[str]) -> str:
    """Who holds ``port`` on ``bind`` among the host's listeners, other than the units ``ours``
    ('' when nobody does): the process, its pid and unit, or that preflight cannot see it."""
    for listener in host.get("listeners") or []:
        if listener.get("port") != port or not _overlaps(bind, str(listener.get("address", ""))):
            continue
        if listener.get("unit") in ours:
            continue
        holder = (
            f"{listener.get('process') or 'a process'} (pid {listener['pid']}"
            f"{', unit ' + str(listener['unit']) if listener.get('unit') else ''})"
            if listener.get("pid")
            else "a process preflight cannot see (run it as root)"
        )
        return f"{port} is already taken on {listener.get('address')} by {holder}; stop it or choose a free port"
    return ""


def rule_port_free(knobs: Knobs, host: Host, device: str, preset: Preset) -> list[Problem]:
    """The active engine's port is free on its address, or held by an llmrig engine unit (the
    engine role stops the others before it starts this one, and restarts itself); with
    reverse_proxy_enabled, the proxy's port too, or held by the proxy's own unit."""
    engine = ENGINES_BY_NAME.get(as_str(knobs, "inference_engine"))
    if engine is None:
        return []
    port, bind = as_int(knobs, engine.port_knob), as_str(knobs, engine.host_knob)
    holder = port_holder(host, port, bind, {spec.unit for spec in ENGINES})
    problems = err(engine.port_knob, holder) if holder else []
    if as_bool(knobs, "reverse_proxy_enabled"):  # the API proxy's port, or its own unit's (a re-run)
        port, bind = as_int(knobs, "reverse_proxy_port"), as_str(knobs, "reverse_proxy_host")
        holder = port_holder(host, port, bind, {PROXY_UNIT})
        problems += err("reverse_proxy_port", holder) if holder else []
    return problems
