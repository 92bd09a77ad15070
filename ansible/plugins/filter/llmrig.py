"""Ansible filters that run llmrig's configuration rules from the rig core (``bench.rig``).

One implementation serves both sides: the ``preflight`` role calls these filters on the
controller, and the tests and ``bench`` call the same functions directly. When the llmrig
package is not installed into the controller's Python, the repository root is put on the path.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import sys
from pathlib import Path
from typing import Any

if importlib.util.find_spec("bench") is None:  # running from a checkout without `pip install -e .`
    sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from bench.rig import (
    artifacts,
    checkpoint,
    credentials,
    deployment,
    engines,
    firewall,
    group,
    inputs,
    networks,
    nvidia,
    open_webui,
    ready,
    rules,
    sandbox,
    specs,
    startup,
    validation,
    values,
    vllm_flags,
)


def llmrig_resolve(knobs: dict[str, Any], host: dict[str, Any]) -> dict[str, Any]:
    """Phase 1: resolve ``vllm_device`` and ``model``; return device, model, preset and errors."""
    resolution = validation.resolve(knobs, host)
    preset = {}
    if resolution.preset is not None:
        preset = dict(knobs["model_presets"][resolution.model])
    return {
        "device": resolution.device,
        "model": resolution.model,
        "preset": preset,
        "errors": [problem.render() for problem in resolution.problems],
    }


def _firewall(problem: Any) -> bool:
    return str(problem.message).startswith("Firewall: ")


def llmrig_check(knobs: dict[str, Any], host: dict[str, Any]) -> dict[str, list[str]]:
    """Phase 2: run every cross-field rule; return rendered errors and warnings."""
    problems = validation.check(knobs, host, validation.resolve(knobs, host))
    return {
        "errors": [problem.render() for problem in problems if problem.severity == "error"],
        "warnings": [problem.render() for problem in problems if problem.severity == "warning"],
        "notes": [problem.message for problem in problems if problem.severity == "info" and not _firewall(problem)],
        "firewall": [problem.message for problem in problems if problem.severity == "info" and _firewall(problem)],
    }


def llmrig_group_problems(
    facts: dict[str, Any], gateways: list[str], engine_boxes: list[str], backends: list[str]
) -> list[str]:
    """The findings on the engine boxes behind a gateway, box first (bench.rig.group.group_problems)."""
    return group.group_problems(facts, list(gateways), list(engine_boxes), list(backends or []))


def llmrig_gateway_sources(addresses: dict[str, str]) -> list[str]:
    """The gateway hosts' addresses for the engine boxes' firewalls (bench.rig.group.gateway_sources)."""
    return group.gateway_sources(addresses)


def llmrig_artifacts_path(value: str, repo_root: str) -> str:
    """Where ``llmrig_artifacts_dir`` lies on the controller (bench.rig.artifacts.artifacts_dir)."""
    return str(artifacts.artifacts_dir(Path(repo_root), value))


def llmrig_engine_units(scope: str) -> dict[str, str]:
    """Engine name to systemd unit from bench's engine table (bench.rig.engines): ``'all' |
    llmrig_engine_units`` for every engine, an engine's name for that one alone."""
    return engines.engine_units(str(scope))


def llmrig_deployment(parts: dict[str, Any]) -> dict[str, Any]:
    """The deployment.json the engine role writes: ``parts`` (all but schema_version) through the
    typed record (bench.rig.deployment.record); a part that does not fit fails the task, named."""
    return deployment.record(parts)


def llmrig_deployment_read(document: Any, where: str = "deployment.json") -> dict[str, Any]:
    """deployment.json read back (verify, Open WebUI) through the typed record, as the current version."""
    return deployment.DEPLOYMENT_FILE.to_document(deployment.parse_deployment(document, str(where)))


def llmrig_engine_knobs(scope: str, kind: str) -> list[str]:
    """Knob names from bench's engine table (bench.rig.engines.engine_knobs): ``'all' |
    llmrig_engine_knobs('endpoint')`` for every engine's host and port knobs, an engine's name for
    its own; kinds endpoint, context, extra_args, paths, gpus and tools."""
    return engines.engine_knobs(str(scope), str(kind))


def llmrig_engine_authenticates(engine: str) -> bool:
    """Whether the engine requires the API key itself (bench's engine table; Ollama does not)."""
    return engines.engine_named(str(engine)).api_key


def llmrig_engine_has_metrics(engine: str) -> bool:
    """Whether the engine serves Prometheus /metrics (bench's engine table; Ollama does not)."""
    return engines.engine_named(str(engine)).metrics is not None


