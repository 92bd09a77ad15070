"""The secrets role on this machine (playbooks/webui.yml --tags secrets against localhost, into a temporary
configuration and artifacts directory): Open WebUI's secret key and admin password, generated
once when their knobs are empty, kept by the next run, and copied 0600 to the controller. The
e2e tier passes known values (to prove none leaks); this is where generation runs for real."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from tests.helpers import run_playbook

pytestmark = pytest.mark.ansible

SECRETS = ("open_webui_secret_key", "open_webui_admin_password")
GENERATE = "secrets : open_webui | Generate each secret whose knob is empty, once (kept across runs)"


def _run(tmp_path: Path) -> list[str]:
    run = run_playbook(
        "playbooks/webui.yml",
        {
            "llmrig_config_dir": str(tmp_path / "etc"),
            "llmrig_artifacts_dir": str(tmp_path / "artifacts"),
            "open_webui_enabled": True,
            "open_webui_secret_key": "",
            "open_webui_admin_password": "",
        },
        check=False,
        flags=("--tags", "secrets"),
        tmp_path=tmp_path,
    )
    assert run.returncode == 0, run.failed_tasks or run.output[-3000:]
    return run.changed_tasks


def _private(path: Path) -> str:
    mode = path.stat()
    assert stat.S_IMODE(mode.st_mode) == 0o600, (path, oct(mode.st_mode))
    assert mode.st_uid == 0, path
    return path.read_text(encoding="utf-8").strip()


def test_empty_open_webui_secrets_are_generated_once_and_kept(tmp_path: Path) -> None:
    """Two different 48-character secrets on the host, 0600 root, the same copies on the
    controller; the next run changes nothing and keeps both."""
    assert GENERATE in _run(tmp_path)
    host = {name: _private(tmp_path / "etc" / name) for name in SECRETS}
    assert all(len(value) == 48 and value.isalnum() for value in host.values()), {k: len(v) for k, v in host.items()}
    assert host["open_webui_secret_key"] != host["open_webui_admin_password"]
    copies = tmp_path / "artifacts" / "localhost"
    assert stat.S_IMODE(copies.stat().st_mode) == 0o700
    assert {name: _private(copies / name) for name in SECRETS} == host
    assert _run(tmp_path) == []
    assert {name: _private(tmp_path / "etc" / name) for name in SECRETS} == host
