"""The shared venv role (included by the vllm, llamacpp and open_webui roles), run by real Ansible on
folders under tmp_path, with a stand-in for pip: a fresh install makes a venv and the symlink, an
upgrade makes a new venv beside the one in use, switches the symlink and keeps exactly one
previous venv, a real venv of an older llmrig is moved aside, and a run that installs nothing or a
check run changes nothing. Pausing the watchdog (real systemd) is shown by the e2e upgrade of Open
WebUI; here the watchdog units do not exist, so the pause is skipped."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from tests.helpers import PlaybookRun, run_playbook

pytestmark = pytest.mark.ansible

PLAYBOOK = "tests/ansible/venv.yml"
PINS = {"1.0": ["app==1.0", "torch==2.13.0"], "2.0": ["app==2.0", "torch==2.13.0"], "3.0": ["app==3.0"]}


def _name(label: str) -> str:
    """The venv's folder name as the role makes it: the label and the first 8 hex digits of the pins' SHA-1."""
    digest = hashlib.sha1("\n".join(PINS[label]).encode()).hexdigest()
    return f"venv-{label}-{digest[:8]}"


def _run(tmp_path: Path, label: str, *, install: bool, check: bool = False, root: Path | None = None) -> PlaybookRun:
    """One run; the install folder is ``root``/app (default: tmp_path/app)."""
    link = (root or tmp_path) / "app" / "venv"
    extra = {"link": str(link), "label": label, "pins": PINS[label], "install_needed": install}
    run = run_playbook(PLAYBOOK, extra, check=check, tmp_path=tmp_path)
    assert run.returncode == 0, run.failed_tasks or run.output[-3000:]
    return run


def _tree(tmp_path: Path) -> dict[str, str]:
    """Each entry of the install folder: a symlink's target name, or a venv's label (its bin/python)."""
    app = tmp_path / "app"
    return {
        entry.name: (
            f"-> {entry.readlink().name}" if entry.is_symlink() else (entry / "bin" / "python").read_text().strip()
        )
        for entry in sorted(app.iterdir())
    }


def test_a_fresh_install_makes_the_venv_and_the_symlink_and_a_rerun_changes_nothing(tmp_path: Path) -> None:
    (tmp_path / "app").mkdir()
    first = _run(tmp_path, "1.0", install=True)
    assert "venv : switch | Point the path the units use at this run's venv" in first.changed_tasks
    assert _tree(tmp_path) == {"venv": f"-> {_name('1.0')}", _name("1.0"): "1.0"}
    assert (tmp_path / "app" / "venv").readlink() == tmp_path / "app" / _name("1.0")
    again = _run(tmp_path, "1.0", install=False)
    assert again.changed == 0, again.changed_tasks
    assert _tree(tmp_path) == {"venv": f"-> {_name('1.0')}", _name("1.0"): "1.0"}


def test_two_services_in_one_run_each_get_their_venv(tmp_path: Path) -> None:
    """site.yml installs vLLM's venv, then Open WebUI's: the second service's decision is its own
    (the first one's switch registered a result that must not stand in for it), twice over."""
    links = [tmp_path / name / "venv" for name in ("engine", "webui")]
    for link in links:
        link.parent.mkdir()
    extra = {"links": [str(link) for link in links], "label": "1.0", "pins": PINS["1.0"], "install_needed": True}
    for _ in range(2):
        run = run_playbook(PLAYBOOK, extra, check=False, tmp_path=tmp_path)
        assert run.returncode == 0, run.failed_tasks or run.output[-3000:]
    for link in links:
        assert link.readlink() == link.parent / _name("1.0")
        assert sorted(entry.name for entry in link.parent.iterdir()) == ["venv", _name("1.0")]
    assert run.changed == 0, run.changed_tasks  # the second run: nothing to switch


def test_upgrades_keep_exactly_one_previous_venv(tmp_path: Path) -> None:
    (tmp_path / "app").mkdir()
    _run(tmp_path, "1.0", install=True)
    _run(tmp_path, "2.0", install=True)
    assert _tree(tmp_path) == {"venv": f"-> {_name('2.0')}", _name("1.0"): "1.0", _name("2.0"): "2.0"}
    third = _run(tmp_path, "3.0", install=True)
    assert _tree(tmp_path) == {"venv": f"-> {_name('3.0')}", _name("2.0"): "2.0", _name("3.0"): "3.0"}
    assert "venv : Remove every venv but the one in use (the previous one from now on) and this run's" in (
        third.changed_tasks
    )
    # The pause is skipped: this host has no such watchdog unit.
    assert "venv : Pause the watchdog before the upgrade (the including role's watchdog task resumes it)" not in (
        third.task_names
    )


def test_an_install_folder_behind_a_symlink_is_idempotent_and_keeps_the_previous_venv(tmp_path: Path) -> None:
    """The symlink is compared as written, not resolved: behind a symlinked /opt a rerun changes
    nothing, and an upgrade still keeps the venv in use as the previous one."""
    (tmp_path / "real" / "app").mkdir(parents=True)
    (tmp_path / "opt").symlink_to(tmp_path / "real")
    _run(tmp_path, "1.0", install=True, root=tmp_path / "opt")
    again = _run(tmp_path, "1.0", install=False, root=tmp_path / "opt")
    assert again.changed == 0, again.changed_tasks
    _run(tmp_path, "2.0", install=True, root=tmp_path / "opt")
    names = sorted(entry.name for entry in (tmp_path / "real" / "app").iterdir())
    assert names == ["venv", _name("1.0"), _name("2.0")]


def test_going_back_to_the_previous_pins_reuses_its_venv(tmp_path: Path) -> None:
    (tmp_path / "app").mkdir()
    _run(tmp_path, "1.0", install=True)
    _run(tmp_path, "2.0", install=True)
    back = _run(tmp_path, "1.0", install=True)
    assert "venv : Remove every venv but the one in use (the previous one from now on) and this run's" not in (
        back.task_names
    )
    assert _tree(tmp_path) == {"venv": f"-> {_name('1.0')}", _name("1.0"): "1.0", _name("2.0"): "2.0"}


def test_other_pins_under_the_same_label_make_a_new_venv(tmp_path: Path) -> None:
    """A pin that the including role's probe does not read (torch, the embedding package) still names
    another venv: the symlink names a venv of other pins, so this run makes a new one."""
    (tmp_path / "app").mkdir()
    _run(tmp_path, "1.0", install=True)
    PINS["1.0-other"] = ["app==1.0", "torch==2.14.0"]
    try:
        moved = _run(tmp_path, "1.0-other", install=False)
    finally:
        del PINS["1.0-other"]
    assert "venv : switch | Point the path the units use at this run's venv" in moved.changed_tasks
    assert (tmp_path / "app" / "venv").readlink().name.startswith("venv-1.0-other-")


def test_the_real_venv_of_an_older_llmrig_is_moved_aside_on_the_next_upgrade(tmp_path: Path) -> None:
    legacy = tmp_path / "app" / "venv" / "bin"
    legacy.mkdir(parents=True)
    (legacy / "python").write_text("legacy\n")
    same = _run(tmp_path, "1.0", install=False)
    assert same.changed == 0, same.changed_tasks
    assert _tree(tmp_path) == {"venv": "legacy"}
    _run(tmp_path, "2.0", install=True)
    assert _tree(tmp_path) == {"venv": f"-> {_name('2.0')}", "venv-legacy": "legacy", _name("2.0"): "2.0"}
    _run(tmp_path, "3.0", install=True)
    assert _tree(tmp_path) == {"venv": f"-> {_name('3.0')}", _name("2.0"): "2.0", _name("3.0"): "3.0"}


def test_a_check_run_of_an_upgrade_changes_nothing_on_disk(tmp_path: Path) -> None:
    (tmp_path / "app").mkdir()
    _run(tmp_path, "1.0", install=True)
    _run(tmp_path, "2.0", install=True)
    before = _tree(tmp_path)
    dry = _run(tmp_path, "3.0", install=True, check=True)
    assert dry.changed > 0
    assert _tree(tmp_path) == before


def test_a_check_run_on_a_fresh_host_changes_nothing_on_disk(tmp_path: Path) -> None:
    dry = _run(tmp_path, "1.0", install=True, check=True)
    assert "venv : switch | Point the path the units use at this run's venv" not in dry.task_names
    assert not (tmp_path / "app").exists()


def test_its_argument_spec_refuses_a_bad_parameter(tmp_path: Path) -> None:
    """venv_install_needed must be a boolean: Ansible's check of the role's entry point stops it first."""
    extra = {"link": str(tmp_path / "app" / "venv"), "label": "1.0", "pins": PINS["1.0"], "install_needed": "perhaps"}
    run = run_playbook(PLAYBOOK, extra, check=False, tmp_path=tmp_path)
    assert run.returncode != 0
    name, _, message = run.failed_tasks[0]
    assert name.startswith("venv : Validating arguments against arg spec 'main'"), name
    assert "venv_install_needed" in message
    assert not (tmp_path / "app").exists()
