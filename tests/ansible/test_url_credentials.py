"""Credentials in the llmrig_pip_* URLs and in ollama_archive_url reach the server, and nothing else.

The roles' own tasks (read from their files, their conditions dropped) run with real pip and
real get_url against a loopback server that asks for HTTP basic authentication; the server sees
the credentials, while the -vvv output, pip's argv as the module reports it, and the record of
the Ollama archive never hold the password.
"""

from __future__ import annotations

import base64
import hashlib
import http.server
import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.helpers import REPO, ansible_render, run_playbook

pytestmark = pytest.mark.ansible

PASSWORD = "s3cret-Pa55word"
USER = "mirror-user"
ARCHIVE = b"not really an archive\n"


class AuthServer:
    """A loopback HTTP server that answers 401 without basic authentication, and records what it got."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, str]] = []  # (path, Authorization header)
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                auth = self.headers.get("Authorization", "")
                server.seen.append((self.path, auth))
                if not auth:
                    self.send_response(401)
                    self.send_header("WWW-Authenticate", 'Basic realm="mirror"')
                    self.end_headers()
                    return
                if self.path.endswith(".tar.zst"):
                    self.send_response(200)
                    self.send_header("Content-Length", str(len(ARCHIVE)))
                    self.end_headers()
                    self.wfile.write(ARCHIVE)
                    return
                self.send_response(404)  # no package: pip fails, after it asked
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base = f"http://{USER}:{PASSWORD}@127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def authorized(self) -> list[str]:
        """The paths requested with the test's credentials."""
        wanted = "Basic " + base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
        return [path for path, auth in self.seen if auth == wanted]


@pytest.fixture
def server() -> Iterator[AuthServer]:
    found = AuthServer()
    yield found
    found.httpd.shutdown()
    found.httpd.server_close()


def _task(role: str, file: str, name: str) -> dict[str, Any]:
    """One task of a role, as its file has it, without its condition."""
    tasks = yaml.safe_load((REPO / "roles" / role / "tasks" / file).read_text(encoding="utf-8"))
    found = [task for task in tasks if task.get("name", "").startswith(name)]
    assert len(found) == 1, name
    return {key: value for key, value in found[0].items() if key != "when"}


def _play(tmp_path: Path, role: str, tasks: list[dict[str, Any]]) -> Path:
    playbook = tmp_path / "play.yml"
    play = {
        "hosts": "localhost",
        "connection": "local",
        "gather_facts": False,
        "vars_files": [str(REPO / "roles" / role / "vars" / "main.yml")],
        "tasks": tasks,
    }
    playbook.write_text(yaml.safe_dump([play], sort_keys=False), encoding="utf-8")
    return playbook


def test_pip_gets_the_index_credentials_from_its_0600_file_and_never_on_its_argv(
    tmp_path: Path, server: AuthServer
) -> None:
    write = _task("vllm", "install.yml", "install | Write pip's configuration")
    install = {**_task("vllm", "install.yml", "install | Install the pinned vLLM distribution"), "ignore_errors": True}
    knobs = {
        "vllm_install_dir": str(tmp_path / "vllm"),
        "llmrig_device": "cuda",
        "vllm_version": "0.0.1",
        "llmrig_pip_index_url": f"{server.base}/simple",
        "llmrig_pip_extra_index_urls": [f"{server.base}/extra"],
        "llmrig_pip_find_links": [],
        "llmrig_pip_no_index": False,
        "vllm_cpu_torch_index_url": "",
        # What the venv role decides before the install (roles/venv): a new venv to install into.
        "venv_release": {"venv": str(tmp_path / "vllm" / "venv-0.0.1"), "switch": True, "missing": True},
    }
    (tmp_path / "vllm").mkdir()
    run = run_playbook(
        str(_play(tmp_path, "vllm", [write, install])), knobs, check=False, tmp_path=tmp_path, flags=("-vvv",),
        wrapper=(), env={"PIP_FIND_LINKS": "", "PIP_INDEX_URL": "", "PIP_EXTRA_INDEX_URL": ""},
    )  # fmt: skip
    config = tmp_path / "vllm" / "pip.conf"
    assert config.stat().st_mode & 0o777 == 0o600
    assert f"index-url = {server.base}/simple" in config.read_text(encoding="utf-8")
    # pip really asked both indexes with the credentials of the file.
    assert {path.split("/")[1] for path in server.authorized()} == {"simple", "extra"}, server.seen
    assert len(run.failed_tasks) == 1, run.failed_tasks  # no package there: the install fails, after asking
    assert PASSWORD not in run.output
    # The json callback's report, then whatever Ansible printed to stderr after it (warnings).
    report, _ = json.JSONDecoder().raw_decode(run.output[run.output.find("\n{\n") + 1 :])
    result = report["plays"][0]["tasks"][1]["hosts"]["localhost"]
    assert "--index-url" not in result["cmd"]
    assert "127.0.0.1" not in result["cmd"]


def test_the_ollama_archive_download_sends_the_credentials_and_the_record_hides_them(
    tmp_path: Path, server: AuthServer
) -> None:
    download = _task("ollama", "install.yml", "install | Download the release archive")
    knobs = {
        "ollama_archive_url": f"{server.base}/v1/ollama-linux-amd64.tar.zst",
        "ollama_archive_checksum": "sha256:" + hashlib.sha256(ARCHIVE).hexdigest(),
        "_ollama_archive": str(tmp_path / "ollama.tar.zst"),
    }
    run = run_playbook(
        str(_play(tmp_path, "ollama", [download])), knobs, check=False, tmp_path=tmp_path, flags=("-vvv",),
        wrapper=(),
    )  # fmt: skip
    assert run.failed_tasks == []
    assert (tmp_path / "ollama.tar.zst").read_bytes() == ARCHIVE
    assert server.authorized() == ["/v1/ollama-linux-amd64.tar.zst"]
    assert PASSWORD not in run.output
    record = _task("ollama", "started.yml", "started | Describe Ollama for deployment.json")
    expression = record["ansible.builtin.set_fact"]["llmrig_engine_record"]["details"]["archive_url"]
    shown = ansible_render(expression, {"ollama_archive_url": knobs["ollama_archive_url"]})
    assert shown == f"http://***@127.0.0.1:{server.httpd.server_address[1]}/v1/ollama-linux-amd64.tar.zst"


def test_no_pip_task_of_a_role_takes_index_options_on_its_command_line() -> None:
    """Every install through ansible.builtin.pip names the role's 0600 configuration file instead."""
    installs = []
    for path in sorted((REPO / "roles").glob("*/tasks/*.yml")):
        stack = list(yaml.safe_load(path.read_text(encoding="utf-8")) or [])
        while stack:
            task = stack.pop()
            stack += task.get("block", [])
            pip = task.get("ansible.builtin.pip")
            if pip and pip.get("state") == "present":
                installs.append(path.relative_to(REPO).as_posix())
                assert "extra_args" not in pip, path
                assert task["environment"]["PIP_CONFIG_FILE"], path
    assert len(installs) >= 6, installs
