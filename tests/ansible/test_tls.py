"""HTTPS in front of Open WebUI (roles/reverse_proxy with tls_enabled): the Caddyfile and unit
rendered by real Ansible from the role's templates, then served by the real caddy binary (Debian's
package) on free high ports in front of a small fake Open WebUI that also takes a WebSocket
upgrade: the site serves a certificate for the name, signed by Caddy's own local CA (verified with
Python's ssl against the root.crt in Caddy's data directory, the file the role fetches as
tls-root.crt), refuses another name, redirects plain HTTP with 308, passes the upgrade through,
and leaves the API proxy's plain HTTP site as it was."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import shutil
import socket
import socketserver
import ssl
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from bench.rig.firewall import firewall_rules
from tests.helpers import BIN, REPO, ansible_render, free_ports

pytestmark = pytest.mark.ansible

ROLE = REPO / "roles" / "reverse_proxy"
NAME = "webui.box.lan"
KEY = "Kq7wZt3xN8vR2mB5pL9sD4fG6hJ1cY0e"
WS_GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
OVER_SSH = {"ansible_port": "", "ssh_connection": "192.168.1.20 50022 192.168.1.50 22"}


def _knobs(**overrides: Any) -> dict[str, Any]:
    """The knobs the role's templates read: HTTPS for Open WebUI on, the API proxy on in plain HTTP."""
    return {
        "reverse_proxy_enabled": True,
        "reverse_proxy_host": "127.0.0.1",
        "reverse_proxy_port": 8001,
        "reverse_proxy_tls": False,
        "tls_enabled": True,
        "tls_server_name": NAME,
        "tls_acme_email": "",
        "tls_https_port": 443,
        "tls_http_port": 80,
        "tls_hsts": False,
        "open_webui_enabled": True,
        "open_webui_host": "127.0.0.1",
        "open_webui_port": 8080,
        **overrides,
    }


def _render(template: str, knobs: dict[str, Any], upstream: str = "127.0.0.1:8010") -> str:
    """roles/reverse_proxy/templates/``template``, templated by ansible with the role's vars."""
    role_vars = yaml.safe_load((ROLE / "vars" / "main.yml").read_text(encoding="utf-8"))
    variables: dict[str, Any] = {
        **role_vars,
        **knobs,
        "llmrig_config_dir": "/etc/llmrig",
        "llmrig_allowed_client_cidrs": ["connected"],
        "llmrig_host": {"networks": ["192.168.1.0/24"]},
        "__reverse_proxy_engine": {"name": "vllm", "upstream": upstream, "health_path": "/health"},
        "ansible_managed": "Ansible managed",
        "__template": (ROLE / "templates" / template).read_text(encoding="utf-8"),
    }
    rendered = ansible_render("{{ __template }}", variables)
    assert isinstance(rendered, str)
    return rendered


def _validate(caddyfile: str, tmp: Path) -> subprocess.CompletedProcess[str]:
    """``caddy validate`` on the rendered file, as the role's template task runs it."""
    path = tmp / "Caddyfile"
    path.write_text(caddyfile, encoding="utf-8")
    env = {**os.environ, "HOME": str(tmp), "XDG_CONFIG_HOME": str(tmp), "XDG_DATA_HOME": str(tmp)}
    return subprocess.run(
        ["/usr/bin/caddy", "validate", "--adapter", "caddyfile", "--config", str(path)],
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )


