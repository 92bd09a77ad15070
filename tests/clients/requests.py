"""What the real agent clients send, as ``bench probe`` replays it: recorded from the pinned
clients of ``scripts/testrig clients`` against the agent protocol fake, written under
``bench/measure/probe/client_requests/`` and compared with what the clients send now.

``python -m tests.clients.requests`` records them again (after a pin moves): each client is run
once with the files ``bench clients`` writes, the task of :mod:`tests.fakes.agent_server`, and
its chat requests kept: those that offer tools (the first turn and the turn carrying the tool's
result; OpenCode's request for a session title is left out), or all of them for a client that
offers none (Aider). The folders of the run are written as a user's (``/home/user/project``).
Record on a machine with the whole test rig: Hermes Agent offers its browser tools only where
Chromium is installed (``scripts/testrig browser``), and the comparison counts every tool.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

from bench.measure.probe.clients import CLIENT_REQUESTS_DIR, CLIENT_TITLES
from tests.fakes.agent_server import AgentServer

PROJECT, HOME, OTHER = "/home/user/project", "/home/user", "/home/user/tmp"
KERNEL = "6.8.0-generic"  # a generic kernel release in place of the recording machine's


def kept(server: AgentServer) -> list[dict[str, Any]]:
    """The chat requests a replay keeps: those offering tools, else every one."""
    chats = server.chats()
    with_tools = [body for body in chats if body.get("tools")]
    return with_tools or chats


def as_users(value: Any, tmp_path: Path) -> Any:
    """``value`` with the run's folders written as a user's, and a generic kernel release (the
    clients put both in their system prompts)."""
    text = json.dumps(value)
    for folder, shown in ((tmp_path / "work", PROJECT), (tmp_path / "home", HOME), (tmp_path, OTHER)):
        text = text.replace(str(folder), shown)
    return json.loads(text.replace(os.uname().release, KERNEL))


def document(client: str, version: str, server: AgentServer, tmp_path: Path) -> dict[str, Any]:
    """The file of one client's recorded requests."""
    return {
        "client": client,
        "title": CLIENT_TITLES[client],
        "version": version,
        "requests": as_users(kept(server), tmp_path),
    }


def shape(requests: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """What a replay depends on, without what changes from run to run (the date and the folder in
    a system prompt, a session's ids): each request's parameters, its tools' names and
    parameters, the roles of its messages and which fields each message has."""
    return [
        {
            "parameters": {key: value for key, value in body.items() if key not in ("messages", "tools")},
            "tools": [(tool["function"]["name"], tool["function"].get("parameters")) for tool in body.get("tools", [])],
            "messages": [(message["role"], sorted(message)) for message in body["messages"]],
        }
        for body in requests
    ]


def main(argv: list[str]) -> int:
    """Record every client's requests again (or those named) into the committed folder."""
    from tests.clients import test_real_clients as real  # noqa: PLC0415 (the test module imports this one)

    names = argv or list(CLIENT_TITLES)
    for client in names:
        with tempfile.TemporaryDirectory() as folder:
            tmp_path = Path(folder)
            setup = real.setup_for(tmp_path)
            try:
                real.RUNS[client](setup)
            finally:
                setup.server.close()
            recorded = document(client, real.version_of(client), setup.server, tmp_path)
        path = CLIENT_REQUESTS_DIR / f"{client}.json"
        path.write_text(json.dumps(recorded, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
        print(f"{path}: {len(recorded['requests'])} request(s) of {recorded['title']} {recorded['version']}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
