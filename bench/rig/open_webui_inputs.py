"""What Open WebUI's knobs must look like, one check per knob, each returning what is wrong ('' when
nothing is): preflight's rule (bench.rig.rules.open_webui) and the environment the role renders
(bench.rig.open_webui) read them through the same functions.

Facts read in the open-webui 0.12.4 wheel: the admin's e-mail passes Open WebUI's own check
(``validate_email_format``: ``...@localhost``, or a ``@`` and a dot in the domain);
``DEFAULT_MODEL_PARAMS`` is merged into every chat request, where Open WebUI casts
``temperature``, ``top_p``, ``min_p``, ``frequency_penalty`` and ``presence_penalty`` with
``float()``, ``max_tokens`` with ``int()``, and reads ``stop`` item by item (a string would become
one stop per character); ``CORS_ALLOW_ORIGIN`` entries must be http(s) URLs with a host.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

# An exact release as pip pins one (PEP 440 without ranges, wildcards or local labels).
PINNED_VERSION = re.compile(r"\d+(\.\d+)*((a|b|rc)\d+)?(\.post\d+)?(\.dev\d+)?")
# Open WebUI's own rule, anchored; no whitespace anywhere.
EMAIL = re.compile(r"[^@\s]+@(localhost|[^@\s]+\.[^@\s]+)")
# A host name (RFC 1123 labels; an IPv4 address is one too).
HOST_NAME = re.compile(r"(?!-)[A-Za-z0-9-]{1,63}(?<!-)(\.(?!-)[A-Za-z0-9-]{1,63}(?<!-))*\.?")

NUMBER = "a number"
WHOLE = "a whole number"
TEXT = "a string"
# Model parameter -> what its value must be (Open WebUI's casts, and what the engines take).
PARAM_TYPES: Mapping[str, str] = {
    "temperature": NUMBER,
    "top_p": NUMBER,
    "min_p": NUMBER,
    "frequency_penalty": NUMBER,
    "presence_penalty": NUMBER,
    "repetition_penalty": NUMBER,
    "top_k": WHOLE,
    "max_tokens": WHOLE,
    "seed": WHOLE,
    "reasoning_effort": TEXT,
    "system": TEXT,
    "stop": "a list of strings",
    "function_calling": "native or legacy",
    "stream_response": "true or false",
    "logit_bias": "a mapping",
    "response_format": "a mapping",
}


def _is_address(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def url_problem(url: str) -> str:
    """What is wrong with ``url`` as Open WebUI's public URL ('' = fine; '' itself is allowed)."""
    if not url:
        return ""
    if re.search(r"\s", url):
        return "has a space in it; give a URL such as https://chat.example.org"
    try:
        parts = urlsplit(url)
        _ = parts.port  # raises on a port that is no number or out of range
    except ValueError:
        return "is not a URL (a bad port or address); give one such as https://chat.example.org"
    if parts.scheme not in ("http", "https"):
        return "needs http:// or https:// in front, such as https://chat.example.org"
    if "@" in parts.netloc or not parts.hostname:
        return "needs a host and no user name, such as https://chat.example.org"
    if not (HOST_NAME.fullmatch(parts.hostname) or _is_address(parts.hostname)):
        return "has a host that is no name or address; give one such as https://chat.example.org"
    if parts.query or parts.fragment:
        return "must not have a query or a fragment (? or #)"
    return ""


def version_problem(version: Any) -> str:
    """What is wrong with ``version`` as the pinned open-webui release ('' = fine)."""
    if isinstance(version, str) and PINNED_VERSION.fullmatch(version.strip()):
        return ""
    return "must be one exact release such as 0.12.4 (no latest, range or wildcard)"


def email_problem(email: Any) -> str:
    """What is wrong with ``email`` as the admin's e-mail ('' = fine)."""
    if isinstance(email, str) and EMAIL.fullmatch(email):
        return ""
    return "must be an e-mail address with a domain, such as admin@example.org"


def _fits(kind: str, value: Any) -> bool:
    if kind == NUMBER:
        return isinstance(value, int | float) and not isinstance(value, bool)
    if kind == WHOLE:
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == TEXT:
        return isinstance(value, str)
    if kind == "a list of strings":
        return isinstance(value, list) and all(isinstance(item, str) for item in value)
    if kind == "native or legacy":
        return value in ("native", "legacy")
    if kind == "true or false":
        return isinstance(value, bool)
    return isinstance(value, Mapping)


def params_problem(params: Any) -> str:
    """What is wrong with ``params`` as the parameters added to every chat ('' = fine): a mapping
    (not a string) whose known parameters have the type Open WebUI and the engines read."""
    if not isinstance(params, Mapping):
        return "must be a mapping such as {temperature: 0.7}, not " + type(params).__name__
    for name, value in params.items():
        kind = PARAM_TYPES.get(str(name))
        if kind is not None and not _fits(kind, value):
            return f"{name} must be {kind}, got {value!r}"
    return ""
