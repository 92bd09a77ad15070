"""The cross-field rules themselves, one function each, collected in :data:`RULES`.

Each rule reads the rendered knobs (``group_vars/all`` after overrides), the host facts from
the ``llmrig_host_facts`` module, the resolved device (``cuda`` or ``cpu``) and the preset, and
returns the problems it finds. Types and choices are the argument specs' job; these rules cover
what a single variable's type cannot say.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable, Mapping
from typing import Any

from bench.rig.engines import ENGINES
from bench.rig.plan import PlanError, plan
from bench.rig.plan_inputs import setup_from_knobs
from bench.rig.presets import Preset
from bench.rig.problems import Problem
from bench.rig.values import truthy

GIB = 1024**3


Knobs = Mapping[str, Any]
Host = Mapping[str, Any]
Rule = Callable[[Knobs, Host, str, Preset], list[Problem]]

TOOL_PARSERS = {
    # Qwen3 (2025) emits Hermes-style <tool_call>{json}</tool_call>.
    "qwen3": ("hermes",),
    # Qwen3.5 and later changed to the XML tool-call format.
    "qwen3.5": ("qwen3_coder", "qwen3_xml"),
    # Gemma 3 has no tool tokens; vLLM's pythonic parser with its Gemma 3 template is the route.
    "gemma3": ("pythonic",),
}
REASONING_PARSERS = {"qwen3": ("qwen3",), "qwen3.5": ("qwen3",), "gemma3": ()}
QUANTIZATIONS = {
    # compressed-tensors is detected from config.json; awq_marlin on it breaks loading.
    "compressed-tensors": ("auto", "compressed-tensors"),
    "awq": ("auto", "awq", "awq_marlin"),
    "gptq": ("auto", "gptq", "gptq_marlin"),
    "bf16": ("auto", "fp8"),
    # The GGUF presets are converted to bf16 safetensors for vLLM.
    "gguf": ("auto",),
}
FP8_KV_MIN_CC = (8, 9)
CPU_KV_DTYPES = ("auto", "bfloat16", "float16")
# Every service that listens: the engines of the table, then Open WebUI.
PORT_KNOBS = (*(engine.port_knob for engine in ENGINES), "open_webui_port")
HOST_KNOBS = (*(engine.host_knob for engine in ENGINES), "open_webui_host")
SIZE_RE = re.compile(r"^[0-9]+(\.[0-9]+)?[KMGTkmgt]?$")


def gpus(host: Host) -> list[Mapping[str, Any]]:
    """The NVIDIA GPUs in the host facts (an empty list on a CPU host)."""
    found = host.get("gpus") or []
    return [gpu for gpu in found if isinstance(gpu, Mapping)]


def as_int(knobs: Knobs, name: str) -> int | None:
    """``knobs[name]`` as an int (extra vars arrive as strings), or None when it is not one."""
    value = knobs.get(name)
    if isinstance(value, bool):
        return None
    try:
        return int(str(value).strip()) if value is not None else None
    except ValueError:
        return None


def as_bool(knobs: Knobs, name: str) -> bool:
    """``knobs[name]`` as a bool, accepting the strings Ansible accepts."""
    return truthy(knobs.get(name))


def as_str(knobs: Knobs, name: str) -> str:
    """``knobs[name]`` as a stripped string ('' when unset)."""
    value = knobs.get(name)
    return "" if value is None else str(value).strip()


def _err(variable: str, message: str) -> list[Problem]:
    return [Problem(variable, message)]


def serves_vllm(knobs: Knobs) -> bool:
    """Hardware-dependent vLLM rules apply only while vLLM is the engine; coherence rules always do."""
    return as_str(knobs, "inference_engine") == "vllm"


def positive(knobs: Knobs, name: str) -> tuple[int, list[Problem]]:
    """``knobs[name]`` as a positive int, or 0 and the problem that says it is not one."""
    value = as_int(knobs, name)
    if value is None or value < 1:
        return 0, _err(name, f"must be a positive integer, got {knobs.get(name)!r}")
    return value, []


def rule_engine_serves_preset(knobs: Knobs, host: Host, device: str, preset: Preset) -> list[Problem]:
    """The chosen engine can load this preset's weights on this device."""
    engine = as_str(knobs, "inference_engine")
    if engine == "ollama" and not preset.ollama_tag:
        return _err("model", f"preset {preset.name} has no ollama_tag; choose another model or inference_engine")
    if engine == "llamacpp" and not preset.gguf_file:
        return _err("model", f"preset {preset.name} has no gguf_file; choose another model or inference_engine")
    if engine == "vllm" and device == "cpu" and preset.checkpoint_format in ("compressed-tensors", "awq", "gptq"):
        return _err(
            "model",
            f"preset {preset.name} is a {preset.checkpoint_format} checkpoint whose kernels "
            "need CUDA; on a CPU host use model: gemma3-270m (or auto)",
        )
    return []


