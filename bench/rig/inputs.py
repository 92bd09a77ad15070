"""What an operator typed, checked before any rule reads it: names, types and ranges.

Preflight runs these first, over every variable whose name carries one of llmrig's knob
prefixes (from the inventory, group_vars, host_vars or extra vars), and stops on the first
finding, so the cross-field rules and the KV plan never reason about a value already refused:

- a name that carries a knob prefix but is no knob (a typo) is an error naming the closest knobs;
- Ansible's argument-spec errors become one line each: the variable, the type it needs, what it
  got (Ansible's own message prints the whole spec after them);
- a numeric knob's description ends in a ``Range:`` sentence (``Range: 1 to 65535.``,
  ``Range: at least 0.``, ``Range: above 0, at most 1.``), which a value outside refuses.

``where`` maps a variable to where Ansible says it was set (a file and line, or ``-e``), when
it knows; the filter plugin reads that from Ansible's data tags, this module only prints it.
"""

from __future__ import annotations

import difflib
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from bench.rig.credentials import redact_url
from bench.rig.engines import ENGINES
from bench.rig.problems import Problem
from bench.rig.rules.secrets import SECRET_KNOBS


class _Hidden:
    """Stands for a secret's value in a message."""

    def __repr__(self) -> str:
        return "(a value not shown: it is secret)"


HIDDEN = _Hidden()

# A variable with one of these prefixes is meant as a knob (the roles' own variables start with
# an underscore or with their role's name, and none of these roles is named so): the shared
# prefixes, and every engine's from the engine table.
KNOB_PREFIXES = (
    "llmrig_",
    "inference_",
    "model_",
    *(engine.knob_prefix for engine in ENGINES),
    "open_webui_",
    "watchdog_",
    "reverse_proxy_",
    "monitoring_",
    "grafana_",
    "engine_",
    "nvidia_driver_",
    "tls_",
    "backup_",
    "gateway_",
)
# Facts that roles publish for later ones: they carry the prefix but are not knobs.
# tests/unit/rig/test_specs.py checks this against every set_fact of the roles.
PUBLISHED_FACTS = frozenset(
    {
        "llmrig_host",
        "llmrig_device",
        "llmrig_model",
        "llmrig_preset",
        "llmrig_nvidia",
        "llmrig_engine",
        "llmrig_engine_record",
        "llmrig_open_webui_secrets",
        "llmrig_restored",
    }
)

_NUMBER = r"-?\d+(?:\.\d+)?"
_RANGE = re.compile(
    rf"Range: (?P<body>(?:{_NUMBER} to {_NUMBER})|(?:(?:at least|above|at most|below) {_NUMBER}(?:, )?)+)\."
)
_BOUND = re.compile(rf"(at least|above|at most|below) ({_NUMBER})")


@dataclass(frozen=True, slots=True)
class Range:
    """Where a numeric knob's value may lie; an open end excludes its bound."""

    text: str  # as the description says it, e.g. "above 0, at most 1"
    low: float = -math.inf
    low_open: bool = False
    high: float = math.inf
    high_open: bool = False

    def holds(self, value: float) -> bool:
        above = value > self.low if self.low_open else value >= self.low
        below = value < self.high if self.high_open else value <= self.high
        return above and below


def parse_range(description: str) -> Range | None:
    """The ``Range:`` sentence of a knob's description, or None when it has none."""
    found = _RANGE.search(description)
    if found is None:
        return None
    body = found.group("body")
    if " to " in body:
        low, high = (float(end) for end in body.split(" to "))
        return Range(body, low=low, high=high)
    bounds: dict[str, Any] = {}
    for word, number in _BOUND.findall(body):
        if word in ("at least", "above"):
            bounds.update(low=float(number), low_open=word == "above")
        else:
            bounds.update(high=float(number), high_open=word == "below")
    return Range(body, **bounds)


def ranges(spec: Mapping[str, Mapping[str, Any]]) -> dict[str, Range]:
    """Knob name to its range, for every knob whose description states one."""
    found: dict[str, Range] = {}
    for name, option in spec.items():
        description = option.get("description") or ""
        text = " ".join(description) if isinstance(description, list) else str(description)
        parsed = parse_range(text)
        if parsed is not None:
            found[name] = parsed
    return found


def candidates(names: Iterable[str]) -> list[str]:
    """The variable names that are meant as knobs: ``model`` and those with a knob prefix."""
    return sorted({name for name in names if name == "model" or name.startswith(KNOB_PREFIXES)})


def _at(name: str, where: Mapping[str, str]) -> str:
    return f" (set in {where[name]})" if where.get(name) else ""


