"""HTTPS in front of Open WebUI (the ``tls_*`` knobs): the name and origin clients use, and which
names a public CA can issue for over ACME.

Caddy (the reverse_proxy role's llmrig-proxy.service) terminates TLS. Without ``tls_acme_email``
it issues from its own local CA (``tls internal``), which clients trust by its root certificate
(docs/tls.md); with it, from Let's Encrypt over ACME, which only issues for a public DNS name: not
an IP address, not a single label, and not a name under a suffix kept for private networks.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from typing import Any

from bench.rig.open_webui_inputs import HOST_NAME
from bench.rig.values import truthy

# Suffixes no public CA issues for (RFC 6762 .local, RFC 8375 .home.arpa, RFC 6761 and 2606's
# special-use names, and .lan, .home, .internal and .localdomain that home routers hand out).
PRIVATE_SUFFIXES = (
    ".local",
    ".lan",
    ".home",
    ".home.arpa",
    ".internal",
    ".localdomain",
    ".localhost",
    ".test",
    ".example",
    ".invalid",
    ".arpa",
    ".fritz.box",  # AVM's FRITZ!Box routers name LAN hosts under it
)
DEFAULT_HTTPS_PORT = 443


def https_url(name: str, port: Any) -> str:
    """The URL of the HTTPS site at ``name`` on ``port`` (the port left out when it is 443)."""
    host = f"[{name}]" if ":" in name else name
    number = int(str(port))
    return f"https://{host}" if number == DEFAULT_HTTPS_PORT else f"https://{host}:{number}"


def tls_on(knobs: Mapping[str, Any]) -> bool:
    """Whether Caddy serves Open WebUI over HTTPS: ``tls_enabled`` with ``open_webui_enabled``."""
    return truthy(knobs.get("tls_enabled")) and truthy(knobs.get("open_webui_enabled", True))


def server_name_problem(name: str) -> str:
    """Why ``name`` cannot be the HTTPS site's name ('' when it can): Caddy's site address and
    Open WebUI's origin take a DNS name or an IPv4 address; an IPv6 literal or a name with spaces
    would render a site for another name."""
    if not name:
        return ""
    try:
        address = ipaddress.ip_address(name)
    except ValueError:
        if HOST_NAME.fullmatch(name):
            return ""
        return f"{name!r} is no DNS name (letters, digits, '-' and dots) or IPv4 address"
    if address.version == 6:
        return f"{name!r} is an IPv6 address; give the box a DNS name (or its IPv4 address)"
    return ""


def acme_name_problem(name: str) -> str:
    """Why a public CA cannot issue for ``name`` over ACME ('' when it can)."""
    if not name:
        return "is empty; ACME (tls_acme_email set) needs the public DNS name clients use"
    try:
        ipaddress.ip_address(name)
    except ValueError:
        pass
    else:
        return f"{name!r} is an IP address; ACME issues for public DNS names (leave tls_acme_email empty: tls internal)"
    if not HOST_NAME.fullmatch(name):
        return f"{name!r} is not a DNS name"
    lowered = name.lower().rstrip(".")
    if "." not in lowered or lowered == "localhost" or lowered.endswith(PRIVATE_SUFFIXES):
        return (
            f"{name!r} is not a public DNS name, so ACME cannot issue for it; "
            "leave tls_acme_email empty (tls internal) or give the public name"
        )
    return ""