def rule_parallelism(knobs: Knobs, host: Host, device: str, preset: Preset) -> list[Problem]:
    """Tensor x pipeline parallel fits the GPUs found and divides the attention heads."""
    tp, bad_tp = positive(knobs, "vllm_tensor_parallel_size")
    pp, bad_pp = positive(knobs, "vllm_pipeline_parallel_size")
    if bad_tp or bad_pp:
        return bad_tp + bad_pp
    if not serves_vllm(knobs):
        return []
    if device == "cpu" and tp * pp != 1:
        return _err(
            "vllm_tensor_parallel_size",
            f"is {tp} (pipeline {pp}) but the cpu device runs one "
            "process; set vllm_tensor_parallel_size: 1 and vllm_pipeline_parallel_size: 1",
        )
    found = len(gpus(host))
    if device == "cuda" and tp * pp > found:
        return _err(
            "vllm_tensor_parallel_size",
            f"{tp} x vllm_pipeline_parallel_size {pp} needs {tp * pp} GPUs "
            f"but {found} were found; lower vllm_tensor_parallel_size to {max(found // pp, 1)}",
        )
    if preset.architecture.attention_heads % tp:
        return _err(
            "vllm_tensor_parallel_size",
            f"{tp} does not divide the {preset.architecture.attention_heads} attention heads of {preset.name}",
        )
    return []


def rule_parsers(knobs: Knobs, host: Host, device: str, preset: Preset) -> list[Problem]:
    """Tool-call and reasoning parsers belong to the preset's model family."""
    problems: list[Problem] = []
    tool = as_str(knobs, "vllm_tool_call_parser")
    allowed_tools = TOOL_PARSERS[preset.family]
    if tool and tool not in allowed_tools:
        problems += _err(
            "vllm_tool_call_parser",
            f"{tool!r} does not parse {preset.family} tool calls; use {' or '.join(allowed_tools)}",
        )
    if as_bool(knobs, "vllm_enable_auto_tool_choice") and not tool:
        problems += _err(
            "vllm_enable_auto_tool_choice",
            "is true but vllm_tool_call_parser is empty; vLLM rejects that; set a parser or turn auto tool choice off",
        )
    reasoning = as_str(knobs, "vllm_reasoning_parser")
    allowed_reasoning = REASONING_PARSERS[preset.family]
    if reasoning and reasoning not in allowed_reasoning:
        hint = " or ".join(allowed_reasoning) if allowed_reasoning else "'' (this family does not reason)"
        problems += _err("vllm_reasoning_parser", f"{reasoning!r} does not match {preset.family}; use {hint}")
    return problems


def rule_quantization(knobs: Knobs, host: Host, device: str, preset: Preset) -> list[Problem]:
    """The quantization setting can load this checkpoint format."""
    quant = as_str(knobs, "vllm_quantization")
    allowed = QUANTIZATIONS[preset.checkpoint_format]
    if quant not in allowed:
        return _err(
            "vllm_quantization",
            f"{quant!r} cannot load the {preset.checkpoint_format} checkpoint of "
            f"{preset.name}; use {' or '.join(allowed)} (auto lets vLLM read config.json)",
        )
    return []


def rule_batching(knobs: Knobs, host: Host, device: str, preset: Preset) -> list[Problem]:
    """Batched tokens cover the hybrid block size and the sequence count."""
    batched, bad_batched = positive(knobs, "vllm_max_num_batched_tokens")
    seqs, bad_seqs = positive(knobs, "vllm_max_num_seqs")
    if bad_batched or bad_seqs:
        return bad_batched + bad_seqs
    if batched < preset.min_num_batched_tokens:
        return _err(
            "vllm_max_num_batched_tokens",
            f"{batched} is below the hybrid block size floor "
            f"{preset.min_num_batched_tokens} of {preset.name}; vLLM would assert at start-up; "
            f"raise it to at least {preset.min_num_batched_tokens} (4096 recommended)",
        )
    if batched < seqs:
        return _err("vllm_max_num_batched_tokens", f"{batched} is below vllm_max_num_seqs {seqs}")
    return []