def llmrig_native_tools(engine: str, knobs: dict[str, Any], preset_tool_parser: str) -> bool:
    """Whether the engine takes OpenAI ``tools`` (bench.rig.open_webui.native_tools)."""
    return open_webui.native_tools(engines.engine_named(str(engine)), knobs, str(preset_tool_parser or ""))


@functools.lru_cache(maxsize=4)
def _role_specs(roles: tuple[str, ...], roles_dir: str) -> dict[str, dict[str, Any]]:
    """The parsed argument specs of ``roles``, read once per templating process (the knob spec and
    the role variables are rendered in the same task)."""
    return specs.load_specs(Path(roles_dir), list(roles))


def llmrig_knob_spec(roles: list[str], roles_dir: str) -> dict[str, dict[str, Any]]:
    """Every knob's option spec, merged from the argument specs of ``roles`` under ``roles_dir``
    (bench.rig.specs.knob_spec); a knob that two roles specify is an error."""
    return specs.knob_spec(_role_specs(tuple(str(role) for role in roles), str(roles_dir)))


def llmrig_dial_host(address: str, instead: str = "127.0.0.1") -> str:
    """The address to dial for a server bound to ``address``: ``instead`` (loopback by default)
    for 0.0.0.0 and ::, else ``address`` (bench.rig.values.dial_host, as bench resolves it)."""
    return values.dial_host(str(address), str(instead))


def llmrig_ip_allow(bind: Any, client_cidrs: Any, *dialled: Any, connected: list[str] | None = None) -> list[str]:
    """IPAddressAllow= entries of a unit (bench.rig.sandbox.ip_address_allow): loopback, the client
    networks when ``bind`` is off loopback (``connected``: the host's networks, llmrig_host.networks),
    each dialled address that is not loopback."""
    return sandbox.ip_address_allow(bind, client_cidrs, dialled, connected)


def llmrig_disk_errors(disk: dict[str, Any], weights_gb: float, headroom_gib: int, name: str) -> list[str]:
    """Preflight's disk rule (bench.rig.rules.disk_problem) for the roles: rendered errors, [] when it fits."""
    problem = rules.disk_problem(disk, float(weights_gb), int(headroom_gib), name)
    return [problem.render()] if problem and problem.severity == "error" else []


def llmrig_vllm_args(knobs: dict[str, Any], device: str, model_path: str, chat_template_path: str) -> list[str]:
    """The ``vllm serve`` argument list for the resolved knobs (see bench.rig.vllm_flags)."""
    return vllm_flags.serve_args(knobs, device=device, model_path=model_path, chat_template_path=chat_template_path)


def llmrig_vllm_env(
    knobs: dict[str, Any], device: str, args: list[str], cache_dir: str, api_key: str
) -> dict[str, str]:
    """The vLLM unit's environment (see bench.rig.vllm_flags.service_env)."""
    return vllm_flags.service_env(knobs, device=device, args=args, cache_dir=cache_dir, api_key=api_key)


def llmrig_public_env(env: dict[str, str]) -> dict[str, Any]:
    """The non-secret part of a service environment, for deployment.json (see bench.rig.vllm_flags.public_env)."""
    return vllm_flags.public_env(env)


def llmrig_env_file(env: dict[str, str]) -> str:
    """``KEY="value"`` lines for a systemd EnvironmentFile."""
    return vllm_flags.env_file(env)


def llmrig_pip_config(no_index: bool, index_url: str, extra_index_urls: list[str], find_links: list[str]) -> str:
    """The llmrig_pip_* options as a pip configuration file (credentials stay off pip's argv)."""
    return credentials.pip_config(values.truthy(no_index), index_url, extra_index_urls, find_links)


def llmrig_url_parts(url: str) -> dict[str, str]:
    """A URL without its credentials, and its user name and password, for get_url's own options."""
    return credentials.url_parts(url)


def llmrig_redact_url(url: str) -> str:
    """A URL with its credentials replaced by ***, as deployment.json and messages show it."""
    return credentials.redact_url(url)


