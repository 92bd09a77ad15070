"""Where each knob is typed: every knob a role reads has one spec, in the role the rule names, and
every spec's knob is read somewhere (bench.rig.specs merges them; preflight checks the union).

"Reads" is found in the role's own files: every variable a Jinja expression in tasks/, vars/,
defaults/ or templates/ loads, and every plain YAML string that is exactly a knob's name (a list of
knob names handed to ``query('ansible.builtin.vars', ...)``). The rules in ``bench/rig`` read
knobs by name, so a string constant there that is a knob's name counts as preflight reading it.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from functools import cache
from typing import Any

import jinja2
import pytest
import yaml
from jinja2 import nodes

from bench.errors import ConfigError
from bench.rig import ENGINE_NAMES
from bench.rig.inputs import PUBLISHED_FACTS, candidates, ranges
from bench.rig.specs import knob_owners, knob_spec, load_specs, role_variables
from bench.rig.validation import DEVICES
from tests.helpers import REPO, knob_documents, knob_names, knob_roles
from tests.helpers import knob_spec as merged_spec

ROLES = sorted(path.name for path in (REPO / "roles").iterdir() if path.is_dir())
CONDITIONS = {"when", "that", "failed_when", "changed_when", "until"}  # bare Jinja expressions
# Names shaped like a knob: a role's prefix (every engine's from the engine table), the shared
# llmrig_* and model knobs, inference_engine.
_PREFIXES = (
    *ENGINE_NAMES,
    "engine",
    "watchdog",
    "reverse_proxy",
    "open_webui",
    "monitoring",
    "grafana",
    "nvidia_driver",
    "llmrig",
    "model",
    "inference",
    "tls",
    "backup",
    "gateway",
)
KNOB_SHAPE = re.compile(rf"^({'|'.join(_PREFIXES)})(_|$)")
# The order roles run in site.yml; the engine roles share a stage (engine includes one of them).
STAGE = {
    "preflight": 0,
    "firewall": 1,
    "nvidia_driver": 2,
    "engine": 3,
    **dict.fromkeys(ENGINE_NAMES, 4),
    "watchdog": 5,
    "reverse_proxy": 6,
    "gateway": 7,
    "secrets": 8,
    "open_webui": 9,
    "monitoring": 10,
    "grafana": 11,
    "backup": 12,
}
JINJA = jinja2.Environment(autoescape=False)  # parsing only; nothing is rendered


def _loads(text: str) -> set[str]:
    """The variables a template loads. Backslashes are doubled: Ansible accepts regex escapes such
    as \\s in string literals, which Jinja's own parser refuses; the names do not change."""
    parsed = JINJA.parse(text.replace("\\", "\\\\"))
    return {node.name for node in parsed.find_all(nodes.Name) if node.ctx == "load"}


def _walk(node: Any, key: Any = None) -> Iterator[tuple[str, str]]:
    """('jinja', name) for each variable an expression loads, ('plain', text) for other strings."""
    if isinstance(node, dict):
        for child_key, child in node.items():
            yield from _walk(child, child_key)
    elif isinstance(node, list):
        for child in node:
            yield from _walk(child, key)
    elif isinstance(node, str):
        if key in CONDITIONS:
            yield from (("jinja", name) for name in _loads("{{ (" + node + ") }}"))
        elif "{{" in node or "{%" in node:
            yield from (("jinja", name) for name in _loads(node))
        else:
            yield ("plain", node)


@cache
def role_reads(role: str) -> frozenset[str]:
    """The knobs one role's tasks, vars, defaults and templates read."""
    knobs = knob_names()
    found: set[str] = set()
    folder = REPO / "roles" / role
    for path in sorted([*folder.glob("tasks/*.yml"), *folder.glob("vars/*.yml"), *folder.glob("defaults/*.yml")]):
        for kind, text in _walk(yaml.safe_load(path.read_text(encoding="utf-8"))):
            if (kind == "jinja" and KNOB_SHAPE.match(text)) or (kind == "plain" and text in knobs):
                found.add(text)
    for path in sorted(folder.glob("templates/*.j2")):
        found |= {name for name in _loads(path.read_text(encoding="utf-8")) if KNOB_SHAPE.match(name)}
    return frozenset(found)


