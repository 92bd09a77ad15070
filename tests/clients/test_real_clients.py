"""The real agent clients with the files ``bench clients`` writes: OpenCode and Continue's CLI
(npm), Aider and Hermes Agent (PyPI), at the versions ``scripts/testrig clients`` pins, each run
headless with its file and given one task, against the agent protocol fake
(:mod:`tests.fakes.agent_server`), which answers as a capable model would. Each must write the
file on disk, and every request it sends must carry the key from ``LLMRIG_API_KEY``, the served
model name and the answer length the file sets. The fake stands in for the model only: the
configuration, the client, its HTTP and its tools are real."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from bench.cli import main
from bench.measure.probe.clients import client_requests
from tests.clients.requests import as_users, kept, shape
from tests.deployments import record
from tests.fakes.agent_server import TASK, TASK_FILE, TASK_TEXT, AgentServer
from tests.helpers import REPO

CLIENTS = REPO / "build" / "testrig" / "clients"
BINARIES = {
    "opencode": CLIENTS / "npm" / "node_modules" / ".bin" / "opencode",
    "continue": CLIENTS / "npm" / "node_modules" / ".bin" / "cn",
    "aider": CLIENTS / "aider" / "bin" / "aider",
    "hermes": CLIENTS / "hermes" / "bin" / "hermes",
}
KEY = "e2e-client-key-7Qm2"
MODEL = "qwen3.8-27b"
# A vLLM box that returns tool calls and separated reasoning, 65,536 tokens of context (Hermes
# Agent refuses less than 64,000): the files then ask for answers of up to 16,384 tokens.
TOOL_FLAGS = ["--tool-call-parser", "qwen3_coder", "--enable-auto-tool-choice", "--reasoning-parser", "qwen3"]
MAX_OUTPUT = 16384


@dataclass
class Setup:
    server: AgentServer
    files: Path  # what bench clients wrote
    work: Path  # the client's current folder: where the task's file must appear
    env: dict[str, str]


def _binary(client: str) -> Path:
    binary = BINARIES[client]
    if not binary.exists():
        pytest.fail(f"{binary} is missing: scripts/testrig clients installs the agent clients")
    return binary


def _setup(tmp_path: Path, *, tools: bool = True) -> Setup:
    work, home = tmp_path / "work", tmp_path / "home"
    work.mkdir()
    home.mkdir()
    server = AgentServer(MODEL, KEY, work)
    deployment = tmp_path / "artifacts" / "box" / "deployment.json"
    deployment.parent.mkdir(parents=True)
    args = ["--max-model-len", "65536", *(TOOL_FLAGS if tools else [])]
    document = record("vllm", args=args, base_url=server.base_url, preset="qwen3.8-27b-w4a16", served_model_name=MODEL)
    deployment.write_text(json.dumps(document), encoding="utf-8")
    files = tmp_path / "clients"
    command = ["--config-dir", str(REPO), "clients", "--deployment", str(deployment), "--out", str(files)]
    assert main([*command, "--base-url", server.base_url]) == 0
    # A home of its own: nothing of this machine's user configuration, no update checks or telemetry.
    env = {
        "PATH": f"{BINARIES['opencode'].parent}:{os.environ['PATH']}",
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "XDG_DATA_HOME": str(home / ".local" / "share"),
        "XDG_CACHE_HOME": str(home / ".cache"),
        "XDG_STATE_HOME": str(home / ".local" / "state"),
        "LLMRIG_API_KEY": KEY,
        "OPENCODE_DISABLE_AUTOUPDATE": "1",
        "OPENCODE_DISABLE_MODELS_FETCH": "1",
        "CONTINUE_METRICS_ENABLED": "0",
        "CONTINUE_CLI_ENABLE_TELEMETRY": "0",
    }
    return Setup(server, files, work, env)


def setup_for(tmp_path: Path) -> Setup:
    """The fake serving, the files written: what every client's run needs."""
    return _setup(tmp_path)


@pytest.fixture
def setup(tmp_path: Path) -> Iterator[Setup]:
    made = _setup(tmp_path)
    yield made
    made.server.close()


PINS = {
    "opencode": "opencode-ai@",
    "continue": "@continuedev/cli@",
    "aider": "aider-chat==",
    "hermes": "hermes-agent==",
}


def version_of(client: str) -> str:
    """The version ``scripts/testrig clients`` pins for ``client``."""
    found = re.search(re.escape(PINS[client]) + r"([0-9][0-9A-Za-z.+-]*)", (REPO / "scripts" / "testrig").read_text())
    assert found, f"scripts/testrig pins no {PINS[client]}"
    return found.group(1)


def _run(setup: Setup, command: list[str], **env: str) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        command,
        cwd=setup.work,
        env={**setup.env, **env},
        capture_output=True,
        text=True,
        timeout=300,
        stdin=subprocess.DEVNULL,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done


