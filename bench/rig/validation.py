"""Cross-field configuration rules, checked before anything changes on a host.

The ``preflight`` role calls these through the ``llmrig`` filter plugin; tests call them
directly. Every rule returns :class:`Problem` records whose ``variable`` is the knob an
operator changes to fix it, and whose message says what to change it to.

Two phases, because the preset-derived knobs cannot be rendered before the preset is chosen:

1. :func:`resolve` picks the device (``vllm_device: auto``) and the preset (``model: auto``)
   from the host facts.
2. :func:`check` runs every rule over the rendered knobs, the host facts and the preset.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from bench.errors import PresetError
from bench.rig.engines import ENGINE_NAMES
from bench.rig.presets import Preset, parse_preset
from bench.rig.problems import Problem
from bench.rig.rules import RULES, gpus
from bench.rig.rules.engine import rule_engine_serves_preset
from bench.rig.rules.host import rule_host_os, rule_kv_plan

DEVICES = ("auto", "cuda", "cpu")
# Rules whose error makes every later rule moot: the host is not one llmrig runs on, or the
# engine cannot serve the preset.
FRAME_RULES = (rule_host_os, rule_engine_serves_preset)


@dataclass(frozen=True, slots=True)
class Resolution:
    """What phase 1 decided, plus the problems that stop phase 2 from running."""

    device: str
    model: str
    preset: Preset | None
    problems: tuple[Problem, ...] = field(default=())


def resolve(knobs: Mapping[str, Any], host: Mapping[str, Any]) -> Resolution:
    """Resolve ``vllm_device`` and ``model`` and validate the chosen preset."""
    problems: list[Problem] = []
    engine = knobs.get("inference_engine")
    if engine not in ENGINE_NAMES:
        problems.append(
            Problem("inference_engine", f"{engine!r} is not an engine; choose one of {', '.join(ENGINE_NAMES)}")
        )
    wanted = knobs.get("vllm_device", "auto")
    if wanted not in DEVICES:
        problems.append(Problem("vllm_device", f"{wanted!r} is not a device; choose one of {', '.join(DEVICES)}"))
        wanted = "auto"
    found = gpus(host)
    device = ("cuda" if found else "cpu") if wanted == "auto" else str(wanted)
    if device == "cuda" and not found:
        problems.append(
            Problem(
                "vllm_device",
                "is cuda but no NVIDIA GPU was found (neither nvidia-smi nor lspci lists one); "
                "set vllm_device: auto or cpu on this host",
            )
        )
    presets = knobs.get("model_presets")
    if not isinstance(presets, Mapping) or not presets:
        problems.append(Problem("model_presets", "must be a non-empty mapping of preset name to fields"))
        return Resolution(device, "", None, tuple(problems))
    model = knobs.get("model", "auto")
    if model == "auto":
        auto_var = f"model_auto_{device}"
        model = knobs.get(auto_var, "")
        if model not in presets:
            problems.append(Problem(auto_var, f"names preset {model!r}, which model_presets does not define"))
            return Resolution(device, str(model), None, tuple(problems))
    elif model not in presets:
        known = ", ".join(sorted(str(name) for name in presets))
        problems.append(Problem("model", f"{model!r} is not a preset; choose auto or one of: {known}"))
        return Resolution(device, str(model), None, tuple(problems))
    try:
        preset = parse_preset(str(model), presets[model])
    except PresetError as exc:
        problems.append(Problem(f"model_presets.{model}", str(exc)))
        return Resolution(device, str(model), None, tuple(problems))
    return Resolution(device, str(model), preset, tuple(problems))


def check(knobs: Mapping[str, Any], host: Mapping[str, Any], resolution: Resolution) -> list[Problem]:
    """Run every cross-field rule; phase 1 problems come first. A host or a preset that the
    first rules refuse ends the check (every other rule would reason about it), and the KV plan
    runs last and only when no other rule found an error (its findings would follow from it)."""
    problems = list(resolution.problems)
    if resolution.preset is None:
        return problems
    for rule in RULES:
        if rule is rule_kv_plan and any(problem.severity == "error" for problem in problems):
            continue
        found = rule(knobs, host, resolution.device, resolution.preset)
        problems.extend(found)
        if rule in FRAME_RULES and any(problem.severity == "error" for problem in found):
            break
    return problems
