"""The hub presets' architecture against the checkpoint's own config.json, where one is committed.

A preset's ``architecture`` drives every cuda KV prediction. For a preset named ``NAME``, the
checkpoint's (or its base model's) config.json, copied unchanged, goes to
``tests/data/configs/NAME.config.json`` with ``NAME.source.md`` beside it naming the repository,
path and revision it was copied from. Then the preset's architecture must equal what
``bench plan --config-json`` derives from that file. A preset without such a copy must say in
its source comment in models.yml that its figures are unverified.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.rig.plan_inputs import architecture_from_config
from bench.rig.presets import load_presets
from tests.helpers import GROUP_VARS, REPO

MODELS = GROUP_VARS / "models.yml"
CONFIGS = REPO / "tests" / "data" / "configs"
HUB_PRESETS = sorted(name for name, preset in load_presets(MODELS).items() if preset.source == "hf")


def _source_comment(name: str) -> str:
    """The comment lines directly above the preset's key in models.yml."""
    lines = MODELS.read_text(encoding="utf-8").splitlines()
    index = lines.index(f"  {name}:")
    comment: list[str] = []
    while index > 0 and lines[index - 1].lstrip().startswith("#"):
        index -= 1
        comment.insert(0, lines[index].strip().lstrip("#").strip())
    return " ".join(comment)


def test_the_hub_presets_are_the_cuda_ones() -> None:
    """The check below covers the three presets that cuda hosts serve."""
    assert HUB_PRESETS == ["qwen3-32b-awq", "qwen3.6-35b-a3b-awq", "qwen3.8-27b-w4a16"]


@pytest.mark.parametrize("name", HUB_PRESETS)
def test_architecture_matches_the_committed_config_or_is_marked_unverified(name: str) -> None:
    """With a committed config.json the figures must equal it; without one, the comment says so."""
    preset = load_presets(MODELS)[name]
    config = CONFIGS / f"{name}.config.json"
    if not config.is_file():
        comment = _source_comment(name)
        assert comment.startswith("Source:"), f"{name}: no source comment above the preset"
        assert "Unverified:" in comment, f"{name}: no {config.name} committed and not marked unverified"
        return
    source = CONFIGS / f"{name}.source.md"
    assert source.is_file(), f"{config.name} needs {source.name} naming where it was copied from"
    assert "Unverified:" not in _source_comment(name), f"{name}: verified by {config.name}, comment says not"
    # native_context is left out: max_position_embeddings can exceed the trained length that the
    # preset records from the model card.
    arch, _native = architecture_from_config(json.loads(config.read_text(encoding="utf-8")), str(config))
    assert arch == preset.architecture


def test_every_committed_config_belongs_to_a_hub_preset() -> None:
    """A config.json under tests/data/configs that no preset is checked against is a stray."""
    committed = sorted(path.name.removesuffix(".config.json") for path in Path(CONFIGS).glob("*.config.json"))
    assert set(committed) <= set(HUB_PRESETS)
