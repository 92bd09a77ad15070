#!/usr/bin/python
"""Ansible module: the Open WebUI admin signs in with the password llmrig holds for it, and a new
password reaches the account (Open WebUI creates the admin from its environment only while its
database has no user, so a rotated password file alone changes nothing)."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: llmrig_open_webui_admin
short_description: Sign the Open WebUI admin in, and move the account to a new password
description:
  - Reads the wanted password from O(password_file) on the host (0600 root; the secrets role
    writes it from open_webui_admin_password) and signs the admin in through Open WebUI's
    C(POST /api/v1/auths/signin). No password is a module argument, on a command line or in the result.
  - With O(rotate), when the wanted password is refused, signs in with the password the account
    had the last time this module set or confirmed it (O(account_file), 0600 root), changes it
    through C(POST /api/v1/auths/update/password) (Open WebUI hashes it with its own code), and
    signs in again with the new one. O(account_file) then holds the new password. Changed only then,
    or when O(account_file) did not hold it yet.
  - Fails naming O(knob) when the admin cannot sign in with either password.
  - With O(model), the signed-in admin's C(GET /api/models) must list that model.
options:
  url:
    description: Open WebUI's base URL on the host, e.g. http://127.0.0.1:8080.
    type: str
    required: true
  email:
    description: The admin's e-mail (open_webui_admin_email).
    type: str
    required: true
  password_file:
    description: File that holds the wanted password.
    type: path
    required: true
  account_file:
    description: File that holds the password the account has (written only with O(rotate)).
    type: path
    default: ""
  rotate:
    description: Change the account's password when the wanted one is refused (false = sign in only).
    type: bool
    default: true
  model:
    description: A model the admin's model list must hold ('' = do not check).
    type: str
    default: ""
  knob:
    description: The variable that sets the password, named in failure messages.
    type: str
    default: open_webui_admin_password
  timeout_s:
    description: Seconds each request may take.
    type: int
    default: 60
author: llmrig
"""

RETURN = r"""
rotated:
  description: Whether the account's password was changed (or, in check mode, would be).
  type: bool
  returned: success
models:
  description: The ids of the signed-in admin's model list (only with O(model)).
  type: list
  returned: success
"""

import json
import os
import urllib.error
import urllib.request
from typing import Any

from ansible.module_utils.basic import AnsibleModule


class Refused(Exception):
    """Open WebUI answered, but not 200: ``status`` and its ``detail``."""

    def __init__(self, status: int, detail: str) -> None:
        super().__init__(f"HTTP {status}: {detail}")
        self.status = status
        self.detail = detail


def call(url: str, body: Any = None, token: str = "", timeout_s: int = 60) -> Any:
    """One JSON request to Open WebUI (POST with ``body``, else GET); the answer's JSON, or
    :class:`Refused` with Open WebUI's ``detail`` (which never holds a password)."""
    request = urllib.request.Request(url, method="POST" if body is not None else "GET")
    request.add_header("Content-Type", "application/json")
    if token:
        request.add_header("Authorization", "Bearer " + token)
    data = json.dumps(body).encode() if body is not None else None
    try:
        with urllib.request.urlopen(request, data=data, timeout=timeout_s) as answer:
            return json.loads(answer.read() or b"null")
    except urllib.error.HTTPError as error:
        text = error.read().decode(errors="replace")
        try:
            detail = str(json.loads(text).get("detail", text))
        except (ValueError, AttributeError):
            detail = text
        raise Refused(error.code, detail[:200]) from None


def sign_in(params: dict[str, Any], password: str) -> str:
    """The session token of the admin signed in with ``password``; '' when Open WebUI refuses the
    credentials (HTTP 400). Any other answer raises :class:`Refused`."""
    body = {"email": params["email"], "password": password}
    try:
        answer = call(params["url"] + "/api/v1/auths/signin", body, timeout_s=params["timeout_s"])
    except Refused as refused:
        if refused.status == 400:
            return ""
        raise
    return str(answer.get("token", "")) if isinstance(answer, dict) else ""


