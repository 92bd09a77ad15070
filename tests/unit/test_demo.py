"""scripts/demo's ending and its box: the environment file bench finds the box through, the next
three commands (each one that bench and the box's inventory accept), what the tiny model cannot
do, what --remove leaves with its sizes, and the one engine port of the demo box."""

from __future__ import annotations

import json
import os
import shlex
import shutil
from pathlib import Path

import pytest

from bench.cli.main import build_parser
from bench.cli.target import DEMO_ENV_FILE, resolve_target
from bench.rig.engines import ENGINES
from bench.rig.presets import parse_preset
from bench.rig.rules.network import rule_ports
from bench.rig.rules.proxy import rule_reverse_proxy, rule_vllm_loopback
from tests import demo, deployments
from tests.box import API_PORT, Box, cpu_host_vars
from tests.helpers import GROUP_VARS, group_vars

BASE_URL = "http://127.0.0.1:41234/v1"


def test_the_demo_writes_the_file_bench_reads() -> None:
    """One path on both sides: what scripts/demo writes is what bench looks for."""
    assert demo.ENV_FILE == DEMO_ENV_FILE


def test_bench_reaches_the_box_through_the_written_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """After the demo, plain `bench probe` in the checkout targets the box's published port with its key."""
    for name in [name for name in os.environ if name.startswith("BENCH_")]:
        monkeypatch.delenv(name)
    shutil.copytree(GROUP_VARS, tmp_path / "group_vars" / "all")
    artifacts = tmp_path / demo.ARTIFACTS
    artifacts.mkdir(parents=True)
    record = deployments.record(
        served_model_name=demo.MODEL, config_version="21a739c", base_url="http://llmrig-demo:8000/v1"
    )
    (artifacts / "deployment.json").write_text(json.dumps(record), encoding="utf-8")
    (artifacts / "api_key").write_text("k" * 32, encoding="utf-8")
    text = demo.write_env(tmp_path, BASE_URL).read_text(encoding="utf-8")
    assert "k" * 32 not in text  # the key stays in its 0600 file
    assert "API_KEY" not in text
    target = resolve_target(build_parser().parse_args(["probe"]), tmp_path / "group_vars" / "all")
    assert (target.base_url, target.api_key, target.model, target.tag) == (BASE_URL, "k" * 32, demo.MODEL, "21a739c")


def test_the_next_commands_are_ones_bench_and_the_box_accept() -> None:
    """Three commands, each alone on its line (copy-pasteable); the bench ones parse, without a target flag."""
    steps = demo.next_steps()
    assert [shlex.split(step.command)[0] for step in steps] == ["ansible-playbook", "bench", "bench"]
    ending = demo.ending(412, "http://127.0.0.1:41235", BASE_URL, "llmrig-demo")
    lines = [line.strip() for line in ending.splitlines()]
    for step in steps:
        assert step.command in lines
    for step in steps[1:]:
        args = build_parser().parse_args(shlex.split(step.command)[1:])
        assert (args.base_url, args.deployment) == (None, None)
    playbook = shlex.split(steps[0].command)
    assert playbook[1:] == ["-i", str(demo.INVENTORY), "site.yml"]
    assert demo.INVENTORY == demo.DEMO / "inventory"  # where tests.box writes hosts.yml under --dir build/demo
    assert "ansible-playbook -i build/demo/inventory site.yml -e inference_engine=llamacpp" in lines


def test_the_ending_says_what_the_tiny_model_cannot_do() -> None:
    """The URLs, and the two limits a newcomer meets: tools get a 400, answers need the stop string."""
    ending = " ".join(demo.ending(412, "http://127.0.0.1:41235", BASE_URL, "llmrig-demo").split())
    assert "Open WebUI: http://127.0.0.1:41235" in ending
    assert f"Engine: {BASE_URL}" in ending
    assert "the same URL whichever engine serves" in ending
    assert "a request with tools gets a clean 400" in ending
    assert "It answers in one line only with a stop string" in ending
    assert "bench compare then shows its tag but does not rank it (--include-failing ranks it anyway)" in ending


def test_remove_says_what_stays_with_its_size_and_how_to_remove_it(tmp_path: Path) -> None:
    """build/ and results/ exist, reports/ does not: both are listed with du's size, one rm removes them."""
    (tmp_path / "build" / "testrig").mkdir(parents=True)
    (tmp_path / "build" / "testrig" / "wheel.whl").write_bytes(os.urandom(3 * 1024 * 1024))
    (tmp_path / "results" / "demo").mkdir(parents=True)
    (tmp_path / "results" / "demo" / "notes.txt").write_text("a run", encoding="utf-8")
    lines = demo.leftovers(tmp_path, None).splitlines()
    assert lines[0].startswith("demo: left in place for the next run, 3.")  # 3.0M or 3.1M in all
    build = next(line for line in lines if line.strip().startswith("build/"))
    assert build.split()[1] in ("3.0M", "3.1M")  # the 3 MiB wheel and the folders' own blocks
    assert any(line.strip().startswith("results/") and "every tag of this checkout" in line for line in lines)
    assert not any("reports/" in line for line in lines)
    assert "  rm -rf build results" in lines
    assert not any("podman rmi" in line for line in lines)
    (tmp_path / ".venv").mkdir()
    lines = demo.leftovers(tmp_path, None).splitlines()
    assert "  rm -rf build results" in lines  # .venv apart, and last: everything runs from it
    assert lines[-2].startswith("  rm -rf .venv ")


def test_remove_names_the_image_when_podman_holds_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The test rig's image is in podman's storage, not under build/: its size and its podman rmi."""
    monkeypatch.setattr(demo, "image_size", lambda image: "0.4G")
    lines = demo.leftovers(tmp_path, "localhost/llmrig-testrig:bookworm-abc").splitlines()
    assert any(line.split()[:4] == ["0.4G", "the", "podman", "image"] for line in lines)
    assert "  podman rmi localhost/llmrig-testrig:bookworm-abc" in lines
    monkeypatch.setattr(demo, "image_size", lambda image: None)
    assert demo.leftovers(tmp_path, "localhost/llmrig-testrig:bookworm-abc") == "demo: nothing else of the demo is left"


def test_the_demo_box_serves_every_engine_through_the_proxy_on_the_published_port(tmp_path: Path) -> None:
    """The proxy listens on every interface of the box at the one published port and every engine
    on loopback behind it, so the URL stays true whichever engine serves; preflight accepts that."""
    box = Box("llmrig-demo", tmp_path / "inventory", tmp_path / "artifacts", tmp_path)
    settings = cpu_host_vars(box)
    assert (settings["reverse_proxy_enabled"], settings["reverse_proxy_port"]) == (True, API_PORT)
    knobs: dict[str, object] = {}
    for values in group_vars().values():
        knobs.update(values or {})
    knobs.update(settings)
    assert knobs["reverse_proxy_host"] == "0.0.0.0"
    preset = parse_preset("gemma3-270m", knobs["model_presets"]["gemma3-270m"])  # type: ignore[index]
    for engine in ENGINES:
        assert knobs[engine.host_knob] == "127.0.0.1"
        switched = {**knobs, "inference_engine": engine.name}
        for rule in (rule_ports, rule_reverse_proxy, rule_vllm_loopback):
            assert rule(switched, {}, "cpu", preset) == [], (engine.name, rule.__name__)