def rule_mtp(knobs: Knobs, host: Host, device: str, preset: Preset) -> list[Problem]:
    """Multi-token prediction needs an MTP head and a CUDA device."""
    if not as_bool(knobs, "vllm_mtp"):
        return []
    if not preset.architecture.mtp_head:
        return _err("vllm_mtp", f"is true but {preset.name} has no MTP head; set vllm_mtp: false")
    if device != "cuda" and serves_vllm(knobs):
        return _err("vllm_mtp", "speculative decoding is only set up for the cuda device; set vllm_mtp: false")
    tokens = as_int(knobs, "vllm_mtp_tokens")
    if tokens is None or not 1 <= tokens <= 4:
        return _err("vllm_mtp_tokens", f"must be 1 to 4 (1 or 2 recommended), got {knobs.get('vllm_mtp_tokens')!r}")
    return []


def rule_context(knobs: Knobs, host: Host, device: str, preset: Preset) -> list[Problem]:
    """Served context stays within the model's native context unless rope scaling is set."""
    problems: list[Problem] = []
    length, bad_length = positive(knobs, "vllm_max_model_len")
    if bad_length:
        return bad_length
    if length > preset.native_context and not knobs.get("vllm_rope_override"):
        problems += _err(
            "vllm_max_model_len",
            f"{length} exceeds the native context {preset.native_context} of "
            f"{preset.name}; lower it or set vllm_rope_override (YaRN)",
        )
    for knob in ("ollama_context_length", "llamacpp_ctx_size"):
        value = as_int(knobs, knob)
        if value is not None and value > preset.native_context:
            problems += _err(knob, f"{value} exceeds the native context {preset.native_context} of {preset.name}")
    return problems


def disk_problem(disk: Mapping[str, Any], weights_gb: float, headroom_gib: int, name: str) -> Problem | None:
    """The one disk rule, for preflight and for the vllm role just before a download: the
    models directory's free bytes plus the bytes already in it (``used_bytes``, so a resumed
    partial download counts) must hold the weights plus ``headroom_gib``. None when they do."""
    free, used = disk.get("free_bytes"), disk.get("used_bytes") or 0
    if not isinstance(free, int):
        return Problem("llmrig_models_dir", "free space could not be measured", "warning")
    need = int(weights_gb * 1e9) + headroom_gib * GIB
    if free + int(used) >= need:
        return None
    return Problem(
        "llmrig_models_dir",
        f"{disk.get('path')} has {free / GIB:.1f} GiB free and {int(used) / GIB:.1f} GiB already there, but "
        f"{name} needs {need / GIB:.1f} GiB (weights plus llmrig_disk_headroom_gib); point llmrig_models_dir "
        "at a larger disk",
    )


def rule_disk(knobs: Knobs, host: Host, device: str, preset: Preset) -> list[Problem]:
    """The models directory has room for the weights (what is already there counts)."""
    headroom = as_int(knobs, "llmrig_disk_headroom_gib") or 0
    problem = disk_problem(host.get("disk") or {}, preset.weights_gb, headroom, preset.name)
    return [problem] if problem else []


def rule_ports(knobs: Knobs, host: Host, device: str, preset: Preset) -> list[Problem]:
    """Every service has its own port."""
    problems: list[Problem] = []
    owners: dict[int, str] = {}
    for knob in PORT_KNOBS:
        port = as_int(knobs, knob)
        if port is None or not 1 <= port <= 65535:
            problems += _err(knob, f"must be a TCP port (1-65535), got {knobs.get(knob)!r}")
            continue
        if port in owners:
            problems += _err(knob, f"port {port} is already taken by {owners[port]}; give {knob} another port")
        owners.setdefault(port, knob)
    return problems


