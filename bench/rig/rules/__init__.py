"""The cross-field rules, one function each, collected in :data:`RULES`.

Each rule reads the rendered knobs (``group_vars/all`` after overrides), the host facts from
the ``llmrig_host_facts`` module, the resolved device (``cuda`` or ``cpu``) and the preset, and
returns the problems it finds. Types and choices are the argument specs' job; these rules cover
what a single variable's type cannot say.

One module per concern: :mod:`~bench.rig.rules.engine` (the engine's knobs against the preset),
:mod:`~bench.rig.rules.host` (the OS, GPUs, disk, RAM and the KV plan),
:mod:`~bench.rig.rules.driver` (the NVIDIA driver's branch floor and GPU count),
:mod:`~bench.rig.rules.network` (ports, bind addresses, the firewall, secrets),
:mod:`~bench.rig.rules.proxy` (vLLM on loopback, the authenticating proxy) and
:mod:`~bench.rig.rules.resources` (the paths and the port on the host), all reading their inputs
through :mod:`~bench.rig.rules.knobs`.
"""

from __future__ import annotations

from bench.rig.rules.driver import rule_driver_branch, rule_driver_gpu_count
from bench.rig.rules.engine import (
    rule_batching,
    rule_context,
    rule_engine_serves_preset,
    rule_extra_args,
    rule_mtp,
    rule_parsers,
    rule_pinned_revision,
    rule_quantization,
)
from bench.rig.rules.host import (
    disk_problem,
    rule_cpu_memory,
    rule_device_flags,
    rule_disk,
    rule_host_os,
    rule_kv_cache_dtype,
    rule_kv_plan,
    rule_parallelism,
)
from bench.rig.rules.knobs import Rule, gpus
from bench.rig.rules.network import rule_exposure, rule_firewall, rule_network, rule_ports, rule_secrets
from bench.rig.rules.proxy import rule_reverse_proxy, rule_vllm_loopback
from bench.rig.rules.resources import rule_paths, rule_port_free

__all__ = ["RULES", "Rule", "disk_problem", "gpus"]

RULES: tuple[Rule, ...] = (
    rule_host_os,
    rule_engine_serves_preset,
    rule_parallelism,
    rule_parsers,
    rule_quantization,
    rule_batching,
    rule_mtp,
    rule_context,
    rule_disk,
    rule_paths,
    rule_ports,
    rule_port_free,
    rule_kv_cache_dtype,
    rule_device_flags,
    rule_cpu_memory,
    rule_network,
    rule_vllm_loopback,
    rule_reverse_proxy,
    rule_firewall,
    rule_exposure,
    rule_extra_args,
    rule_secrets,
    rule_pinned_revision,
    rule_driver_branch,
    rule_driver_gpu_count,
    rule_kv_plan,  # last: it runs only when no other rule found an error
)
