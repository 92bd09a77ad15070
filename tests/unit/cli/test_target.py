"""Where bench finds its target: BENCH_DEPLOYMENT, a deployment.json under artifacts/, and the
demo box that scripts/demo leaves in build/demo/bench.env, each in a checkout of its own."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from bench.cli.main import build_parser
from bench.cli.target import DEMO_ENV_FILE, discover, resolve_target
from bench.errors import ConfigError
from bench.measure.target import Target
from bench.rig import parse_deployment
from tests import deployments
from tests.helpers import BIN, GROUP_VARS

DEMO_URL = "http://127.0.0.1:40123/v1"  # the box's published engine port on this machine


@pytest.fixture
def checkout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A checkout with the real group_vars/all and none of this process's BENCH_* variables."""
    for name in [name for name in os.environ if name.startswith("BENCH_")]:
        monkeypatch.delenv(name)
    root = tmp_path / "repo"
    shutil.copytree(GROUP_VARS, root / "group_vars" / "all")
    return root


def _deployment(path: Path, version: str, base_url: str = "http://10.88.0.5:8000/v1") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    record = deployments.record(served_model_name="gemma3-270m", config_version=version, base_url=base_url)
    path.write_text(json.dumps(record), encoding="utf-8")
    (path.parent / "api_key").write_text("demo-key-0123456789\n", encoding="utf-8")
    return path


def _demo(checkout: Path, *lines: str) -> Path:
    """The box scripts/demo leaves behind: its fetched deployment.json and build/demo/bench.env."""
    deployment = _deployment(checkout / "build" / "demo" / "artifacts" / "box" / "deployment.json", "demo-1")
    text = lines or ("# written by scripts/demo", "BENCH_DEPLOYMENT=build/demo/artifacts/box/deployment.json",
                     f"BENCH_BASE_URL={DEMO_URL}")  # fmt: skip
    (checkout / DEMO_ENV_FILE).write_text("\n".join(text) + "\n", encoding="utf-8")
    return deployment


def _target(checkout: Path, *flags: str) -> Target:
    args = build_parser().parse_args(["probe", *flags])
    return resolve_target(args, checkout / "group_vars" / "all")


def test_the_demo_box_is_found_when_nothing_else_names_a_target(checkout: Path) -> None:
    """No flag, no variable, no artifacts/: bench reaches the demo box at its published port, with its key."""
    deployment = _demo(checkout)
    target = _target(checkout)
    assert (target.base_url, target.api_key, target.model, target.tag) == (
        DEMO_URL, "demo-key-0123456789", "gemma3-270m", "demo-1"
    )  # fmt: skip
    assert target.sources["base_url"] == f"BENCH_BASE_URL ({DEMO_ENV_FILE})"
    assert target.sources["api_key"] == str(deployment.parent / "api_key")
    assert target.engine == "vllm"


def test_a_box_of_your_own_under_artifacts_wins_over_the_demo(checkout: Path) -> None:
    """Once site.yml fetched a deployment.json into artifacts/, the demo's file is not read."""
    _demo(checkout)
    _deployment(checkout / "artifacts" / "gpu-box" / "deployment.json", "v1.2", "http://192.168.1.20:8000/v1")
    target = _target(checkout)
    assert (target.base_url, target.tag) == ("http://192.168.1.20:8000/v1", "v1.2")
    assert "bench.env" not in target.sources["base_url"]


