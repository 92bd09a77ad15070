"""How `bench run` fails: the first real error with its own exit code, partial results shown,
the two timeouts, and endpoint errors that name --base-url. Against the scripted server (a
protocol fake), whose ``requests`` option injects a fault into one request by arrival number
(0 and 1 are the calibration requests, 2 is the first measured one)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from bench.cli import main
from bench.measure.run import results
from bench.measure.run.benchmark import Progress, RunOptions, execute
from bench.measure.target import Target
from tests.result_files import load_result
from tests.scripted import FAST, KEY, read_table, result_files, run_args, scripted


def _error_lines(err: str) -> list[str]:
    return [line for line in err.splitlines() if line.startswith("bench: error:")]


def test_prompt_below_the_fixed_overhead_is_a_configuration_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--input-tokens 10 is below the overhead the calibration measured: exit 2 with that cause,
    before any measured request, and nothing written."""
    with scripted(tmp_path, **FAST) as server:
        assert main([*run_args(server, tmp_path), "--input-tokens", "10"]) == 2
    err = capsys.readouterr().err
    assert _error_lines(err) == [
        "bench: error: --input-tokens: 10 is below this endpoint's fixed prompt overhead "
        "(23 tokens of chat template, salt and instruction)"
    ]
    assert result_files(tmp_path) == []


def test_wrong_key_after_calibration_is_an_auth_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The server refuses the key from the first measured request on: exit 3 with the 401."""
    with scripted(tmp_path, **FAST, requests={"2": {"api_key": "other"}}) as server:
        assert main(run_args(server, tmp_path)) == 3
    (line,) = _error_lines(capsys.readouterr().err)
    message = f"{server.base_url} answered 401: wrong or missing API key (--api-key or BENCH_API_KEY)"
    assert line == f"bench: error: {message}"
    assert result_files(tmp_path) == []


def test_server_dying_in_the_first_request_is_reported_as_lost(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The server exits while streaming the first measured answer: exit 3, it was lost."""
    with scripted(tmp_path, **FAST, requests={"2": {"die_after": 1}}) as server:
        assert main(run_args(server, tmp_path)) == 3
    (line,) = _error_lines(capsys.readouterr().err)
    assert line.startswith(f"bench: error: lost {server.base_url}: it answered 3 requests, then POST ")
    assert line.endswith("the server stopped or restarted")
    assert "no request succeeded" not in line
    assert result_files(tmp_path) == []


@pytest.mark.parametrize(("workload", "flags"), [("single", ()), ("sweep", ("--concurrency", "2"))])
def test_a_server_that_closes_each_connection_after_an_answer_is_not_an_error(
    tmp_path: Path, workload: str, flags: tuple[str, ...]
) -> None:
    """llama.cpp closes the connection after every streamed answer without saying so: each next
    request finds its kept-alive connection closed (at concurrency 2, maybe both pooled ones),
    is sent again, and succeeds; the server answers each request once (two calibration requests
    and the measured ones)."""
    with scripted(tmp_path, **FAST, close_after_stream=True) as server:
        args = run_args(server, tmp_path, workload, *flags, "--requests", "6", "--read-timeout", "20")
        assert main(args) == 0
        answered = server.log.read_text(encoding="utf-8").splitlines()
    (path,) = result_files(tmp_path)
    (level,) = load_result(path)["levels"]
    total = level["requests"]["total"]
    assert total >= 6
    assert level["requests"]["successful"] == total
    assert level["requests"]["errors_by_kind"] == {}
    assert len(answered) == total + 2


def test_server_killed_mid_run_shows_the_partial_table_and_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Three measured requests succeed, then the server dies: the table of those, the partial
    file's path, then the error; the file says partial, untrusted, and why it stopped."""
    with scripted(tmp_path, **FAST, requests={"5": {"die_after": 1}}) as server:
        assert main(run_args(server, tmp_path, "single", "--requests", "6")) == 3
    captured = capsys.readouterr()
    (path,) = result_files(tmp_path)
    document = load_result(path)
    assert document["partial"] is True
    assert document["trusted"] is False
    assert document["stopped_because"].startswith(f"lost {server.base_url}")
    # In bench's words: the address and why, not aiohttp's "Cannot connect to host ... ssl:default".
    assert f"failed (127.0.0.1:{server.port}: connect call failed" in document["stopped_because"]
    (level,) = document["levels"]
    assert level["requests"]["successful"] == 3
    assert set(level["requests"]["errors_by_kind"]) == {"truncated"}  # the stream the death cut
    _, rows = read_table(captured.out)
    assert rows[0][2] == f"3/{level['requests']['total']}"
    assert f"partial result: {path}" in captured.out
    (line,) = _error_lines(captured.err)
    assert line.startswith(f"bench: error: lost {server.base_url}")


def test_interrupted_before_any_answer_is_an_interruption(tmp_path: Path) -> None:
    """Cancelled while the first request is in flight: the cancellation propagates (Ctrl-C,
    exit 130), not a made-up "no request succeeded", and nothing is written."""
    with scripted(tmp_path, ttft_ms=20.0, itl_ms=2000.0, content_tokens=4) as server:
        target = Target(server.base_url, KEY, "scripted", "t", "vllm", None)
        options = RunOptions("single", 4, 40, 4, tmp_path / "results")

        async def cancel_in_first_level() -> None:
            progress = Progress()
            task = asyncio.create_task(execute(target, options, progress))
            started = asyncio.Event()
            progress.level_started = lambda spec: started.set()
            await started.wait()
            await asyncio.sleep(0.2)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task

        asyncio.run(cancel_in_first_level())
    assert result_files(tmp_path) == []