def llmrig_open_webui_env(
    knobs: dict[str, Any],
    engine: dict[str, Any],
    secrets: dict[str, str],
    dirs: dict[str, str],
    model: dict[str, Any],
    *,
    host: dict[str, Any] | None = None,
) -> dict[str, str]:
    """Open WebUI's unit environment (see bench.rig.open_webui.service_env). ``engine`` holds the
    engine's local_base_url (its OpenAI base URL on this host, as deployment.json records it),
    api_key and served_model_name; ``secrets`` secret_key and admin_password; ``dirs`` data,
    static and embedding_model; ``model`` stop (the preset's stop strings) and native_tools
    (whether the running engine accepts OpenAI ``tools``: llmrig_native_tools); ``host`` names
    and addresses (the host's names and IP addresses, for CORS_ALLOW_ORIGIN)."""
    where = host or {}
    connection = open_webui.Connection(
        base_url=str(engine["local_base_url"]),
        api_key=str(engine["api_key"]),
        served_model_name=str(engine["served_model_name"]),
    )
    return open_webui.service_env(
        knobs,
        connection,
        open_webui.Secrets(secret_key=str(secrets["secret_key"]), admin_password=str(secrets["admin_password"])),
        data_dir=str(dirs["data"]),
        static_dir=str(dirs["static"]),
        embedding_model_dir=str(dirs["embedding_model"]),
        stop=[str(item) for item in model["stop"]],
        native_tools=values.truthy(model["native_tools"]),
        host=open_webui.Host(
            names=tuple(str(name) for name in where.get("names") or () if name),
            addresses=tuple(str(address) for address in where.get("addresses") or () if address),
        ),
    )


def llmrig_mtp_refusal(summary: dict[str, Any]) -> str:
    """The line that refuses vllm_mtp for a checkpoint the llmrig_checkpoint module read ('' = keep going)."""
    return checkpoint.mtp_refusal(
        checkpoint.Summary(
            read=[str(path) for path in summary["read"]],
            tensors=int(summary["tensors"]),
            mtp_tensors=int(summary["mtp_tensors"]),
            problem=str(summary["problem"]),
        )
    )


def llmrig_vllm_startup_facts(journal: str) -> dict[str, Any]:
    """Start-up facts (KV pool, backend, kernel, load time) parsed from vLLM's journal."""
    return startup.parse_vllm_log(journal)


def llmrig_engine_ready(parts: dict[str, Any]) -> dict[str, Any]:
    """deployment.json's start-up figures (unit start to first answer) from what the engine role gathered."""
    return ready.ready_facts(parts)


def _where(value: Any) -> str:
    """Where Ansible says ``value`` was set (a file and line, or the -e option), from the origin
    tags of ansible-core 2.19's data tagging; '' when it does not say or the API is not there."""
    try:
        from ansible._internal._datatag._tags import Origin  # noqa: PLC0415 (ansible-core's own data tags)
    except ImportError:
        return ""
    tag = Origin.get_tag(value)
    if tag is None:
        return ""
    if tag.path:
        path = os.path.relpath(tag.path) if tag.path.startswith(os.getcwd() + os.sep) else tag.path
        return f"{path} line {tag.line_num}" if tag.line_num else path
    return "extra vars (-e)" if tag.description and "'-e'" in tag.description else str(tag.description or "")


def llmrig_role_variables(roles: list[str], roles_dir: str) -> dict[str, dict[str, Any]]:
    """The defaulted variables of ``roles`` under ``roles_dir`` with their options
    (bench.rig.specs.role_variable_options)."""
    return specs.role_variable_options(_role_specs(tuple(str(role) for role in roles), str(roles_dir)))


def llmrig_knob_candidates(names: list[str]) -> list[str]:
    """The variable names meant as knobs: ``model`` and those with a knob prefix (bench.rig.inputs)."""
    return inputs.candidates(str(name) for name in names)


def llmrig_check_input(
    spec: dict[str, dict[str, Any]],
    given: dict[str, Any],
    argument_errors: list[str],
    role_variables: dict[str, dict[str, Any]],
) -> list[str]:
    """Unknown knob names, argument-spec errors (one line each) and values out of range, rendered
    with where each was set (bench.rig.inputs.check_input)."""
    where = {name: _where(value) for name, value in given.items()}
    errors = [str(line) for line in argument_errors]
    own = {str(name): dict(option) for name, option in role_variables.items()}
    problems = inputs.check_input(spec, given, errors, where, own)
    return [problem.render() for problem in problems]


def llmrig_firewall_rules(knobs: dict[str, Any], connection: dict[str, Any]) -> list[dict[str, Any]]:
    """The rules the firewall role allows, SSH first (bench.rig.firewall.firewall_rules)."""
    return firewall.firewall_rules(knobs, connection)


def llmrig_connected_networks(facts: dict[str, Any]) -> list[str]:
    """The networks of the box's interfaces from Ansible's network facts, loopback and link-local
    left out (bench.rig.networks.connected_networks): what ``connected`` stands for."""
    return networks.connected_networks(facts)