def _assert_served(setup: Setup, *, tools: bool) -> None:
    """The task's file is on disk, and each chat request carried the key, the model and the answer length."""
    assert (setup.work / TASK_FILE).read_text(encoding="utf-8").strip() == TASK_TEXT
    chats = setup.server.chats()
    assert chats
    assert {(body["model"], body.get("max_tokens")) for body in chats} == {(MODEL, MAX_OUTPUT)}
    # Tool users offer their tools (OpenCode's request for a title aside); Aider never does.
    assert any(body.get("tools") for body in chats) == tools
    keys = {
        next((value for name, value in request.headers.items() if name.lower() == "authorization"), None)
        for request in setup.server.requests
        if request.path.endswith("/chat/completions")
    }
    assert keys == {f"Bearer {KEY}"}


def run_opencode(setup: Setup) -> None:
    _run(setup, [str(_binary("opencode")), "run", TASK, "--auto"], OPENCODE_CONFIG=str(setup.files / "opencode.json"))


def run_continue(setup: Setup) -> None:
    _run(
        setup,
        [str(_binary("continue")), "--config", str(setup.files / "continue" / "config.yaml"), "-p", TASK, "--auto"],
    )


def run_aider(setup: Setup) -> None:
    """Aider edits through text: the three files copied into the folder, as docs/clients.md says."""
    for path in (setup.files / "aider").iterdir():
        shutil.copy(path, setup.work / path.name)
    _run(
        setup,
        [str(_binary("aider")), "--message", TASK, "--yes-always", "--no-git", TASK_FILE],
        OPENAI_API_KEY=setup.env["LLMRIG_API_KEY"],
    )


def run_hermes(setup: Setup) -> None:
    home = Path(setup.env["HOME"]) / ".hermes"
    home.mkdir()
    shutil.copy(setup.files / "hermes" / "config.yaml", home / "config.yaml")
    _run(setup, [str(_binary("hermes")), "chat", "-q", TASK, "-Q", "--yolo"], HERMES_HOME=str(home))


RUNS = {"opencode": run_opencode, "continue": run_continue, "aider": run_aider, "hermes": run_hermes}


def _assert_replayed_as_sent(client: str, setup: Setup) -> None:
    """bench probe replays what this client sends now: the committed recording has the same
    parameters, tools and message fields (``python -m tests.clients.requests`` records it again)."""
    committed = client_requests()[client]
    assert committed.version == version_of(client), f"record again: python -m tests.clients.requests {client}"
    now = as_users(kept(setup.server), setup.work.parent)
    assert shape(now) == shape(committed.requests), f"record again: python -m tests.clients.requests {client}"


@pytest.mark.parametrize("client", ["opencode", "continue", "hermes"])
def test_a_tool_using_client_writes_the_file_through_its_write_tool(client: str, setup: Setup) -> None:
    RUNS[client](setup)
    _assert_served(setup, tools=True)
    if client == "opencode":
        assert {body.get("tool_choice") for body in setup.server.chats() if body.get("tools")} == {"auto"}
    _assert_replayed_as_sent(client, setup)


def test_opencode_without_the_key_variable_is_refused(setup: Setup) -> None:
    """The file names the variable, and holds no key: unset, OpenCode sends none and gets 401."""
    env = {**setup.env, "OPENCODE_CONFIG": str(setup.files / "opencode.json")}
    del env["LLMRIG_API_KEY"]
    subprocess.run(
        [str(_binary("opencode")), "run", TASK, "--auto"],
        cwd=setup.work, env=env, capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL, check=False,
    )  # fmt: skip
    assert not (setup.work / TASK_FILE).exists()
    chats = [request for request in setup.server.requests if request.path.endswith("/chat/completions")]
    assert chats
    assert all("authorization" not in {name.lower() for name in request.headers} for request in chats)


def test_opencode_offers_its_tools_even_to_a_model_without_tool_calls(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """For a server that returns no tool calls the file says ``tool_call: false``, and OpenCode
    1.18 offers its tools (with ``tool_choice`` auto, which such a vLLM refuses) all the same:
    bench clients says so when it writes the file."""
    made = _setup(tmp_path, tools=False)
    try:
        assert (
            "the server returns no tool calls (vLLM runs without --enable-auto-tool-choice" in capsys.readouterr().out
        )
        model = json.loads((made.files / "opencode.json").read_text(encoding="utf-8"))["provider"]["llmrig"]["models"]
        assert model[MODEL]["tool_call"] is False
        _run(made, [str(_binary("opencode")), "run", TASK], OPENCODE_CONFIG=str(made.files / "opencode.json"))
        assert any(body.get("tools") and body.get("tool_choice") == "auto" for body in made.server.chats())
    finally:
        made.server.close()


def test_aider_applies_its_edit_to_the_file(setup: Setup) -> None:
    run_aider(setup)
    _assert_served(setup, tools=False)
    assert "SEARCH/REPLACE" in json.dumps(setup.server.chats()[0]["messages"][:1])  # the diff format the file set
    _assert_replayed_as_sent("aider", setup)
