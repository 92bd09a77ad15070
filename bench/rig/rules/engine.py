"""Rules on the engine's knobs against the preset: the chosen engine can load it, and the vLLM
knobs (parsers, quantization, batching, MTP, context, revision) suit the model."""

from __future__ import annotations

import re

from bench.rig.engines import ENGINES, ENGINES_BY_NAME, LLAMACPP_OWNED_FLAGS
from bench.rig.presets import Preset
from bench.rig.problems import Problem
from bench.rig.rules.knobs import Host, Knobs, as_bool, as_int, as_str, err, positive, serves_vllm

__all__ = ["LLAMACPP_OWNED_FLAGS", "QUANTIZATIONS", "REASONING_PARSERS", "TOOL_PARSERS"]

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


def rule_engine_serves_preset(knobs: Knobs, host: Host, device: str, preset: Preset) -> list[Problem]:
    """The chosen engine can load this preset's weights on this device."""
    engine = ENGINES_BY_NAME.get(as_str(knobs, "inference_engine"))
    if engine is not None and engine.preset_needs and not getattr(preset, engine.preset_needs):
        return err(
            "model", f"preset {preset.name} has no {engine.preset_needs}; choose another model or inference_engine"
        )
    if serves_vllm(knobs) and device == "cpu" and preset.checkpoint_format in ("compressed-tensors", "awq", "gptq"):
        return err(
            "model",
            f"preset {preset.name} is a {preset.checkpoint_format} checkpoint whose kernels "
            "need CUDA; on a CPU host use model: gemma3-270m (or auto)",
        )
    return []


def rule_parsers(knobs: Knobs, host: Host, device: str, preset: Preset) -> list[Problem]:
    """Tool-call and reasoning parsers belong to the preset's model family."""
    problems: list[Problem] = []
    tool = as_str(knobs, "vllm_tool_call_parser")
    allowed_tools = TOOL_PARSERS[preset.family]
    if tool and tool not in allowed_tools:
        problems += err(
            "vllm_tool_call_parser",
            f"{tool!r} does not parse {preset.family} tool calls; use {' or '.join(allowed_tools)}",
        )
    if as_bool(knobs, "vllm_enable_auto_tool_choice") and not tool:
        problems += err(
            "vllm_enable_auto_tool_choice",
            "is true but vllm_tool_call_parser is empty; vLLM rejects that; set a parser or turn auto tool choice off",
        )
    reasoning = as_str(knobs, "vllm_reasoning_parser")
    allowed_reasoning = REASONING_PARSERS[preset.family]
    if reasoning and reasoning not in allowed_reasoning:
        hint = " or ".join(allowed_reasoning) if allowed_reasoning else "'' (this family does not reason)"
        problems += err("vllm_reasoning_parser", f"{reasoning!r} does not match {preset.family}; use {hint}")
    if serves_vllm(knobs) and not reasoning and preset.reasoning_parser and _thinks(knobs):
        problems += err(
            "vllm_reasoning_parser",
            f"is empty but {preset.name} thinks, so its reasoning would land in content (agent harnesses break); "
            f"use {preset.reasoning_parser}, or turn thinking off with "
            "vllm_default_chat_template_kwargs: {enable_thinking: false}",
        )
    return problems


def _thinks(knobs: Knobs) -> bool:
    """False only when the chat template is told not to think (``enable_thinking: false``)."""
    kwargs = knobs.get("vllm_default_chat_template_kwargs")
    return not (isinstance(kwargs, dict) and kwargs.get("enable_thinking") in (False, "false", "False"))


def rule_quantization(knobs: Knobs, host: Host, device: str, preset: Preset) -> list[Problem]:
    """The quantization setting can load this checkpoint format."""
    quant = as_str(knobs, "vllm_quantization")
    allowed = QUANTIZATIONS[preset.checkpoint_format]
    if quant not in allowed:
        return err(
            "vllm_quantization",
            f"{quant!r} cannot load the {preset.checkpoint_format} checkpoint of "
            f"{preset.name}; use {' or '.join(allowed)} (auto lets vLLM read config.json)",
        )
    return []