def rule_kv_cache_dtype(knobs: Knobs, host: Host, device: str, preset: Preset) -> list[Problem]:
    """fp8 KV cache only on GPUs that have fp8 attention kernels (compute capability 8.9+)."""
    dtype = as_str(knobs, "vllm_kv_cache_dtype")
    if not serves_vllm(knobs):
        return []
    if device == "cpu":
        if dtype not in CPU_KV_DTYPES:
            return _err("vllm_kv_cache_dtype", f"{dtype!r} is not supported by the cpu device; use auto")
        return []
    if not dtype.startswith("fp8"):
        return []
    for gpu in gpus(host):
        cc = str(gpu.get("compute_capability") or "")
        match = re.fullmatch(r"(\d+)\.(\d+)", cc)
        if match is None:
            return [
                Problem(
                    "vllm_kv_cache_dtype",
                    f"compute capability of {gpu.get('name')} is unknown, so fp8 KV support is unchecked",
                    "warning",
                )
            ]
        if (int(match[1]), int(match[2])) < FP8_KV_MIN_CC:
            return _err(
                "vllm_kv_cache_dtype",
                f"{dtype} needs compute capability 8.9 or newer but {gpu.get('name')} is {cc}; use auto",
            )
    if as_str(knobs, "vllm_attention_backend") == "FLASH_ATTN":
        return _err(
            "vllm_attention_backend",
            f"FLASH_ATTN cannot read a {dtype} KV cache on these GPUs; use "
            "TRITON_ATTN (or set vllm_kv_cache_dtype: auto)",
        )
    return []


def rule_device_flags(knobs: Knobs, host: Host, device: str, preset: Preset) -> list[Problem]:
    """GPU-only settings stay off the cpu device; memory settings are in range."""
    problems: list[Problem] = []
    if device == "cpu" and serves_vllm(knobs) and as_str(knobs, "vllm_attention_backend"):
        problems += _err("vllm_attention_backend", "is a CUDA attention backend; leave it empty on the cpu device")
    try:
        utilization = float(knobs.get("vllm_gpu_memory_utilization", 0))
    except (TypeError, ValueError):
        utilization = -1.0
    if not 0 < utilization <= 1:
        problems += _err(
            "vllm_gpu_memory_utilization",
            f"must be above 0 and at most 1, got {knobs.get('vllm_gpu_memory_utilization')!r}",
        )
    elif utilization > 0.95:
        problems.append(
            Problem(
                "vllm_gpu_memory_utilization",
                f"{utilization} leaves almost no room for the MTP and sampler workspace that the profiler misses",
                "warning",
            )
        )
    size = as_str(knobs, "vllm_kv_cache_memory_bytes")
    if size and not SIZE_RE.match(size):
        problems += _err("vllm_kv_cache_memory_bytes", f"{size!r} is not a size such as 4G (GiB) or 4000000000")
    return problems


def rule_cpu_memory(knobs: Knobs, host: Host, device: str, preset: Preset) -> list[Problem]:
    """On the cpu device, weights plus the KV space fit in RAM."""
    if device != "cpu" or not serves_vllm(knobs):
        return []
    total = (host.get("memory") or {}).get("total_bytes")
    space, bad_space = positive(knobs, "vllm_cpu_kvcache_space_gib")
    if bad_space:
        return bad_space
    # bf16 weights are about twice the size of the 4-bit GGUF they are converted from.
    need = preset.weights_gb * 2e9 + space * GIB
    if isinstance(total, int) and need > total * 0.8:
        return _err(
            "vllm_cpu_kvcache_space_gib",
            f"{space} GiB of KV space plus the weights needs "
            f"{need / GIB:.1f} GiB, over 80% of the {total / GIB:.1f} GiB of RAM; lower it",
        )
    return []


def _is_loopback(address: str) -> bool:
    if address == "localhost":
        return True
    try:
        return ipaddress.ip_address(address).is_loopback
    except ValueError:
        return False


def rule_network(knobs: Knobs, host: Host, device: str, preset: Preset) -> list[Problem]:
    """Bind addresses parse; anything off loopback is limited to the allowed client CIDRs."""
    problems: list[Problem] = []
    cidrs = knobs.get("llmrig_allowed_client_cidrs")
    if not isinstance(cidrs, list):
        return _err("llmrig_allowed_client_cidrs", "must be a list of CIDRs such as 192.168.1.0/24")
    for cidr in cidrs:
        try:
            ipaddress.ip_network(str(cidr), strict=False)
        except ValueError:
            problems += _err("llmrig_allowed_client_cidrs", f"{cidr!r} is not a CIDR such as 192.168.1.0/24")
    for knob in HOST_KNOBS:
        address = as_str(knobs, knob)
        if address != "localhost":
            try:
                ipaddress.ip_address(address)
            except ValueError:
                problems += _err(
                    knob, f"{address!r} is not an IP address (use 127.0.0.1, 0.0.0.0 or an address of this host)"
                )
                continue
        if not _is_loopback(address) and not cidrs:
            problems += _err(
                "llmrig_allowed_client_cidrs",
                f"is empty but {knob} is {address}, off loopback; list the client networks, or bind to 127.0.0.1",
            )
    return problems