class _Upstream(socketserver.ThreadingTCPServer):
    """A fake Open WebUI (and engine) on loopback: a WebSocket upgrade gets 101 and then an echo of
    every byte; any other request gets 200 and JSON of the path and the headers that reached it."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self) -> None:
        class Handler(socketserver.StreamRequestHandler):
            def handle(self) -> None:
                lines = []
                while (line := self.rfile.readline()) not in (b"\r\n", b"\n", b""):
                    lines.append(line.decode("latin-1").rstrip("\r\n"))
                if not lines:
                    return
                path = lines[0].split(" ")[1]
                headers = {k.strip().lower(): v.strip() for k, _, v in (item.partition(":") for item in lines[1:])}
                if headers.get("upgrade", "").lower() == "websocket":
                    accept = base64.b64encode(
                        hashlib.sha1((headers["sec-websocket-key"] + WS_GUID).encode()).digest()
                    ).decode()
                    self.wfile.write(
                        b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                        + f"Sec-WebSocket-Accept: {accept}\r\n\r\n".encode()
                    )
                    self.wfile.flush()
                    while data := self.connection.recv(1024):
                        self.connection.sendall(data)
                    return
                body = json.dumps({"path": path, "headers": headers}).encode()
                self.wfile.write(
                    b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n"
                    + f"Content-Length: {len(body)}\r\n\r\n".encode()
                    + body
                )

        super().__init__(("127.0.0.1", 0), Handler)
        self.port = self.server_address[1]
        threading.Thread(target=self.serve_forever, daemon=True).start()


@dataclass(frozen=True)
class Site:
    https: int
    http: int
    api: int
    upstream: int
    root: Path
    caddyfile: str


def _wait_for(port: int, server: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + 30
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            assert server.poll() is None, log.read_text(encoding="utf-8")
            assert time.monotonic() < deadline, f"caddy did not listen on {port} within 30 s"
            time.sleep(0.2)


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    """The role's Caddyfile (HTTPS for Open WebUI, the API proxy in plain HTTP) served by the real
    caddy in front of the fake upstream, with Caddy's data directory in a temporary directory."""
    caddy = shutil.which("caddy")
    if caddy is None:
        pytest.fail("caddy is not installed: scripts/testrig caddy installs Debian's package (apt-get install caddy)")
    tmp = tmp_path_factory.mktemp("caddy-tls")
    upstream = _Upstream()
    https, http, api = free_ports()[0], free_ports()[0], free_ports()[0]
    knobs = _knobs(
        tls_https_port=https, tls_http_port=http, reverse_proxy_port=api, open_webui_port=upstream.port, tls_hsts=True
    )
    caddyfile = _render("Caddyfile.j2", knobs, f"127.0.0.1:{upstream.port}")
    config = tmp / "Caddyfile"
    config.write_text(caddyfile, encoding="utf-8")
    data = tmp / "data"
    env = {**os.environ, "LLMRIG_API_KEY": KEY, "HOME": str(tmp), "XDG_CONFIG_HOME": str(tmp / "config")}
    env["XDG_DATA_HOME"] = str(data)
    log_path = tmp / "caddy.log"
    log = log_path.open("w")
    server = subprocess.Popen(
        [caddy, "run", "--adapter", "caddyfile", "--config", str(config)], env=env, stdout=log, stderr=log
    )
    try:
        for port in (https, http, api):
            _wait_for(port, server, log_path)
        root = data / "caddy" / "pki" / "authorities" / "local" / "root.crt"
        deadline = time.monotonic() + 30
        while not root.exists():
            assert time.monotonic() < deadline, log_path.read_text(encoding="utf-8")
            time.sleep(0.2)
        yield Site(https, http, api, upstream.port, root, caddyfile)
    finally:
        server.terminate()
        server.wait(timeout=10)
        log.close()
        upstream.shutdown()
        upstream.server_close()


def _tls(site: Site, name: str | None, *, verify: bool = True) -> ssl.SSLSocket:
    """A TLS connection to the HTTPS site, sending ``name`` as SNI (None: no SNI)."""
    context = ssl.create_default_context(cafile=str(site.root))
    if not verify:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    raw = socket.create_connection(("127.0.0.1", site.https), timeout=10)
    try:
        return context.wrap_socket(raw, server_hostname=name)
    except BaseException:
        raw.close()
        raise


def _exchange(sock: socket.socket, request: bytes) -> bytes:
    sock.sendall(request)
    answer = b""
    while b"\r\n\r\n" not in answer:
        chunk = sock.recv(4096)
        if not chunk:
            break
        answer += chunk
    return answer


