"""bench probe against a protocol fake whose capabilities are scripted: each check passes against
good behaviour and fails, saying what came back, against each bad one; expectations come from
the deployment; the file is written and read back; the CLI's exit codes."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from bench.cli import main
from bench.errors import ResultFileError
from bench.measure.probe.checks import CHECKS, run_probe
from bench.measure.probe.expect import (
    AUTO_TOOL_CHECKS,
    TOOL_CHECKS,
    Expectations,
    PresetFacts,
    context_tokens,
    expectations,
)
from bench.measure.probe.result import PROBE_FILE, TTFO_RUNS, CheckResult, ProbeResult, latest_probe, write_probe
from bench.measure.target import Target
from tests import deployments
from tests.fakes.capability_openai_server import CapabilityServer

KEY = "test-key"


@pytest.fixture
def fake() -> Iterator[CapabilityServer]:
    server = CapabilityServer()
    yield server
    server.stop()


def _target(server: CapabilityServer) -> Target:
    return Target(server.base_url, KEY, None, "t", "unknown", None)


def _probe(server: CapabilityServer, expected: Expectations | None = None, timeout_s: float = 30) -> ProbeResult:
    expected = expected or Expectations(context=2048, context_source="test")
    return asyncio.run(run_probe(_target(server), expected, list(CHECKS), timeout_s))


def _by_name(result: ProbeResult) -> dict[str, CheckResult]:
    return {check.name: check for check in result.checks}


def test_every_check_passes_against_a_capable_server(fake: CapabilityServer) -> None:
    """A server that does everything right passes all eleven checks, each with a detail line."""
    result = _probe(fake)
    assert [check.name for check in result.checks] == list(CHECKS)
    assert result.failed == []
    checks = _by_name(result)
    assert all(check.passed and check.ran and check.detail for check in result.checks)
    assert checks["tool_calls_parallel"].detail.count("get_weather(") == 2
    assert "repo-search.v2(" in checks["tool_name_punctuation"].detail
    assert checks["over_context_400"].detail.startswith("HTTP 400: \"This model's maximum context length")
    assert checks["spec_decode_accepts"].detail == "30 of 40 draft tokens accepted (75%)"
    assert result.model == "capable"


def test_requests_ask_for_what_each_check_tests(fake: CapabilityServer) -> None:
    """Tool checks send the tool and tool_choice; thinking on and off is asked per request."""
    _probe(fake)
    by_tool = {request["tools"][0]["function"]["name"]: request for request in fake.requests if "tools" in request}
    assert set(by_tool) == {"get_weather", "repo-search.v2", "create_ticket"}
    choices = {request["tool_choice"] for request in fake.requests if "tools" in request}
    assert choices == {"auto", "required"}
    thinking = [request.get("chat_template_kwargs", {}).get("enable_thinking") for request in fake.requests]
    assert True in thinking
    assert False in thinking
    assert all(request["temperature"] == 0 for request in fake.requests)
    streamed = [request for request in fake.requests if request["stream"]]
    # The checks are not streamed; the time to first answer is, TTFO_RUNS times thinking on, then off.
    assert [r["chat_template_kwargs"]["enable_thinking"] for r in streamed] == [True] * TTFO_RUNS + [False] * TTFO_RUNS


def test_time_to_first_answer_with_thinking_on_and_off(tmp_path: Path) -> None:
    """Streamed, to the first content token: with thinking on the fake reasons 0.3 s first."""
    server = CapabilityServer(think_s=0.3)
    try:
        result = _probe(server)
    finally:
        server.stop()
    assert result.ttfo_thinking_on_ms is not None
    assert result.ttfo_thinking_on_ms >= 300
    assert result.ttfo_thinking_off_ms is not None
    path = write_probe(tmp_path, result)
    jsonschema.validate(json.loads(path.read_text(encoding="utf-8")), PROBE_FILE.committed())  # probe.schema.json
    written = PROBE_FILE.read(path)
    assert (written.ttfo_thinking_on_ms, written.ttfo_thinking_off_ms) == (
        result.ttfo_thinking_on_ms,
        result.ttfo_thinking_off_ms,
    )


def test_no_answer_token_is_no_time_to_first_answer() -> None:
    server = CapabilityServer(thinking_off="empty", reasoning="none")
    try:
        result = _probe(server)
    finally:
        server.stop()
    assert result.ttfo_thinking_off_ms is None
    assert result.ttfo_thinking_on_ms is not None  # thinking on still answers "42"


@pytest.mark.parametrize(
    ("behaviour", "check", "detail"),
    [
        ({"tools": "text"}, "tool_call_single", 'no tool_calls; content: \'<tool_call>{"name": "get_weather"'),
        ({"tools": "400"}, "tool_call_single", 'HTTP 400: \'"auto" tool choice requires --enable-auto-tool-choice'),
        ({"tools": "text"}, "tool_args_schema", "no tool_calls"),
        ({"parallel": False}, "tool_calls_parallel", "1 call, want 2 in one turn"),
        ({"tool_names": "mangled"}, "tool_name_punctuation", "called 'repo_search_v2', want 'repo-search.v2'"),
        ({"tools": "400"}, "tool_calls_parallel", "HTTP 400: "),
        ({"args": "invalid"}, "tool_args_schema", "priority: \"'urgent' is not one of"),
        ({"reasoning": "think_tags"}, "reasoning_field", "think tags in content: '<think>12 plus 30"),
        ({"reasoning": "none"}, "reasoning_field", "no reasoning or reasoning_content; content: '42'"),
        ({"thinking_off": "empty"}, "thinking_off_answers", "empty content with thinking off"),
        ({"over_context": "500"}, "over_context_400", "HTTP 500, want 400 with an error body"),
        ({"over_context": "200"}, "over_context_400", "HTTP 200: a prompt of about 2304 tokens was accepted"),
        (
            {"response_format": "invalid_json"},
            "response_format_json_schema",
            "content is not JSON (finish_reason stop)",
        ),
        ({"response_format": "wrong_schema"}, "response_format_json_schema", "does not validate: \"'Berlin'"),
        ({"max_model_len": 4096}, "served_context_matches", "served 4096, expected 2048 (test)"),
    ],
)
def test_a_bad_answer_fails_its_check_saying_what_came_back(behaviour: dict[str, Any], check: str, detail: str) -> None:
    """Each bad behaviour fails the check that looks for it, with a detail that shows the answer."""
    server = CapabilityServer(**behaviour)
    try:
        result = _probe(server)
    finally:
        server.stop()
    found = _by_name(result)[check]
    assert (found.passed, found.ran, found.expected_failure) == (False, True, False)
    assert detail in found.detail
    assert found in result.failed
    assert found.verdict == "FAIL"


def test_the_older_reasoning_content_field_counts(tmp_path: Path) -> None:
    """Reasoning in reasoning_content (the name older servers use) passes reasoning_field."""
    server = CapabilityServer(reasoning="legacy_field")
    try:
        result = _probe(server)
    finally:
        server.stop()
    assert _by_name(result)["reasoning_field"].passed


def test_a_hanging_answer_fails_within_the_timeout() -> None:
    """A server that never answers an over-long prompt fails over_context_400 at the deadline."""
    server = CapabilityServer(over_context="hang")
    try:
        target = _target(server)
        result = asyncio.run(run_probe(target, Expectations(), ["over_context_400"], 0.5))
    finally:
        server.stop()
    (check,) = result.checks
    assert (check.passed, check.detail) == (False, "no answer within 0.5 s")


@pytest.mark.parametrize(
    ("accepted", "outcome", "detail"),
    [
        (0, (True, False), "0 of 40 draft tokens accepted: the checkpoint's MTP head is missing or broken"),
        (
            None,
            (False, False),
            "no per-request speculative decoding in the answer (no MTP, or vllm_per_request_metrics",
        ),
    ],
)
def test_an_mtp_run_that_accepts_no_draft_fails_and_none_sent_is_not_run(
    accepted: int | None, outcome: tuple[bool, bool], detail: str
) -> None:
    """Drafts all rejected (a quantizer dropped the MTP head): the check fails and names vllm_mtp;
    no per-request figures (no speculative decoding): not run, and it gates nothing."""
    server = CapabilityServer(spec_accepted=accepted)
    try:
        result = asyncio.run(run_probe(_target(server), Expectations(), ["spec_decode_accepts"], 30))
    finally:
        server.stop()
    (check,) = result.checks
    assert (check.ran, check.passed) == outcome
    assert check.detail.startswith(detail)
    if accepted == 0:
        assert "vllm_mtp" in check.detail
        assert [failed.name for failed in result.unexpected] == ["spec_decode_accepts"]
    else:
        assert result.failed == []


def test_an_unknown_context_is_not_run_and_gates_nothing(fake: CapabilityServer) -> None:
    """Without an expected context, served_context_matches is reported as not run, neither pass nor fail."""
    result = _probe(fake, Expectations())
    check = _by_name(result)["served_context_matches"]
    assert (check.ran, check.passed, check.verdict) == (False, False, "not run")
    assert "expected context not known" in check.detail
    assert result.failed == []


def test_expected_failures_are_marked_and_still_failed() -> None:
    """A deployment without tool or reasoning parser: those checks fail as expected, still in failed."""
    server = CapabilityServer(tools="400", reasoning="none")
    deployment = deployments.deployment(args=["--model", "m", "--max-model-len", "2048"])
    try:
        result = _probe(server, expectations(deployment))
    finally:
        server.stop()
    checks = _by_name(result)
    for name in (*TOOL_CHECKS, "reasoning_field"):
        assert checks[name].expected_failure, name
        assert checks[name].verdict == "expected FAIL"
        assert "(expected: vllm.args has no --" in checks[name].detail
    assert 'HTTP 400: \'tool_choice="required" requires --tool-call-parser' in checks["tool_choice_required"].detail
    assert checks["served_context_matches"].passed
    assert result.unexpected == []
    assert {check.name for check in result.failed} == {*TOOL_CHECKS, "reasoning_field"}


@pytest.mark.parametrize(
    ("deployment", "preset", "absent", "context"),
    [
        (None, None, set(), None),
        (
            deployments.deployment(args=["--max-model-len", "32K"]),
            None,
            {*TOOL_CHECKS, "reasoning_field"},
            32768,
        ),
        (
            deployments.deployment(
                args=["--enable-auto-tool-choice", "--tool-call-parser", "qwen3_coder", "--reasoning-parser=qwen3"]
            ),
            None,
            set(),
            None,
        ),
        (
            deployments.deployment(args=["--tool-call-parser", "hermes"]),
            None,
            {*AUTO_TOOL_CHECKS, "reasoning_field"},
            None,
        ),
        (
            deployments.deployment("llamacpp", preset="p", args=[]),
            PresetFacts("", "qwen3"),
            set(TOOL_CHECKS),
            None,
        ),
        (deployments.deployment("ollama", preset="p"), PresetFacts("hermes", ""), {"reasoning_field"}, None),
    ],
)
def test_expectations_follow_the_deployment(
    deployment: Any, preset: PresetFacts | None, absent: set[str], context: int | None
) -> None:
    """vLLM's recorded command line decides (a parser without --enable-auto-tool-choice is not
    enough); other engines fall back on the preset's parsers; no deployment expects nothing."""
    found = expectations(deployment, preset=preset)
    assert set(found.absent) == absent
    assert found.context == context


