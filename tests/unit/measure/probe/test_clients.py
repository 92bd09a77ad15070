"""bench probe replays the agent clients' recorded requests against a protocol fake whose
capabilities are scripted: a capable server serves all four, each way of serving a client
wrongly is named on the client it breaks, a deployment that lacks tool calls explains the tool
users' failures, and the client results never decide the exit status unless --clients names
them."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from bench.cli import main
from bench.measure.probe.checks import run_probe
from bench.measure.probe.clients import CLIENT_TITLES, REPLAY_MAX_TOKENS, ReplayFailed, Streamed, client_requests
from bench.measure.probe.expect import Expectations, expectations
from bench.measure.probe.result import CheckResult, latest_probe
from bench.measure.target import Target
from tests import deployments
from tests.fakes.capability_openai_server import CapabilityServer

KEY = "test-key"
TOOL_USERS = ("opencode", "continue", "hermes")


def _clients(expected: Expectations | None = None, **behaviour: Any) -> tuple[dict[str, CheckResult], CapabilityServer]:
    server = CapabilityServer(**behaviour)
    target = Target(server.base_url, KEY, None, "t", "unknown", None)
    try:
        result = asyncio.run(run_probe(target, expected or Expectations(), [], 30, list(CLIENT_TITLES)))
    finally:
        server.stop()
    assert result.clients is not None
    assert [client.name for client in result.clients] == list(CLIENT_TITLES)
    return {client.name: client for client in result.clients}, server


def test_the_recordings_are_each_clients_own_requests() -> None:
    """One file per client: the tool users' first turn and the turn with the tool's result, Aider's
    one text request; all streamed, the tool users asking for the usage chunk."""
    recorded = client_requests()
    assert list(recorded) == ["opencode", "continue", "aider", "hermes"]
    for client, requests in recorded.items():
        assert all(body["stream"] is True for body in requests.requests), client
        assert requests.uses_tools == (client in TOOL_USERS)
        roles = [[message["role"] for message in body["messages"]][-1] for body in requests.requests]
        assert roles == (["user", "tool"] if client in TOOL_USERS else ["user"]), client
    assert recorded["opencode"].requests[0]["tool_choice"] == "auto"
    assert "tool_choice" not in recorded["hermes"].requests[0]  # vLLM reads tools without a choice as auto


def test_a_capable_server_serves_every_client() -> None:
    """Each client passes, its tool call named; the replay sends the recorded requests with the
    served model and the answer length cut, nothing else changed."""
    results, server = _clients()
    assert all(result.passed for result in results.values())
    assert results["opencode"].detail == "OpenCode 1.18.33: write(filePath,content); then '42'"
    assert results["hermes"].detail.startswith("Hermes Agent 0.19.0: write_file(path,content); then")
    assert results["aider"].detail == "Aider 0.86.2: '42'"
    replayed = [body for body in server.requests if "chat_template_kwargs" not in body]  # the probe's own say it
    assert len(replayed) == 7  # two turns of each tool user, one of Aider
    recorded = [body for requests in client_requests().values() for body in requests.requests]
    for sent, body in zip(replayed, recorded, strict=True):
        assert sent == {**body, "model": "capable", "max_tokens": REPLAY_MAX_TOKENS}


@pytest.mark.parametrize(
    ("behaviour", "failing", "detail"),
    [
        ({"stream_usage": False}, TOOL_USERS, "turn 1: no usage chunk, which the client asks for"),
        ({"stream_done": False}, (*TOOL_USERS, "aider"), "the stream ended without data: [DONE]"),
        ({"tools": "text"}, TOOL_USERS, "turn 1: a tool call written into content: '<tool_call>"),
        ({"tools": "400"}, TOOL_USERS, 'turn 1: HTTP 400: \'"auto" tool choice requires --enable-auto-tool-choice'),
        (
            {"reasoning": "think_tags"},
            (*TOOL_USERS, "aider"),
            "think tags in content: '<think>12 plus 30 is 42</think>42'",
        ),
        ({"max_model_len": 100}, (*TOOL_USERS, "aider"), "HTTP 400: \"This model's maximum context length is 100"),
    ],
)
def test_a_server_that_fails_a_client_is_named_on_it(
    behaviour: dict[str, Any], failing: tuple[str, ...], detail: str
) -> None:
    """The clients it breaks fail with what came back, the others are served."""
    results, _ = _clients(**behaviour)
    assert {name for name, result in results.items() if not result.passed} == set(failing)
    for name in failing:
        assert detail in results[name].detail, results[name].detail
        assert not results[name].expected_failure


def test_think_tags_in_the_answer_to_a_tool_result_fail_the_second_turn() -> None:
    """A tool user's first turn is a call (no content); its answer after the result carries the tags."""
    results, _ = _clients(reasoning="think_tags")
    assert results["opencode"].detail.startswith("OpenCode 1.18.33: turn 2: think tags in content")


