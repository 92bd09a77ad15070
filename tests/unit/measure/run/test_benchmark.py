"""bench run against the scripted server (a protocol fake with known timings): every metric
matches the ground truth within 1 ms or 1 percent, at concurrency 1 and 32.

Ground truth: the script fixes TTFT, the gap between events, the tokens per event and the
reasoning-then-answer order, so per-request metrics are known in advance; for throughput the
fake logs each token event's send time on the same monotonic clock the client uses, and the
truth is the tokens it sent inside the window that bench chose.

The ground-truth checks run as the integration tier does: the server pinned to one core, bench
(``python -m bench run``, its own process, writing the result file the test reads) pinned to
another, both at real-time priority (SCHED_FIFO), so a busy neighbour on either core cannot
delay them and the comparison measures bench, not the machine's load. They need 2 cores and the
right to real-time priority (root, or CAP_SYS_NICE), and fail, saying so, without them.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bench.cli import main
from bench.errors import EndpointAuthError, EndpointError, EndpointModelError, EndpointUnreachable
from bench.measure import metrics
from bench.measure.metrics import Event, RequestRecord
from bench.measure.run import levels, results
from bench.measure.run.benchmark import Progress, RunOptions, execute
from bench.measure.run.prompts import Calibration, PromptFactory
from bench.measure.run.window import closed_loop_window
from bench.measure.target import Target
from tests import deployments
from tests.helpers import GROUP_VARS, REPO
from tests.result_files import load_result
from tests.scripted import KEY, Scripted


@pytest.fixture
def scripted(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Scripted]:
    server = Scripted(tmp_path, **getattr(request, "param", {}))
    yield server
    server.close()


# SCHED_FIFO priority 50: runs before any normal process on its core as soon as it wakes.
REALTIME = ["chrt", "--fifo", "50"]


def _pinned(core: int) -> list[str]:
    return ["taskset", "--cpu-list", str(core), *REALTIME]


def _cores() -> tuple[int, int]:
    """(bench's core, the server's core): the first two this process may run on."""
    cores = sorted(os.sched_getaffinity(0))
    if len(cores) < 2:
        pytest.fail(
            f"the ground-truth checks pin the scripted server and bench to a core each, so that neither "
            f"waits for the other or for a neighbour: they need 2 cores, this process may use {len(cores)} ({cores})"
        )
    refused = subprocess.run([*REALTIME, "true"], capture_output=True, text=True, check=False)
    if refused.returncode != 0:
        pytest.fail(
            "the ground-truth checks run the scripted server and bench at real-time priority, so that a busy "
            f"neighbour on their cores cannot delay them; `{' '.join(REALTIME)}` was refused here "
            f"({refused.stderr.strip()}): run them as root or with CAP_SYS_NICE"
        )
    return cores[0], cores[1]


@pytest.fixture
def isolated(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Scripted]:
    """The scripted server pinned to the second core at real-time priority; bench goes on the first."""
    bench_core, server_core = _cores()
    server = Scripted(tmp_path, _pinned(server_core), **request.param)
    server.bench_prefix = _pinned(bench_core)
    yield server
    server.close()


def _bench_isolated(server: Scripted, tmp_path: Path, *args: str) -> dict[str, Any]:
    """`python -m bench run ARGS` against ``server``, pinned and real-time; returns its result file."""
    results_dir = tmp_path / "results"
    command = [*server.bench_prefix, sys.executable, "-m", "bench", "run", *args, "--base-url", server.base_url]
    command += ["--api-key", KEY, "--model", "scripted", "--tag", "test", "--results-dir", str(results_dir)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300, check=False, cwd=REPO)
    assert done.returncode == 0, done.stdout + done.stderr
    (path,) = (results_dir / "test").glob("*.json")
    return load_result(path)


def _execute(target: Target, options: RunOptions) -> dict[str, Any]:
    """An in-process run; returns its result file as the test tiers read it (tests/result_files.py)."""
    _, path = asyncio.run(execute(target, options))
    return load_result(path)


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
    if concurrency == 1:
        return RunOptions("single", requests, 64, 32, tmp_path / "results")
    return RunOptions("sweep", requests, 64, 32, tmp_path / "results", settings={"concurrency": (concurrency,)})


def _close(measured: float, truth: float) -> bool:
    return abs(measured - truth) <= max(1.0, 0.01 * abs(truth))


SCENARIO = {"ttft_ms": 150.0, "itl_ms": 15.0, "reasoning_tokens": 8, "content_tokens": 24}


def _send_gap_median(server: Scripted) -> float:
    """Median gap (ms) between consecutive token events the fake sent, over every answered request."""
    gaps = [
        (later[0] - earlier[0]) / 1e6
        for entry in server.answered().values()
        for earlier, later in zip(entry["sent"], entry["sent"][1:], strict=False)
    ]
    return metrics.percentile(gaps, 0.5)


def _records(document: dict[str, Any]) -> list[RequestRecord]:
    return [
        RequestRecord(**{**event, "events": tuple(Event(**e) for e in event["events"])})
        for event in results.decode_events(document["requests_events_gzip_b64"])
    ]


def _truth(server: Scripted, document: dict[str, Any], record: RequestRecord) -> dict[str, float]:
    """What really happened to one request, from the fake's send log and the client's dispatch."""
    prompts = PromptFactory(document["prompts"]["salt"], document["prompts"]["seed"])
    words = Calibration(**document["calibration"]).words_for(record.requested_tokens and 64)
    content = prompts.messages(record.index, words)[0]["content"]
    sent = server.answered()[" ".join(content.split()[:11])]["sent"]
    first, last = sent[0][0], sent[-1][0]
    answer = next(t for t, _, is_answer in sent if is_answer)
    tokens = sum(count for _, count, _ in sent)
    return {
        "thinking_tokens": sum(count for t, count, is_answer in sent if not is_answer and t < answer),
        "ttft_ms": (first - record.t_disp_ns) / 1e6,
        "ttfo_ms": (answer - record.t_disp_ns) / 1e6,
        "e2e_ms": (last - record.t_disp_ns) / 1e6,
        "tpot_ms": (last - first) / 1e6 / (tokens - 1),
    }


@pytest.mark.parametrize(
    ("isolated", "concurrency", "requests"),
    # At 32 the streams are staggered over 128 ms (one start per 4 ms), as a real server's do not
    # all start together; in lockstep every event would arrive in one burst of 32 and measure the
    # client's queue. Bench spends about a millisecond sending a request, and the 32 that follow the
    # ends of one wave of streams each need it: one start per ms left no headroom (over 15 ms they
    # queued up; a run sharing its cores saw E2E 13 ms late), one per 4 ms leaves three quarters.
    [(SCENARIO, 1, 12), ({**SCENARIO, "stagger_slots": 32, "stagger_step_ms": 4}, 32, 128)],
    indirect=["isolated"],
    ids=["concurrency-1", "concurrency-32"],
)
def test_metrics_match_the_ground_truth(isolated: Scripted, tmp_path: Path, concurrency: int, requests: int) -> None:
    """TTFT, time to first answer, E2E, TPOT, decode speed, ITL and throughput equal what the
    server really did (its send log), within 1 ms or 1 percent, and the script's intent."""
    scripted = isolated
    workload = ["single"] if concurrency == 1 else ["sweep", "--concurrency", str(concurrency)]
    shape = ["--requests", str(requests), "--input-tokens", "64", "--output-tokens", "32"]
    document = _bench_isolated(scripted, tmp_path, *workload, *shape)
    assert document["partial"] is False
    (level,) = document["levels"]
    total = max(requests, 4 * concurrency)
    assert level["requests"]["successful"] == total
    records = _records(document)
    window = closed_loop_window(records, concurrency, levels.warmup_count(total, concurrency))
    assert window is not None
    measured = [r for r in records if window.start_ns <= r.t_disp_ns <= window.end_ns]
    assert level["requests"]["measured"] == len(measured)
    truths = [_truth(scripted, document, record) for record in measured]
    for name in ("ttft_ms", "ttfo_ms", "e2e_ms", "tpot_ms"):
        truth = metrics.percentile([t[name] for t in truths], 0.5)
        print(f"{name} p50: bench {level['latency'][name]['p50']:.3f}, truth {truth:.3f}")
        assert _close(level["latency"][name]["p50"], truth), (name, level["latency"][name]["p50"], truth)
    tpot_truth = metrics.percentile([t["tpot_ms"] for t in truths], 0.5)
    assert _close(level["decode_tps"]["p50"], 1000 / tpot_truth)
    # The script's intent: 150 ms to the first (reasoning) token, 8 reasoning tokens, 15 ms apart.
    # The fake sleeps at least that long, and longer when its core is busy (the send log above is
    # the truth either way), so the intent bounds each figure from below, and each gap from above
    # by half a gap (a token counted one event late would read as 30 ms).
    assert level["latency"]["ttft_ms"]["p50"] >= 150.0, level["latency"]["ttft_ms"]
    # The first answer comes 8 events after the first token: more than 7 gaps, whatever the load.
    assert level["latency"]["ttfo_ms"]["p50"] - level["latency"]["ttft_ms"]["p50"] > 7 * 15.0
    for gap in (level["latency"]["tpot_ms"], level["itl_token_ms"], level["icl_chunk_ms"]):
        assert 15.0 - 1.0 <= gap["p50"] < 15.0 * 1.5, gap
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
    document = _execute(_target(scripted), _options(tmp_path, 1, 6))
    (level,) = document["levels"]
    gap = _send_gap_median(scripted)  # 30 ms by the script; the truth is what the fake did
    assert _close(gap, 30.0)
    assert _close(level["latency"]["tpot_ms"]["p50"], 10 * gap / 31)  # 11 events, 10 gaps, 32 tokens
    assert _close(level["itl_token_ms"]["p50"], gap / 3.1)  # 31 tokens spread over the 10 later events
    assert _close(level["icl_chunk_ms"]["p50"], gap)
    assert level["tokens"]["chunked_requests"] == 6
    assert level["tokens"]["tokens_per_chunk"]["p50"] == pytest.approx(32 / 11)