# Engine flags that take a secret: on a command line it shows in ps, the journal and deployment.json.
SECRET_FLAGS = ("--api-key", "--hf-token", "--token")


def rule_secrets(knobs: Knobs, host: Host, device: str, preset: Preset) -> list[Problem]:
    """A supplied API key is long enough to mean something (empty = generated on the host), and
    no secret rides on an engine's command line through the extra-argument knobs."""
    problems: list[Problem] = []
    key = knobs.get("llmrig_api_key") or ""
    if key and (len(str(key)) < 16 or re.search(r"\s", str(key))):
        problems += _err("llmrig_api_key", "must be at least 16 characters without spaces, or empty to generate one")
    for knob in ("vllm_extra_args", "llamacpp_extra_args"):
        for arg in knobs.get(knob) or []:
            flag = str(arg).split("=", 1)[0]
            if flag in SECRET_FLAGS:
                problems += _err(
                    knob,
                    f"{flag} would put a secret on the command line (ps, the journal, deployment.json); "
                    "set llmrig_api_key / llmrig_hf_token instead, which reach the engine from 0600 files",
                )
    return problems


def rule_host_os(knobs: Knobs, host: Host, device: str, preset: Preset) -> list[Problem]:
    """The host runs a Debian-family OS (Ubuntu 24.04 on the GPU box; Debian 12 in tests)."""
    os_facts = host.get("os") or {}
    family = str(os_facts.get("family", ""))
    if family != "debian":
        return _err(
            "inventory",
            f"{os_facts.get('pretty_name', 'this OS')} is not Debian-family; llmrig "
            "installs with apt and supports Ubuntu 24.04 (Debian 12 for tests)",
        )
    return []


def rule_pinned_revision(knobs: Knobs, host: Host, device: str, preset: Preset) -> list[Problem]:
    """A Hugging Face revision should be a commit SHA, so a re-run downloads the same bytes."""
    revision = as_str(knobs, "vllm_model_revision")
    if preset.source == "hf" and not re.fullmatch(r"[0-9a-f]{40}", revision):
        return [
            Problem(
                "vllm_model_revision", f"{revision!r} is not a commit SHA; downloads are not reproducible", "warning"
            )
        ]
    return []


def _plannable(knobs: Knobs, host: Host, device: str, preset: Preset) -> bool:
    """The knobs the planner reads are sane; otherwise the rules above report them."""
    numbers = [
        as_int(knobs, name) for name in ("vllm_max_model_len", "vllm_max_num_seqs", "vllm_max_num_batched_tokens")
    ]
    tp, pp = as_int(knobs, "vllm_tensor_parallel_size") or 0, as_int(knobs, "vllm_pipeline_parallel_size") or 0
    if any(value is None or value < 1 for value in numbers) or tp < 1 or pp < 1:
        return False
    if preset.architecture.attention_heads % tp:
        return False
    return tp * pp <= len(gpus(host)) if device == "cuda" else tp * pp == 1


def rule_kv_plan(knobs: Knobs, host: Host, device: str, preset: Preset) -> list[Problem]:
    """The KV planner (bench/rig/plan.py): one sequence of vllm_max_model_len must fit, max_num_seqs should."""
    if not serves_vllm(knobs) or not _plannable(knobs, host, device, preset):
        return []
    found = gpus(host) if device == "cuda" else []
    try:
        setup = setup_from_knobs(knobs, device, preset.weights_gb, found)
        if device == "cuda" and not setup.gpu_memory_mib and not setup.kv_cache_memory_bytes:
            return [
                Problem("vllm_kv_cache_memory_bytes", "the GPUs' memory is unknown, so there is no KV plan", "warning")
            ]
        result = plan(preset.architecture, setup, preset.native_context)
    except PlanError as exc:
        variable, _, message = str(exc).partition(": ")
        return [Problem(variable, f"no KV plan: {message}", "warning")]
    summary = (
        f"KV plan: {result.pool_tokens:,} tokens, {result.concurrency:.2f} sequences of {setup.max_model_len:,} "
        f"(blocks of {result.block_size:,} tokens); `bench plan` prints the arithmetic"
    )
    findings = [Problem("vllm_max_model_len", summary, "info")]
    return findings + result.problems


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
    rule_ports,
    rule_kv_cache_dtype,
    rule_device_flags,
    rule_cpu_memory,
    rule_network,
    rule_secrets,
    rule_pinned_revision,
    rule_kv_plan,
)