def test_a_base_url_given_leaves_the_demo_alone(checkout: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """--base-url or BENCH_BASE_URL names another server: no demo deployment.json is mixed in."""
    _demo(checkout)
    target = _target(checkout, "--base-url", "http://127.0.0.1:9000/v1")
    assert (target.base_url, target.deployment, target.engine) == ("http://127.0.0.1:9000/v1", None, "unknown")
    monkeypatch.setenv("BENCH_BASE_URL", "http://127.0.0.1:9001/v1")
    assert discover(build_parser().parse_args(["probe"]), checkout / "group_vars" / "all").deployment is None


def test_bench_deployment_names_the_record(checkout: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """BENCH_DEPLOYMENT stands for --deployment; the flag still wins, and a missing file is named."""
    _demo(checkout)
    other = _deployment(checkout / "elsewhere" / "deployment.json", "lab-3", "http://10.0.0.7:8081/v1")
    monkeypatch.setenv("BENCH_DEPLOYMENT", str(other))
    assert _target(checkout).base_url == "http://10.0.0.7:8081/v1"
    flagged = _deployment(checkout / "flagged" / "deployment.json", "lab-4")
    assert _target(checkout, "--deployment", str(flagged)).tag == "lab-4"
    monkeypatch.setenv("BENCH_DEPLOYMENT", str(checkout / "nowhere.json"))
    with pytest.raises(ConfigError, match=r"^BENCH_DEPLOYMENT: .*nowhere\.json does not exist$"):
        _target(checkout)


def test_a_removed_demo_box_says_how_to_fix_it(checkout: Path) -> None:
    """bench.env left behind with its deployment.json gone: the error names the file and the fix."""
    _demo(checkout).unlink()
    with pytest.raises(ConfigError, match=r"bench\.env: BENCH_DEPLOYMENT .* does not exist; run scripts/demo again"):
        _target(checkout)


def test_a_line_of_another_shape_is_refused_with_its_number(checkout: Path) -> None:
    """Only NAME=VALUE lines of the two variables the demo writes; anything else names file and line."""
    _demo(checkout, "BENCH_DEPLOYMENT=build/demo/artifacts/box/deployment.json", "BENCH_API_KEY=secret")
    with pytest.raises(ConfigError, match=r"bench\.env:2: want one of BENCH_DEPLOYMENT, BENCH_BASE_URL"):
        _target(checkout)


def test_no_target_at_all_still_says_which_flag_to_give(checkout: Path) -> None:
    """Without the demo's file, artifacts/ or a flag, bench falls back to group_vars/all/endpoint.yml."""
    target = _target(checkout)
    assert target.base_url == "http://127.0.0.1:8000/v1"
    assert target.deployment is None


@pytest.mark.parametrize("command", ["run", "probe", "capacity"])
def test_help_documents_the_demo_box(command: str) -> None:
    """Each measuring command's --help says where bench looks, the demo's file included."""
    done = subprocess.run([str(BIN / "bench"), command, "--help"], capture_output=True, text=True, check=True)
    text = " ".join(done.stdout.split())
    assert "BENCH_DEPLOYMENT" in text
    assert "scripts/demo writes build/demo/bench.env" in text


def test_a_record_without_metrics_is_believed_at_any_url() -> None:
    """Ollama records no /metrics: reached at the demo's published port (another URL than the
    record's), bench scrapes nothing; vLLM's record reached elsewhere is scraped beside /v1."""
    ollama = parse_deployment(deployments.record("ollama"), "d")
    assert Target("http://127.0.0.1:45000/v1", "", None, "t", "ollama", ollama).metrics_url is None
    vllm = parse_deployment(deployments.record("vllm"), "d")
    assert (
        Target("http://127.0.0.1:45000/v1", "k", None, "t", "vllm", vllm).metrics_url
        == "http://127.0.0.1:45000/metrics"
    )
    assert Target(vllm.endpoint.base_url, "k", None, "t", "vllm", vllm).metrics_url == vllm.endpoint.metrics_url


def test_the_key_file_gives_the_key_and_is_named_as_its_source(
    checkout: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    key_file = tmp_path / "key"
    key_file.write_text("  file-key-0123456789  \nsecond line\n", encoding="utf-8")
    _demo(checkout)
    target = _target(checkout, "--api-key-file", str(key_file))
    assert target.api_key == "file-key-0123456789"
    assert target.sources["api_key"] == f"--api-key-file ({key_file})"
    assert capsys.readouterr().err == ""


def test_a_key_on_the_command_line_works_with_a_warning(checkout: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _demo(checkout)
    target = _target(checkout, "--api-key", "argv-key-0123456789")
    assert target.api_key == "argv-key-0123456789"
    err = capsys.readouterr().err
    assert err.startswith("bench: warning: --api-key puts the key in the process list")
    assert "--api-key-file or BENCH_API_KEY" in err
    assert "argv-key" not in err


def test_bench_api_key_beats_the_fetched_file_without_a_warning(
    checkout: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _demo(checkout)
    monkeypatch.setenv("BENCH_API_KEY", "env-key-0123456789")
    target = _target(checkout)
    assert (target.api_key, target.sources["api_key"]) == ("env-key-0123456789", "BENCH_API_KEY")
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize("content", ["", "\n  \n"])
def test_an_empty_or_missing_key_file_is_refused_naming_the_flag(checkout: Path, tmp_path: Path, content: str) -> None:
    key_file = tmp_path / "key"
    key_file.write_text(content, encoding="utf-8")
    with pytest.raises(ConfigError, match=rf"^--api-key-file: {key_file} is empty"):
        _target(checkout, "--api-key-file", str(key_file))
    with pytest.raises(ConfigError, match=r"^--api-key-file: cannot read .*/absent \(FileNotFoundError\)$"):
        _target(checkout, "--api-key-file", str(tmp_path / "absent"))


def test_the_key_and_the_key_file_cannot_both_be_given(checkout: Path, tmp_path: Path) -> None:
    with pytest.raises(SystemExit):
        _target(checkout, "--api-key", "k" * 20, "--api-key-file", str(tmp_path / "key"))
