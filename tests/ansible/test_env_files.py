"""The engines' and Open WebUI's environment files, rendered by Ansible from the roles' templates,
read back under systemd's EnvironmentFile= rules: a value with spaces, quotes, ``$``, a backtick
or a backslash arrives exactly as given (systemd.exec(5): a double-quoted value takes a backslash
before ``"``, ``\\``, ``$`` and a backtick literally, and does not expand variables)."""

from __future__ import annotations

import base64
import re

import pytest

from tests.helpers import REPO, ansible_render

pytestmark = pytest.mark.ansible

NASTY = "a b \"c\" $HOME `x` \\n; 'q'"
ESCAPED = '"\\`$'  # what a backslash escapes inside systemd's double quotes
ASSIGNMENT = re.compile(r'^(?P<name>[A-Za-z_][A-Za-z0-9_]*)="(?P<body>(?:[^"\\]|\\.)*)"$')


def _systemd_reads(text: str) -> dict[str, str]:
    """The variables of an EnvironmentFile whose every assignment is double-quoted on one line."""
    found: dict[str, str] = {}
    for line in text.splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        match = ASSIGNMENT.match(line)
        assert match is not None, f"not a double-quoted assignment: {line!r}"
        body = re.sub(r"\\(.)", lambda m: m[1] if m[1] in ESCAPED else "\\" + m[1], match["body"])
        found[match["name"]] = body
    return found


def _template(role: str, name: str, variables: dict[str, object]) -> str:
    path = REPO / "roles" / role / "templates" / name
    rendered = ansible_render(f"{{{{ lookup('ansible.builtin.template', '{path}') }}}}", variables)
    assert isinstance(rendered, str)
    assert rendered.startswith("#")  # the managed header is a comment
    return rendered


def test_llamacpp_env_quotes_the_key() -> None:
    content = base64.b64encode(f"{NASTY}\n".encode()).decode()
    text = _template("llamacpp", "llamacpp.env.j2", {"__llamacpp_api_key_file": {"content": content}})
    assert _systemd_reads(text) == {"LLAMA_API_KEY": NASTY}
    assert 'LLAMA_API_KEY="a b \\"c\\" $HOME `x` \\\\n; \'q\'"' in text.splitlines()


@pytest.mark.parametrize(("role", "name", "variable"), [
    ("vllm", "vllm.env.j2", "__vllm_env"),
    ("open_webui", "open-webui.env.j2", "__open_webui_env"),
])  # fmt: skip
def test_the_other_env_files_quote_every_value(role: str, name: str, variable: str) -> None:
    env = {"SECRET": NASTY, "PLAIN": "1"}
    assert _systemd_reads(_template(role, name, {variable: env})) == env