def test_the_site_serves_a_certificate_for_the_name_from_caddys_own_ca(site: Site) -> None:
    """The handshake verifies against Caddy's local root (the file fetched as tls-root.crt) for the
    name, and the request reaches Open WebUI with the forwarded scheme and HSTS on the answer."""
    with _tls(site, NAME) as tls:
        cert = tls.getpeercert()
        assert cert is not None
        assert ("DNS", NAME) in cert["subjectAltName"]
        issuer = [str(item[1]) for part in cert["issuer"] for item in part if item[0] == "commonName"]
        assert "Caddy Local Authority" in issuer[0]
        answer = _exchange(tls, f"GET /api/config HTTP/1.1\r\nHost: {NAME}\r\nConnection: close\r\n\r\n".encode())
        while chunk := tls.recv(4096):
            answer += chunk
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200"), head
    assert b"strict-transport-security: max-age=31536000" in head.lower()
    seen = json.loads(body)
    assert seen["path"] == "/api/config"
    assert seen["headers"]["x-forwarded-proto"] == "https"
    assert seen["headers"]["host"] == NAME


def test_the_certificate_does_not_verify_against_the_system_store(site: Site) -> None:
    """The root is Caddy's own: a client that has not been handed tls-root.crt refuses the site."""
    context = ssl.create_default_context()
    with (
        socket.create_connection(("127.0.0.1", site.https), timeout=10) as raw,
        pytest.raises(ssl.SSLCertVerificationError),
    ):
        context.wrap_socket(raw, server_hostname=NAME)


@pytest.mark.parametrize("name", ["other.box.lan", "127.0.0.1", None])
def test_another_name_gets_no_certificate(site: Site, name: str | None) -> None:
    """Caddy holds a certificate for the name alone: another SNI, an address or none fails the
    handshake on the server's side (this client verifies nothing here)."""
    with pytest.raises(ssl.SSLError):
        _tls(site, name, verify=False).close()


@pytest.mark.parametrize("path", ["/", "/c/123?x=1"])
def test_plain_http_answers_308_to_the_https_site(site: Site, path: str) -> None:
    """Every request on the HTTP port, by any Host, is 308 to the same path on the HTTPS site."""
    for host in (NAME, "192.168.1.50"):
        with socket.create_connection(("127.0.0.1", site.http), timeout=10) as sock:
            answer = _exchange(sock, f"GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n".encode())
        head = answer.partition(b"\r\n\r\n")[0].decode()
        assert head.startswith("HTTP/1.1 308"), head
        assert f"location: https://{NAME}:{site.https}{path}" in head.lower(), head


def test_a_websocket_upgrade_reaches_open_webui_and_carries_frames(site: Site) -> None:
    """Socket.IO's upgrade passes through reverse_proxy: 101 from the upstream, then bytes both ways."""
    key = base64.b64encode(os.urandom(16)).decode()
    request = (
        f"GET /ws/socket.io/?EIO=4&transport=websocket HTTP/1.1\r\nHost: {NAME}\r\nUpgrade: websocket\r\n"
        f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n"
        f"Origin: https://{NAME}:{site.https}\r\n\r\n"
    ).encode()
    with _tls(site, NAME) as tls:
        head = _exchange(tls, request).partition(b"\r\n\r\n")[0].decode()
        assert head.startswith("HTTP/1.1 101"), head
        expected = base64.b64encode(hashlib.sha1((key + WS_GUID).encode()).digest()).decode()
        assert f"sec-websocket-accept: {expected.lower()}" in head.lower()
        tls.sendall(b"\x81\x05hello")
        echoed = b""
        while len(echoed) < 7:
            echoed += tls.recv(64)
        assert echoed == b"\x81\x05hello"


def _probe(**args: Any) -> tuple[int, dict[str, Any]]:
    """The role's llmrig_tls_probe module, run by ansible on this machine; its exit code and result."""
    env = {**os.environ, "ANSIBLE_LOAD_CALLBACK_PLUGINS": "1", "ANSIBLE_STDOUT_CALLBACK": "ansible.posix.json"}
    command = [str(BIN / "ansible"), "localhost", "-c", "local", "-i", "localhost,", "-m", "llmrig_tls_probe"]
    command += ["-e", f"ansible_python_interpreter={sys.executable}"]
    done = subprocess.run(
        [*command, "-a", json.dumps(args)], cwd=REPO, env=env, capture_output=True, text=True, check=False, timeout=120
    )
    result: dict[str, Any] = json.loads(done.stdout)["plays"][0]["tasks"][0]["hosts"]["localhost"]
    return done.returncode, result


