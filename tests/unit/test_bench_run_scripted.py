"""bench run against the scripted server (a protocol fake with known timings): every metric
matches the ground truth within 1 ms or 1 percent, at concurrency 1 and 32.

Ground truth: the script fixes TTFT, the gap between events, the tokens per event and the
reasoning-then-answer order, so per-request metrics are known in advance; for throughput the
fake logs each token event's send time on the same monotonic clock the client uses, and the
truth is the tokens it sent inside the window that bench chose.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bench import metrics, results
from bench.config import Target
from bench.errors import EndpointAuthError, EndpointError, EndpointModelError, EndpointUnreachable
from bench.metrics import Event, RequestRecord
from bench.run import RunOptions, execute
from bench.workloads import PromptFactory
from tests.helpers import FAKES

SERVER = FAKES / "scripted_openai_server.py"
KEY = "test-key"


class Scripted:
    """The scripted server running in its own process, on a free loopback port."""

    def __init__(self, tmp_path: Path, **scenario: Any) -> None:
        self.log = tmp_path / "events.jsonl"
        self.scenario = {"api_key": KEY, "event_log": str(self.log), **scenario}
        path = tmp_path / "scenario.json"
        path.write_text(json.dumps(self.scenario), encoding="utf-8")
        self.process = subprocess.Popen([sys.executable, str(SERVER), str(path)], stdout=subprocess.PIPE, text=True)
        assert self.process.stdout is not None
        self.base_url = f"http://127.0.0.1:{self.process.stdout.readline().strip()}/v1"

    def answered(self) -> dict[str, dict[str, Any]]:
        """The fake's log of answered requests, by the first eleven words of their prompt."""
        lines = self.log.read_text(encoding="utf-8").splitlines()
        return {entry["key"]: entry for entry in map(json.loads, lines)}

    def close(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=10)
        assert self.process.stdout is not None
        self.process.stdout.close()


@pytest.fixture
def scripted(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Scripted]:
    server = Scripted(tmp_path, **getattr(request, "param", {}))
    yield server
    server.close()


def _target(server: Scripted, **changes: Any) -> Target:
    fields: dict[str, Any] = {
        "base_url": server.base_url,
        "api_key": KEY,
        "model": "scripted",
        "tag": "test",
        "engine": "vllm",
        "deployment": None,
    }
    return Target(**{**fields, **changes})


def _options(tmp_path: Path, concurrency: int, requests: int) -> RunOptions:
    workload = "single" if concurrency == 1 else "sweep"
    return RunOptions(workload, (concurrency,), requests, 64, 32, tmp_path / "results")


def _close(measured: float, truth: float) -> bool:
    return abs(measured - truth) <= max(1.0, 0.01 * abs(truth))


SCENARIO = {"ttft_ms": 150.0, "itl_ms": 15.0, "reasoning_tokens": 8, "content_tokens": 24}


def _records(document: dict[str, Any]) -> list[RequestRecord]:
    return [
        RequestRecord(**{**event, "events": tuple(Event(**e) for e in event["events"])})
        for event in results.decode_events(document["requests_events_gzip_b64"])
    ]


def _truth(server: Scripted, document: dict[str, Any], record: RequestRecord) -> dict[str, float]:
    """What really happened to one request, from the fake's send log and the client's dispatch."""
    prompts = PromptFactory(document["prompts"]["salt"], document["prompts"]["seed"])
    content = prompts.messages(record.index, document["prompts"]["words"])[0]["content"]
    sent = server.answered()[" ".join(content.split()[:11])]["sent"]
    first, last = sent[0][0], sent[-1][0]
    answer = next(t for t, _, is_answer in sent if is_answer)
    tokens = sum(count for _, count, _ in sent)
    return {
        "ttft_ms": (first - record.t_disp_ns) / 1e6,
        "ttfo_ms": (answer - record.t_disp_ns) / 1e6,
        "e2e_ms": (last - record.t_disp_ns) / 1e6,
        "tpot_ms": (last - first) / 1e6 / (tokens - 1),
    }


