"""The rig core: what the Ansible side and ``bench`` agree on about a configuration.

Model presets (:mod:`~bench.rig.presets`), the cross-field rules and their two phases
(:mod:`~bench.rig.rules`, :mod:`~bench.rig.validation`) with the one finding type of the rules
and the planner (:mod:`~bench.rig.problems`), the ``vllm serve`` command line
(:mod:`~bench.rig.vllm_flags`), vLLM's start-up facts (:mod:`~bench.rig.startup`), the unit's
start to its first answer (:mod:`~bench.rig.ready`), the KV
planner (:mod:`~bench.rig.plan`, its arithmetic :mod:`~bench.rig.plan_math`, its inputs
:mod:`~bench.rig.plan_inputs`), the artifacts rule (:mod:`~bench.rig.artifacts`), the engine
table (:mod:`~bench.rig.engines`: each engine's knobs, owned flags, paths, authentication and
metrics), the typed deployment.json record (:mod:`~bench.rig.deployment`, its open sections
:mod:`~bench.rig.open_json`, its host part :mod:`~bench.rig.host_record` and a gateway host's
part :mod:`~bench.rig.gateway_record`), the checks over the engine boxes behind a gateway
(:mod:`~bench.rig.group`), the one parser of a recorded command line (:mod:`~bench.rig.argv`),
the firewall's rules (:mod:`~bench.rig.firewall`), the literal
knobs of group_vars (:mod:`~bench.rig.group_vars`), the parsers of knob values
(:mod:`~bench.rig.values`) and the NVIDIA driver's probe parsers and decisions
(:mod:`~bench.rig.nvidia_probes`, :mod:`~bench.rig.nvidia`); the variable reference
``docs/variables.md`` is generated from the knob specification (:mod:`~bench.rig.specs`) by
:mod:`~bench.rig.variables_page`.
The filter plugin in ``ansible/plugins/filter``
imports these modules on the controller, so importing any of them stays cheap: the standard
library, PyYAML (which Ansible itself needs) and the shared ground (:mod:`bench.codec`,
:mod:`bench.documents`), nothing of the measuring harness or the CLI.

The names below are the core's public face for the measuring harness (:mod:`bench.measure`),
which imports them from ``bench.rig`` and never reaches into a module of this package. The
exception tree (:mod:`bench.errors`) is not here but at the top of the package: the core, the
harness and the CLI all raise and map the same classes, and it imports nothing.
"""

from bench.rig.argv import context_tokens, flag_value, has_flag, parse_flags
from bench.rig.artifacts import artifacts_dir
from bench.rig.deployment import (
    DEPLOYMENT_FILE,
    DEPLOYMENT_VERSION,
    Deployment,
    parse_deployment,
    read_deployment,
    recorded_deployment,
)
from bench.rig.engines import DEFAULT_ENGINE, ENGINE_NAMES, ENGINES, ENGINES_BY_NAME, Engine
from bench.rig.group_vars import literal_knobs
from bench.rig.values import dial_host

__all__ = [
    "DEFAULT_ENGINE",
    "DEPLOYMENT_FILE",
    "DEPLOYMENT_VERSION",
    "ENGINES",
    "ENGINES_BY_NAME",
    "ENGINE_NAMES",
    "Deployment",
    "Engine",
    "artifacts_dir",
    "context_tokens",
    "dial_host",
    "flag_value",
    "has_flag",
    "literal_knobs",
    "parse_deployment",
    "parse_flags",
    "read_deployment",
    "recorded_deployment",
]
