"""llmrig_first_answer: one minimal chat completion, timed on the host's monotonic clock, sent with
the key read from its file; an engine that does not answer is reported, never a failure."""

from __future__ import annotations

import http.server
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import REPO, LoopbackServer, load_file_module

MODULE = load_file_module(REPO / "ansible" / "plugins" / "modules" / "llmrig_first_answer.py", "llmrig_first_answer")


class Engine(LoopbackServer):
    """Answers POST /v1/chat/completions with ``status`` and one choice; keeps what it was sent."""

    def __init__(self) -> None:
        self.status = 200
        self.seen: list[tuple[str, str, dict[str, Any]]] = []
        engine = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                engine.seen.append((self.path, self.headers.get("Authorization", ""), body))
                answer = json.dumps({"choices": [{"message": {"role": "assistant", "content": "OK"}}]}).encode()
                self.send_response(engine.status)
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, *args: Any) -> None:
                pass

        super().__init__(Handler)


@pytest.fixture
def engine() -> Iterator[Engine]:
    server = Engine()
    yield server
    server.close()


def _params(base_url: str, **changes: Any) -> dict[str, Any]:
    return {"base_url": base_url, "model": "m", "api_key_file": "", "max_tokens": 1, "timeout_s": 5.0, **changes}


def test_one_token_with_the_key_from_its_file(engine: Engine, tmp_path: Path) -> None:
    """The request: the served model, one message, one token, not streamed, the key as a bearer token;
    the moments sent and answered bracket the call on the monotonic clock, sent first."""
    key = tmp_path / "api_key"
    key.write_text("sk-test\n", encoding="utf-8")
    before = time.monotonic_ns() // 1000
    result = MODULE.ask(_params(engine.url + "/v1/", api_key_file=str(key)))
    after = time.monotonic_ns() // 1000
    assert (result["changed"], result["answered"], result["msg"]) == (False, True, "")
    assert before <= result["sent_monotonic_us"] <= result["answered_monotonic_us"] <= after
    ((path, authorization, body),) = engine.seen
    assert (path, authorization) == ("/v1/chat/completions", "Bearer sk-test")
    assert body == {
        "model": "m",
        "messages": [{"role": "user", "content": "Say OK."}],
        "max_tokens": 1,
        "temperature": 0,
        "stream": False,
    }


def test_no_key_file_sends_no_key(engine: Engine) -> None:
    assert MODULE.ask(_params(engine.url + "/v1"))["answered"] is True
    assert engine.seen[0][1] == ""


def test_a_refusal_is_reported_not_raised(engine: Engine) -> None:
    engine.status = 404
    result = MODULE.ask(_params(engine.url + "/v1"))
    assert (result["answered"], result["answered_monotonic_us"]) == (False, 0)
    assert result["msg"] == f"{engine.url}/v1/chat/completions answered 404"
    assert result["sent_monotonic_us"] > 0


def test_an_unreadable_key_file_is_reported(tmp_path: Path) -> None:
    result = MODULE.ask(_params("http://127.0.0.1:9/v1", api_key_file=str(tmp_path / "missing")))
    assert (result["answered"], result["sent_monotonic_us"]) == (False, 0)
    assert result["msg"] == f"cannot read the API key file {tmp_path / 'missing'}: No such file or directory"
