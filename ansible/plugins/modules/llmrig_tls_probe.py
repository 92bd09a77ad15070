#!/usr/bin/python
"""Ansible module: read the certificate an HTTPS site serves for a name, verified against a CA, and
the answer to one plain request; the HTTP side's redirect with it. Python's ssl only: no openssl
command line, no cryptography package on the host."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: llmrig_tls_probe
short_description: Check the certificate an HTTPS site serves for a name, its expiry, and the HTTP redirect
description:
  - Connects to O(address) on O(https_port), sends O(server_name) as SNI, verifies the certificate
    chain against O(ca_file) (or the system's store when it is empty) and the name, and reports
    when the certificate expires; then sends GET / with the name as Host and reports the status.
  - With O(http_port), sends GET / over plain HTTP there and reports the status and Location.
  - Fails when the handshake or the verification fails. Never changes anything.
options:
  address:
    description: Address to connect to (the site listens there; the name need not resolve).
    type: str
    default: 127.0.0.1
  https_port:
    description: TCP port of the HTTPS site.
    type: int
    required: true
  server_name:
    description: Name the certificate must be for (sent as SNI and Host).
    type: str
    required: true
  ca_file:
    description: PEM file of the CA root to trust; empty = the system's trust store (ACME).
    type: path
    default: ""
  http_port:
    description: TCP port of the plain HTTP side to read the redirect from; 0 = none.
    type: int
    default: 0
  timeout_s:
    description: Seconds for each connection.
    type: float
    default: 10
  wait_s:
    description:
      - Seconds to keep trying the HTTPS side while it fails (the certificate is issued just after
        Caddy starts; an ACME order takes longer); 0 = one try.
    type: float
    default: 0
author: llmrig
"""

EXAMPLES = r"""
- name: Read the certificate of the Open WebUI site
  llmrig_tls_probe:
    https_port: 443
    server_name: box.lan
    ca_file: /var/lib/llmrig-proxy/data/caddy/pki/authorities/local/root.crt
    http_port: 80
"""

RETURN = r"""
not_after:
  description: The certificate's notAfter, as the ssl module prints it.
  type: str
  returned: success
days_left:
  description: Days until the certificate expires (Caddy's own CA issues 12-hour certificates and renews them).
  type: float
  returned: success
issuer:
  description: The issuer's common name.
  type: str
  returned: success
https_status:
  description: Status of GET / over HTTPS (502 while the upstream is down).
  type: int
  returned: success
http_status:
  description: Status of GET / over plain HTTP (0 without http_port).
  type: int
  returned: success
http_location:
  description: Location header of that answer.
  type: str
  returned: success
"""

import http.client
import socket
import ssl
import time
from typing import Any

from ansible.module_utils.basic import AnsibleModule


def _https(params: dict[str, Any]) -> dict[str, Any]:
    context = ssl.create_default_context(cafile=params["ca_file"] or None)
    raw = socket.create_connection((params["address"], params["https_port"]), timeout=params["timeout_s"])
    with context.wrap_socket(raw, server_hostname=params["server_name"]) as tls:
        cert = tls.getpeercert() or {}
        connection = http.client.HTTPConnection(
            params["server_name"], params["https_port"], timeout=params["timeout_s"]
        )
        connection.sock = tls
        connection.request("GET", "/")
        status = connection.getresponse().status
    not_after = str(cert.get("notAfter", ""))
    issuer = next((str(item[1]) for part in cert.get("issuer", ()) for item in part if item[0] == "commonName"), "")
    return {
        "not_after": not_after,
        "days_left": round((ssl.cert_time_to_seconds(not_after) - time.time()) / 86400, 2),
        "issuer": issuer,
        "https_status": status,
    }


def _https_within(params: dict[str, Any]) -> dict[str, Any]:
    """:func:`_https`, tried every 2 s until it succeeds or ``wait_s`` has passed (the last error raised)."""
    deadline = time.monotonic() + params["wait_s"]
    while True:
        try:
            return _https(params)
        except (OSError, ssl.SSLError, http.client.HTTPException):
            if time.monotonic() + 2 > deadline:
                raise
            time.sleep(2)


def _http(params: dict[str, Any]) -> dict[str, Any]:
    if not params["http_port"]:
        return {"http_status": 0, "http_location": ""}
    connection = http.client.HTTPConnection(params["address"], params["http_port"], timeout=params["timeout_s"])
    connection.putrequest("GET", "/", skip_host=True)
    connection.putheader("Host", params["server_name"])
    connection.endheaders()
    answer = connection.getresponse()
    return {"http_status": answer.status, "http_location": answer.getheader("Location") or ""}


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "address": {"type": "str", "default": "127.0.0.1"},
            "https_port": {"type": "int", "required": True},
            "server_name": {"type": "str", "required": True},
            "ca_file": {"type": "path", "default": ""},
            "http_port": {"type": "int", "default": 0},
            "timeout_s": {"type": "float", "default": 10},
            "wait_s": {"type": "float", "default": 0},
        },
        supports_check_mode=True,
    )
    params = module.params
    where = f"{params['server_name']} at {params['address']}:{params['https_port']}"
    try:
        found = _https_within(params)
    except (OSError, ssl.SSLError, http.client.HTTPException) as exc:
        module.fail_json(msg=f"HTTPS to {where} failed: {exc}")
    try:
        found.update(_http(params))
    except (OSError, http.client.HTTPException) as exc:
        module.fail_json(msg=f"plain HTTP to {params['address']}:{params['http_port']} failed: {exc}")
    module.exit_json(changed=False, **found)


if __name__ == "__main__":
    main()
