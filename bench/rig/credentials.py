"""Credentials inside URLs (``https://user:token@mirror/simple``) kept off command lines and records.

- :func:`pip_config`: the ``llmrig_pip_*`` options as the text of a pip configuration file, which
  the roles write 0600 and hand to pip through ``PIP_CONFIG_FILE`` (pip's argv, and so the
  process list and the pip task's ``cmd``, carry no URL);
- :func:`url_parts`: a URL split into the URL without its credentials and the user name and
  password, for a download module's own credential options (whose password Ansible never shows);
- :func:`redact_url`: a URL as a record (deployment.json, a message) may show it: ``***@host``.
"""

from __future__ import annotations

from collections.abc import Sequence
from urllib.parse import unquote, urlsplit, urlunsplit

from bench.errors import ConfigError

REDACTED = "***"


def _netloc_without_credentials(netloc: str) -> str:
    return netloc.rpartition("@")[2]


def redact_url(url: str) -> str:
    """``url`` with any ``user:password@`` (or ``token@``) replaced by ``***@``; unchanged without one."""
    parts = urlsplit(str(url))
    if "@" not in parts.netloc:
        return str(url)
    host = _netloc_without_credentials(parts.netloc)
    return urlunsplit(parts._replace(netloc=f"{REDACTED}@{host}"))


def url_parts(url: str) -> dict[str, str]:
    """``url`` without its credentials, and the decoded ``username`` and ``password`` ('' when absent)."""
    parts = urlsplit(str(url))
    if "@" not in parts.netloc:
        return {"url": str(url), "username": "", "password": ""}
    userinfo = parts.netloc.rpartition("@")[0]
    username, _, password = userinfo.partition(":")
    bare = urlunsplit(parts._replace(netloc=_netloc_without_credentials(parts.netloc)))
    return {"url": bare, "username": unquote(username), "password": unquote(password)}


def _value(name: str, value: object) -> str:
    text = str(value).strip()
    if not text or any(char in text for char in "\r\n"):
        raise ConfigError(f"{name}: {redact_url(text)!r} cannot go into pip's configuration (empty or a line break)")
    return text


def pip_config(no_index: bool, index_url: str, extra_index_urls: Sequence[str], find_links: Sequence[str]) -> str:
    """The ``[global]`` section of a pip configuration file with these options ('' or an empty
    list leaves an option out, so pip's default holds); several values go one per indented line."""
    lines = ["[global]", f"no-index = {'true' if no_index else 'false'}"]
    if str(index_url).strip():
        lines.append(f"index-url = {_value('llmrig_pip_index_url', index_url)}")
    for option, values, knob in (
        ("extra-index-url", extra_index_urls, "llmrig_pip_extra_index_urls"),
        ("find-links", find_links, "llmrig_pip_find_links"),
    ):
        if values:
            lines.append(f"{option} =")
            lines += [f"    {_value(knob, value)}" for value in values]
    return "\n".join(lines) + "\n"
