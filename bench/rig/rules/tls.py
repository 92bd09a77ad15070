"""Rules on HTTPS in front of Open WebUI (the ``tls_*`` knobs, :mod:`bench.rig.tls`): ACME only
for a public name and with a port its challenges reach, Open WebUI behind the proxy on loopback,
and the proxy's ports its own."""

from __future__ import annotations

from bench.rig.engines import ENGINES
from bench.rig.open_webui_inputs import url_problem
from bench.rig.presets import Preset
from bench.rig.problems import Problem
from bench.rig.rules.knobs import Host, Knobs, as_bool, as_int, as_str, err
from bench.rig.rules.network import HOST_KNOBS, is_loopback
from bench.rig.rules.resources import PROXY_UNIT, port_holder
from bench.rig.tls import acme_name_problem, server_name_problem, tls_on

TLS_PORT_KNOBS = ("tls_https_port", "tls_http_port")
# The ports the CA's ACME challenges come to: HTTP-01 on 80, TLS-ALPN-01 on 443 (Caddy tries both).
ACME_HTTP_PORT = 80
ACME_TLS_PORT = 443


def _taken(knobs: Knobs) -> dict[str, int | None]:
    """The ports of the services beside the HTTPS site: every engine's (any may be switched to),
    Open WebUI's own, and the API proxy's when it runs."""
    knobs_taken = [engine.port_knob for engine in ENGINES] + ["open_webui_port"]
    if as_bool(knobs, "reverse_proxy_enabled"):
        knobs_taken.append("reverse_proxy_port")
    return {knob: as_int(knobs, knob) for knob in knobs_taken}


def _port_problems(knobs: Knobs, host: Host) -> list[Problem]:
    """Each of the proxy's two ports is a port, no other service's, and free on the host (or held by
    the proxy's own unit: a re-run)."""
    problems: list[Problem] = []
    taken = _taken(knobs)
    for knob in TLS_PORT_KNOBS:
        port = as_int(knobs, knob)
        if port is None or not 1 <= port <= 65535:
            problems += err(knob, f"must be a TCP port (1-65535), got {knobs.get(knob)!r}")
            continue
        owner = next((other for other, value in taken.items() if value == port), None)
        if owner is not None:
            problems += err(knob, f"port {port} is already taken by {owner}; give {knob} another port")
        elif holder := port_holder(host, port, "0.0.0.0", {PROXY_UNIT}):
            problems += err(knob, holder)
        taken[knob] = port
    return problems


def _acme_problems(knobs: Knobs) -> list[Problem]:
    """ACME (tls_acme_email set) needs a public DNS name and a port its challenges reach; a public
    name without it would get a certificate from Caddy's own CA, which no browser trusts for it."""
    name = as_str(knobs, "tls_server_name")
    if not as_str(knobs, "tls_acme_email"):
        if name and not acme_name_problem(name):
            return err(
                "tls_acme_email",
                f"is empty, so {name!r}, a public DNS name, would get a certificate from Caddy's own CA "
                "(tls internal); set it for ACME, or use a LAN name (.lan, .home.arpa, .internal)",
            )
        return []
    problems: list[Problem] = []
    if not tls_on(knobs):  # reverse_proxy_tls alone: no site on tls_http_port or tls_https_port
        return err(
            "tls_acme_email",
            "is set with tls_enabled off: ACME for the API site alone is not built (the CA's challenges come "
            "to ports 80 and 443, which only the Open WebUI site serves); turn tls_enabled on or leave "
            "tls_acme_email empty (tls internal)",
        )
    if "@" not in as_str(knobs, "tls_acme_email"):
        problems += err("tls_acme_email", f"{as_str(knobs, 'tls_acme_email')!r} is not an e-mail address")
    if problem := acme_name_problem(name):
        problems += err("tls_server_name", problem)
    if as_int(knobs, "tls_http_port") != ACME_HTTP_PORT and as_int(knobs, "tls_https_port") != ACME_TLS_PORT:
        problems += err(
            "tls_http_port",
            f"is {knobs.get('tls_http_port')} and tls_https_port {knobs.get('tls_https_port')}: the CA's ACME "
            "challenges come to port 80 (HTTP-01) or 443 (TLS-ALPN-01); set tls_http_port: 80 or tls_https_port: 443",
        )
    return problems


def rule_tls(knobs: Knobs, host: Host, device: str, preset: Preset) -> list[Problem]:
    """With HTTPS in front of Open WebUI: Open WebUI listens on loopback (only the proxy reaches it;
    refused whether or not the firewall is on, so the box never serves its password in plain HTTP
    beside the HTTPS site), open_webui_url is left to the proxy's name, the HTTPS and HTTP ports
    are the proxy's own, and ACME is asked for a public name only."""
    problems: list[Problem] = []
    if as_bool(knobs, "reverse_proxy_tls") or tls_on(knobs):
        if name_problem := server_name_problem(as_str(knobs, "tls_server_name")):
            return err("tls_server_name", name_problem)
        problems += _acme_problems(knobs)
    if not tls_on(knobs):
        return problems
    bind = as_str(knobs, "open_webui_host")
    if not is_loopback(bind):
        unfiltered = "" if as_bool(knobs, "llmrig_firewall_enabled") else " and llmrig_firewall_enabled is false"
        problems += err(
            "open_webui_host",
            f"is {bind} with tls_enabled true{unfiltered}: Open WebUI would serve passwords in plain HTTP beside the "
            "HTTPS site; bind it to 127.0.0.1 (the proxy reaches it there) or set tls_enabled: false",
        )
    proxy_bind = as_str(knobs, "reverse_proxy_host")
    proxy_off_loopback = as_bool(knobs, "reverse_proxy_enabled") and not is_loopback(proxy_bind)
    if (
        not knobs.get("llmrig_allowed_client_cidrs")
        and not proxy_off_loopback
        and all(is_loopback(as_str(knobs, k)) for k in HOST_KNOBS)
    ):
        # (with another service off loopback, rule_network or rule_reverse_proxy already says the list is empty)
        problems += err(
            "llmrig_allowed_client_cidrs",
            "is empty but the HTTPS site in front of Open WebUI (tls_enabled) listens on every interface; "
            "list the client networks",
        )
    url = as_str(knobs, "open_webui_url")
    if url and not url_problem(url.rstrip("/")):  # (rule_open_webui names a malformed one)
        problems += err(
            "open_webui_url",
            "must be '' with tls_enabled true: WEBUI_URL is then https://tls_server_name (with tls_https_port)",
        )
    return problems + _port_problems(knobs, host)