@pytest.mark.parametrize(
    ("value", "tokens"), [("2048", 2048), ("32k", 32000), ("32K", 32768), ("auto", None), ("-1", None)]
)
def test_context_lengths_read_as_vllm_reads_them(value: str, tokens: int | None) -> None:
    """--max-model-len suffixes: k is 1000, K is 1024; auto and -1 leave the length to vLLM."""
    assert context_tokens(value) == tokens


def _result(started_at: str, passed: bool) -> ProbeResult:
    check = CheckResult("tool_call_single", passed, "detail", expected_failure=False)
    return ProbeResult("t", started_at, "http://x/v1", "m", [check])


def test_the_file_is_written_and_the_newest_read_back(tmp_path: Path) -> None:
    """Two probes under one tag: latest_probe returns the later one, equal to what was written."""
    older = _result("2026-12-02T10:00:00.000000Z", passed=False)
    newer = _result("2026-12-02T11:00:00.000000Z", passed=True)
    newer_path = write_probe(tmp_path, newer)
    write_probe(tmp_path, older)
    assert newer_path == tmp_path / "t" / "probes" / "20261202T110000000000Z.json"
    assert json.loads(newer_path.read_text())["schema_version"] == 1
    assert latest_probe(tmp_path, "t") == newer
    assert PROBE_FILE.read(newer_path).failed == []
    assert latest_probe(tmp_path, "other") is None
    assert [path.name for path in (tmp_path / "t" / "probes").iterdir()] != []
    assert not list((tmp_path / "t" / "probes").glob(".*"))  # no temporary file left


