"""Open WebUI's environment as the open_webui role builds it, rendered by real Ansible on this
machine (tests/ansible/render_open_webui_env.yml: preflight, then the role's own tasks, with the
host's real names from its network facts): CORS admits the origins the UI is served at, never '*'."""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.helpers import REPO, playbook_dump

pytestmark = pytest.mark.ansible


def _render(tmp_path: Path, **knobs: Any) -> dict[str, str]:
    files = {name: tmp_path / name for name in ("api_key", "secret_key", "admin_password")}
    for name, path in files.items():
        path.write_text(f"test-{name}-value\n", encoding="utf-8")
    extra = {
        "llmrig_engine": {
            "local_base_url": "http://127.0.0.1:8000/v1",
            "api_key_file": str(files["api_key"]),
            "served_model_name": "gemma3-270m",
            "name": "vllm",
        },
        "llmrig_open_webui_secrets": {
            "secret_key_file": str(files["secret_key"]),
            "admin_password_file": str(files["admin_password"]),
        },
        **knobs,
    }
    env: dict[str, str] = playbook_dump("tests/ansible/render_open_webui_env.yml", "env_dump", extra, tmp_path=tmp_path)
    return env


# Open WebUI serving plain HTTP itself, on every interface (the tests below before TLS).
PLAIN = {"tls_enabled": False, "open_webui_host": "0.0.0.0"}


def test_without_a_public_url_cors_lists_loopback_and_the_hosts_own_names(tmp_path: Path) -> None:
    env = _render(tmp_path, **PLAIN)
    origins = env["CORS_ALLOW_ORIGIN"].split(";")
    assert "*" not in env["CORS_ALLOW_ORIGIN"]
    assert origins[:2] == ["http://127.0.0.1:8080", "http://localhost:8080"]
    assert f"http://{socket.gethostname().lower()}:8080" in origins
    assert all(origin.startswith("http://") and origin.endswith(":8080") for origin in origins), origins
    assert "WEBUI_URL" not in env
    assert "WEBUI_SESSION_COOKIE_SECURE" not in env
    assert "FORWARDED_ALLOW_IPS" not in env
    assert (env["WEBUI_ADMIN_PASSWORD"], env["OPENAI_API_KEYS"]) == ("test-admin_password-value", "test-api_key-value")


def test_a_public_url_is_the_only_origin(tmp_path: Path) -> None:
    env = _render(tmp_path, **PLAIN, open_webui_url="https://chat.example.org/", open_webui_port=3000)
    assert env["CORS_ALLOW_ORIGIN"] == "https://chat.example.org"
    assert env["WEBUI_URL"] == "https://chat.example.org"


def test_a_port_of_its_own_reaches_the_origins(tmp_path: Path) -> None:
    env = _render(tmp_path, tls_enabled=False, open_webui_host="127.0.0.1", open_webui_port=3000)
    assert env["CORS_ALLOW_ORIGIN"] == "http://127.0.0.1:3000;http://localhost:3000"


def test_behind_https_the_url_is_the_only_origin_and_cookies_are_secure(tmp_path: Path) -> None:
    """The defaults (tls_enabled, Open WebUI on loopback): the HTTPS site's URL at the inventory
    name, that origin alone for CORS and Socket.IO, secure cookies, forwarded headers from the
    proxy on loopback only."""
    env = _render(tmp_path)
    assert env["WEBUI_URL"] == "https://localhost"
    assert env["CORS_ALLOW_ORIGIN"] == "https://localhost"
    assert (env["WEBUI_SESSION_COOKIE_SECURE"], env["WEBUI_AUTH_COOKIE_SECURE"]) == ("True", "True")
    assert env["FORWARDED_ALLOW_IPS"] == "127.0.0.1"


def test_behind_https_a_name_and_port_of_its_own(tmp_path: Path) -> None:
    env = _render(tmp_path, tls_server_name="Chat.Box.lan", tls_https_port=8443)
    assert (env["WEBUI_URL"], env["CORS_ALLOW_ORIGIN"]) == ("https://chat.box.lan:8443", "https://chat.box.lan:8443")


def test_the_verify_step_reads_the_secrets_roles_password_file() -> None:
    """roles/open_webui's _open_webui_admin_password_path is the file the secrets role writes."""
    secrets = yaml.safe_load((REPO / "roles" / "secrets" / "vars" / "main.yml").read_text(encoding="utf-8"))
    webui = yaml.safe_load((REPO / "roles" / "open_webui" / "vars" / "main.yml").read_text(encoding="utf-8"))
    (entry,) = [item for item in secrets["_secrets_open_webui"] if item["knob"] == "open_webui_admin_password"]
    assert webui["_open_webui_admin_password_path"] == entry["file"]
