"""The engine role's unit list, rendered by real Ansible from bench's engine table."""

from __future__ import annotations

import json
import os
import subprocess

import pytest
import yaml

from bench.rig import ENGINES
from tests.helpers import BIN, REPO

pytestmark = pytest.mark.ansible


def test_the_engine_role_takes_its_units_from_the_table() -> None:
    """roles/engine/vars/main.yml's _engine_units, templated by ansible, is the table's name-to-unit map."""
    role_vars = yaml.safe_load((REPO / "roles" / "engine" / "vars" / "main.yml").read_text(encoding="utf-8"))
    expression = role_vars["_engine_units"]
    assert "llmrig_engine_units" in expression  # derived, not a literal list
    env = {**os.environ, "ANSIBLE_LOAD_CALLBACK_PLUGINS": "1", "ANSIBLE_STDOUT_CALLBACK": "ansible.posix.json"}
    command = [str(BIN / "ansible"), "localhost", "-c", "local", "-i", "localhost,", "-m", "ansible.builtin.debug"]
    done = subprocess.run(
        [*command, "-a", f"msg={expression}"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    rendered = json.loads(done.stdout)["plays"][0]["tasks"][0]["hosts"]["localhost"]["msg"]
    assert rendered == {engine.name: engine.unit for engine in ENGINES}
    assert rendered == {"vllm": "vllm.service", "ollama": "ollama.service", "llamacpp": "llamacpp.service"}
