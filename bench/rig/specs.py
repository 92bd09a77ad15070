"""The knob specification: every knob's type and choices, merged from the roles that read them.

Each role's ``meta/argument_specs.yml`` types the knobs of ``group_vars/all`` that the role reads
(with ``required: true`` and no ``default``: the value lives in group_vars), beside its own
role variables (each with its ``default``, equal to the role's ``defaults/main.yml``). Ansible
checks a role's entry point when the role starts; the ``preflight`` role checks the union of the
knobs, merged here, before anything changes (through the ``llmrig_knob_spec`` filter).

A knob is specified once: a second role that specifies it is a :class:`~bench.errors.ConfigError`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from bench.errors import ConfigError


def knob_options(role: str, document: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """The knobs one role's argument spec types: the options without a default, of every entry point."""
    found: dict[str, dict[str, Any]] = {}
    for spec in (document.get("argument_specs") or {}).values():
        for name, option in (spec.get("options") or {}).items():
            if "default" in option:  # a role variable, defaulted in the role's defaults/main.yml
                continue
            if name in found:
                raise ConfigError(f"{name}: specified twice in roles/{role}/meta/argument_specs.yml")
            found[name] = dict(option)
    return found


def knob_owners(documents: Mapping[str, Mapping[str, Any]]) -> dict[str, str]:
    """Knob name to the one role whose argument spec types it."""
    owners: dict[str, str] = {}
    for role, document in documents.items():
        for name in knob_options(role, document):
            if name in owners:
                raise ConfigError(
                    f"{name}: specified by roles/{owners[name]} and roles/{role}; a knob is specified once"
                )
            owners[name] = role
    return owners


def knob_spec(documents: Mapping[str, Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """Every knob's option, merged from the argument specs of ``documents`` (role name to parsed file)."""
    knob_owners(documents)  # one role per knob
    merged: dict[str, dict[str, Any]] = {}
    for role, document in documents.items():
        merged.update(knob_options(role, document))
    return merged


def load_specs(roles_dir: Path, roles: Sequence[str]) -> dict[str, dict[str, Any]]:
    """Role name to its parsed ``meta/argument_specs.yml``, for each of ``roles`` under ``roles_dir``."""
    documents: dict[str, dict[str, Any]] = {}
    for role in roles:
        path = roles_dir / role / "meta" / "argument_specs.yml"
        try:
            documents[role] = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        except OSError as exc:
            raise ConfigError(f"roles/{role}: cannot read its argument specs ({exc.strerror})") from exc
    return documents


def role_variable_options(documents: Mapping[str, Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """The roles' own variables and their options: the options with a default, of every entry
    point (an operator may set them; they are not knobs of group_vars/all)."""
    found: dict[str, dict[str, Any]] = {}
    for document in documents.values():
        for spec in (document.get("argument_specs") or {}).values():
            found |= {name: dict(option) for name, option in (spec.get("options") or {}).items() if "default" in option}
    return dict(sorted(found.items()))


def role_variables(documents: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """The names of :func:`role_variable_options`, sorted."""
    return list(role_variable_options(documents))
