"""Ansible filters that run llmrig's configuration rules from the ``bench`` package.

One implementation serves both sides: the ``preflight`` role calls these filters on the
controller, and the tests and ``bench`` call the same functions directly. When the llmrig
package is not installed into the controller's Python, the repository root is put on the path.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

try:
    from bench import validation
except ImportError:  # running from a checkout without `pip install -e .`
    sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
    from bench import validation


def llmrig_resolve(knobs: dict[str, Any], host: dict[str, Any]) -> dict[str, Any]:
    """Phase 1: resolve ``vllm_device`` and ``model``; return device, model, preset and errors."""
    resolution = validation.resolve(knobs, host)
    preset = {}
    if resolution.preset is not None:
        preset = dict(knobs["model_presets"][resolution.model])
    return {
        "device": resolution.device,
        "model": resolution.model,
        "preset": preset,
        "errors": [problem.render() for problem in resolution.problems],
    }


def llmrig_check(knobs: dict[str, Any], host: dict[str, Any]) -> dict[str, list[str]]:
    """Phase 2: run every cross-field rule; return rendered errors and warnings."""
    problems = validation.check(knobs, host, validation.resolve(knobs, host))
    return {
        "errors": [problem.render() for problem in problems if problem.severity == "error"],
        "warnings": [problem.render() for problem in problems if problem.severity == "warning"],
    }


class FilterModule:
    """llmrig configuration filters."""

    def filters(self) -> dict[str, Any]:
        return {"llmrig_resolve": llmrig_resolve, "llmrig_check": llmrig_check}
