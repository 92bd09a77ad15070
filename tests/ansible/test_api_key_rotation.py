"""Rotating the API key is one variable and one run: the engine role's own tasks rewrite the key
file when llmrig_api_key changes (and only then), and the chain from that file to a restarted
engine is there in each engine role that requires the key. The live restart with the old key
refused is tests/e2e/test_engine_switch.py::test_rotating_the_api_key."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from bench.rig.vllm_flags import service_env
from tests.helpers import REPO, run_playbook

pytestmark = pytest.mark.ansible

OLD = "rotationOldKey4Hd8Sm2Qv6Lp"
NEW = "rotationNewKey7Tc3Wn9Bx5Rk"


def _write(tmp_path: Path, key: str) -> list[str]:
    run = run_playbook(
        "tests/ansible/api_key_file.yml",
        {"llmrig_config_dir": str(tmp_path / "etc"), "llmrig_api_key": key},
        check=False,
        tmp_path=tmp_path,
    )
    assert run.returncode == 0, run.failed_tasks or run.output[-3000:]
    # no_log on every task that sees the key
    assert OLD not in run.output
    assert NEW not in run.output
    return run.changed_tasks


def test_a_new_llmrig_api_key_rewrites_the_key_file_once(tmp_path: Path) -> None:
    """The first run stores the key 0600, the same key again changes nothing, a new key is written."""
    key_file = tmp_path / "etc" / "api_key"
    assert "engine : prepare | Store the API key from llmrig_api_key" in _write(tmp_path, OLD)
    assert key_file.read_text(encoding="utf-8") == OLD + "\n"
    assert oct(key_file.stat().st_mode & 0o777) == "0o600"
    assert key_file.stat().st_uid == 0  # root
    assert _write(tmp_path, OLD) == []
    assert _write(tmp_path, NEW) == ["engine : prepare | Store the API key from llmrig_api_key"]
    assert key_file.read_text(encoding="utf-8") == NEW + "\n"


def test_an_empty_llmrig_api_key_generates_one_key_kept_across_runs(tmp_path: Path) -> None:
    """No key given: the first run generates a long random key in a root-only 0600 file, and the
    next run keeps it (the engines and bench read that file)."""
    key_file = tmp_path / "etc" / "api_key"
    generate = (
        "engine : prepare | Generate the API key once when llmrig_api_key is empty (kept across runs and engines)"
    )
    assert generate in _write(tmp_path, "")
    key = key_file.read_text(encoding="utf-8").strip()
    assert len(key) == 48, len(key)
    assert key.isalnum()
    assert oct(key_file.stat().st_mode & 0o777) == "0o600"
    assert key_file.stat().st_uid == 0  # root
    assert _write(tmp_path, "") == []
    assert key_file.read_text(encoding="utf-8").strip() == key


def _tasks(role: str, name: str) -> list[dict[str, object]]:
    tasks: list[dict[str, object]] = yaml.safe_load(
        (REPO / "roles" / role / "tasks" / name).read_text(encoding="utf-8")
    )
    return tasks


def test_a_changed_key_file_restarts_the_engine() -> None:
    """vLLM and llama.cpp render the key from that file into their 0600 env file; a changed env
    file makes restart_needed true, and the engine role restarts the unit on restart_needed."""
    env = service_env(
        {"vllm_cpu_kvcache_space_gib": 1, "vllm_extra_env": {}}, device="cpu", args=[], cache_dir="/c", api_key=NEW
    )
    assert env["VLLM_API_KEY"] == NEW
    template = (REPO / "roles" / "llamacpp" / "templates" / "llamacpp.env.j2").read_text(encoding="utf-8")
    assert "{'LLAMA_API_KEY': (__llamacpp_api_key_file.content" in template
    for role in ("vllm", "llamacpp"):
        configure = _tasks(role, "configure.yml")
        assert configure[0]["register"] == f"__{role}_api_key_file"  # the slurp of the key file
        env_task = next(task for task in configure if task.get("register") == f"__{role}_env_file")
        assert env_task["ansible.builtin.template"]["mode"] == "0600"  # type: ignore[index]
        publish = _tasks(role, "publish.yml")[0]["ansible.builtin.set_fact"]
        assert f"__{role}_env_file" in publish["llmrig_engine"]["restart_needed"]  # type: ignore[index]
    start = _tasks("engine", "start.yml")[0]["block"][0]["ansible.builtin.systemd_service"]  # type: ignore[index]
    assert start["state"] == "{{ 'restarted' if llmrig_engine.restart_needed else 'started' }}"  # type: ignore[index]