def test_the_probe_module_reports_the_expiry_and_the_redirect(site: Site) -> None:
    """What site.yml and verify.yml run: the certificate for the name verifies against the root,
    expires within Caddy's 12-hour lifetime, and plain HTTP answers 308 to the name; another name
    or the system's store alone fails the task."""
    code, found = _probe(https_port=site.https, http_port=site.http, server_name=NAME, ca_file=str(site.root))
    assert code == 0, found.get("msg")
    assert 0 < found["days_left"] <= 0.5
    assert found["issuer"].startswith("Caddy Local Authority")
    assert (found["https_status"], found["http_status"]) == (200, 308)
    assert found["http_location"] == f"https://{NAME}:{site.https}/"
    for wrong in ({"server_name": "other.box.lan", "ca_file": str(site.root)}, {"server_name": NAME, "ca_file": ""}):
        code, found = _probe(https_port=site.https, **wrong)
        assert code != 0
        assert found["msg"].startswith(f"HTTPS to {wrong['server_name']} at 127.0.0.1:{site.https} failed"), found


def test_an_address_as_the_name_gets_a_certificate_for_that_address(tmp_path: Path) -> None:
    """tls_server_name an IP address (the inventory name, when that is one): Caddy's CA signs the
    address, which a client reaching it without SNI verifies; the role's probe dials the address."""
    https, http = free_ports()[0], free_ports()[0]
    knobs = _knobs(reverse_proxy_enabled=False, tls_server_name="127.0.0.1", tls_https_port=https, tls_http_port=http)
    config = tmp_path / "Caddyfile"
    config.write_text(_render("Caddyfile.j2", knobs), encoding="utf-8")
    env = {**os.environ, "HOME": str(tmp_path), "XDG_CONFIG_HOME": str(tmp_path / "config")}
    env["XDG_DATA_HOME"] = str(tmp_path / "data")
    log_path = tmp_path / "caddy.log"
    with log_path.open("w") as log:
        command = ["/usr/bin/caddy", "run", "--adapter", "caddyfile", "--config", str(config)]
        server = subprocess.Popen(command, env=env, stdout=log, stderr=log)
        try:
            _wait_for(https, server, log_path)
            root = tmp_path / "data" / "caddy" / "pki" / "authorities" / "local" / "root.crt"
            code, found = _probe(address="127.0.0.1", https_port=https, http_port=http, server_name="127.0.0.1",
                                 ca_file=str(root))  # fmt: skip
            assert code == 0, found.get("msg")
            assert (found["http_status"], found["http_location"]) == (308, f"https://127.0.0.1:{https}/")
        finally:
            server.terminate()
            server.wait(timeout=10)


