"""``bench clients``: writes every client's files from deployment.json and says how to run each;
``--check`` exits 4 naming each stale field; edits are never overwritten without --force and
nothing is half-written; bad input gets one line naming the flag or the knob."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.cli import main
from bench.rig.clients import MANIFEST
from tests.deployments import record
from tests.helpers import REPO


@pytest.fixture(autouse=True)
def _no_bench_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    """The flags alone decide (a developer's BENCH_* variables would pick another target)."""
    for name in ("BENCH_DEPLOYMENT", "BENCH_BASE_URL"):
        monkeypatch.delenv(name, raising=False)


ARGS = ["--max-model-len", "65536", "--tool-call-parser", "qwen3_coder", "--enable-auto-tool-choice"]


def _deployment(tmp_path: Path, base_url: str = "http://llm.lan:8443/v1", length: str = "65536") -> Path:
    path = tmp_path / "artifacts" / "box" / "deployment.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    args = [length if arg == "65536" else arg for arg in ARGS]
    document = record("vllm", args=args, base_url=base_url, preset="qwen3.8-27b-w4a16", served_model_name="qwen3.8-27b")
    path.write_text(json.dumps(document), encoding="utf-8")
    return path


def _bench(tmp_path: Path, *args: str) -> int:
    return main(["--config-dir", str(REPO), "clients", "--out", str(tmp_path / "out"), *args])


def test_writes_every_client_and_says_how_to_run_each(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    deployment = _deployment(tmp_path)
    assert _bench(tmp_path, "--deployment", str(deployment)) == 0
    out = capsys.readouterr().out
    assert "qwen3.8-27b at http://llm.lan:8443/v1 (vllm, preset qwen3.8-27b-w4a16): context 65,536 tokens" in out
    files = sorted(str(path.relative_to(tmp_path / "out")) for path in (tmp_path / "out").rglob("*") if path.is_file())
    assert files == [
        MANIFEST,
        "aider/.aider.conf.yml",
        "aider/.aider.model.metadata.json",
        "aider/.aider.model.settings.yml",
        "continue/config.yaml",
        "hermes/config.yaml",
        "hermes/profile/config.yaml",
        "hermes/profile/distribution.yaml",
        "openai.env",
        "opencode.json",
    ]
    key_file = deployment.parent.resolve() / "api_key"
    assert f'export LLMRIG_API_KEY="$(cat {key_file})"' in out
    assert f'opencode: OPENCODE_CONFIG={tmp_path / "out"}/opencode.json opencode run "..."' in out
    assert "hermes: compacts at about 64,000 tokens" in out
    assert _bench(tmp_path, "--deployment", str(deployment), "--check") == 0
    assert "checked 9 files" in capsys.readouterr().out


def test_check_exits_4_naming_the_stale_fields(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    deployment = _deployment(tmp_path)
    assert _bench(tmp_path, "--deployment", str(deployment), "--client", "opencode") == 0
    _deployment(tmp_path, length="32768")
    capsys.readouterr()
    assert _bench(tmp_path, "--deployment", str(deployment), "--client", "opencode", "--check") == 4
    assert capsys.readouterr().out.splitlines() == [
        "opencode.json: provider.llmrig.models.qwen3.8-27b.limit.context is 65536, the server now needs 32768",
        "opencode.json: provider.llmrig.models.qwen3.8-27b.limit.output is 16384, the server now needs 8192",
        f"checked 1 files in {tmp_path / 'out'}: 2 stale fields",
    ]


def test_an_edited_file_is_kept_and_nothing_is_written(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    deployment = _deployment(tmp_path)
    assert _bench(tmp_path, "--deployment", str(deployment)) == 0
    edited = tmp_path / "out" / "continue" / "config.yaml"
    edited.write_text(edited.read_text(encoding="utf-8") + "rules:\n- Be brief.\n", encoding="utf-8")
    _deployment(tmp_path, length="32768")
    before = {path: path.read_bytes() for path in (tmp_path / "out").rglob("*") if path.is_file()}
    capsys.readouterr()
    assert _bench(tmp_path, "--deployment", str(deployment)) == 2
    err = capsys.readouterr().err
    assert err.startswith("bench: error: --out: continue/config.yaml in ")
    assert "nothing was written" in err
    assert {path: path.read_bytes() for path in (tmp_path / "out").rglob("*") if path.is_file()} == before
    assert _bench(tmp_path, "--deployment", str(deployment), "--force") == 0
    assert "Be brief" not in edited.read_text(encoding="utf-8")
    assert "contextLength: 32768" in edited.read_text(encoding="utf-8")
    assert _bench(tmp_path, "--deployment", str(deployment)) == 0  # bench's own files are rewritten freely


@pytest.mark.parametrize(
    ("extra", "named"),
    [
        (["--base-url", "http://llm.lan:8000/v1"], "--base-url: http://llm.lan:8000/v1 is port 8000 of the box"),
        (["--key-env", "1KEY"], "--key-env: '1KEY' is not an environment variable name"),
    ],
)
def test_bad_flags_get_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str], named: str
) -> None:
    assert _bench(tmp_path, "--deployment", str(_deployment(tmp_path)), *extra) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"bench: error: {named}"), err
    assert len(err.strip().splitlines()) == 1
    assert not (tmp_path / "out").exists()


def test_a_loopback_endpoint_needs_the_clients_address(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    deployment = _deployment(tmp_path, base_url="http://127.0.0.1:8443/v1")
    assert _bench(tmp_path, "--deployment", str(deployment)) == 2
    assert "is the box's loopback, which no client on another machine reaches (reverse_proxy_host)" in (
        capsys.readouterr().err
    )
    assert _bench(tmp_path, "--deployment", str(deployment), "--base-url", "http://10.0.0.5:8443/v1") == 0


def test_an_out_that_is_a_file_and_an_unknown_client(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    deployment = _deployment(tmp_path)
    (tmp_path / "out").write_text("", encoding="utf-8")
    assert _bench(tmp_path, "--deployment", str(deployment)) == 2
    assert capsys.readouterr().err.strip() == f"bench: error: --out: {tmp_path / 'out'} is a file, not a folder"
    with pytest.raises(SystemExit) as exited:
        _bench(tmp_path, "--deployment", str(deployment), "--client", "cursor")
    assert exited.value.code == 2
    assert "argument --client: invalid choice: 'cursor'" in capsys.readouterr().err


def test_check_of_an_empty_folder_says_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "out").mkdir()
    assert _bench(tmp_path, "--deployment", str(_deployment(tmp_path)), "--check") == 2
    assert "holds no configuration of opencode, aider, continue, hermes, openai; write them first" in (
        capsys.readouterr().err
    )


def test_no_deployment_names_where_it_looks(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["--config-dir", str(tmp_path), "clients"]) == 2
    assert "bench clients needs a deployment.json" in capsys.readouterr().err


def test_a_server_without_tool_calls_is_said_to_fail_the_tool_users(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """OpenCode, Continue and Hermes Agent always offer their tools (tests/clients runs OpenCode so)."""
    path = tmp_path / "artifacts" / "box" / "deployment.json"
    path.parent.mkdir(parents=True)
    document = record("vllm", args=["--max-model-len", "4096"], base_url="http://llm.lan:8443/v1", preset="gemma3-270m")
    path.write_text(json.dumps(document), encoding="utf-8")
    assert _bench(tmp_path, "--deployment", str(path)) == 0
    out = capsys.readouterr().out
    assert (
        "opencode, continue, hermes: the server returns no tool calls (vLLM runs without --enable-auto-tool-choice "
        "and a --tool-call-parser: vllm_tool_call_parser), and these agents always offer their tools, so their "
        "requests fail; Aider edits without tools"
    ) in out
    assert "hermes: the server's context of 4,096 tokens is below Hermes Agent's minimum of 64,000" in out
    assert _bench(tmp_path, "--deployment", str(path), "--client", "aider") == 0
    assert "no tool calls" not in capsys.readouterr().out