def test_a_deployment_without_tool_calls_explains_the_tool_users() -> None:
    """vLLM without a tool-call parser refuses their tools: expected failures; Aider is served."""
    expected = expectations(deployments.deployment(args=["--max-model-len", "2048"]))
    results, _ = _clients(expected, tools="400")
    for name in TOOL_USERS:
        assert results[name].verdict == "expected FAIL"
        assert results[name].detail.endswith("(expected: vllm.args has no --tool-call-parser)")
    assert results["aider"].passed


def _cli(server: CapabilityServer, tmp_path: Path, *flags: str) -> int:
    args = ["probe", "--base-url", server.base_url, "--api-key", KEY, "--tag", "t"]
    return main([*args, "--results-dir", str(tmp_path / "results"), *flags])


def test_cli_reports_the_clients_without_changing_the_exit_status(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """By default every client is replayed and reported (a table and a line), and filed; a
    client not served leaves the exit status to the checks."""
    server = CapabilityServer(stream_usage=False)
    try:
        assert _cli(server, tmp_path, "--expect-context", "2048") == 0
    finally:
        server.stop()
    out = capsys.readouterr().out
    assert "Agent clients: their recorded requests replayed" in out
    assert "served correctly: Aider; not: OpenCode, Continue, Hermes Agent" in out
    probe = latest_probe(tmp_path / "results", "t")
    assert probe is not None
    assert probe.clients_served == ["aider"]
    assert probe.failed == []


def test_cli_exits_5_when_a_named_client_is_not_served(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--clients names the clients that must be served: one that is not gives exit 5, after the file."""
    server = CapabilityServer(stream_usage=False)
    try:
        assert _cli(server, tmp_path, "--only", "thinking_off_answers", "--clients", "aider", "opencode") == 5
    finally:
        server.stop()
    assert capsys.readouterr().err.strip().endswith("not served as they ask: OpenCode (--clients)")
    probe = latest_probe(tmp_path / "results", "t")
    assert probe is not None
    assert [client.name for client in probe.clients or []] == ["opencode", "aider"]


def test_cli_only_leaves_the_clients_out(tmp_path: Path) -> None:
    """--only without --clients runs just those checks: no client is replayed, none is filed."""
    server = CapabilityServer()
    try:
        assert _cli(server, tmp_path, "--only", "thinking_off_answers") == 0
    finally:
        server.stop()
    probe = latest_probe(tmp_path / "results", "t")
    assert probe is not None
    assert probe.clients is None
    assert "clients" not in json.loads(next((tmp_path / "results" / "t" / "probes").glob("*.json")).read_text())
    assert all("chat_template_kwargs" in body for body in server.requests)  # the probe's own requests only


def _fed(*chunks: object) -> Streamed:
    answer = Streamed()
    for chunk in chunks:
        answer.feed(chunk if isinstance(chunk, str) else f"data: {json.dumps(chunk)}")
    return answer


def test_a_stream_is_put_together_as_a_client_reads_it() -> None:
    """Tool-call deltas join by index (name first, arguments in pieces), usage null until the last
    chunk, reasoning apart from content, comments and blank lines skipped."""
    delta = [
        {"index": 0, "id": "c1", "type": "function", "function": {"name": "write", "arguments": ""}},
    ]
    answer = _fed(
        ": keep-alive",
        "",
        {"choices": [{"index": 0, "delta": {"reasoning": "a file"}}], "usage": None},
        {"choices": [{"index": 0, "delta": {"tool_calls": delta}}], "usage": None},
        {"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "function": {"arguments": '{"path": '}}]}}]},
        {"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "function": {"arguments": '"a"}'}}]}}]},
        {"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}], "usage": None},
    )
    assert (answer.calls, answer.reasoning, answer.content) == ({0: ["write", '{"path": "a"}']}, "a file", "")
    assert (answer.finish, answer.usage, answer.done) == ("tool_calls", False, False)
    answer.feed('data: {"choices": [], "usage": {"prompt_tokens": 9, "completion_tokens": 3}}')
    answer.feed("data: [DONE]")
    assert (answer.usage, answer.done) == (True, True)


@pytest.mark.parametrize(
    ("line", "detail"),
    [
        ("data: {not json", "a stream chunk is not JSON: '{not json'"),
        ("data: [1, 2]", "a stream chunk is not an object: '[1, 2]'"),
        ('data: {"choices": [7]}', "a stream chunk not as the OpenAI API has it: '{\"choices\": [7]}'"),
        (
            'data: {"error": {"message": "The decoder prompt is longer than the maximum model length"}}',
            "an error in the stream: 'The decoder prompt is longer than the maximum model length'",
        ),
    ],
)
def test_a_broken_stream_is_named(line: str, detail: str) -> None:
    with pytest.raises(ReplayFailed) as failed:
        _fed(line)
    assert str(failed.value) == detail


def test_an_answer_cut_off_while_reasoning_is_not_known_either_way() -> None:
    """Reasoning until the replay's answer length ran out, no call yet: not run, not a failure."""
    results, _ = _clients(client_turn="reasoning_cut")
    for name in TOOL_USERS:
        assert (results[name].ran, results[name].verdict) == (False, "not run"), results[name]
        assert "tokens ran out while the model was still reasoning" in results[name].detail
    assert results["aider"].passed


def test_a_server_that_drops_a_client_fails_that_client_and_the_probe_goes_on() -> None:
    """No answer at all to the tool users' first turn (the connection closed): each fails, named,
    and Aider's replay still runs after them."""
    results, _ = _clients(client_turn="drop")
    for name in TOOL_USERS:
        assert not results[name].passed
        assert "turn 1: the stream broke off" in results[name].detail, results[name].detail
    assert results["aider"].passed


def test_tool_call_deltas_without_an_index_or_with_the_name_repeated() -> None:
    """Some servers repeat the name in every delta, or leave out the index: one call all the same."""
    repeated = _fed(
        *[
            {"choices": [{"delta": {"tool_calls": [{"index": 0, "function": {"name": "write", "arguments": part}}]}}]}
            for part in ('{"a"', ": 1}")
        ]
    )
    assert repeated.calls == {0: ["write", '{"a": 1}']}
    unindexed = _fed(
        {"choices": [{"delta": {"tool_calls": [{"id": "c1", "function": {"name": "read", "arguments": "{"}}]}}]},
        {"choices": [{"delta": {"tool_calls": [{"function": {"arguments": "}"}}]}}]},
        {"choices": [{"delta": {"tool_calls": [{"id": "c2", "function": {"name": "write", "arguments": "{}"}}]}}]},
    )
    assert unindexed.calls == {0: ["read", "{}"], 1: ["write", "{}"]}


def test_cli_a_named_client_the_deployment_cannot_serve_exits_5(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Named with --clients, a client fails the probe even where the deployment explains it (no
    tool-call parser): the client cannot use this deployment."""
    deployment = tmp_path / "deployment.json"
    args = ["--served-model-name", "capable", "--max-model-len", "2048"]
    deployment.write_text(json.dumps(deployments.record(served_model_name="capable", args=args)))
    server = CapabilityServer(tools="400")
    try:
        flags = ["--deployment", str(deployment), "--only", "thinking_off_answers", "--clients", "aider", "hermes"]
        assert _cli(server, tmp_path, *flags) == 5
    finally:
        server.stop()
    captured = capsys.readouterr()
    assert "served correctly: Aider; not: Hermes Agent" in captured.out
    assert captured.err.strip().endswith("not served as they ask: Hermes Agent (--clients)")
