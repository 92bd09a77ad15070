"""llmrig_open_webui_admin: the admin signs in with the password llmrig holds, and a new password
reaches the account through Open WebUI's own routes.

A loopback HTTP server plays Open WebUI's three routes the module uses, as the open-webui 0.12.4
wheel defines them (open_webui/routers/auths.py: POST /api/v1/auths/signin answers 400 to wrong
credentials; POST /api/v1/auths/update/password takes the current and the new password from a
signed-in user and answers true; GET /api/models). The real Open WebUI runs in the end-to-end tier
(tests/e2e/test_engine_switch.py, test_rotating_the_open_webui_admin_password).
"""

from __future__ import annotations

import http.server
import json
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import REPO, LoopbackServer, load_file_module

MODULE = load_file_module(
    REPO / "ansible" / "plugins" / "modules" / "llmrig_open_webui_admin.py", "llmrig_open_webui_admin"
)
EMAIL = "admin@llmrig.example"
OLD, NEW = "old-password-4Kd8", "new-password-9Qe2"


class FakeOpenWebUI(LoopbackServer):
    """The admin account (one password), the model list, and every request's path."""

    def __init__(self, password: str) -> None:
        self.password = password
        self.models = ["gemma3-270m"]
        self.calls: list[str] = []
        self.status: int | None = None  # answer every request with this status instead
        self.refuse_update = ""  # the detail of a 400 to the password change
        fake = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def _answer(self, status: int, body: Any) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _signed_in(self) -> bool:
                return self.headers.get("Authorization") == f"Bearer token-{fake.password}"

            def do_POST(self) -> None:
                fake.calls.append(self.path)
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                if fake.status:
                    self._answer(fake.status, {"detail": "Too many requests. Please try again later."})
                elif self.path == "/api/v1/auths/signin":
                    if body == {"email": EMAIL, "password": fake.password}:
                        self._answer(200, {"token": f"token-{fake.password}", "role": "admin"})
                    else:
                        self._answer(400, {"detail": "The email or password provided is incorrect."})
                elif self.path == "/api/v1/auths/update/password" and self._signed_in():
                    if body["password"] != fake.password:
                        self._answer(400, {"detail": "The password provided is incorrect."})
                    elif fake.refuse_update:
                        self._answer(400, {"detail": fake.refuse_update})
                    else:
                        fake.password = body["new_password"]
                        self._answer(200, True)
                else:
                    self._answer(401, {"detail": "Not authenticated"})

            def do_GET(self) -> None:
                fake.calls.append(self.path)
                if self.path == "/api/models" and self._signed_in():
                    self._answer(200, {"data": [{"id": model} for model in fake.models]})
                else:
                    self._answer(401, {"detail": "Not authenticated"})

            def log_message(self, *args: Any) -> None:
                pass

        super().__init__(Handler)


@pytest.fixture
def webui() -> Iterator[FakeOpenWebUI]:
    server = FakeOpenWebUI(OLD)
    yield server
    server.close()


def _files(tmp_path: Path, wanted: str, account: str | None) -> tuple[Path, Path]:
    wanted_file, account_file = tmp_path / "open_webui_admin_password", tmp_path / "open_webui_admin_password.applied"
    wanted_file.write_text(wanted + "\n", encoding="utf-8")
    if account is not None:
        account_file.write_text(account + "\n", encoding="utf-8")
    return wanted_file, account_file


def _params(url: str, wanted_file: Path, account_file: Path, **changes: Any) -> dict[str, Any]:
    return {
        "url": url,
        "email": EMAIL,
        "password_file": str(wanted_file),
        "account_file": str(account_file),
        "rotate": True,
        "model": "",
        "knob": "open_webui_admin_password",
        "timeout_s": 5,
        **changes,
    }


def _run(params: dict[str, Any], check_mode: bool = False) -> dict[str, Any]:
    result: dict[str, Any] = MODULE.converge(params, check_mode)
    assert OLD not in json.dumps(result), result
    assert NEW not in json.dumps(result), result
    return result


def test_a_password_that_signs_in_changes_nothing_once_it_is_on_record(webui: FakeOpenWebUI, tmp_path: Path) -> None:
    """The first run records the password the account has (0600); the next changes nothing."""
    wanted_file, account_file = _files(tmp_path, OLD, None)
    params = _params(webui.url, wanted_file, account_file)
    assert _run(params) == {"changed": True, "rotated": False, "models": []}
    assert account_file.read_text(encoding="utf-8") == OLD + "\n"
    assert stat.S_IMODE(account_file.stat().st_mode) == 0o600
    assert _run(params) == {"changed": False, "rotated": False, "models": []}
    assert webui.calls == ["/api/v1/auths/signin"] * 2


