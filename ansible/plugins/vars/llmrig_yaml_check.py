"""Ansible vars plugin: a YAML syntax error in group_vars, host_vars or an ``-e @FILE``, named with
its file and line.

Ansible's own loader reports such an error in group_vars as "YAML parsing failed: ..." with
neither the file nor the line (ansible-core 2.19), and one in an ``-e @FILE`` as "Completely
failed to parse inventory source" (the ``llmrig_extra_vars`` inventory plugin lets the run get
here instead). This plugin runs first among the vars plugins (ansible.cfg lists it before
host_group_vars), reads each ``-e @FILE`` and each group_vars and host_vars file beside the
inventory and the playbook once with PyYAML, and stops the run on the first broken one with
``FILE line N column M: what is wrong``. It returns no variables.
"""

from __future__ import annotations

DOCUMENTATION = r"""
name: llmrig_yaml_check
version_added: "0.1"
short_description: Stop on a YAML syntax error in group_vars or host_vars, naming file and line
description:
  - Parses every -e @FILE and every file under the group_vars and host_vars folders next to the
    inventory and the playbook once, and raises a parser error naming the file, line and column
    of the first syntax error; returns no variables.
options:
  stage:
    ini:
      - key: stage
        section: vars_llmrig_yaml_check
    env:
      - name: ANSIBLE_VARS_PLUGIN_STAGE
extends_documentation_fragment:
  - vars_plugin_staging
"""

import os

import yaml
from ansible.errors import AnsibleParserError

from ansible import context
from ansible.plugins.vars import BaseVarsPlugin

SUFFIXES = ("", ".yml", ".yaml", ".json")
_CHECKED: set[str] = set()


def syntax_error(path: str) -> str:
    """``FILE line N column M: problem`` for the first YAML syntax error in ``path``, else ''."""
    try:
        with open(path, encoding="utf-8") as handle:
            yaml.safe_load(handle)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f" line {mark.line + 1} column {mark.column + 1}" if mark else ""
        return f"{path}{where}: {exc.problem or exc.context}"
    except (OSError, yaml.YAMLError, UnicodeDecodeError) as exc:
        return f"{path}: {exc}"
    return ""


def extra_vars_error() -> str:
    """What is wrong with the first broken ``-e @FILE`` of this command line (a YAML syntax error
    with its line, no such file, or no mapping in it), else ''."""
    options = context.CLIARGS.get("extra_vars", ()) if context.CLIARGS else ()
    for path in (str(option)[1:] for option in options if str(option).startswith("@")):
        if not os.path.isfile(path):
            return f"-e @{path}: no such file"
        if message := syntax_error(path):
            return f"YAML syntax error in {message}"
        with open(path, encoding="utf-8") as handle:
            if not isinstance(yaml.safe_load(handle), dict):
                return f"-e @{path}: holds no mapping of variable names to values"
    return ""


def _shown(message: str) -> str:
    """The message with a path under the current directory made relative (the repository root)."""
    here = os.getcwd() + os.sep
    return message[len(here) :] if message.startswith(here) else message


def files_under(folder: str) -> list[str]:
    """The variable files Ansible would read under ``folder``, in a stable order."""
    found = []
    for root, dirs, files in os.walk(folder):
        dirs.sort()
        found += [
            os.path.join(root, name)
            for name in sorted(files)
            if not name.startswith(".") and os.path.splitext(name)[1] in SUFFIXES
        ]
    return found


class VarsModule(BaseVarsPlugin):
    """Checks the YAML of group_vars and host_vars; contributes no variables."""

    REQUIRES_ENABLED = True

    def get_vars(self, loader, path, entities, cache=True):
        super().get_vars(loader, path, entities)
        if "-e" not in _CHECKED:
            _CHECKED.add("-e")
            if message := extra_vars_error():
                raise AnsibleParserError(_shown(message))
        for sub in ("group_vars", "host_vars"):
            folder = os.path.realpath(os.path.join(path, sub))
            if folder in _CHECKED or not os.path.isdir(folder):
                continue
            _CHECKED.add(folder)
            for name in files_under(folder):
                if message := syntax_error(name):
                    raise AnsibleParserError(f"YAML syntax error in {_shown(message)}")
        return {}
