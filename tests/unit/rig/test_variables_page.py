"""docs/variables.md is generated: the committed page equals what bench.rig.variables_page writes
from the roles' argument specs and group_vars/all, and the generator refuses a knob it cannot
document (no description, no spec, no value) with one line naming the knob."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from bench.errors import ConfigError
from bench.rig import variables_page
from bench.rig.variables_page import PAGE, REGENERATE, generate, main, sections, written_default
from tests.helpers import GROUP_VARS, REPO, knob_names


def _checkout(tmp_path: Path) -> Path:
    """The parts of this checkout the generator reads, copied under ``tmp_path``."""
    root = tmp_path / "checkout"
    shutil.copytree(GROUP_VARS, root / "group_vars" / "all")
    for spec in (REPO / "roles").glob("*/meta/argument_specs.yml"):
        target = root / spec.relative_to(REPO)
        target.parent.mkdir(parents=True)
        shutil.copy(spec, target)
    (root / "roles" / "preflight" / "vars").mkdir()
    shutil.copy(REPO / "roles" / "preflight" / "vars" / "main.yml", root / "roles" / "preflight" / "vars" / "main.yml")
    return root


def test_the_committed_page_is_the_generated_one() -> None:
    """docs/variables.md is what the specs and group_vars give today (scripts/lint checks it too)."""
    committed = (REPO / PAGE).read_text(encoding="utf-8")
    assert committed == generate(REPO), f"docs/variables.md is stale; regenerate with: {REGENERATE}"


def test_each_file_is_a_section_with_its_own_knobs_in_file_order() -> None:
    """One section per group_vars/all file, in the page's order, listing exactly that file's knobs."""
    found = sections(REPO)
    assert [section.stem for section in found] == list(variables_page.SECTIONS)
    assert {path.stem for path in GROUP_VARS.glob("*.yml")} == set(variables_page.SECTIONS)
    for section in found:
        document = yaml.safe_load((GROUP_VARS / f"{section.stem}.yml").read_text(encoding="utf-8"))
        assert [knob.name for knob in section.knobs] == list(document), section.stem
    assert {knob.name for section in found for knob in section.knobs} == knob_names()
    endpoint = next(section for section in found if section.stem == "endpoint")
    port = next(knob for knob in endpoint.knobs if knob.name == "vllm_port")
    assert (port.type, port.default, port.role, port.entry) == ("int", "8000", "vllm", "main")
    assert port.description.endswith("Range: 1 to 65535.")
    assert endpoint.intro.startswith("Addresses and ports that Ansible and bench both need.")


def test_a_row_shows_the_type_choices_default_and_home() -> None:
    """A row of the page: choices after the type, the default as its file writes it, the spec's entry point."""
    page = (REPO / PAGE).read_text(encoding="utf-8")
    assert (
        "| `inference_engine` | `str`, one of `vllm`, `ollama`, `llamacpp` | `vllm` | Engine that serves the model: "
        "vllm, ollama or llamacpp. The others are stopped and disabled. | `preflight` (knobs) |"
    ) in page
    assert '| `vllm_enable_auto_tool_choice` | `bool` | `"{{ vllm_tool_call_parser \\| length > 0 }}"` |' in page
    assert "| `llmrig_allowed_client_cidrs` | `list of str` | `[connected]` |" in page
    assert "| `model_presets` | `dict` | 4 entries: `qwen3.8-27b-w4a16`, " in page


def test_defaults_are_written_as_their_file_writes_them() -> None:
    """The text after the name when it is on that line; a block list in flow style; a long mapping by its keys."""
    text = 'a: "0.33.0"\nb:\n  - x\n  - y\nc: {}\nd:\n' + "".join(f"  key{n}: {'v' * 20}\n" for n in range(9))
    values = yaml.safe_load(text)
    assert written_default(text, "a", values["a"]) == '"0.33.0"'
    assert written_default(text, "b", values["b"]) == "[x, y]"
    assert written_default(text, "c", values["c"]) == "{}"
    assert written_default(text, "d", values["d"]) == ""


def test_a_knob_without_a_description_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A spec that gives a knob no description stops the generator, naming the knob and the file."""
    root = _checkout(tmp_path)
    spec_file = root / "roles" / "vllm" / "meta" / "argument_specs.yml"
    document = yaml.safe_load(spec_file.read_text(encoding="utf-8"))
    del document["argument_specs"]["main"]["options"]["vllm_port"]["description"]
    spec_file.write_text(yaml.safe_dump(document), encoding="utf-8")
    with pytest.raises(ConfigError, match=r"^vllm_port: roles/vllm/meta/argument_specs.yml gives it no description$"):
        generate(root)
    assert main(["--root", str(root)]) == 2
    assert capsys.readouterr().err == (
        "variables_page: vllm_port: roles/vllm/meta/argument_specs.yml gives it no description\n"
    )
    assert not (root / PAGE).exists()


def test_a_knob_no_spec_types_is_refused(tmp_path: Path) -> None:
    """A value in group_vars/all without a spec cannot be documented: the generator names it and its file."""
    root = _checkout(tmp_path)
    with (root / "group_vars" / "all" / "vllm.yml").open("a", encoding="utf-8") as handle:
        handle.write("# Not a knob.\nvllm_frobnicate: 1\n")
    with pytest.raises(ConfigError, match=r"^vllm_frobnicate: set in group_vars/all/vllm.yml, but no role's"):
        generate(root)


def test_check_names_the_command_that_regenerates(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--check exits 1 with one line while the page differs, and 0 once the generator has written it."""
    root = _checkout(tmp_path)
    (root / "docs").mkdir()
    (root / PAGE).write_text((REPO / PAGE).read_text(encoding="utf-8") + "a hand edit\n", encoding="utf-8")
    assert main(["--check", "--root", str(root)]) == 1
    err = capsys.readouterr().err
    assert err == f"docs/variables.md is not the generated page; regenerate with: {REGENERATE}\n"
    assert main(["--root", str(root)]) == 0
    assert main(["--check", "--root", str(root)]) == 0
    assert (root / PAGE).read_text(encoding="utf-8") == (REPO / PAGE).read_text(encoding="utf-8")