def test_a_new_password_is_set_on_the_account_with_the_old_one(webui: FakeOpenWebUI, tmp_path: Path) -> None:
    wanted_file, account_file = _files(tmp_path, NEW, OLD)
    params = _params(webui.url, wanted_file, account_file)
    assert _run(params) == {"changed": True, "rotated": True, "models": []}
    assert webui.password == NEW
    assert account_file.read_text(encoding="utf-8") == NEW + "\n"
    assert webui.calls == [
        "/api/v1/auths/signin",  # the new one: refused
        "/api/v1/auths/signin",  # the one on record
        "/api/v1/auths/update/password",
        "/api/v1/auths/signin",  # the new one again: the proof
    ]
    assert _run(params) == {"changed": False, "rotated": False, "models": []}


def test_check_mode_says_it_would_rotate_and_changes_nothing(webui: FakeOpenWebUI, tmp_path: Path) -> None:
    wanted_file, account_file = _files(tmp_path, NEW, OLD)
    assert _run(_params(webui.url, wanted_file, account_file), check_mode=True)["changed"] is True
    assert webui.password == OLD
    assert account_file.read_text(encoding="utf-8") == OLD + "\n"
    assert "/api/v1/auths/update/password" not in webui.calls


@pytest.mark.parametrize(
    ("account", "why"),
    [("another-password-1", "nor with the one before it ({account_file})"), (None, "(no earlier one on record)")],
)
def test_an_admin_who_cannot_sign_in_fails_naming_the_knob(
    webui: FakeOpenWebUI, tmp_path: Path, account: str | None, why: str
) -> None:
    """The account's password is neither the wanted one nor the one on record (changed in Open
    WebUI, or an account that never was this e-mail's): the run fails and says what to set."""
    wanted_file, account_file = _files(tmp_path, NEW, account)
    result = _run(_params(webui.url, wanted_file, account_file))
    assert result["failed"] is True
    assert result["msg"] == (
        f"open_webui_admin_password: the Open WebUI admin {EMAIL} cannot sign in at {webui.url} with it, "
        f"{why.format(account_file=account_file)}; set it to the account's password, or check open_webui_admin_email"
    )
    assert webui.password == OLD


def test_a_new_password_open_webui_refuses_fails_with_its_reason(webui: FakeOpenWebUI, tmp_path: Path) -> None:
    webui.refuse_update = "Password too long."
    wanted_file, account_file = _files(tmp_path, NEW, OLD)
    result = _run(_params(webui.url, wanted_file, account_file))
    assert result == {
        "failed": True,
        "msg": "open_webui_admin_password: Open WebUI did not take it as the new password "
        "(HTTP 400: Password too long.)",
    }
    assert account_file.read_text(encoding="utf-8") == OLD + "\n"


def test_verify_signs_in_changes_nothing_and_finds_the_model(webui: FakeOpenWebUI, tmp_path: Path) -> None:
    """rotate false (verify.yml): a sign-in and the model list, no record written, no rotation tried."""
    wanted_file, account_file = _files(tmp_path, OLD, None)
    params = _params(webui.url, wanted_file, "", rotate=False, model="gemma3-270m")
    assert _run(params) == {"changed": False, "rotated": False, "models": ["gemma3-270m"]}
    assert not account_file.exists()
    webui.models = ["something-else"]
    assert _run(params)["msg"].startswith(
        f"Open WebUI at {webui.url} does not list the served model gemma3-270m (it lists ['something-else'])"
    )
    wanted_file.write_text(NEW + "\n", encoding="utf-8")
    result = _run(params)
    assert (
        result["msg"]
        == f"open_webui_admin_password: the Open WebUI admin {EMAIL} cannot sign in at {webui.url} with it"
    )
    assert "/api/v1/auths/update/password" not in webui.calls


def test_open_webui_down_or_refusing_sign_ins_fails_saying_so(webui: FakeOpenWebUI, tmp_path: Path) -> None:
    wanted_file, account_file = _files(tmp_path, OLD, OLD)
    webui.status = 429
    result = _run(_params(webui.url, wanted_file, account_file))
    assert result["msg"].endswith("(Open WebUI answered HTTP 429: Too many requests. Please try again later.)")
    webui.close()
    result = _run(_params(webui.url, wanted_file, account_file))
    assert "cannot sign in" in result["msg"], result
    assert "(no answer: " in result["msg"], result


def test_an_empty_password_file_fails_before_any_request(webui: FakeOpenWebUI, tmp_path: Path) -> None:
    wanted_file, account_file = _files(tmp_path, "", OLD)
    result = _run(_params(webui.url, wanted_file, account_file))
    assert result["msg"] == f"open_webui_admin_password: {wanted_file} is missing or empty; run site.yml"
    assert webui.calls == []
