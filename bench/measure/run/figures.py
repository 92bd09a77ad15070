"""How the run's console output writes a figure: a dash for none, thousands separated."""

from __future__ import annotations

from bench.measure.metrics import Summary


def fmt(value: float | None, digits: int = 1) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


def p50(summary: Summary | None, digits: int = 1) -> str:
    return "-" if summary is None else fmt(summary.p50, digits)
