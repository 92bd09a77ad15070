"""bench.rig.group_vars: the literal knobs that bench run and bench plan start from."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.errors import ConfigError
from bench.rig import literal_knobs
from tests.helpers import REPO


def _write(directory: Path, name: str, text: str) -> None:
    (directory / name).write_text(text, encoding="utf-8")


def test_literal_values_only_later_files_win(tmp_path: Path) -> None:
    _write(tmp_path, "a.yml", "vllm_port: 8000\nvllm_host: '{{ llmrig_bind }}'\nmodel: auto\n")
    _write(tmp_path, "b.yml", "vllm_port: 8001\nlist_knob: [1, 2]\n")
    assert literal_knobs(tmp_path) == {"vllm_port": 8001, "model": "auto", "list_knob": [1, 2]}


def test_named_files_in_the_order_given_missing_ones_skipped(tmp_path: Path) -> None:
    _write(tmp_path, "engine.yml", "inference_engine: ollama\nvllm_port: 1\n")
    _write(tmp_path, "endpoint.yml", "vllm_port: 2\n")
    _write(tmp_path, "other.yml", "vllm_port: 3\n")
    assert literal_knobs(tmp_path, "engine.yml", "endpoint.yml", "absent.yml") == {
        "inference_engine": "ollama",
        "vllm_port": 2,
    }


@pytest.mark.parametrize(("text", "says"), [("a: [1\n", "cannot read"), ("- 1\n- 2\n", "is not a mapping")])
def test_a_broken_file_is_named(tmp_path: Path, text: str, says: str) -> None:
    _write(tmp_path, "bad.yml", text)
    with pytest.raises(ConfigError) as caught:
        literal_knobs(tmp_path)
    message = str(caught.value)
    assert message.startswith("--config-dir: ")
    assert str(tmp_path / "bad.yml") in message
    assert says in message


def test_the_checkouts_endpoint_defaults_are_literal() -> None:
    knobs = literal_knobs(REPO / "group_vars" / "all", "engine.yml", "endpoint.yml")
    assert knobs["inference_engine"] == "vllm"
    assert isinstance(knobs["vllm_port"], int)