@pytest.mark.parametrize("scripted", [{"continuous_usage": True, "tokens_per_event": 2}], indirect=True)
def test_continuous_usage_counts_tokens_per_event(scripted: Scripted, tmp_path: Path) -> None:
    """With continuous usage each event's token count comes from the server, not from a spread."""
    document = _execute(_target(scripted), _options(tmp_path, 1, 4))
    (level,) = document["levels"]
    assert level["tokens"]["count_sources"] == {"server-continuous": 4}
    assert level["tokens"]["chunked_requests"] == 0
    assert _close(level["itl_token_ms"]["p50"], _send_gap_median(scripted) / 2)  # two tokens per event


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


def test_interrupted_run_keeps_what_it_measured(scripted: Scripted, tmp_path: Path) -> None:
    """Cancelling a run (what Ctrl-C does) writes the finished requests, marked partial."""
    progress = Progress()

    async def interrupt_after_three() -> None:
        done = asyncio.Event()
        seen: list[RequestRecord] = []

        def on_done(record: RequestRecord) -> None:
            seen.append(record)
            if len(seen) == 3:
                done.set()

        progress.request_done = on_done
        task = asyncio.create_task(execute(_target(scripted), _options(tmp_path, 1, 20), progress))
        await done.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(interrupt_after_three())
    assert progress.written is not None
    document = load_result(progress.written)
    assert document["partial"] is True
    assert document["trusted"] is False
    assert 3 <= document["levels"][0]["requests"]["total"] < 20
    assert "the level was interrupted" in document["levels"][0]["untrusted_because"]


