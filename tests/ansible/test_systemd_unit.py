"""The shared systemd_unit role (included by the vllm, ollama, llamacpp, open_webui and watchdog roles), run
by real Ansible with the host's real systemd-analyze on unit files written here: a clean unit
passes, a unit with a warning fails naming it, check mode runs neither task, and its argument
spec refuses a parameter of the wrong type."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tests.helpers import REPO, run_playbook

pytestmark = pytest.mark.ansible

PLAYBOOK = "tests/ansible/systemd_unit.yml"
CLEAN = "[Unit]\nDescription=clean\n\n[Service]\nExecStart=/bin/true\n\n[Install]\nWantedBy=multi-user.target\n"
WARNS = "[Unit]\nDescription=warns\n\n[Service]\nExecStart=/bin/true\nNoSuchSetting=1\n"


def _units(tmp_path: Path, *texts: str) -> list[str]:
    paths = []
    for number, text in enumerate(texts):
        path = tmp_path / f"llmrig-test-{number}.service"
        path.write_text(text, encoding="utf-8")
        paths.append(str(path))
    return paths


def test_clean_units_pass_and_change_nothing(tmp_path: Path) -> None:
    """Two clean units pass systemd-analyze verify; nothing changed, so systemd is not reloaded."""
    run = run_playbook(PLAYBOOK, {"unit_paths": _units(tmp_path, CLEAN, CLEAN)}, check=False, tmp_path=tmp_path)
    assert run.returncode == 0, run.failed_tasks or run.output[-2000:]
    assert run.changed == 0
    assert "systemd_unit : Check the units with systemd-analyze verify" in run.task_names
    assert "systemd_unit : Reload systemd after a unit change" not in run.task_names


def test_a_unit_with_a_warning_fails(tmp_path: Path) -> None:
    """A warning from systemd-analyze verify (exit status 0) fails the check, showing the warning."""
    paths = _units(tmp_path, CLEAN, WARNS)
    run = run_playbook(PLAYBOOK, {"unit_paths": paths}, check=False, tmp_path=tmp_path)
    assert run.returncode != 0
    assert [name for name, _, _ in run.failed_tasks] == ["systemd_unit : Check the units with systemd-analyze verify"]
    assert "NoSuchSetting" in run.output


def test_check_mode_runs_neither_task(tmp_path: Path) -> None:
    """In check mode the units may not exist yet: neither the reload nor the check runs."""
    extra = {"unit_paths": [str(tmp_path / "missing.service")], "units_changed": True}
    run = run_playbook(PLAYBOOK, extra, check=True, tmp_path=tmp_path)
    assert run.returncode == 0, run.failed_tasks or run.output[-2000:]
    assert run.changed == 0
    assert "systemd_unit : Reload systemd after a unit change" not in run.task_names
    assert "systemd_unit : Check the units with systemd-analyze verify" not in run.task_names
    assert any(name.startswith("systemd_unit : Validating arguments") for name in run.task_names)


def test_its_argument_spec_refuses_a_bad_parameter(tmp_path: Path) -> None:
    """systemd_unit_changed must be a boolean: Ansible's check of the role's entry point stops it first."""
    extra = {"unit_paths": _units(tmp_path, CLEAN), "units_changed": "perhaps"}
    run = run_playbook(PLAYBOOK, extra, check=False, tmp_path=tmp_path)
    assert run.returncode != 0
    name, _, message = run.failed_tasks[0]
    assert name.startswith("systemd_unit : Validating arguments against arg spec 'main'"), name
    assert "systemd_unit_changed" in message


def test_the_service_roles_share_this_one_copy() -> None:
    """vllm, ollama, llamacpp, open_webui, reverse_proxy, watchdog, monitoring (the GPU exporter), grafana,
    backup and gateway (after its unit's removal too) include systemd_unit with both parameters; no other task
    file reloads systemd or runs systemd-analyze itself."""
    importers = []
    for path in sorted(REPO.glob("roles/*/tasks/*.yml")):
        if path.parts[-3] == "systemd_unit":
            continue
        tasks = yaml.safe_load(path.read_text(encoding="utf-8")) or []
        for task in tasks:
            assert "daemon_reload" not in str(task.get("ansible.builtin.systemd_service", "")), path
            assert "systemd-analyze" not in str(task.get("ansible.builtin.command", "")), path
            if (task.get("ansible.builtin.include_role") or {}).get("name") == "systemd_unit":
                assert set(task["vars"]) == {"systemd_unit_paths", "systemd_unit_changed"}, path
                importers.append(path.parts[-3])
    assert importers == [
        "backup",
        "gateway",
        "gateway",
        "grafana",
        "llamacpp",
        "monitoring",
        "ollama",
        "open_webui",
        "reverse_proxy",
        "vllm",
        "watchdog",
    ]