SLOW = {"ttft_ms": 0.0, "itl_ms": 300.0, "content_tokens": 5}  # each answer takes 1.2 s, 0.3 s between tokens


def test_read_timeout_limits_the_gap_and_request_timeout_the_whole(tmp_path: Path) -> None:
    """Answers of 1.2 s with 0.3 s gaps: --read-timeout 1 lets them finish (it bounds the gap,
    not the request); both limits are recorded in the result file."""
    with scripted(tmp_path, **SLOW) as server:
        argv = [*run_args(server, tmp_path), "--requests", "4", "--output-tokens", "5"]
        argv += ["--read-timeout", "1", "--request-timeout", "10"]
        assert main(argv) == 0
    (path,) = result_files(tmp_path)
    document = load_result(path)
    assert document["options"]["read_timeout_s"] == 1.0
    assert document["options"]["request_timeout_s"] == 10.0
    (level,) = document["levels"]
    assert level["requests"]["successful"] == 4
    assert level["untrusted_because"] == []
    requests = results.decode_events(document["requests_events_gzip_b64"])
    assert len(requests) == 4
    assert all(r["error"] is None and r["t_end_ns"] - r["t_disp_ns"] > 1e9 for r in requests)  # each past 1 s


@pytest.mark.parametrize(
    ("flags", "kind"),
    [
        (["--request-timeout", "0.6"], "request_timeout"),
        (["--timeout", "0.6"], "request_timeout"),  # the old name of --request-timeout
        (["--read-timeout", "0.1"], "read_timeout"),
    ],
)
def test_each_timeout_fails_requests_with_its_own_kind(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flags: list[str], kind: str
) -> None:
    """Past --request-timeout a request fails as request_timeout, a gap past --read-timeout as
    read_timeout; when every request failed, that kind is the error (exit 3)."""
    with scripted(tmp_path, **SLOW) as server:
        assert main([*run_args(server, tmp_path), "--requests", "4", *flags]) == 3
    (line,) = _error_lines(capsys.readouterr().err)
    assert line == f"bench: error: no request succeeded: all 4 failed, {kind} 4; nothing was written"


def test_base_url_without_v1_names_the_flag_and_the_url(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A base URL without /v1: one line with --base-url and the URL that answered 404."""
    with scripted(tmp_path, **FAST) as server:
        root = server.base_url.removesuffix("/v1")
        argv = [*run_args(server, tmp_path), "--base-url", root]
        assert main(argv) == 3
    (line,) = _error_lines(capsys.readouterr().err)
    message = f"GET {root}/models answered 404: check --base-url ({root}; an OpenAI base URL ends in /v1)"
    assert line == f"bench: error: {message}"


def test_unreachable_endpoint_names_the_flag_and_the_url(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Nothing listening: one line with --base-url and the URL it tried."""
    url = "http://127.0.0.1:9/v1"
    argv = ["run", "single", "--base-url", url, "--api-key", KEY, "--tag", "t", "--results-dir", str(tmp_path)]
    assert main(argv) == 3
    (line,) = _error_lines(capsys.readouterr().err)
    assert line.startswith(f"bench: error: cannot reach {url} (--base-url): GET {url}/models failed: ")


def test_every_request_failing_shows_what_the_server_said(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """All refused: the kind, how many, and the server's own message (cut to one line), exit 3."""
    said = "This model's maximum context length is 2048 tokens.\nHowever, you requested 4096 tokens."
    with scripted(tmp_path, **FAST, status=400, status_above_max_tokens=1, error_message=said) as server:
        assert main([*run_args(server, tmp_path), "--requests", "4"]) == 3
    (line,) = _error_lines(capsys.readouterr().err)
    assert line == (
        "bench: error: no request succeeded: all 4 failed, context_overflow 4 (\"This model's maximum context "
        'length is 2048 tokens. However, you requested 4096 tokens."); nothing was written'
    )
    assert result_files(tmp_path) == []


def test_an_untrusted_run_exits_6_after_its_table_and_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Every answer shorter than asked (as a reasoning model's that spent its tokens thinking) and no
    request failed: the table, the reason and the file, then exit 6 saying why."""
    with scripted(tmp_path, **{**FAST, "content_tokens": 4}) as server:
        assert main([*run_args(server, tmp_path), "--requests", "6"]) == 6
    captured = capsys.readouterr()
    (path,) = result_files(tmp_path)
    document = load_result(path)
    assert (document["trusted"], document["partial"]) == (False, False)
    (level,) = document["levels"]
    assert level["untrusted_because"] == ["5 of 5 requests missed the output length 8"]
    assert f"result: {path}" in captured.out
    _, rows = read_table(captured.out)
    assert rows[0][-1] == "no"
    (line,) = _error_lines(captured.err)
    assert line == (
        f"bench: error: the run is not trusted ({level['label']}: 5 of 5 requests missed the output length 8); "
        "the result is marked untrusted"
    )