@pytest.mark.parametrize("scripted", [{"ttft_ms": 20.0, "itl_ms": 2.0}], indirect=True)
def test_cli_run_prints_a_table_and_files_the_result(
    scripted: Scripted, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`bench run single` with flags: exit 0, a summary row, and the file under results/<tag>/."""
    code = main(
        [
            "run",
            "single",
            "--base-url",
            scripted.base_url,
            "--api-key",
            KEY,
            "--tag",
            "cli-test",
            "--requests",
            "6",
            "--input-tokens",
            "40",
            "--output-tokens",
            "8",
            "--results-dir",
            str(tmp_path / "results"),
        ]
    )
    out = capsys.readouterr().out
    assert code == 0
    assert "TTFT" in out
    (path,) = (tmp_path / "results" / "cli-test").glob("*.json")
    assert f"result: {path}" in out


@pytest.mark.parametrize(
    "case",
    [
        (["--api-key", "wrong"], 3, "401: wrong or missing API key (--api-key"),
        (["--model", "nope"], 3, "does not serve model 'nope' (--model)"),
        (["--input-tokens", "0"], 2, "--input-tokens: must be at least 1"),
        (["--tag", "a/b"], 2, "--tag: 'a/b'"),
    ],
)
def test_cli_errors_are_one_line_with_exit_codes(
    scripted: Scripted, tmp_path: Path, capsys: pytest.CaptureFixture[str], case: tuple[list[str], int, str]
) -> None:
    """Bad input or a refusing endpoint: one line on stderr naming the flag, the class's exit code."""
    flags, code, message = case
    base = ["run", "single", "--base-url", scripted.base_url, "--results-dir", str(tmp_path / "results")]
    assert main([*base, "--api-key", KEY, *flags]) == code
    err = capsys.readouterr().err
    assert message in err
    assert "Traceback" not in err
    assert len([line for line in err.splitlines() if line.startswith("bench: error:")]) == 1
    assert not (tmp_path / "results").exists()


@pytest.mark.parametrize("scripted", [{"ttft_ms": 20.0, "itl_ms": 2.0}], indirect=True)
def test_cli_reads_endpoint_key_model_and_tag_from_the_fetched_deployment(scripted: Scripted, tmp_path: Path) -> None:
    """With no target flags, bench uses artifacts/<host>/deployment.json and the key beside it."""
    checkout = tmp_path / "checkout"
    (checkout / "group_vars").mkdir(parents=True)
    (checkout / "group_vars" / "all").symlink_to(GROUP_VARS)
    host = checkout / "artifacts" / "box"
    host.mkdir(parents=True)
    deployment = deployments.record(
        preset="gemma3-270m",
        served_model_name="scripted",
        config_version="v1-test",
        base_url=scripted.base_url,
        args=["--tensor-parallel-size", "1"],
    )
    (host / "deployment.json").write_text(json.dumps(deployment), encoding="utf-8")
    (host / "api_key").write_text(KEY + "\n", encoding="utf-8")
    results_dir = tmp_path / "results"
    argv = ["--config-dir", str(checkout), "run", "single", "--requests", "4", "--input-tokens", "40"]
    assert main([*argv, "--output-tokens", "8", "--results-dir", str(results_dir)]) == 0
    (path,) = (results_dir / "v1-test").glob("*.json")
    document = load_result(path)
    sources = document["environment"]["sources"]
    assert sources["base_url"] == str(host / "deployment.json")
    assert sources["api_key"] == str(host / "api_key")
    assert sources["tag"] == str(host / "deployment.json")
    assert document["environment"]["deployment"]["preset"] == "gemma3-270m"
    assert document["gpu"]["available"] is False  # no NVIDIA driver on this machine, said once
    assert KEY not in path.read_text(encoding="utf-8")


@pytest.mark.parametrize("isolated", [{"ttft_ms": 20.0, "itl_ms": 2.0}], indirect=True)
def test_rate_workload_is_open_loop_with_scheduled_sends(isolated: Scripted, tmp_path: Path) -> None:
    """Poisson arrivals: every request keeps its schedule, queue time is reported, one level per rate.
    Queue time is a live measurement, so server and bench run pinned, as the ground-truth checks do."""
    shape = ["--requests", "12", "--input-tokens", "64", "--output-tokens", "8", "--rate", "20", "40"]
    document = _bench_isolated(isolated, tmp_path, "rate", *shape)
    assert [level["rate_per_s"] for level in document["levels"]] == [20.0, 40.0]
    for level in document["levels"]:
        assert level["requests"]["successful"] == 12
        assert level["window_s"] > 0
        assert level["latency"]["queue_client_ms"]["max"] < 50  # nothing waited for a slot
    records = _records(document)
    assert all(record.t_sched_ns is not None and record.t_disp_ns >= record.t_sched_ns for record in records)


@pytest.mark.parametrize("scripted", [{"ttft_ms": 20.0, "itl_ms": 2.0, "max_model_len": 4096}], indirect=True)
def test_context_workload_grows_the_prompt_and_skips_what_does_not_fit(scripted: Scripted, tmp_path: Path) -> None:
    """Each level has its exact prompt length; a level beyond max_model_len is skipped and listed."""
    options = RunOptions("context", 3, 64, 8, tmp_path / "results", settings={"contexts": (128, 1024, 8192)})
    document = _execute(_target(scripted), options)
    assert [level["tokens"]["input"]["p50"] for level in document["levels"]] == [128, 1024]
    assert document["skipped_levels"] == ["c=1, 8192 prompt tokens"]
    assert document["environment"]["max_model_len"] == 4096


@pytest.mark.parametrize("scripted", [{"ttft_ms": 10.0, "itl_ms": 1.0}], indirect=True)
def test_agent_sessions_resend_a_growing_history(scripted: Scripted, tmp_path: Path) -> None:
    """Two sessions of three turns: each turn's prompt holds the system prompt, the earlier turns
    and the answers the server gave, so it grows by the new message plus the last answer."""
    settings = {"sessions": 2, "turns": 3, "system_tokens": 100}
    options = RunOptions("agent", 2, 32, 8, tmp_path / "results", settings=settings)
    document = _execute(_target(scripted), options)
    (level,) = document["levels"]
    turns = level["agent_turns"]
    assert [row["turn"] for row in turns] == [0, 1, 2]
    assert [row["requests"] for row in turns] == [2, 2, 2]
    sizes = [row["prompt_tokens_mean"] for row in turns]
    # Each turn adds a user message (about 32 tokens) and the previous answer (8 words here).
    assert sizes[1] - sizes[0] == pytest.approx(sizes[2] - sizes[1])
    assert sizes[1] - sizes[0] >= 32 + 8
    assert level["untrusted_because"] == []
    records = _records(document)
    assert sorted((r.session, r.turn) for r in records) == [(s, t) for s in range(2) for t in range(3)]


@pytest.mark.parametrize(
    ("scripted", "kind"),
    [
        ({"malformed_after": 3}, "malformed"),
        (
            {"status": 400, "status_above_max_tokens": 1, "error_message": "maximum context length is 2048 tokens"},
            "context_overflow",
        ),
        ({"status": 500, "status_above_max_tokens": 1}, "http_500"),
    ],
    indirect=["scripted"],
)
def test_request_failures_are_classified_and_nothing_claims_success(
    scripted: Scripted, tmp_path: Path, kind: str
) -> None:
    """Malformed streams, context overflow and server errors: counted by kind, no result file."""
    with pytest.raises(EndpointError, match=rf"no request succeeded: all 4 failed, {kind} 4"):
        asyncio.run(execute(_target(scripted), _options(tmp_path, 1, 4)))
    assert not (tmp_path / "results").exists()


@pytest.mark.parametrize(
    "isolated", [{"ollama": True, "ttft_ms": 20.0, "itl_ms": 5.0, "content_tokens": 16}], indirect=True
)
def test_ollama_native_timings_cross_check_the_stream(isolated: Scripted, tmp_path: Path) -> None:
    """When the server answers Ollama's /api/version, bench sets Ollama's own decode speed
    (eval_count / eval_duration) beside the one it measured from the stream (isolated: a timing check)."""
    shape = ["--requests", "4", "--input-tokens", "64", "--output-tokens", "16"]
    document = _bench_isolated(isolated, tmp_path, "single", *shape)
    assert document["environment"]["engine"] == "ollama"
    native = document["ollama_native"]
    assert native["requests"] == 3
    assert native["server_decode_tps_p50"] == pytest.approx(200.0)
    assert native["client_over_server"] == pytest.approx(1.0, abs=0.03)
    assert native["warnings"] == []


def test_no_cross_check_when_the_server_is_not_ollama(scripted: Scripted, tmp_path: Path) -> None:
    """A server without /api/version gets no Ollama section."""
    document = _execute(_target(scripted, engine="unknown"), _options(tmp_path, 1, 4))
    assert "ollama_native" not in document


@pytest.mark.parametrize(
    "isolated",
    [{"reasoning_field": "reasoning_content", "reasoning_tokens": 6, "ttft_ms": 40.0, "itl_ms": 10.0}],
    indirect=True,
)
def test_older_reasoning_content_field_counts_as_thinking(isolated: Scripted, tmp_path: Path) -> None:
    """Servers that still send delta.reasoning_content: the first answer comes after the thinking,
    exactly when the server sent its first content event."""
    shape = ["--requests", "4", "--input-tokens", "64", "--output-tokens", "32"]
    document = _bench_isolated(isolated, tmp_path, "single", *shape)
    latency = document["levels"][0]["latency"]
    truths = [_truth(isolated, document, record) for record in _records(document)]
    # Bench stamps the event the fake sent: within a quarter of the 10 ms between events, so
    # stamping the one before or after would fail, while the delivery from the fake's core to
    # bench's (a millisecond at worst, seen here) does not.
    for name in ("ttfo_ms", "ttft_ms"):
        truth = metrics.percentile([t[name] for t in truths], 0.5)
        assert abs(latency[name]["p50"] - truth) < 10.0 / 4, (name, latency[name], truth)
    # Thinking is not the answer: the fake sent its 6 reasoning_content tokens before the first
    # content event (its send log says so, whatever the machine's load did to the timing), and
    # bench puts the first answer that much after the first token.
    assert all(t["thinking_tokens"] == 6 for t in truths), truths
    assert all(t["ttfo_ms"] > t["ttft_ms"] for t in truths), truths