def test_another_schema_version_is_refused_naming_the_file(tmp_path: Path) -> None:
    """A probe file of another schema_version raises ResultFileError with the path and both versions."""
    path = write_probe(tmp_path, _result("2026-12-02T10:00:00.000000Z", passed=True))
    document = json.loads(path.read_text())
    path.write_text(json.dumps({**document, "schema_version": 9}))
    with pytest.raises(
        ResultFileError, match=r"schema_version 9; this bench reads bench probe files of schema_version 1"
    ):
        latest_probe(tmp_path, "t")


def _cli(server: CapabilityServer, tmp_path: Path, *flags: str) -> int:
    args = ["probe", "--base-url", server.base_url, "--api-key", KEY, "--tag", "t"]
    return main([*args, "--results-dir", str(tmp_path / "results"), *flags])


def test_cli_exits_0_when_all_pass_and_files_the_result(
    fake: CapabilityServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """All checks pass: exit 0, a table row per check, the file's path printed and readable."""
    assert _cli(fake, tmp_path, "--expect-context", "2048") == 0
    out = capsys.readouterr().out
    for name in CHECKS:
        assert name in out
    (path,) = (tmp_path / "results" / "t" / "probes").glob("*.json")
    assert f"probe: {path}" in out
    probe = latest_probe(tmp_path / "results", "t")
    assert probe is not None
    assert probe.failed == []


def test_cli_exits_5_on_an_unexpected_failure_after_writing_the_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A failed check nothing explains: the table and file are there, then exit 5 naming the check."""
    server = CapabilityServer(response_format="invalid_json")
    try:
        assert _cli(server, tmp_path, "--only", "response_format_json_schema", "thinking_off_answers") == 5
    finally:
        server.stop()
    captured = capsys.readouterr()
    assert "FAIL" in captured.out
    assert captured.err.strip().endswith("does not explain: response_format_json_schema")
    probe = latest_probe(tmp_path / "results", "t")
    assert probe is not None
    assert [check.name for check in probe.checks] == ["thinking_off_answers", "response_format_json_schema"]


def test_cli_exits_0_when_only_expected_failures_occur(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The deployment lacks tool and reasoning parsers: those fail as expected, exit 0, and a line says so."""
    deployment = tmp_path / "deployment.json"
    args = ["--served-model-name", "capable", "--max-model-len", "2048"]
    deployment.write_text(json.dumps(deployments.record(served_model_name="capable", args=args)))
    server = CapabilityServer(tools="400", reasoning="none")
    try:
        assert _cli(server, tmp_path, "--deployment", str(deployment)) == 0
    finally:
        server.stop()
    out = capsys.readouterr().out
    assert "expected FAIL" in out
    assert "expected failures only (tool_call_single, tool_calls_parallel" in out
    assert "bench compare shows tag t but does not rank it (--include-failing ranks it anyway)" in out
    probe = latest_probe(tmp_path / "results", "t")
    assert probe is not None
    assert len(probe.failed) == 6
    assert probe.unexpected == []
