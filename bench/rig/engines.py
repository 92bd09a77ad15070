"""The engines llmrig can run, in one typed table that bench and the Ansible roles derive from.

``inference_engine`` names one of :data:`ENGINES`. The rules (:mod:`bench.rig.validation`,
:mod:`bench.rig.rules`) take the engine names and their host and port knobs from here, the
harness (:mod:`bench.measure.target`, :mod:`bench.measure.run.benchmark`) its endpoint knobs and metrics
families, and the engine role its units (the ``llmrig_engine_units`` filter). The default ports
equal ``group_vars/all/endpoint.yml`` (a test compares them); that file stays the place an
operator changes a port.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from bench.errors import ConfigError


@dataclass(frozen=True, slots=True)
class Engine:
    """One engine: its systemd unit, how to reach it, and what its server exposes."""

    name: str  # the value of inference_engine, and the prefix of its role's knobs
    unit: str  # the systemd unit the engine role starts and stops
    health_path: str  # answers once the engine serves (Ollama has no /health: its root says so)
    host_knob: str  # the knob of the address it listens on
    port_knob: str  # the knob of its TCP port
    default_port: int  # that knob's value in group_vars/all/endpoint.yml
    metrics_prefix: str  # the prefix of its Prometheus families on /metrics ('' when it has none)
    api_key: bool  # whether it requires the API key (Ollama has no authentication)


ENGINES: tuple[Engine, ...] = (
    Engine("vllm", "vllm.service", "/health", "vllm_host", "vllm_port", 8000, "vllm:", api_key=True),
    Engine("ollama", "ollama.service", "/", "ollama_host", "ollama_port", 11434, "", api_key=False),
    Engine(
        "llamacpp", "llamacpp.service", "/health", "llamacpp_host", "llamacpp_port", 8081, "llamacpp:", api_key=True
    ),
)
ENGINE_NAMES: tuple[str, ...] = tuple(engine.name for engine in ENGINES)
ENGINES_BY_NAME: Mapping[str, Engine] = MappingProxyType({engine.name: engine for engine in ENGINES})
# The engine when nothing names one: group_vars/all/engine.yml's inference_engine (a test compares).
DEFAULT_ENGINE = ENGINES_BY_NAME["vllm"]


def engine_units(scope: str) -> dict[str, str]:
    """Engine name to systemd unit: every engine for ``scope`` ``all``, else the one named."""
    if scope == "all":
        return {engine.name: engine.unit for engine in ENGINES}
    if scope not in ENGINES_BY_NAME:
        raise ConfigError(f"inference_engine: {scope!r} is not an engine; choose one of {', '.join(ENGINE_NAMES)}")
    return {scope: ENGINES_BY_NAME[scope].unit}