@pytest.mark.parametrize("scripted", [SCENARIO], indirect=True)
@pytest.mark.parametrize(("concurrency", "requests"), [(1, 12), (32, 128)])
def test_metrics_match_the_ground_truth(scripted: Scripted, tmp_path: Path, concurrency: int, requests: int) -> None:
    """TTFT, time to first answer, E2E, TPOT, decode speed, ITL and throughput equal what the
    server really did (its send log), within 1 ms or 1 percent, and the script's intent."""
    document, path = asyncio.run(execute(_target(scripted), _options(tmp_path, concurrency, requests)))
    assert path.is_file()
    assert json.loads(path.read_text(encoding="utf-8"))["run_id"] == document["run_id"]
    assert document["partial"] is False
    (level,) = document["levels"]
    total = max(requests, 4 * concurrency)
    assert level["requests"]["successful"] == total
    records = _records(document)
    window = metrics.closed_loop_window(records, concurrency, results.warmup_count(total, concurrency))
    assert window is not None
    measured = [r for r in records if window.start_ns <= r.t_disp_ns <= window.end_ns]
    assert level["requests"]["measured"] == len(measured)
    truths = [_truth(scripted, document, record) for record in measured]
    for name in ("ttft_ms", "ttfo_ms", "e2e_ms", "tpot_ms"):
        truth = metrics.percentile([t[name] for t in truths], 0.5)
        assert _close(level["latency"][name]["p50"], truth), (name, level["latency"][name]["p50"], truth)
    tpot_truth = metrics.percentile([t["tpot_ms"] for t in truths], 0.5)
    assert _close(level["decode_tps"]["p50"], 1000 / tpot_truth)
    # The script's intent: 150 ms to the first (reasoning) token, 8 reasoning tokens, 15 ms apart.
    if concurrency == 1:  # at 32 the fake's own queue adds real (and truthfully measured) waiting
        assert 150.0 <= level["latency"]["ttft_ms"]["p50"] < 155.0, level["latency"]["ttft_ms"]
    assert _close(level["latency"]["ttfo_ms"]["p50"] - level["latency"]["ttft_ms"]["p50"], 8 * 15.0)
    assert _close(level["latency"]["tpot_ms"]["p50"], 15.0)
    assert _close(level["itl_token_ms"]["p50"], 15.0)
    assert _close(level["icl_chunk_ms"]["p50"], 15.0)
    assert level["tokens"]["output"]["p50"] == 32
    assert level["tokens"]["count_sources"] == {"server": total}
    # The prompt is exactly --input-tokens long, as the server counts it.
    assert level["tokens"]["input"]["p50"] == 64
    assert level["tokens"]["input"]["max"] == 64
    # Throughput: the tokens the server sent inside bench's window, over the window.
    sent = sum(
        count
        for entry in scripted.answered().values()
        for t_ns, count, _ in entry["sent"]
        if window.start_ns <= t_ns <= window.end_ns
    )
    truth_tps = sent / window.seconds
    assert abs(level["throughput"]["output_tps"] - truth_tps) <= 0.01 * truth_tps, (level["throughput"], truth_tps)
    assert level["untrusted_because"] == []


@pytest.mark.parametrize("scripted", [{"tokens_per_event": 3, "ttft_ms": 80.0, "itl_ms": 30.0}], indirect=True)
def test_multi_token_events_are_spread_and_flagged(scripted: Scripted, tmp_path: Path) -> None:
    """Three tokens per event (as with MTP): per-token figures come from the spread, chunks stay 30 ms."""
    document, _ = asyncio.run(execute(_target(scripted), _options(tmp_path, 1, 6)))
    (level,) = document["levels"]
    assert _close(level["latency"]["tpot_ms"]["p50"], 10 * 30.0 / 31)  # 11 events, 10 gaps of 30 ms, 32 tokens
    assert _close(level["itl_token_ms"]["p50"], 30.0 / 3.1)  # 31 tokens spread over the 10 later events
    assert _close(level["icl_chunk_ms"]["p50"], 30.0)
    assert level["tokens"]["chunked_requests"] == 6
    assert level["tokens"]["tokens_per_chunk"]["p50"] == pytest.approx(32 / 11)


@pytest.mark.parametrize("scripted", [{"continuous_usage": True, "tokens_per_event": 2}], indirect=True)
def test_continuous_usage_counts_tokens_per_event(scripted: Scripted, tmp_path: Path) -> None:
    """With continuous usage each event's token count comes from the server, not from a spread."""
    document, _ = asyncio.run(execute(_target(scripted), _options(tmp_path, 1, 4)))
    (level,) = document["levels"]
    assert level["tokens"]["count_sources"] == {"server-continuous": 4}
    assert level["tokens"]["chunked_requests"] == 0
    assert _close(level["itl_token_ms"]["p50"], 5.0)


def test_wrong_key_is_an_auth_error_and_writes_nothing(scripted: Scripted, tmp_path: Path) -> None:
    """A wrong key stops the run with EndpointAuthError before anything is written."""
    with pytest.raises(EndpointAuthError, match="401"):
        asyncio.run(execute(_target(scripted, api_key="wrong"), _options(tmp_path, 1, 4)))
    assert not (tmp_path / "results").exists()


def test_unknown_model_names_the_flag(scripted: Scripted, tmp_path: Path) -> None:
    """A model the server does not serve is reported with --model and the served list."""
    with pytest.raises(EndpointModelError, match=r"--model.*scripted"):
        asyncio.run(execute(_target(scripted, model="other"), _options(tmp_path, 1, 4)))


def test_unreachable_endpoint(tmp_path: Path) -> None:
    """Nothing listening: EndpointUnreachable with the URL."""
    target = Target("http://127.0.0.1:9/v1", KEY, "scripted", "test", "vllm", None)
    with pytest.raises(EndpointUnreachable, match=r"127\.0\.0\.1:9"):
        asyncio.run(execute(target, _options(tmp_path, 1, 4)))


@pytest.mark.parametrize("scripted", [{"truncate_after": 5}], indirect=True)
def test_truncated_streams_are_errors_and_nothing_claims_success(scripted: Scripted, tmp_path: Path) -> None:
    """Every stream cut short: counted as truncated, and no result file claims success."""
    with pytest.raises(EndpointError, match=r"no request succeeded.*truncated"):
        asyncio.run(execute(_target(scripted), _options(tmp_path, 1, 4)))
    assert not (tmp_path / "results").exists()