def read_secret(path: str) -> str:
    """The first line of ``path`` ('' when the file is missing)."""
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.read().strip()
    except FileNotFoundError:
        return ""


def write_secret(path: str, value: str) -> None:
    """``value`` into ``path``, created 0600 (never readable by others, not even for a moment)."""
    temporary = path + ".new"
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
        handle.write(value + "\n")
    os.chmod(temporary, 0o600)
    os.replace(temporary, path)


def _not_signed_in(params: dict[str, Any], why: str) -> dict[str, Any]:
    return {
        "failed": True,
        "msg": f"{params['knob']}: the Open WebUI admin {params['email']} cannot sign in at {params['url']} {why}",
    }


def converge(params: dict[str, Any], check_mode: bool = False) -> dict[str, Any]:
    """Sign in with the wanted password, rotating the account to it first when needed; return the
    module result (``failed`` set on failure)."""
    wanted = read_secret(params["password_file"])
    if not wanted:
        return {"failed": True, "msg": f"{params['knob']}: {params['password_file']} is missing or empty; run site.yml"}
    account = read_secret(params["account_file"]) if params["account_file"] else ""
    rotated = False
    try:
        token = sign_in(params, wanted)
        if not token and params["rotate"]:
            old = sign_in(params, account) if account and account != wanted else ""
            if not old:
                record = (
                    f"nor with the one before it ({params['account_file']})"
                    if account
                    else "(no earlier one on record)"
                )
                return _not_signed_in(
                    params,
                    f"with it, {record}; set it to the account's password, or check open_webui_admin_email",
                )
            rotated = True
            if check_mode:
                return {"changed": True, "rotated": True, "models": []}
            change = {"password": account, "new_password": wanted}
            try:
                taken = call(params["url"] + "/api/v1/auths/update/password", change, old, params["timeout_s"])
            except Refused as refused:
                taken = refused
            if taken is not True:
                return {
                    "failed": True,
                    "msg": f"{params['knob']}: Open WebUI did not take it as the new password ({taken})",
                }
            # The account has the new password now, whatever the next request says.
            write_secret(params["account_file"], wanted)
            account = wanted
            token = sign_in(params, wanted)
        if not token:
            return _not_signed_in(params, "with it")
        models: list[str] = []
        if params["model"]:
            answer = call(params["url"] + "/api/models", token=token, timeout_s=params["timeout_s"])
            models = [str(entry.get("id")) for entry in (answer or {}).get("data", []) if isinstance(entry, dict)]
            if params["model"] not in models:
                return {
                    "failed": True,
                    "msg": f"Open WebUI at {params['url']} does not list the served model {params['model']} "
                    f"(it lists {models}); is the engine up, and does open-webui.env point at it? run site.yml",
                }
    except Refused as refused:
        return _not_signed_in(params, f"(Open WebUI answered {refused})")
    except OSError as error:
        return _not_signed_in(params, f"(no answer: {error})")
    recorded = not params["rotate"] or not params["account_file"] or account == wanted
    if not recorded and not check_mode:
        write_secret(params["account_file"], wanted)
    return {"changed": rotated or not recorded, "rotated": rotated, "models": models}


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "url": {"type": "str", "required": True},
            "email": {"type": "str", "required": True},
            "password_file": {"type": "path", "required": True},
            "account_file": {"type": "path", "default": ""},
            "rotate": {"type": "bool", "default": True},
            "model": {"type": "str", "default": ""},
            "knob": {"type": "str", "default": "open_webui_admin_password"},
            "timeout_s": {"type": "int", "default": 60},
        },
        supports_check_mode=True,
    )
    result = converge(module.params, module.check_mode)
    if result.pop("failed", False):
        module.fail_json(**result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
