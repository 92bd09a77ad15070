"""The cross-field rules, one function each, collected in :data:`RULES`.

Each rule reads the rendered knobs (``group_vars/all`` after overrides), the host facts from
the ``llmrig_host_facts`` module, the resolved device (``cuda`` or ``cpu``) and the preset, and
returns the problems it finds (the backup rule also looks at the password file: preflight runs
the rules in a filter, on the controller). Types and choices are the argument specs' job; these rules cover
what a single variable's type cannot say.

One module per concern: :mod:`~bench.rig.rules.engine` (the engine's knobs against the preset),
:mod:`~bench.rig.rules.host` (the OS, GPUs, disk, RAM and the KV plan),
:mod:`~bench.rig.rules.driver` (the NVIDIA driver's branch floor, GPU count, compute capability
and module options),
:mod:`~bench.rig.rules.network` (ports, bind addresses, the firewall),
:mod:`~bench.rig.rules.firewall` (the SSH networks against this run's session),
:mod:`~bench.rig.rules.proxy` (vLLM on loopback, the authenticating proxy),
:mod:`~bench.rig.rules.tls` (HTTPS in front of Open WebUI),
:mod:`~bench.rig.rules.secrets` (each secret knob's length and alphabet),
:mod:`~bench.rig.rules.sources` (pinned versions, index and download URLs),
:mod:`~bench.rig.rules.combinations` (knobs that only make sense together),
:mod:`~bench.rig.rules.resources` (the paths and the port on the host),
:mod:`~bench.rig.rules.addresses` (the bind addresses on the host),
:mod:`~bench.rig.rules.open_webui` (Open WebUI's knobs and port),
:mod:`~bench.rig.rules.monitoring` (Prometheus' receivers, retention, port and address),
:mod:`~bench.rig.rules.grafana` (Grafana's address and port),
:mod:`~bench.rig.rules.backup` (the restic repository, its password, retention and schedules),
:mod:`~bench.rig.rules.gateway` (the gateway's ports),
all reading their inputs through :mod:`~bench.rig.rules.knobs`.
"""

from __future__ import annotations

from bench.rig.rules.addresses import rule_bind_addresses
from bench.rig.rules.backup import rule_backup
from bench.rig.rules.combinations import rule_visible_devices, rule_vllm_only_settings, rule_watchdog_timing
from bench.rig.rules.driver import (
    rule_driver_branch,
    rule_driver_compute_capability,
    rule_driver_gpu_count,
    rule_driver_module_params,
)
from bench.rig.rules.engine import (
    rule_batching,
    rule_context,
    rule_engine_serves_preset,
    rule_extra_args,
    rule_moe_symmetric,
    rule_mtp,
    rule_parsers,
    rule_pinned_revision,
    rule_quantization,
)
from bench.rig.rules.firewall import rule_firewall_plan, rule_ssh_session
from bench.rig.rules.gateway import rule_gateway_ports
from bench.rig.rules.grafana import rule_grafana
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
from bench.rig.rules.monitoring import rule_monitoring
from bench.rig.rules.network import rule_exposure, rule_firewall, rule_network, rule_ports
from bench.rig.rules.open_webui import rule_open_webui, rule_open_webui_port_free
from bench.rig.rules.proxy import rule_reverse_proxy, rule_vllm_loopback
from bench.rig.rules.resources import rule_paths, rule_port_free
from bench.rig.rules.secrets import rule_secrets
from bench.rig.rules.sources import rule_pinned_versions, rule_sources
from bench.rig.rules.tls import rule_tls

__all__ = ["RULES", "Rule", "disk_problem", "gpus"]

RULES: tuple[Rule, ...] = (
    rule_host_os,
    rule_engine_serves_preset,
    rule_parallelism,
    rule_parsers,
    rule_quantization,
    rule_moe_symmetric,
    rule_batching,
    rule_mtp,
    rule_context,
    rule_disk,
    rule_paths,
    rule_ports,
    rule_port_free,
    rule_bind_addresses,
    rule_open_webui,
    rule_open_webui_port_free,
    rule_kv_cache_dtype,
    rule_device_flags,
    rule_cpu_memory,
    rule_network,
    rule_vllm_loopback,
    rule_reverse_proxy,
    rule_monitoring,
    rule_tls,
    rule_firewall,
    rule_ssh_session,
    rule_exposure,
    rule_firewall_plan,
    rule_extra_args,
    rule_secrets,
    rule_pinned_revision,
    rule_driver_branch,
    rule_driver_gpu_count,
    rule_driver_compute_capability,
    rule_driver_module_params,
    rule_pinned_versions,
    rule_sources,
    rule_visible_devices,
    rule_watchdog_timing,
    rule_vllm_only_settings,
    rule_grafana,
    rule_backup,
    rule_gateway_ports,
    rule_kv_plan,  # last: it runs only when no other rule found an error
)
