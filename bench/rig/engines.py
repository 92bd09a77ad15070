"""The engines llmrig can run, in one typed table that bench and the Ansible roles derive from.

``inference_engine`` names one of :data:`ENGINES`. Each row says what is the same kind of fact
for every engine, so that nothing else spells an engine by name: its unit (the engine role,
through ``llmrig_engine_units``) and health path (each role's own health URL ends in it, a test
checks), its host, port, context and extra-arguments knobs
(the rules in :mod:`bench.rig.rules`, the firewall, the knob prefixes of :mod:`bench.rig.inputs`),
the flags its role writes from a knob (the extra-arguments rule), the path knobs preflight checks,
whether it takes the API key, the knob of the GPUs it splits a model over (``playbooks/verify.yml``),
the knobs that let it take OpenAI ``tools`` (Open WebUI's function calling), the preset field it
needs, the knob of the model name clients send (the gateway's group check), and the Prometheus
samples of its ``/metrics`` that fill bench's server report
(:mod:`bench.measure.telemetry.server`). The Ansible side reads the table through the
``llmrig_engine_units``, ``llmrig_engine_knobs`` and ``llmrig_native_tools`` filters. The default
ports equal ``group_vars/all/endpoint.yml`` (a test compares them); that file stays the place an
operator changes a port.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Literal

from bench.errors import ConfigError
from bench.rig.argv import flag_name
from bench.rig.vllm_flags import OWNED_FLAGS as VLLM_OWNED_FLAGS

PathKind = Literal["dir", "file", "executable"]
PathNeed = Literal["exist", "create"]  # must exist already, or a role creates it

# llama-server flags that the llamacpp role writes from a knob (roles/llamacpp/vars/main.yml,
# _llamacpp_args; tests/unit/rig/test_validation.py checks the two agree), short forms included.
LLAMACPP_OWNED_FLAGS: Mapping[str, str] = MappingProxyType(
    {
        "--model": "model",
        "-m": "model",
        "--alias": "llamacpp_served_model_name",
        "-a": "llamacpp_served_model_name",
        "--host": "llamacpp_host",
        "--port": "llamacpp_port",
        "--ctx-size": "llamacpp_ctx_size",
        "-c": "llamacpp_ctx_size",
        "--parallel": "llamacpp_parallel",
        "-np": "llamacpp_parallel",
        "--n-gpu-layers": "llamacpp_n_gpu_layers",
        "--gpu-layers": "llamacpp_n_gpu_layers",
        "-ngl": "llamacpp_n_gpu_layers",
        "--threads": "llamacpp_threads",
        "-t": "llamacpp_threads",
        "--chat-template": "model_presets (chat_template)",
        "--chat-template-file": "model_presets (chat_template: a bundled Jinja template)",
        "--jinja": "model_presets (chat_template: a bundled Jinja template)",
        "--metrics": "llmrig (always on: bench and the watchdog read /metrics)",
    }
)


@dataclass(frozen=True, slots=True)
class Metrics:
    """What an engine's Prometheus ``/metrics`` holds for bench's server report: each field of
    the report's ``Counters``, ``Gauges`` and histograms, and the exposition sample (the
    histogram family) it is read from. Engines may feed the same field with samples of their own."""

    prefix: str  # the prefix of its families, which tells bench which engine a /metrics belongs to
    counters: Mapping[str, str]
    gauges: Mapping[str, str]
    histograms: Mapping[str, str] = field(default_factory=dict)
    cache_config: str = ""  # the info sample whose labels describe the KV cache ('' when none)


@dataclass(frozen=True, slots=True)
class Engine:
    """One engine: its unit, how to reach it, the knobs that shape it and what its server exposes."""

    name: str  # the value of inference_engine, its role's name and the prefix of its knobs
    title: str  # its name in messages
    unit: str  # the systemd unit the engine role starts and stops
    health_path: str  # answers once the engine serves (Ollama has no /health: its root says so)
    host_knob: str  # the knob of the address it listens on
    port_knob: str  # the knob of its TCP port
    default_port: int  # that knob's value in group_vars/all/endpoint.yml
    api_key: bool  # whether it is authenticated: it requires the API key (Ollama has no authentication)
    context_knob: str  # the knob of the context it serves, in tokens
    extra_args_knob: str = ""  # the knob of extra command-line arguments ('' = it takes none)
    owned_flags: Mapping[str, str] = field(default_factory=dict)  # flag -> the knob its role writes it from
    path_knobs: Mapping[str, tuple[PathKind, PathNeed]] = field(default_factory=dict)  # checked when it runs
    gpus_knob: str = ""  # the knob of how many GPUs it splits one model over ('' = one)
    tool_knobs: tuple[str, ...] = ()  # all set: it takes OpenAI tools; () = the preset's tool_call_parser says
    preset_needs: str = ""  # the preset field it cannot serve a model without ('' = none)
    served_name_knob: str = ""  # the knob of the model name clients send
    metrics: Metrics | None = None  # None: it serves no /metrics

    @property
    def knob_prefix(self) -> str:
        """The prefix of its role's knobs (``vllm_``)."""
        return f"{self.name}_"

    @property
    def metrics_prefix(self) -> str:
        """The prefix of its Prometheus families on /metrics ('' when it has none)."""
        return self.metrics.prefix if self.metrics else ""

    def owner_of(self, arg: str) -> str | None:
        """The knob that owns the flag ``arg`` (``--max_model_len=4096`` counts as
        ``--max-model-len``), or None for a flag no knob sets and for a value."""
        name = flag_name(str(arg))
        return self.owned_flags.get(name) if name else None


