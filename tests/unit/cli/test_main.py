"""The bench command line: help a newcomer can follow, presets, and one-line errors."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from bench.cli import main
from tests.helpers import BIN, REPO


def test_help_has_examples() -> None:
    """`bench --help` runs as the installed console script and ends with examples."""
    done = subprocess.run([str(BIN / "bench"), "--help"], capture_output=True, text=True, check=True)
    assert "examples:" in done.stdout
    assert "bench presets qwen3.8-27b-w4a16" in done.stdout


def test_presets_lists_every_preset(capsys: pytest.CaptureFixture[str]) -> None:
    """The list shows each preset with its served name."""
    assert main(["--config-dir", str(REPO), "presets"]) == 0
    out = capsys.readouterr().out
    for name in ("qwen3.8-27b-w4a16", "qwen3.6-35b-a3b-awq", "qwen3-32b-awq", "gemma3-270m"):
        assert name in out


def test_preset_detail(capsys: pytest.CaptureFixture[str]) -> None:
    """One preset shows every field, architecture included."""
    assert main(["--config-dir", str(REPO), "presets", "qwen3.8-27b-w4a16"]) == 0
    out = capsys.readouterr().out
    assert "qwen3_coder" in out
    assert "architecture.full_attention_layers" in out


def test_unknown_preset_is_a_config_error(capsys: pytest.CaptureFixture[str]) -> None:
    """An unknown name exits 2 with one line on stderr and no traceback."""
    assert main(["--config-dir", str(REPO), "presets", "nope"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("bench: error: no preset 'nope'")
    assert "Traceback" not in err


def test_missing_checkout_is_a_config_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Outside a checkout, bench says where it looked and how to point it elsewhere."""
    assert main(["--config-dir", str(tmp_path), "presets"]) == 2
    assert "--config-dir" in capsys.readouterr().err
