"""Real outcomes of the firewall role: ufw under systemd, and what a second network namespace
can reach. The namespace ("client") is joined to the container by a veth pair; its address
198.51.100.2 lies inside llmrig_allowed_client_cidrs (198.51.100.0/28), 198.51.100.200 outside.
Stand-in listeners (python3 -m http.server) hold the API proxy's port 8001 (vLLM itself stays on
loopback) and Open WebUI's 8080,
so a refused connection is the firewall's doing, not a missing server."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

HOST_SIDE = "198.51.100.1"
ALLOWED = "198.51.100.2"
OUTSIDE = "198.51.100.200"
ENGINE_PORT = 8001  # the API proxy's, in front of the engine
OTHER_PORT = 8080  # Open WebUI's, bound to loopback here: not in the list
SSH_PORT = 22

# Connect from `src` to `dst:port` and read the first bytes: "open <bytes>" or "closed <error>".
PROBE = """
import socket, sys
src, dst, port, hello = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4].encode()
try:
    with socket.create_connection((dst, port), timeout=3, source_address=(src, 0)) as conn:
        if hello:
            conn.sendall(hello)
        print("open", conn.recv(64).decode(errors="replace").splitlines()[0])
except OSError as error:
    print("closed", type(error).__name__)
"""


@pytest.fixture(scope="module")
def client(host: Any) -> Iterator[Any]:
    """The second namespace and the stand-in listeners, removed afterwards."""
    setup = [
        "ip netns add client",
        "ip link add fwt-h type veth peer name fwt-c",
        "ip link set fwt-c netns client",
        f"ip addr add {HOST_SIDE}/24 dev fwt-h",
        "ip link set fwt-h up",
        f"ip -n client addr add {ALLOWED}/24 dev fwt-c",
        f"ip -n client addr add {OUTSIDE}/24 dev fwt-c",
        "ip -n client link set fwt-c up",
        "ip -n client link set lo up",
    ]
    host.run_expect([0], " && ".join(setup))
    for port in (ENGINE_PORT, OTHER_PORT):
        host.run_expect([0], f"systemd-run --unit=stand-in-{port} python3 -m http.server {port} --bind 0.0.0.0")
    host.run_expect([0], "systemctl start ssh")
    for port in (ENGINE_PORT, OTHER_PORT, SSH_PORT):
        host.run_expect([0], f"timeout 20 sh -c 'until ss -ltn | grep -q \":{port} \"; do sleep 0.2; done'")
    yield host
    host.run(f"systemctl stop stand-in-{ENGINE_PORT} stand-in-{OTHER_PORT}; ip link del fwt-h; ip netns del client")


def _probe(host: Any, src: str, port: int, hello: str = "GET / HTTP/1.0\r\n\r\n", netns: bool = True) -> str:
    prefix = "ip netns exec client " if netns else ""
    dst = HOST_SIDE if netns else "127.0.0.1"
    return str(host.check_output(f"{prefix}python3 -c %s %s %s %s %s", PROBE, src, dst, str(port), hello))


def test_ufw_is_active_and_denies_incoming_by_default(host: Any) -> None:
    """ufw's boot unit is enabled and ufw is active: deny incoming, allow outgoing."""
    status = host.check_output("ufw status verbose")
    assert "Status: active" in status
    assert "Default: deny (incoming), allow (outgoing)" in status
    assert host.service("ufw").is_enabled


def test_only_ssh_the_api_proxy_and_the_https_site_are_allowed(host: Any) -> None:
    """The llmrig rules: SSH, the API proxy's port and the HTTPS site's two ports (tls_enabled, the
    default) from the client network, nothing for vLLM or Open WebUI on loopback."""
    added = [line for line in host.check_output("ufw show added").splitlines() if line.startswith("ufw ")]
    assert added == [
        "ufw allow from 198.51.100.0/28 to any port 22 proto tcp comment 'llmrig ssh'",
        "ufw allow from 198.51.100.0/28 to any port 8001 proto tcp comment 'llmrig reverse_proxy'",
        "ufw allow from 198.51.100.0/28 to any port 443 proto tcp comment 'llmrig https'",
        "ufw allow from 198.51.100.0/28 to any port 80 proto tcp comment 'llmrig http'",
    ]


def test_the_engine_port_answers_an_allowed_client(client: Any) -> None:
    assert _probe(client, ALLOWED, ENGINE_PORT).startswith("open HTTP/1.0 200")


def test_the_engine_port_is_refused_outside_the_allowed_networks(client: Any) -> None:
    assert _probe(client, OUTSIDE, ENGINE_PORT).startswith("closed")


def test_a_port_not_in_the_list_is_refused(client: Any) -> None:
    """Open WebUI's stand-in listens on every interface (it answers on loopback), yet the
    allowed client cannot reach it: its port is not in the list."""
    assert _probe(client, "127.0.0.1", OTHER_PORT, netns=False).startswith("open HTTP/1.0 200")
    assert _probe(client, ALLOWED, OTHER_PORT).startswith("closed")


def test_ssh_stays_reachable_after_the_policy_flips_to_deny(client: Any) -> None:
    """sshd greets the allowed client with its banner; outside the SSH networks it is refused."""
    assert _probe(client, ALLOWED, SSH_PORT, hello="").startswith("open SSH-2.0-")
    assert _probe(client, OUTSIDE, SSH_PORT, hello="").startswith("closed")