VLLM_METRICS = Metrics(
    prefix="vllm:",
    counters={
        "requests_succeeded": "vllm:request_success_total",
        "prompt_tokens": "vllm:prompt_tokens_total",
        "generation_tokens": "vllm:generation_tokens_total",
        "preemptions": "vllm:num_preemptions_total",
        "prefix_cache_queries": "vllm:prefix_cache_queries_total",
        "prefix_cache_hits": "vllm:prefix_cache_hits_total",
        "spec_decode_drafts": "vllm:spec_decode_num_drafts_total",
        "spec_decode_draft_tokens": "vllm:spec_decode_num_draft_tokens_total",
        "spec_decode_accepted_tokens": "vllm:spec_decode_num_accepted_tokens_total",
    },
    gauges={
        "kv_cache_usage": "vllm:kv_cache_usage_perc",
        "requests_running": "vllm:num_requests_running",
        "requests_waiting": "vllm:num_requests_waiting",
    },
    histograms={
        "ttft_ms": "vllm:time_to_first_token_seconds",
        "itl_ms": "vllm:inter_token_latency_seconds",
        "e2e_ms": "vllm:e2e_request_latency_seconds",
        "queue_ms": "vllm:request_queue_time_seconds",
        "prefill_ms": "vllm:request_prefill_time_seconds",
        "decode_ms": "vllm:request_decode_time_seconds",
    },
    cache_config="vllm:cache_config_info",
)
LLAMACPP_METRICS = Metrics(
    prefix="llamacpp:",
    counters={
        "llamacpp_prompt_tokens": "llamacpp:prompt_tokens_total",
        "llamacpp_tokens_predicted": "llamacpp:tokens_predicted_total",
        "llamacpp_decode_calls": "llamacpp:n_decode_total",
    },
    gauges={
        "llamacpp_requests_processing": "llamacpp:requests_processing",
        "llamacpp_requests_deferred": "llamacpp:requests_deferred",
    },
)

