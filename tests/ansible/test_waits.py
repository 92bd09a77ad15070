"""The roles' waits: each is one task that names what it waits for, never an until/retries loop
(Ansible prints every early try of one as "FAILED - RETRYING", which reads as an error)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

from tests.helpers import REPO


def _tasks(items: Any) -> Iterator[dict[str, Any]]:
    """Every task of a task file, those inside block/rescue/always included."""
    for item in items or []:
        if isinstance(item, dict):
            yield item
            for key in ("block", "rescue", "always"):
                yield from _tasks(item.get(key))


def _role_tasks() -> Iterator[tuple[Path, dict[str, Any]]]:
    for path in sorted(REPO.glob("roles/*/*/*.yml")):
        if path.parent.name in ("tasks", "handlers"):
            for task in _tasks(yaml.safe_load(path.read_text(encoding="utf-8"))):
                yield path.relative_to(REPO), task


def test_no_role_task_retries_until() -> None:
    """No task in any role's tasks/ or handlers/ loops with until: (the waits block in one module call)."""
    looping = [f"{path}: {task.get('name')}" for path, task in _role_tasks() if "until" in task or "retries" in task]
    assert looping == []


def test_open_webui_waits_in_one_named_task_for_its_ready_url() -> None:
    """Open WebUI's start-up wait: the health wait the engine uses, on /ready, naming its own time-out
    knob; the block's rescue waits the same way on the previous release after a rollback."""
    service = yaml.safe_load((REPO / "roles/open_webui/tasks/service.yml").read_text(encoding="utf-8"))
    (block,) = [task for task in service if "block" in task]
    waits = [task for task in block["block"] if "llmrig_wait_healthy" in task]
    assert len(waits) == 1
    (again,) = [task for task in block["rescue"] if "llmrig_wait_healthy" in task]
    assert again["llmrig_wait_healthy"] == waits[0]["llmrig_wait_healthy"]
    assert again["when"] == "__open_webui_roll_back"
    wait = waits[0]
    assert wait["llmrig_wait_healthy"] == {
        "url": "{{ _open_webui_ready_url }}",
        "unit": "{{ _open_webui_unit }}",
        "timeout_s": "{{ open_webui_ready_timeout_s }}",
        "interval_s": 2,
        "timeout_knob": "open_webui_ready_timeout_s",
    }
    assert "has started and set up its database" in wait["name"]
    assert wait["name"].endswith("seconds at most: {{ open_webui_ready_timeout_s }}")
    assert wait["when"] == "not ansible_check_mode"