@cache
def rule_reads() -> frozenset[str]:
    """The knobs named by a string constant in bench/rig (the rules preflight runs)."""
    knobs = knob_names()
    found: set[str] = set()
    for path in sorted((REPO / "bench" / "rig").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in knobs:
                found.add(node.value)
    return frozenset(found)


def _role_variables() -> set[str]:
    """Every role's own variables: the spec options with a default (from defaults/main.yml)."""
    return set(role_variables(load_specs(REPO / "roles", ROLES)))


def _published_facts() -> set[str]:
    """The facts the roles publish (set_fact, and llmrig_host from the llmrig_host_facts module): not knobs."""
    module = (REPO / "ansible" / "plugins" / "modules" / "llmrig_host_facts.py").read_text(encoding="utf-8")
    assert 'ansible_facts={"llmrig_host": facts}' in module
    found: set[str] = {"llmrig_host"}
    for path in (REPO / "roles").glob("*/tasks/*.yml"):
        for task in yaml.safe_load(path.read_text(encoding="utf-8")) or []:
            found |= set(task.get("ansible.builtin.set_fact") or {})
    return found


def _entry_of(knob: str) -> tuple[str, str]:
    """(role, entry point) whose argument spec types ``knob``."""
    for role, document in knob_documents().items():
        for entry, spec in document["argument_specs"].items():
            if knob in (spec.get("options") or {}):
                return role, entry
    raise AssertionError(f"{knob} has no spec")


def expected_home(knob: str) -> tuple[str, str]:
    """Where the rule at the top of roles/preflight/meta/argument_specs.yml puts ``knob``."""
    readers = {role for role in knob_roles() if knob in role_reads(role)}
    prefixed = [role for role in readers if knob.startswith(f"{role}_")]
    if prefixed:
        return prefixed[0], "main"
    if readers:
        first = min(STAGE[role] for role in readers)
        earliest = sorted(role for role in readers if STAGE[role] == first)
        role = earliest[0] if len(earliest) == 1 else "engine"
        return role, "knobs" if role == "preflight" else "main"  # preflight's main is its own variable only
    return "preflight", "knobs"


def test_preflight_merges_the_specs_of_every_role_that_types_a_knob() -> None:
    """_preflight_knob_roles is exactly the roles whose specs type a knob, preflight first; no other role types one."""
    roles = knob_roles()
    assert roles[0] == "preflight"
    assert sorted(roles) == [
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
        "vllm",
        "watchdog",
    ]
    owners = set(knob_owners(knob_documents()).values())
    assert owners == set(roles)
    for role in set(ROLES) - set(roles):
        specs = yaml.safe_load((REPO / "roles" / role / "meta" / "argument_specs.yml").read_text(encoding="utf-8"))
        for spec in specs["argument_specs"].values():
            assert not set(spec.get("options") or {}) & knob_names(), role


def test_the_merged_spec_types_every_knob_and_nothing_else() -> None:
    """Every group_vars knob has one spec with a type and a description, required, its default left to group_vars."""
    options = merged_spec()
    assert set(options) == knob_names()
    assert len(options) > 90
    for name, option in options.items():
        assert option.get("type"), name
        assert option.get("description"), name
        assert option.get("required") is True, name
        assert "default" not in option, f"{name}: its default lives in group_vars only"


@pytest.mark.parametrize("role", ROLES)
def test_every_knob_a_role_reads_has_a_spec(role: str) -> None:
    """Each knob-shaped variable a role reads is a typed knob, a role's own variable or a published fact."""
    unknown = role_reads(role) - set(merged_spec()) - _role_variables() - _published_facts()
    assert not unknown, f"roles/{role} reads {sorted(unknown)}, which no argument spec types"


def test_the_scan_finds_what_the_roles_read() -> None:
    """The scan sees reads in expressions, conditions, templates and knob-name lists (so the tests above bite)."""
    assert "llmrig_config_dir" in role_reads("engine")  # an expression in vars/main.yml
    assert "vllm_max_num_seqs" in role_reads("vllm")  # a name in the _vllm_flag_knobs list
    assert "watchdog_enabled" in role_reads("vllm")  # the unit template
    assert "llmrig_api_key" in role_reads("engine")  # a `when:` condition
    assert "inference_engine" in role_reads("preflight")
    assert "open_webui_port" in rule_reads()


def test_every_spec_is_read_somewhere() -> None:
    """Each typed knob is read by a role or the rules: a knob that nothing reads is a false promise."""
    read = set(rule_reads()).union(*(role_reads(role) for role in ROLES))
    assert set(merged_spec()) <= read, sorted(set(merged_spec()) - read)


@pytest.mark.parametrize("knob", sorted(knob_names()))
def test_each_knob_is_typed_where_the_rule_puts_it(knob: str) -> None:
    """The role (and entry point) that types a knob is the one the rule names."""
    assert _entry_of(knob) == expected_home(knob)


def test_knobs_shared_by_roles_are_typed_once_where_said() -> None:
    """A few shared knobs, spelled out: the first reader, engine for the engine roles' shared pip knobs."""
    owners = knob_owners(knob_documents())
    assert owners["inference_engine"] == "preflight"  # preflight and engine read it
    assert owners["llmrig_config_dir"] == "preflight"  # preflight probes it, then engine and others
    assert owners["llmrig_pip_index_url"] == "engine"  # vllm and llamacpp read it, engine includes either
    assert owners["watchdog_enabled"] == "watchdog"  # its prefix; the engine roles read it too
    assert owners["vllm_device"] == "preflight"  # only preflight reads it
    assert owners["open_webui_port"] == "open_webui"  # its prefix; the rules and the firewall read it too
    assert owners["llmrig_allowed_client_cidrs"] == "firewall"  # the rules check it, the firewall enforces it
    assert owners["llmrig_allow_unfiltered"] == "preflight"  # only the rules read it
    assert owners["open_webui_admin_password"] == "secrets"


def test_a_knob_typed_by_two_roles_is_refused() -> None:
    """Two roles typing one knob is a ConfigError naming both; options with a default are role variables."""
    one = {"argument_specs": {"main": {"options": {"vllm_port": {"type": "int", "required": True}}}}}
    other = {"argument_specs": {"main": {"options": {"vllm_port": {"type": "int", "required": True}}}}}
    with pytest.raises(ConfigError, match="vllm_port: specified by roles/vllm and roles/ollama"):
        knob_spec({"vllm": one, "ollama": other})
    defaulted = {"argument_specs": {"main": {"options": {"ollama_user": {"type": "str", "default": "ollama"}}}}}
    assert knob_spec({"vllm": one, "ollama": defaulted}) == {"vllm_port": {"type": "int", "required": True}}


def test_rule_choices_equal_the_spec() -> None:
    """The devices the rules resolve are vllm_device's choices (the spec is what Ansible checks first)."""
    assert tuple(merged_spec()["vllm_device"]["choices"]) == DEVICES


def test_each_role_readme_says_where_its_knobs_are_typed() -> None:
    """Each knob role's README points at its argument spec for the knobs it types."""
    for role in knob_roles():
        readme = (REPO / "roles" / role / "README.md").read_text(encoding="utf-8")
        assert "meta/argument_specs.yml" in readme, role


def test_the_variable_reference_says_where_each_knob_is_typed() -> None:
    """The variable reference's "typed in" column (docs/variables.md) names the role (and a non-main
    entry point) of each knob's spec."""
    page = (REPO / "docs" / "variables.md").read_text(encoding="utf-8")
    section = page.split("# Variable reference", 1)[1]
    rows = re.findall(r"^\| `([a-z_]+)` \|.*\| `([a-z_]+)`( \(([a-z_]+)\))? \|$", section, flags=re.MULTILINE)
    documented = {name: (role, entry or "main") for name, role, _, entry in rows}
    assert documented == {name: _entry_of(name) for name in knob_names()}


def test_every_numeric_knob_states_its_range_and_the_reference_shows_it() -> None:
    """An int or float knob ends its description in a Range: sentence that bench.rig.inputs
    parses, and the variable reference's row (docs/variables.md) says the same range."""
    page = (REPO / "docs" / "variables.md").read_text(encoding="utf-8")
    spec = merged_spec()
    numeric = sorted(name for name, option in spec.items() if option.get("type") in ("int", "float"))
    assert numeric
    found = ranges(spec)
    assert [name for name in numeric if name not in found] == []
    for name in numeric:
        row = re.search(rf"^\| `{name}` \|.*$", page, flags=re.MULTILINE)
        assert row is not None, name
        assert f"Range: {found[name].text}." in row.group(0), row.group(0)


def test_every_knob_carries_a_prefix_the_name_check_knows() -> None:
    """Preflight's typo check looks at the variables with a knob prefix (bench.rig.inputs); a knob
    outside those prefixes would let its own typos through."""
    assert candidates(knob_names()) == sorted(knob_names())


def test_the_facts_the_roles_publish_pass_the_name_check() -> None:
    """Every fact a role publishes under a knob prefix is one the typo check knows is not a typo."""
    published = {name for name in candidates(_published_facts()) if name not in knob_names()}
    assert published == set(PUBLISHED_FACTS)


def test_the_roles_own_variables_are_known_to_the_name_check() -> None:
    """Defaulted role variables (an operator may set them) are listed, and none is a knob."""
    documents = load_specs(REPO / "roles", sorted(knob_roles()))
    own = role_variables(documents)
    assert "preflight_nvidia_smi_timeout_s" in own
    assert not set(own) & set(knob_names())
