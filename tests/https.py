"""HTTPS to a site by its name, from the host: the TCP connection goes to an address of the
test's choosing (a port published on the host's loopback), while TLS carries the site's name
(SNI) and checks the certificate against that name and the given CA's root only, as a client on
the LAN that trusts the box's CA would. Plain HTTP goes the same way with the name in Host."""

from __future__ import annotations

import http.client
import socket
import ssl
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Answer:
    status: int
    headers: Mapping[str, str]
    body: str


class _Dialled(http.client.HTTPSConnection):
    """An HTTPS connection to ``name`` (SNI, Host and the certificate check) over a TCP
    connection to ``address``."""

    def __init__(self, name: str, port: int, address: str, context: ssl.SSLContext, timeout: float) -> None:
        super().__init__(name, port, context=context, timeout=timeout)
        self._address = address
        self._tls = context

    def connect(self) -> None:
        raw = socket.create_connection((self._address, self.port), self.timeout)
        self.sock = self._tls.wrap_socket(raw, server_hostname=self.host)


def request(
    url_name: str,
    port: int,
    path: str,
    *,
    address: str = "127.0.0.1",
    ca_file: Path | None = None,
    method: str = "GET",
    headers: Mapping[str, str] | None = None,
    timeout: float = 60,
) -> Answer:
    """``method path`` at ``url_name:port`` reached through ``address``: over HTTPS when
    ``ca_file`` is given (its root the only one trusted), else plain HTTP with the name in Host.
    Redirects are not followed: a 308 is an answer."""
    connection: http.client.HTTPConnection
    if ca_file is not None:
        context = ssl.create_default_context(cafile=str(ca_file))
        connection = _Dialled(url_name, port, address, context, timeout)
    else:
        connection = http.client.HTTPConnection(address, port, timeout=timeout)
    try:
        sent = {"Host": f"{url_name}:{port}", **(headers or {})}
        connection.request(method, path, headers=sent)
        answer = connection.getresponse()
        body = answer.read().decode(errors="replace")
        return Answer(answer.status, {key.lower(): value for key, value in answer.getheaders()}, body)
    finally:
        connection.close()
