"""Contracts that keep the configuration in one place and the documentation in step with it."""

from __future__ import annotations

import json
import re
import subprocess
from typing import Any

import pytest
import yaml

from tests.helpers import BIN, GROUP_VARS, REPO, group_vars, knob_names, knob_roles

ROLES = sorted(path for path in (REPO / "roles").iterdir() if path.is_dir())
LITERAL_ONLY = ("endpoint.yml", "engine.yml", "models.yml")


def _load(path: Any) -> Any:
    return yaml.safe_load(path.read_text(encoding="utf-8"))


def test_there_are_roles() -> None:
    """The role list below is not empty (a parametrized test over nothing would pass)."""
    assert [role.name for role in ROLES] == [
        "backup",
        "engine",
        "firewall",
        "gateway",
        "grafana",
        "llamacpp",
        "monitoring",
        "nvidia_driver",
        "ollama",
        "open_webui",
        "preflight",
        "reverse_proxy",
        "secrets",
        "systemd_unit",
        "venv",
        "vllm",
        "watchdog",
    ]


@pytest.mark.parametrize("role", ROLES, ids=[role.name for role in ROLES])
def test_argument_spec_defaults_equal_role_defaults(role: Any) -> None:
    """Each role's main entry point declares exactly its defaults/main.yml, with equal defaults,
    but for a role whose other entry point declares some of them (the backup role's restore.yml
    arguments, in its restore entry point); main's other options are knobs of group_vars
    (tests/unit/rig/test_specs.py places them)."""
    specs = _load(role / "meta" / "argument_specs.yml")["argument_specs"]
    options = specs["main"]["options"]
    defaults = _load(role / "defaults" / "main.yml") or {}
    defaulted = {name: option for name, option in options.items() if "default" in option}
    for entry, spec in specs.items():
        declared = {name: option for name, option in spec["options"].items() if "default" in option}
        if entry != "main" and set(declared) <= set(defaults) - set(defaulted):
            defaulted.update(declared)
    assert set(defaulted) == set(defaults)
    if role.name in knob_roles():
        assert set(options) - set(defaulted) <= knob_names()
    for name, value in defaults.items():
        assert defaulted[name].get("default") == value, name
        assert defaulted[name].get("description"), name


def test_no_knob_is_defined_twice() -> None:
    """No knob appears in two group_vars files or in a role's defaults (the prior art drifted there)."""
    seen: dict[str, str] = {}
    for stem, document in group_vars().items():
        for name in document:
            assert name not in seen, f"{name} in {stem}.yml and {seen[name]}.yml"
            seen[name] = stem
    for role in ROLES:
        defaults = _load(role / "defaults" / "main.yml") or {}
        assert not set(defaults) & set(seen), role.name


def test_every_knob_has_a_comment() -> None:
    """Each knob in group_vars/all has a '# ' comment line right above it."""
    for path in GROUP_VARS.glob("*.yml"):
        lines = path.read_text(encoding="utf-8").splitlines()
        for number, line in enumerate(lines):
            if re.match(r"^[a-z_]+:", line):
                assert number > 0, f"{path.name}: {line} has no comment line above it"
                assert lines[number - 1].startswith("# "), f"{path.name}:{number + 1} {line}"


@pytest.mark.parametrize("name", LITERAL_ONLY)
def test_shared_files_are_literal(name: str) -> None:
    """Files that bench reads with a plain YAML parser hold no Jinja."""
    assert "{{" not in (GROUP_VARS / name).read_text(encoding="utf-8")


def test_the_variable_reference_lists_every_knob() -> None:
    """The variable reference (docs/variables.md, generated) names every knob, and no knob that does not exist."""
    page = (REPO / "docs" / "variables.md").read_text(encoding="utf-8")
    section = page.split("# Variable reference", 1)[1]
    documented = set(re.findall(r"^\| `([a-z_]+)` \|", section, flags=re.MULTILINE))
    assert documented == knob_names()


def test_collections_satisfy_requirements() -> None:
    """The `ansible` package installed the collections ansible/requirements.yml asks for."""
    wanted = _load(REPO / "ansible" / "requirements.yml")["collections"]
    listing = subprocess.run(
        [str(BIN / "ansible-galaxy"), "collection", "list", "--format", "json"],
        capture_output=True,
        text=True,
        check=True,
        cwd=REPO,
    ).stdout
    installed: dict[str, str] = {}
    for collections in json.loads(listing).values():
        for name, info in collections.items():
            installed.setdefault(name, info["version"])
    for entry in wanted:
        assert entry["name"] in installed, entry["name"]
        version = tuple(int(part) for part in installed[entry["name"]].split(".")[:3])
        for bound in entry["version"].split(","):
            match = re.match(r"(>=|<)(.+)", bound)
            assert match, bound
            op, number = match.groups()
            limit = tuple(int(part) for part in number.split("."))
            assert version >= limit if op == ">=" else version < limit, (entry, version)


@pytest.mark.parametrize("ci", ["true", "1", "yes"])
def test_a_requested_skip_under_ci_fails_before_anything_runs(ci: str) -> None:
    """CI runs every tier: LLMRIG_SKIP_SLOW under CI exits 2 at once and names the tiers it would skip."""
    env = {"PATH": "/usr/bin:/bin", "CI": ci, "LLMRIG_SKIP_SLOW": "1"}
    done = subprocess.run([str(REPO / "scripts" / "test")], env=env, capture_output=True, text=True, check=False)
    assert done.returncode == 2
    assert "molecule and end-to-end tiers would not run" in done.stderr
    assert "== pytest" not in done.stdout + done.stderr  # nothing ran: not even lint
    assert done.stdout == ""