ENGINES: tuple[Engine, ...] = (
    Engine(
        "vllm",
        "vLLM",
        "vllm.service",
        "/health",
        "vllm_host",
        "vllm_port",
        8000,
        api_key=True,
        context_knob="vllm_max_model_len",
        extra_args_knob="vllm_extra_args",
        owned_flags=VLLM_OWNED_FLAGS,
        path_knobs={"vllm_model_local_dir": ("dir", "exist")},
        gpus_knob="vllm_tensor_parallel_size",
        tool_knobs=("vllm_tool_call_parser", "vllm_enable_auto_tool_choice"),
        served_name_knob="vllm_served_model_name",
        metrics=VLLM_METRICS,
    ),
    Engine(
        "ollama",
        "Ollama",
        "ollama.service",
        "/",
        "ollama_host",
        "ollama_port",
        11434,
        api_key=False,
        context_knob="ollama_context_length",
        path_knobs={"ollama_models_dir": ("dir", "create")},
        preset_needs="ollama_tag",
        served_name_knob="ollama_model",
    ),
    Engine(
        "llamacpp",
        "llama.cpp",
        "llamacpp.service",
        "/health",
        "llamacpp_host",
        "llamacpp_port",
        8081,
        api_key=True,
        context_knob="llamacpp_ctx_size",
        extra_args_knob="llamacpp_extra_args",
        owned_flags=LLAMACPP_OWNED_FLAGS,
        path_knobs={"llamacpp_model_local_file": ("file", "exist"), "llamacpp_server_binary": ("executable", "exist")},
        preset_needs="gguf_file",
        served_name_knob="llamacpp_served_model_name",
        metrics=LLAMACPP_METRICS,
    ),
)
ENGINE_NAMES: tuple[str, ...] = tuple(engine.name for engine in ENGINES)
ENGINES_BY_NAME: Mapping[str, Engine] = MappingProxyType({engine.name: engine for engine in ENGINES})
# The engine when nothing names one: group_vars/all/engine.yml's inference_engine (a test compares).
DEFAULT_ENGINE = ENGINES_BY_NAME["vllm"]


def engine_named(name: str) -> Engine:
    """The engine ``name`` names; a ConfigError naming ``inference_engine`` and the choices otherwise."""
    if name not in ENGINES_BY_NAME:
        raise ConfigError(f"inference_engine: {name!r} is not an engine; choose one of {', '.join(ENGINE_NAMES)}")
    return ENGINES_BY_NAME[name]


def engine_units(scope: str) -> dict[str, str]:
    """Engine name to systemd unit: every engine for ``scope`` ``all``, else the one named."""
    if scope == "all":
        return {engine.name: engine.unit for engine in ENGINES}
    return {scope: engine_named(scope).unit}


# What each kind of knob list holds of a row, for the Ansible side (the llmrig_engine_knobs filter).
_KNOBS: Mapping[str, Callable[[Engine], tuple[str, ...]]] = {
    "endpoint": lambda engine: (engine.host_knob, engine.port_knob),
    "context": lambda engine: (engine.context_knob,),
    "extra_args": lambda engine: (engine.extra_args_knob,) if engine.extra_args_knob else (),
    "paths": lambda engine: tuple(engine.path_knobs),
    "gpus": lambda engine: (engine.gpus_knob,) if engine.gpus_knob else (),
    "tools": lambda engine: engine.tool_knobs,
    "served_name": lambda engine: (engine.served_name_knob,) if engine.served_name_knob else (),
}


def engine_knobs(scope: str, kind: str) -> list[str]:
    """The knobs of one ``kind`` (:data:`_KNOBS`: endpoint, context, extra_args, paths, gpus,
    tools, served_name) of every engine for ``scope`` ``all``, else of the one named, engine by engine."""
    if kind not in _KNOBS:
        raise ConfigError(f"llmrig_engine_knobs: {kind!r} is not a kind of knob; choose one of {', '.join(_KNOBS)}")
    engines = ENGINES if scope == "all" else (engine_named(scope),)
    return [knob for engine in engines for knob in _KNOBS[kind](engine)]
