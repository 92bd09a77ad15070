"""How every rule reads its inputs: the rule signature, the knob accessors (extra vars arrive as
strings) and the GPUs of the host facts."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from bench.rig.presets import Preset
from bench.rig.problems import Problem
from bench.rig.values import truthy

GIB = 1024**3


Knobs = Mapping[str, Any]
Host = Mapping[str, Any]
Rule = Callable[[Knobs, Host, str, Preset], list[Problem]]


def gpus(host: Host) -> list[Mapping[str, Any]]:
    """The NVIDIA GPUs in the host facts (an empty list on a CPU host)."""
    found = host.get("gpus") or []
    return [gpu for gpu in found if isinstance(gpu, Mapping)]


def as_int(knobs: Knobs, name: str) -> int | None:
    """``knobs[name]`` as an int (extra vars arrive as strings), or None when it is not one."""
    value = knobs.get(name)
    if isinstance(value, bool):
        return None
    try:
        return int(str(value).strip()) if value is not None else None
    except ValueError:
        return None


def as_bool(knobs: Knobs, name: str) -> bool:
    """``knobs[name]`` as a bool, accepting the strings Ansible accepts."""
    return truthy(knobs.get(name))


def as_str(knobs: Knobs, name: str) -> str:
    """``knobs[name]`` as a stripped string ('' when unset)."""
    value = knobs.get(name)
    return "" if value is None else str(value).strip()


def err(variable: str, message: str) -> list[Problem]:
    """One error about ``variable``, as the list a rule returns."""
    return [Problem(variable, message)]


def serves_vllm(knobs: Knobs) -> bool:
    """Hardware-dependent vLLM rules apply only while vLLM is the engine; coherence rules always do."""
    return as_str(knobs, "inference_engine") == "vllm"


def positive(knobs: Knobs, name: str) -> tuple[int, list[Problem]]:
    """``knobs[name]`` as a positive int, or 0 and the problem that says it is not one."""
    value = as_int(knobs, name)
    if value is None or value < 1:
        return 0, err(name, f"must be a positive integer, got {knobs.get(name)!r}")
    return value, []