def rule_moe_symmetric(knobs: Knobs, host: Host, device: str, preset: Preset) -> list[Problem]:
    """A MoE preset whose compressed-tensors 4-bit experts have zero points (asymmetric) is one
    vLLM's compressed-tensors MoE path refuses at load with the sentence quoted below."""
    if (
        serves_vllm(knobs)
        and preset.architecture.moe
        and preset.checkpoint_format == "compressed-tensors"
        and preset.quant_symmetric is False
    ):
        return err(
            "model",
            f"preset {preset.name} has asymmetric (zero-point) 4-bit experts and vLLM refuses them: "
            '"Only symmetric quantization is supported for MoE"; choose a symmetric checkpoint',
        )
    return []


def rule_batching(knobs: Knobs, host: Host, device: str, preset: Preset) -> list[Problem]:
    """Batched tokens cover the hybrid block size and the sequence count."""
    batched, bad_batched = positive(knobs, "vllm_max_num_batched_tokens")
    seqs, bad_seqs = positive(knobs, "vllm_max_num_seqs")
    if bad_batched or bad_seqs:
        return bad_batched + bad_seqs
    if batched < preset.min_num_batched_tokens:
        return err(
            "vllm_max_num_batched_tokens",
            f"{batched} is below the hybrid block size floor "
            f"{preset.min_num_batched_tokens} of {preset.name}; vLLM would assert at start-up; "
            f"raise it to at least {preset.min_num_batched_tokens} (4096 recommended)",
        )
    if batched < seqs:
        return err("vllm_max_num_batched_tokens", f"{batched} is below vllm_max_num_seqs {seqs}")
    return []


def rule_mtp(knobs: Knobs, host: Host, device: str, preset: Preset) -> list[Problem]:
    """Multi-token prediction needs an MTP head and a CUDA device."""
    if not as_bool(knobs, "vllm_mtp"):
        return []
    if not preset.architecture.mtp_head:
        return err("vllm_mtp", f"is true but {preset.name} has no MTP head; set vllm_mtp: false")
    if device != "cuda" and serves_vllm(knobs):
        return err("vllm_mtp", "speculative decoding is only set up for the cuda device; set vllm_mtp: false")
    tokens = as_int(knobs, "vllm_mtp_tokens")
    if tokens is None or not 1 <= tokens <= 4:
        return err("vllm_mtp_tokens", f"must be 1 to 4 (1 or 2 recommended), got {knobs.get('vllm_mtp_tokens')!r}")
    return []


def rule_context(knobs: Knobs, host: Host, device: str, preset: Preset) -> list[Problem]:
    """Served context stays within the model's native context unless rope scaling is set."""
    problems: list[Problem] = []
    length, bad_length = positive(knobs, "vllm_max_model_len")
    if bad_length:
        return bad_length
    if length > preset.native_context and not knobs.get("vllm_rope_override"):
        problems += err(
            "vllm_max_model_len",
            f"{length} exceeds the native context {preset.native_context} of "
            f"{preset.name}; lower it or set vllm_rope_override (YaRN)",
        )
    # The other engines' context knobs (vLLM's is checked above, with its rope override).
    for knob in (engine.context_knob for engine in ENGINES if engine.context_knob != "vllm_max_model_len"):
        value = as_int(knobs, knob)
        if value is not None and value > preset.native_context:
            problems += err(knob, f"{value} exceeds the native context {preset.native_context} of {preset.name}")
    return problems


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


def rule_extra_args(knobs: Knobs, host: Host, device: str, preset: Preset) -> list[Problem]:
    """Extra engine arguments are a list of strings (or numbers), none empty, and none a flag
    that a knob owns: the rules read the knob, so a flag set behind it would go unchecked."""
    problems: list[Problem] = []
    for engine in (engine for engine in ENGINES if engine.extra_args_knob):
        knob = engine.extra_args_knob
        value = knobs.get(knob)
        if value is None:
            continue
        if not isinstance(value, list):
            kind = "a string" if isinstance(value, str) else type(value).__name__
            problems += err(
                knob,
                f"needs a YAML list of strings, one argument each (e.g. [--swap-space, '4']); got {kind} {value!r}",
            )
            continue
        for arg in value:
            if isinstance(arg, bool) or not isinstance(arg, str | int | float):
                problems += err(knob, f"every argument must be a string; got {arg!r}")
            elif not str(arg).strip():
                problems += err(knob, f"holds an empty argument {arg!r}; remove it")
            elif (owner := engine.owner_of(str(arg))) is not None:
                problems += err(knob, f"{str(arg).split('=', 1)[0]} is set by {owner}; set that knob instead")
    return problems
