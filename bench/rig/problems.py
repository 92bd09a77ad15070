"""The one finding type of the rig core: what the rules and the KV planner report.

``variable`` is the knob an operator changes to fix it, ``severity`` is ``error``, ``warning``
or ``info`` (a fact to show, such as the KV plan's summary).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Problem:
    """One finding: ``variable`` is what to change, ``severity`` error, warning or info (a fact to show)."""

    variable: str
    message: str
    severity: str = "error"

    def render(self) -> str:
        """One line, variable first, as the preflight role prints it."""
        return f"{self.variable}: {self.message}"
