"""Over-saturation of an open-loop level: the slope test exact on known points, and against the
scripted server (a protocol fake with one slot, so its service rate is known): arrivals faster
than it serves are stopped and marked; arrivals it keeps up with are not."""

from __future__ import annotations

import asyncio
import math
from pathlib import Path

import pytest

from bench.measure.compare import comparison
from bench.measure.compare.store import StoredRun
from bench.measure.run.benchmark import RunOptions, execute
from bench.measure.run.saturation import ALPHA, MIN_POINTS, rising, verdict
from bench.measure.target import Target
from tests.scripted import KEY, scripted

# One slot; each answer 20 ms to the first token, then 8 tokens 20 ms apart: about 0.18 s, so the
# fake serves at most about 5.5 requests a second.
ONE_SLOT = {"slots": 1, "ttft_ms": 20.0, "itl_ms": 20.0, "content_tokens": 8}


def test_the_slope_and_its_one_sided_p_are_exact() -> None:
    # y = 2x + e with e alternating +-1: slope 2 exactly (the residuals are orthogonal to x here).
    points = [(float(x), 2.0 * x + (1.0 if x % 2 else -1.0)) for x in range(12)]
    found = rising(points)
    assert found is not None
    n = 12
    sxx = sum((x - 5.5) ** 2 for x in range(n))
    fitted_slope = sum((x - 5.5) * (y - sum(y for _, y in points) / n) for x, y in points) / sxx
    assert found.per_s == pytest.approx(fitted_slope)
    assert found.p < 1e-6
    flat = rising([(float(x), 5.0 + (1.0 if x % 2 else -1.0)) for x in range(12)])
    assert flat is not None
    assert flat.p > ALPHA
    assert rising([(float(x), float(x)) for x in range(MIN_POINTS - 1)]) is None
    assert rising([(1.0, float(y)) for y in range(MIN_POINTS)]) is None  # every x the same
    exact = rising([(float(x), 3.0 * x) for x in range(MIN_POINTS)])
    assert exact is not None
    assert exact.per_s == pytest.approx(3.0)
    assert exact.p == 0.0


def test_both_series_must_rise() -> None:
    up = [(float(x), float(x)) for x in range(MIN_POINTS)]
    flat = [(float(x), 1.0 + math.sin(x)) for x in range(MIN_POINTS)]
    assert verdict(up, up) is not None
    assert verdict(up, flat) is None
    assert verdict(flat, up) is None
    said = verdict(up, [(x, 10 * y) for x, y in up])
    assert said is not None
    assert said.startswith(
        "over-saturated: requests outstanding rise +1.00/s (p 0) and the wait for the first token +10 ms/s"
    )


def _rate(tmp_path: Path, rate: float, requests: int) -> StoredRun:
    with scripted(tmp_path, **ONE_SLOT) as server:
        target = Target(server.base_url, KEY, "scripted", "t", "vllm", None)
        options = RunOptions("rate", requests, 40, 8, tmp_path / "results", settings={"rates": (rate,)})
        result, path = asyncio.run(execute(target, options))
    return StoredRun(path, result)


def test_arrivals_faster_than_the_server_are_stopped_and_marked(tmp_path: Path) -> None:
    """12 a second against about 5.5 served: the queue and the wait grow from the start; the level
    stops within seconds, long before its 240 requests (20 s of arrivals), and compare leaves it out."""
    stored = _rate(tmp_path, 12.0, 240)
    (level,) = stored.result.levels
    assert level.saturated is not None
    assert level.saturated.startswith("over-saturated: requests outstanding rise +")
    assert level.requests.total < 150  # the rest were never sent
    assert level.requests.errored == 0  # those in flight finished
    assert stored.result.trusted  # its figures are kept, marked; the run is not thrown away
    gates = (comparison.Gate("a", None), comparison.Gate("b", None))
    assert comparison.compare([stored], [stored], gates).levels == []


def test_arrivals_the_server_keeps_up_with_are_not_stopped(tmp_path: Path) -> None:
    stored = _rate(tmp_path, 2.0, 16)
    (level,) = stored.result.levels
    assert level.saturated is None
    assert level.requests.total == 16