def test_the_api_site_is_unchanged_beside_the_https_site(site: Site) -> None:
    """With reverse_proxy_tls off, the API proxy's site is the same text as without TLS and still
    answers plain HTTP: /health without the key, 401 on /v1 without it."""
    knobs = _knobs(tls_enabled=False, reverse_proxy_port=site.api, open_webui_port=site.upstream)
    plain = _render("Caddyfile.j2", knobs, f"127.0.0.1:{site.upstream}")

    def api_block(text: str) -> str:
        start = text.index(f"http://:{site.api} {{")
        return text[start : text.index("\n}\n", start)]

    assert api_block(site.caddyfile) == api_block(plain)
    assert "auto_https off" in plain
    assert "tls internal" not in plain
    for path, status in (("/health", b"200"), ("/v1/models", b"401")):
        with socket.create_connection(("127.0.0.1", site.api), timeout=10) as sock:
            answer = _exchange(sock, f"GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
        assert answer.startswith(b"HTTP/1.1 " + status), answer[:200]


def test_the_api_site_serves_https_with_reverse_proxy_tls(tmp_path: Path) -> None:
    """reverse_proxy_tls: the API site is https at the name with the same CA; caddy accepts it."""
    caddyfile = _render("Caddyfile.j2", _knobs(reverse_proxy_tls=True))
    assert f"https://{NAME}:8001 {{\n\ttls internal\n\tbind 127.0.0.1" in caddyfile
    assert caddyfile.count("tls internal") == 2
    checked = _validate(caddyfile, tmp_path)
    assert checked.returncode == 0, checked.stderr[-2000:]


def test_acme_asks_the_public_ca_with_the_email(tmp_path: Path) -> None:
    """tls_acme_email: ACME for the name (no local CA, nothing about the trust store), caddy accepts it."""
    caddyfile = _render("Caddyfile.j2", _knobs(tls_server_name="chat.example.org", tls_acme_email="ops@example.org"))
    assert "tls ops@example.org" in caddyfile
    assert "email ops@example.org" in caddyfile
    assert "tls internal" not in caddyfile
    assert "skip_install_trust" not in caddyfile
    assert "https://chat.example.org:443 {" in caddyfile
    assert "redir https://chat.example.org{uri} 308" in caddyfile
    checked = _validate(caddyfile, tmp_path)
    assert checked.returncode == 0, checked.stderr[-2000:]


def test_the_https_site_alone_runs_the_proxy_without_the_key(tmp_path: Path) -> None:
    """Only HTTPS for Open WebUI (no API proxy): no API site, no key file, the capability to bind
    443 and 80, loopback and the client networks only (tls internal needs no internet), and the
    unit passes systemd-analyze verify with an exposure score of 2.0 or below."""
    knobs = _knobs(reverse_proxy_enabled=False)
    caddyfile = _render("Caddyfile.j2", knobs)
    assert "LLMRIG_API_KEY" not in caddyfile
    assert "http://:8001" not in caddyfile
    assert _validate(caddyfile, tmp_path).returncode == 0
    unit = _render("llmrig-proxy.service.j2", knobs)
    lines = unit.splitlines()
    assert not [line for line in lines if line.startswith("EnvironmentFile=")]
    assert "CapabilityBoundingSet=CAP_NET_BIND_SERVICE" in lines
    assert "IPAddressAllow=localhost 192.168.1.0/24" in lines
    path = tmp_path / "llmrig-proxy.service"
    path.write_text(unit, encoding="utf-8")
    verify = subprocess.run(["systemd-analyze", "verify", str(path)], capture_output=True, text=True, check=False)
    assert (verify.returncode, verify.stderr.strip()) == (0, ""), verify.stderr
    security = subprocess.run(
        ["systemd-analyze", "security", "--offline=true", str(path)], capture_output=True, text=True, check=False
    )
    score = re.search(r"Overall exposure level for llmrig-proxy\.service: ([0-9.]+)", security.stdout)
    assert score is not None, security.stdout[-2000:] + security.stderr
    assert float(score.group(1)) <= 2.0, security.stdout
    acme = _render("llmrig-proxy.service.j2", _knobs(tls_acme_email="ops@example.org")).splitlines()
    assert "IPAddressDeny=any" not in acme  # the CA is on the internet


def test_the_firewall_opens_https_and_http_instead_of_open_webuis_port() -> None:
    """With TLS on, the client networks get the HTTPS and HTTP ports; Open WebUI, on loopback, none."""
    knobs = {
        "inference_engine": "vllm",
        "vllm_host": "127.0.0.1",
        "vllm_port": 8000,
        "open_webui_enabled": True,
        "open_webui_host": "127.0.0.1",
        "open_webui_port": 8080,
        "reverse_proxy_enabled": False,
        "tls_enabled": True,
        "tls_https_port": 443,
        "tls_http_port": 80,
        "llmrig_allowed_client_cidrs": ["192.168.1.0/24"],
        "llmrig_ssh_allowed_cidrs": [],
    }
    rules = [(rule["name"], rule["port"]) for rule in firewall_rules(knobs, OVER_SSH) if rule["name"] != "ssh"]
    assert rules == [("https", 443), ("http", 80)]
    off = {**knobs, "tls_enabled": False, "open_webui_host": "0.0.0.0"}
    assert [(r["name"], r["port"]) for r in firewall_rules(off, OVER_SSH) if r["name"] != "ssh"] == [
        ("open_webui", 8080)
    ]
