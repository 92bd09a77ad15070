"""A protocol fake of an OpenAI-compatible server for the agent clients (not a model): it answers
the one task every client is given, "create the file TASK_FILE holding TASK_TEXT", the way a
capable model would, and records every request it gets.

- A request that offers tools, before any tool result came back: one streamed tool call of the
  client's own file-writing tool (found among the offered tools by its name and its parameters:
  a path and a content), with the file's absolute path under the client's folder.
- A request that carries a tool result: a short final answer.
- A request without tools (Aider, which edits through text): the file in the edit format Aider's
  system prompt asks for: a SEARCH/REPLACE block with an empty SEARCH (``diff``), else the file
  name on a line and the content fenced (``whole``).

Streams as the OpenAI API does (``data:`` chunks, a usage chunk when ``stream_options`` asks,
``[DONE]``), or one JSON answer when ``stream`` is false. ``GET /v1/models`` lists the one model.
Requests without ``Authorization: Bearer <key>`` get 401, as the API proxy answers them.
"""

from __future__ import annotations

import http.server
import json
import re
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.helpers import LoopbackServer

TASK_FILE = "hello.txt"
TASK_TEXT = "llmrig wrote this"
TASK = f"Create the file {TASK_FILE} in the current folder, holding exactly this line: {TASK_TEXT}"
_PATH_NAMES = ("filePath", "file_path", "path", "filepath", "filename", "file", "target_file")
_CONTENT_NAMES = ("content", "contents", "text", "file_text", "data")


@dataclass
class Recorded:
    """One request as the server got it."""

    path: str
    headers: dict[str, str]
    body: dict[str, Any] = field(default_factory=dict)


def write_call(tools: list[dict[str, Any]], folder: Path) -> tuple[str, dict[str, str]] | None:
    """The name and arguments of a call of the offered tool that writes a file (None: none does)."""
    for tool in tools:
        function = tool.get("function") or {}
        name = str(function.get("name", ""))
        properties = (function.get("parameters") or {}).get("properties") or {}
        path = next((key for key in _PATH_NAMES if key in properties), None)
        content = next((key for key in _CONTENT_NAMES if key in properties), None)
        if re.search(r"write|create", name, re.IGNORECASE) and path and content:
            return name, {path: str(folder / TASK_FILE), content: TASK_TEXT + "\n"}
    return None


class AgentServer(LoopbackServer):
    """The fake on loopback: ``url`` + ``/v1`` is its base URL; ``requests`` what it got."""

    def __init__(self, model: str, key: str, folder: Path) -> None:
        self.model, self.key, self.folder = model, key, folder
        self.requests: list[Recorded] = []
        self.lock = threading.Lock()
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:
                server.record(self, {})
                if not server.authorized(self):
                    return
                if self.path.rstrip("/") == "/v1/models":
                    self.send_json(200, {"object": "list", "data": [{"id": server.model, "object": "model"}]})
                else:
                    self.send_json(404, {"error": {"message": "not found"}})

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                server.record(self, body)
                if not server.authorized(self):
                    return
                if self.path.rstrip("/") != "/v1/chat/completions":
                    self.send_json(404, {"error": {"message": "not found"}})
                    return
                server.answer(self, body)

            def send_json(self, status: int, document: dict[str, Any]) -> None:
                data = json.dumps(document).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        super().__init__(Handler)

    @property
    def base_url(self) -> str:
        return self.url + "/v1"

    def record(self, handler: Any, body: dict[str, Any]) -> None:
        with self.lock:
            self.requests.append(Recorded(handler.path, dict(handler.headers.items()), body))

    def authorized(self, handler: Any) -> bool:
        if handler.headers.get("Authorization") == f"Bearer {self.key}":
            return True
        handler.send_json(401, {"error": {"message": "a key is required", "type": "invalid_request_error"}})
        return False

    def chats(self) -> list[dict[str, Any]]:
        """The bodies of the chat requests, in order."""
        with self.lock:
            return [request.body for request in self.requests if request.path.rstrip("/").endswith("/chat/completions")]

    def answer(self, handler: Any, body: dict[str, Any]) -> None:
        messages = body.get("messages") or []
        tools = body.get("tools") or []
        call = None if any(message.get("role") == "tool" for message in messages) else write_call(tools, self.folder)
        if call is not None:
            name, arguments = call
            delta: dict[str, Any] = {
                "role": "assistant",
                "tool_calls": [
                    {"index": 0, "id": "call_1", "type": "function",
                     "function": {"name": name, "arguments": json.dumps(arguments)}}
                ],
            }  # fmt: skip
            finish = "tool_calls"
        elif tools or any(message.get("role") == "tool" for message in messages):
            delta, finish = {"role": "assistant", "content": f"Done: {TASK_FILE} holds the line."}, "stop"
        elif "SEARCH/REPLACE" in json.dumps(messages[:1]):
            block = f"{TASK_FILE}\n```\n<<<<<<< SEARCH\n=======\n{TASK_TEXT}\n>>>>>>> REPLACE\n```\n"
            delta, finish = {"role": "assistant", "content": block}, "stop"
        else:
            delta, finish = {"role": "assistant", "content": f"{TASK_FILE}\n```\n{TASK_TEXT}\n```\n"}, "stop"
        usage = {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120}
        if not body.get("stream"):
            message = dict(delta)
            if "tool_calls" in message:
                for entry in message["tool_calls"]:
                    entry.pop("index", None)
            handler.send_json(200, {
                "id": "chatcmpl-1", "object": "chat.completion", "model": self.model,
                "choices": [{"index": 0, "message": message, "finish_reason": finish}], "usage": usage,
            })  # fmt: skip
            return
        handler.send_response(200)
        handler.send_header("Content-Type", "text/event-stream")
        handler.send_header("Cache-Control", "no-cache")
        handler.send_header("Connection", "close")
        handler.end_headers()
        chunks = [
            {"choices": [{"index": 0, "delta": delta, "finish_reason": None}]},
            {"choices": [{"index": 0, "delta": {}, "finish_reason": finish}]},
        ]
        if (body.get("stream_options") or {}).get("include_usage"):
            chunks.append({"choices": [], "usage": usage})
        for chunk in chunks:
            document = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "model": self.model, **chunk}
            handler.wfile.write(f"data: {json.dumps(document)}\n\n".encode())
        handler.wfile.write(b"data: [DONE]\n\n")
        handler.wfile.flush()
        handler.close_connection = True