def llmrig_firewall_stale(show_added: str, wanted: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The llmrig rules of ``ufw show added`` that ``wanted`` lacks (bench.rig.firewall.stale_rules)."""
    return firewall.stale_rules(str(show_added), wanted)


def llmrig_firewall_missing(show_added: str, wanted: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The wanted rules that ``ufw show added`` lacks (bench.rig.firewall.missing_rules)."""
    return firewall.missing_rules(str(show_added), wanted)


def llmrig_ufw_settled(status_verbose: str, logging: str) -> dict[str, bool]:
    """The ufw state already in place (bench.rig.firewall.ufw_settled)."""
    return firewall.ufw_settled(str(status_verbose), str(logging))


def llmrig_nvidia_hardware(host: dict[str, Any]) -> dict[str, Any]:
    """Preflight's decision for the nvidia_driver role from the host facts (bench.rig.nvidia.hardware_decision)."""
    decision = nvidia.hardware_decision(list(host.get("gpus") or []), str(host.get("gpu_source", "")))
    return {"manage": decision.manage, "gpu_count": decision.gpu_count, "line": decision.line}


def llmrig_nvidia_state(probes: dict[str, Any], expected: dict[str, Any]) -> dict[str, Any]:
    """The driver's state from the nvidia_driver role's raw probes, with the checks' errors and
    the reboot decision once something changed (bench.rig.nvidia)."""
    state = nvidia.driver_state(
        str(probes.get("proc_version", "")),
        str(probes.get("modinfo", "")),
        str(probes.get("smi", "")),
        int(probes.get("smi_rc", 127)),
        str(probes.get("lspci", "")),
    )
    problems = nvidia.driver_problems(
        state, int(expected["branch"]), int(expected["gpu_count"]), str(expected["compute_capability"])
    )
    reboot = nvidia.reboot_decision(
        True,
        state,
        values.truthy(expected["reboot_allowed"]),
        str(expected["connection"]),
        values.truthy(expected["no_kernel"]),
    )
    return {
        "errors": [problem.render() for problem in problems],
        "reboot_pending": state.reboot_pending,
        "reboot_would_help": state.loaded is None or state.reboot_pending,
        "pending_line": nvidia.pending_line(state),
        "summary": nvidia.summary(state),
        "reboot": {"action": reboot.action, "message": reboot.message},
    }


class FilterModule:
    """llmrig configuration filters."""

    def filters(self) -> dict[str, Any]:
        return {
            "llmrig_resolve": llmrig_resolve,
            "llmrig_artifacts_path": llmrig_artifacts_path,
            "llmrig_check": llmrig_check,
            "llmrig_group_problems": llmrig_group_problems,
            "llmrig_gateway_sources": llmrig_gateway_sources,
            "llmrig_check_input": llmrig_check_input,
            "llmrig_knob_candidates": llmrig_knob_candidates,
            "llmrig_role_variables": llmrig_role_variables,
            "llmrig_dial_host": llmrig_dial_host,
            "llmrig_ip_allow": llmrig_ip_allow,
            "llmrig_disk_errors": llmrig_disk_errors,
            "llmrig_engine_units": llmrig_engine_units,
            "llmrig_deployment": llmrig_deployment,
            "llmrig_deployment_read": llmrig_deployment_read,
            "llmrig_engine_knobs": llmrig_engine_knobs,
            "llmrig_engine_authenticates": llmrig_engine_authenticates,
            "llmrig_engine_has_metrics": llmrig_engine_has_metrics,
            "llmrig_native_tools": llmrig_native_tools,
            "llmrig_firewall_rules": llmrig_firewall_rules,
            "llmrig_firewall_stale": llmrig_firewall_stale,
            "llmrig_connected_networks": llmrig_connected_networks,
            "llmrig_firewall_missing": llmrig_firewall_missing,
            "llmrig_ufw_settled": llmrig_ufw_settled,
            "llmrig_knob_spec": llmrig_knob_spec,
            "llmrig_nvidia_hardware": llmrig_nvidia_hardware,
            "llmrig_nvidia_state": llmrig_nvidia_state,
            "llmrig_vllm_args": llmrig_vllm_args,
            "llmrig_vllm_env": llmrig_vllm_env,
            "llmrig_env_file": llmrig_env_file,
            "llmrig_public_env": llmrig_public_env,
            "llmrig_vllm_startup_facts": llmrig_vllm_startup_facts,
            "llmrig_engine_ready": llmrig_engine_ready,
            "llmrig_mtp_refusal": llmrig_mtp_refusal,
            "llmrig_open_webui_env": llmrig_open_webui_env,
            "llmrig_pip_config": llmrig_pip_config,
            "llmrig_url_parts": llmrig_url_parts,
            "llmrig_redact_url": llmrig_redact_url,
        }
