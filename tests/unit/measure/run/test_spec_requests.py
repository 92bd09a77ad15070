"""Per-request speculative decoding against the scripted server (a protocol fake that sends vLLM's
``metrics.speculative_decoding`` in each answer's final usage chunk): the level's figures are the
ground truth the fake was given, request by request, and differ from the pooled rate as they must."""

from __future__ import annotations

import asyncio
from pathlib import Path
from statistics import median

import pytest

from bench.measure.metrics import Event, RequestRecord, request_metrics
from bench.measure.run import levels, results
from bench.measure.run.benchmark import RunOptions, execute
from bench.measure.run.spec_requests import summarise
from bench.measure.target import Target
from tests.scripted import FAST, KEY, scripted

REQUESTS = 6
# Request k (arrival k + 2, after the two calibration requests) makes 6 verify steps of 2 drafts:
# k of them accept both, the rest none. Request 0 accepts nothing, request 5 accepts 10 of 12.
STEPS = {str(k + 2): {"spec_decode": {"num_spec_tokens": 2, "steps": [2] * k + [0] * (6 - k)}} for k in range(6)}


def _run(tmp_path: Path) -> results.RunResult:
    with scripted(tmp_path, **FAST, requests=STEPS) as server:
        target = Target(server.base_url, KEY, "scripted", "t", "vllm", None)
        options = RunOptions("single", REQUESTS, 64, 8, tmp_path / "results")
        result, _ = asyncio.run(execute(target, options))
    return result


def test_each_request_reports_its_own_acceptance(tmp_path: Path) -> None:
    result = _run(tmp_path)
    (level,) = result.levels
    (records,) = results.records_by_level(result)
    assert [(r.spec_accepted, r.spec_drafted, r.spec_steps) for r in records] == [
        (2 * k, 12, 6) for k in range(REQUESTS)
    ]
    measured = {m.index for m in levels.measured_requests(records, level)}
    kept = [k for k in range(REQUESTS) if k in measured]
    assert len(kept) >= 4
    found = level.spec_decode_requests
    assert found is not None
    assert found.requests == len(kept)
    assert found.acceptance.p50 == pytest.approx(median(k / 6 for k in kept))
    assert found.acceptance.mean == pytest.approx(sum(k / 6 for k in kept) / len(kept))
    assert found.acceptance_length is not None
    assert found.acceptance_length.p50 == pytest.approx(median(1 + 2 * k / 6 for k in kept))
    assert found.pooled_acceptance == pytest.approx(sum(2 * k for k in kept) / (12 * len(kept)))
    assert found.zero_acceptance == (1 if 0 in kept else 0)
    # Each request's own rate also reaches compare, through its metrics.
    rates = {m.index: m.spec_acceptance for m in levels.measured_requests(records, level)}
    assert rates == {k: pytest.approx(k / 6) for k in kept}


def test_the_mean_per_request_differs_from_the_pooled_rate_when_lengths_differ() -> None:
    """A long answer that accepts much and three short ones that accept little: the pooled rate
    follows the long one (AIPerf's point, vLLM issue 42690); each request weighs the same here."""
    long = _record(0, accepted=90, drafted=100, steps=50)
    short = [_record(i, accepted=1, drafted=10, steps=5) for i in range(1, 4)]
    found = summarise([long, *short], {0, 1, 2, 3})
    assert found is not None
    assert found.pooled_acceptance == pytest.approx(93 / 130)
    assert found.acceptance.mean == pytest.approx((0.9 + 3 * 0.1) / 4)
    assert found.acceptance.p50 == pytest.approx(0.1)
    assert summarise([long], set()) is None
    assert summarise([_record(0, None, None, None)], {0}) is None


def test_an_answer_without_the_servers_figures_has_none() -> None:
    assert request_metrics(_record(0, None, None, None)) is not None
    assert request_metrics(_record(0, None, None, None)).spec_acceptance is None  # type: ignore[union-attr]


def _record(index: int, accepted: int | None, drafted: int | None, steps: int | None) -> RequestRecord:
    events = (Event(1_000_000, 3, 0, False, None), Event(2_000_000, 3, 0, False, None))
    return RequestRecord(
        index=index,
        t_disp_ns=0,
        t_end_ns=3_000_000,
        events=events,
        requested_tokens=2,
        completion_tokens=2,
        spec_accepted=accepted,
        spec_drafted=drafted,
        spec_steps=steps,
    )