def unknown_names(names: Iterable[str], known: Iterable[str], where: Mapping[str, str]) -> list[Problem]:
    """A problem for each of ``names`` that is neither a knob nor a published fact."""
    knobs = sorted(set(known))
    problems = []
    for name in candidates(names):
        if name in knobs or name in PUBLISHED_FACTS:
            continue
        close = difflib.get_close_matches(name, knobs, n=3, cutoff=0.75)
        hint = f"did you mean {' or '.join(close)}?" if close else "see the variable reference in docs/variables.md"
        problems.append(Problem(name, f"is not an llmrig knob{_at(name, where)}; {hint}"))
    return problems


_CONVERT = re.compile(
    r"argument '(?P<name>[^']+)' is of type (?P<got>\S+) and we were unable to convert to (?P<want>\w+)"
)
_CHOICE = re.compile(r"value of (?P<name>\S+) must be one of: (?P<choices>.*), got: (?P<got>.*)$")
_ELEMENTS = re.compile(r"[Ee]lements value for option '?(?P<name>[^' ]+)'?.* unable to convert to (?P<want>\w+)")
_MISSING = re.compile(r"missing required arguments: (?P<names>.*)$")
_NEEDS = {"bool": "true or false", "int": "a whole number", "float": "a number", "list": "a list", "dict": "a mapping"}


def type_problems(
    argument_errors: Sequence[str],
    values: Mapping[str, object],
    where: Mapping[str, str],
    secret: frozenset[str] = frozenset(),
) -> list[Problem]:
    """Ansible's argument-spec errors, one short problem each, naming the variable; a line this
    does not know is passed on, unless it names a ``secret`` (Ansible may quote the value)."""
    problems: list[Problem] = []
    for line in argument_errors:
        named = [name for name in secret if name in line]
        if found := _CONVERT.search(line):
            name, want = found.group("name"), found.group("want")
            got = f"{values[name]!r}" if name in values else found.group("got")
            problems.append(Problem(name, f"needs {_NEEDS.get(want, want)}, got {got}{_at(name, where)}"))
        elif found := _CHOICE.search(line):
            name = found.group("name")
            message = f"must be one of {found.group('choices')}; got {found.group('got')!r}{_at(name, where)}"
            problems.append(Problem(name, message))
        elif found := _ELEMENTS.search(line):
            name = found.group("name")
            problems.append(Problem(name, f"every element needs {_NEEDS.get(found.group('want'), 'the right type')}"))
        elif found := _MISSING.search(line):
            for name in found.group("names").split(", "):
                problems.append(Problem(name, "is not set; group_vars/all defines it, so was that file changed?"))
        elif named:
            problems.append(Problem(named[0], "has the wrong type or value (not shown: it is secret)"))
        else:
            problems.append(Problem("argument spec", line.split(". Valid booleans")[0][:300]))
    return problems


def _number(value: object) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value)
    try:
        return float(str(value))
    except ValueError:
        return None


def range_problems(
    values: Mapping[str, object], spec: Mapping[str, Mapping[str, Any]], where: Mapping[str, str]
) -> list[Problem]:
    """A problem for each numeric knob outside the range its description states."""
    problems = []
    for name, allowed in ranges(spec).items():
        number = _number(values.get(name)) if name in values else None
        if number is not None and not allowed.holds(number):
            problems.append(Problem(name, f"must be {allowed.text}; got {values[name]!r}{_at(name, where)}"))
    return problems


def _shown(value: object) -> object:
    """``value`` as a message may quote it: any URL in it without its credentials."""
    if isinstance(value, str):
        return redact_url(value) if "://" in value else value
    if isinstance(value, list):
        return [_shown(item) for item in value]
    return value


def check_input(
    spec: Mapping[str, Mapping[str, Any]],
    values: Mapping[str, object],
    argument_errors: Sequence[str],
    where: Mapping[str, str],
    role_variables: Mapping[str, Mapping[str, Any]] | None = None,
) -> list[Problem]:
    """Every finding about names, types and ranges; ``values`` holds each candidate variable, and
    ``role_variables`` are the roles' own (defaulted) variables and their options: no typos
    either, and their ``Range:`` holds too.
    The value of a secret (:data:`~bench.rig.rules.secrets.SECRET_KNOBS`) is never quoted, and a
    URL's credentials are shown as ``***``."""
    secret = set(SECRET_KNOBS)
    values = {name: HIDDEN if name in secret else _shown(value) for name, value in values.items()}
    own = dict(role_variables or {})
    problems = unknown_names(values, [*spec, *own], where)
    problems += type_problems(argument_errors, values, where, frozenset(secret))
    typed = {problem.variable for problem in problems}
    problems += [p for p in range_problems(values, {**own, **spec}, where) if p.variable not in typed]
    return problems
