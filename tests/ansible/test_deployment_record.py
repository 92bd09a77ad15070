"""deployment.json as the engine role really writes it: roles/engine/tasks/record.yml's expression,
rendered by Ansible with the host facts preflight gathers (two GPUs, through the nvidia-smi fake),
passes through the llmrig_deployment filter, and bench reads the file back as its typed record;
verify and Open WebUI read the host's file back through llmrig_deployment_read."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from bench.codec import to_json
from bench.rig import ENGINE_NAMES, read_deployment
from tests import deployments
from tests.helpers import REPO, PlaybookRun, ansible_render, run_playbook

pytestmark = pytest.mark.ansible

PLAYBOOK = "tests/ansible/deployment_record.yml"
PUBLISHED = {
    "name": "vllm",
    "unit": "vllm.service",
    "health_url": "http://127.0.0.1:8000/health",
    "base_url": "http://gpu-box:8000/v1",
    "local_base_url": "http://127.0.0.1:8000/v1",
    "metrics_url": "http://gpu-box:8000/metrics",
    "api_key_file": "/etc/llmrig/api_key",
    "served_model_name": "qwen3.8-27b",
    "restart_needed": False,
}
RECORD = {
    "startup": {"kv_cache_tokens": 228010, "max_concurrency": 3.48, "attention_backend": "TRITON_ATTN"},
    "details": {
        "distribution": "vllm",
        "versions": {"vllm": "0.33.0"},
        "args": ["--model", "/srv/llmrig/models/m", "--tensor-parallel-size", "2"],
        "env": {"HF_HUB_OFFLINE": "1"},
        "secret_env_names": ["VLLM_API_KEY"],
        "unit": "vllm.service",
        "model": {"source": "hf", "path": "/srv/llmrig/models/m"},
    },
}


def _write_task() -> dict[str, Any]:
    tasks = yaml.safe_load((REPO / "roles/engine/tasks/record.yml").read_text(encoding="utf-8"))
    (task,) = [task for task in tasks if task["name"].startswith("record | Write deployment.json")]
    return dict(task)


def _render(tmp_path: Path, published: dict[str, Any], **knobs: Any) -> tuple[PlaybookRun, Path]:
    """record.yml's write task rendered on localhost after preflight, with ``published`` as
    llmrig_engine (and ``knobs`` over group_vars and the registered results, as extra vars)."""
    task = _write_task()
    engine_vars = yaml.safe_load((REPO / "roles/engine/vars/main.yml").read_text(encoding="utf-8"))
    dump = tmp_path / "deployment.json"
    extra = {
        "record_dump": str(dump),
        "record_content": task["ansible.builtin.copy"]["content"],
        **task["vars"],
        **{
            name: engine_vars[name]
            for name in ("_engine_units", "_engine_endpoint", "_engine_proxy_url", "_engine_api_key_path")
        },
        "ansible_host": "gpu-box",
        "__engine_show": {
            "stdout_lines": [
                "InvocationID=0123abcd",
                "ActiveEnterTimestamp=Tue 2026-12-01 10:00:00 UTC",
                "ExecMainStartTimestampMonotonic=5000000400",
            ]
        },
        **knobs,
        "llmrig_engine": published,
        "llmrig_engine_record": RECORD,
        "__engine_git": {"rc": 0, "stdout": "v1.4-2-gabc1234"},
    }
    return run_playbook(PLAYBOOK, extra, host="gpu", check=False, tmp_path=tmp_path), dump


def test_the_role_writes_a_record_bench_reads(tmp_path: Path) -> None:
    """The file holds schema_version 3, the engine's section under its name, both base URLs and the
    GPUs preflight found; bench reads it back."""
    run, path = _render(tmp_path, PUBLISHED)
    assert run.returncode == 0, run.failed_tasks or run.output[-3000:]
    document = json.loads(path.read_text(encoding="utf-8"))
    assert document["schema_version"] == 3
    assert "gateway" not in document  # no inventory group llmrig_gateway
    assert document["vllm"]["args"][-2:] == ["--tensor-parallel-size", "2"]
    record = read_deployment(path)
    stopped = [name for name in ENGINE_NAMES if name != "vllm"]  # every other engine of the table
    assert (record.engine, record.engines.stopped, record.config_version) == ("vllm", stopped, "v1.4-2-gabc1234")
    assert (record.endpoint.base_url, record.endpoint.local_base_url) == (
        PUBLISHED["base_url"],
        PUBLISHED["local_base_url"],
    )
    assert [gpu.memory_mib for gpu in record.host.gpus] == [16311, 16311]
    assert record.startup.invocation_id == "0123abcd"
    assert record.startup.kv_cache_tokens == 228010
    assert record.section.facts["versions"] == {"vllm": "0.33.0"}


# What the engine role gathers to time a start it made (roles/engine/tasks/start.yml and record.yml):
# journalctl --output=json lines of the invocation, the health wait's and the first answer's returns.
_JOURNAL = "\n".join(
    json.dumps({"__MONOTONIC_TIMESTAMP": str(stamp), "_BOOT_ID": "b0", field: "0123abcd"})
    for stamp, field in ((5_000_000_000, "INVOCATION_ID"), (5_000_120_000, "_SYSTEMD_INVOCATION_ID"))
)
TIMED = {
    "__engine_start": {"changed": True},
    "__engine_wait": {"invocation_id": "0123abcd", "boot_id": "b0", "healthy_monotonic_us": 5_095_300_000},
    "__engine_start_journal": {"stdout": _JOURNAL},
    "__engine_first_answer": {
        "answered": True,
        "sent_monotonic_us": 5_101_000_000,
        "answered_monotonic_us": 5_101_420_000,
        "msg": "",
    },
}


def test_a_start_this_run_made_is_timed_to_its_first_answer(tmp_path: Path) -> None:
    """The unit's start (its journal's first line) to the health wait's first 200 is 95.3 s, the first
    chat completion 0.42 s: startup.ready_s is 95.72 in the typed record."""
    run, path = _render(tmp_path, PUBLISHED, **TIMED)
    assert run.returncode == 0, run.failed_tasks or run.output[-3000:]
    startup = read_deployment(path).startup
    assert (startup.ready_s, startup.health_s, startup.first_answer_s, startup.ready_reason) == (
        95.72,
        95.3,
        0.42,
        None,
    )
    assert "ready_reason" not in json.loads(path.read_text(encoding="utf-8"))["startup"]


def test_a_second_run_keeps_the_figure_of_the_same_start_and_none_for_another(tmp_path: Path) -> None:
    """A run that did not start the unit: the host's record of the same invocation keeps its figures
    (the file does not change); a start made outside the run is null, saying why."""
    run, path = _render(tmp_path, PUBLISHED, **TIMED)
    assert run.returncode == 0, run.failed_tasks or run.output[-3000:]
    first = path.read_bytes()
    previous = {"content": base64.b64encode(first).decode()}
    again = {"__engine_start": {"changed": False}, "__engine_previous": previous}
    run, path = _render(tmp_path, PUBLISHED, **again)
    assert run.returncode == 0, run.failed_tasks or run.output[-3000:]
    assert path.read_bytes() == first
    restarted = {
        "stdout_lines": ["InvocationID=4567ef", "ActiveEnterTimestamp=Tue 2026-12-01 11:00:00 UTC"],
    }
    run, path = _render(tmp_path, PUBLISHED, **again, __engine_show=restarted)
    assert run.returncode == 0, run.failed_tasks or run.output[-3000:]
    document = json.loads(path.read_text(encoding="utf-8"))
    assert document["startup"]["ready_s"] is None
    assert document["startup"]["ready_reason"].startswith("invocation 4567ef was started outside site.yml")
    assert read_deployment(path).startup.ready_s is None


def test_with_the_proxy_clients_get_its_url_and_the_key_for_every_engine(tmp_path: Path) -> None:
    """reverse_proxy_enabled: base_url and metrics_url are the proxy's (the inventory address for a
    0.0.0.0 bind), the key file is named even for Ollama, which has none of its own; the host's
    own URLs still dial the engine on loopback."""
    ollama = {
        **PUBLISHED,
        "name": "ollama",
        "metrics_url": "",
        "api_key_file": "",
        "health_url": "http://127.0.0.1:11434/",
    }
    run, path = _render(tmp_path, ollama, reverse_proxy_enabled=True, reverse_proxy_port=8001)
    assert run.returncode == 0, run.failed_tasks or run.output[-3000:]
    endpoint = read_deployment(path).endpoint
    assert (endpoint.base_url, endpoint.metrics_url, endpoint.api_key_file) == (
        "http://gpu-box:8001/v1",
        "",
        "/etc/llmrig/api_key",
    )
    assert (endpoint.local_base_url, endpoint.health_url) == (PUBLISHED["local_base_url"], ollama["health_url"])
    # An address of the host (preflight binds it): the test's namespace has 192.0.2.1 on its LAN.
    run, path = _render(tmp_path, PUBLISHED, reverse_proxy_enabled=True, reverse_proxy_host="192.0.2.1")
    assert run.returncode == 0, run.failed_tasks or run.output[-3000:]
    assert read_deployment(path).endpoint.metrics_url == "http://192.0.2.1:8001/metrics"


def test_a_gateway_host_records_the_front_and_the_boxes(tmp_path: Path) -> None:
    """On a gateway host (the gateway role's tasks/args.yml set __gateway_record earlier in the
    run) the record keeps it; bench then sends clients to the front."""
    run, path = _render(tmp_path, PUBLISHED, __gateway_record=deployments.gateway())
    assert run.returncode == 0, run.failed_tasks or run.output[-3000:]
    record = read_deployment(path)
    assert record.gateway is not None
    assert to_json(record.gateway) == deployments.gateway()
    assert record.client_base_url == "http://box1:8002/v1"
    assert record.endpoint.base_url == PUBLISHED["base_url"]


def test_a_part_that_does_not_fit_fails_the_task_naming_it(tmp_path: Path) -> None:
    """An engine role that published a port where the local base URL goes: the write fails, naming the field."""
    run, dump = _render(tmp_path, {**PUBLISHED, "local_base_url": 8000})
    assert run.returncode != 0
    assert not dump.exists()
    (name, _, message) = run.failed_tasks[-1]
    assert name == "Write the record"
    assert "endpoint.local_base_url: 8000 is not a string" in message


def _recorded(tmp_path: Path) -> str:
    """The record the role writes, base64 as ansible.builtin.slurp returns it."""
    run, path = _render(tmp_path, PUBLISHED)
    assert run.returncode == 0, run.failed_tasks or run.output[-3000:]
    return base64.b64encode(path.read_bytes()).decode()


def test_verify_and_open_webui_dial_the_recorded_local_base_url(tmp_path: Path) -> None:
    """roles/engine/tasks/verify.yml checks the engine at the record's local base URL, and Open
    WebUI, when the engine play did not run, points at the same one (no URL rebuilt from another)."""
    content = _recorded(tmp_path)
    tasks = yaml.safe_load((REPO / "roles/engine/tasks/verify.yml").read_text(encoding="utf-8"))
    (decide,) = [task for task in tasks if task["name"].startswith("verify | Decide the endpoint to check")]
    facts = decide["ansible.builtin.set_fact"]
    variables = {
        "__engine_deployment_file": {"content": content},
        "_engine_deployment_path": "/etc/llmrig/deployment.json",
    }
    assert ansible_render(facts["__engine_base_url"], variables) == PUBLISHED["local_base_url"]
    preflight = yaml.safe_load((REPO / "roles/open_webui/tasks/preflight.yml").read_text(encoding="utf-8"))
    (decide,) = [task for task in preflight if task["name"].startswith("preflight | Decide which engine Open WebUI")]
    variables = {
        "__open_webui_engine": decide["ansible.builtin.set_fact"]["__open_webui_engine"],
        **decide["vars"],
        "__open_webui_deployment_file": {"content": content},
        "_open_webui_deployment_path": "/etc/llmrig/deployment.json",
    }
    engine = ansible_render("{{ __open_webui_engine }}", variables)
    assert engine == {
        "local_base_url": PUBLISHED["local_base_url"],
        "api_key_file": PUBLISHED["api_key_file"],
        "served_model_name": PUBLISHED["served_model_name"],
        "name": "vllm",
    }
