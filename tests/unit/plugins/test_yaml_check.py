"""The llmrig_yaml_check vars plugin: a YAML error in group_vars or host_vars names file and line."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import REPO, load_file_module

plugin = load_file_module(REPO / "ansible" / "plugins" / "vars" / "llmrig_yaml_check.py", "llmrig_yaml_check")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("vllm_port: 8000\ninference_engine: ollama: x\n", "line 2 column 25: mapping values are not allowed here"),
        ("vllm_extra_args: [--a\n", "line 2 column 1: expected ',' or ']', but got '<stream end>'"),
        ("a:\n  - 1\n b: 2\n", "line 3 column 2: expected <block end>, but found '<block mapping start>'"),
        ("\tvllm_port: 1\n", "line 1 column 1: found character '\\t' that cannot start any token"),
    ],
)
def test_a_syntax_error_names_file_line_and_column(tmp_path: Path, text: str, expected: str) -> None:
    path = tmp_path / "llmrig.yml"
    path.write_text(text, encoding="utf-8")
    assert plugin.syntax_error(str(path)) == f"{path} {expected}"


def test_good_yaml_has_no_error(tmp_path: Path) -> None:
    path = tmp_path / "ok.yml"
    path.write_text("vllm_port: 8000\nllmrig_allowed_client_cidrs: [192.168.1.0/24]\n", encoding="utf-8")
    assert plugin.syntax_error(str(path)) == ""


def test_the_files_ansible_reads_under_a_folder(tmp_path: Path) -> None:
    for name in ("llmrig.yml", "all/10-engine.yaml", "all/zz", "box.json", ".hidden.yml", "notes.txt"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("a: 1\n", encoding="utf-8")
    found = [Path(path).relative_to(tmp_path).as_posix() for path in plugin.files_under(str(tmp_path))]
    assert found == ["box.json", "llmrig.yml", "all/10-engine.yaml", "all/zz"]
