"""Ansible inventory plugin: lets a broken ``-e @FILE`` reach the error that names its file and line.

Every inventory plugin loads the extra vars before it reads its source, so a YAML error in an
``-e @FILE`` fails them all, and the run ends with "Completely failed to parse inventory source"
(the file and line only in warnings above it). This plugin comes first in ``enable_plugins``
(ansible.cfg): when an ``-e @FILE`` does not parse as a mapping, it claims each inventory source
and adds nothing to it, so the run gets as far as the ``llmrig_yaml_check`` vars plugin, which
stops it with ``YAML syntax error in FILE line N column M: ...`` as its last line. Otherwise it
declines every source and the usual plugins read them.
"""

from __future__ import annotations

DOCUMENTATION = r"""
name: llmrig_extra_vars
version_added: "0.1"
short_description: Step aside for the vars plugin that names a broken -e @FILE
description:
  - Claims an inventory source, and adds nothing to it, only when an extra-vars file given with
    -e @FILE does not parse as a YAML mapping; llmrig_yaml_check then names its file and line.
"""

import yaml

from ansible import context
from ansible.plugins.inventory import BaseInventoryPlugin


def extra_vars_files() -> list[str]:
    """The files named by ``-e @FILE`` on this command line."""
    options = context.CLIARGS.get("extra_vars", ()) if context.CLIARGS else ()
    return [str(option)[1:] for option in options if str(option).startswith("@")]


def broken(path: str) -> bool:
    """Whether ``path`` cannot be read as a YAML mapping."""
    try:
        with open(path, encoding="utf-8") as handle:
            return not isinstance(yaml.safe_load(handle), dict)
    except (OSError, yaml.YAMLError, UnicodeDecodeError):
        return True


class InventoryModule(BaseInventoryPlugin):
    """Claims every source, adding nothing, while an -e @FILE is broken; declines otherwise."""

    NAME = "llmrig_extra_vars"

    def verify_file(self, path):
        return any(broken(name) for name in extra_vars_files())

    def parse(self, inventory, loader, path, cache=True):
        # Not BaseInventoryPlugin.parse: it would load the broken extra vars.
        self.loader = loader
        self.inventory = inventory
