"""Open WebUI's service environment: how Ansible owns its connection to the active engine, its
accounts and its load on the engine (the open_webui role renders it into a 0600 EnvironmentFile).

Facts read in the open-webui 0.12.4 wheel: with ``ENABLE_PERSISTENT_CONFIG=False`` every setting
comes from this environment at each start (none from the database), URLs in
``OPENAI_API_BASE_URLS`` are used as written (a trailing slash asks for ``//models``), lists are
``;``-separated, and ``DEFAULT_MODEL_PARAMS`` is JSON merged into every chat request.
``CORS_ALLOW_ORIGIN`` (``*`` when unset) is also the list of origins its Socket.IO server accepts:
a browser whose page came from an origin not listed gets its WebSocket refused, so the list holds
every origin the box serves the UI at.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from bench.errors import ConfigError
from bench.rig.engines import Engine
from bench.rig.open_webui_inputs import params_problem, url_problem
from bench.rig.tls import https_url, tls_on
from bench.rig.values import FALSE_STRINGS, WILDCARD_HOSTS, truthy

# Knob -> Open WebUI's variable for each background generation that sends extra requests to the
# model (users report title generation alone slowing a first answer 2-3x on a few-slot engine).
TASK_KNOBS = {
    "open_webui_title_generation": ("ENABLE_TITLE_GENERATION",),
    "open_webui_tags_generation": ("ENABLE_TAGS_GENERATION",),
    "open_webui_follow_up_generation": ("ENABLE_FOLLOW_UP_GENERATION",),
    "open_webui_autocomplete_generation": ("ENABLE_AUTOCOMPLETE_GENERATION",),
    "open_webui_query_generation": ("ENABLE_RETRIEVAL_QUERY_GENERATION", "ENABLE_SEARCH_QUERY_GENERATION"),
}
SECRET_VARIABLES = ("OPENAI_API_KEYS", "WEBUI_SECRET_KEY", "WEBUI_ADMIN_PASSWORD")


@dataclass(frozen=True, slots=True)
class Connection:
    """What the UI talks to: the active engine's OpenAI-compatible base URL, its key and model."""

    base_url: str
    api_key: str
    served_model_name: str


@dataclass(frozen=True, slots=True)
class Secrets:
    """The values that never leave 0600 files: the session secret and the first admin's password."""

    secret_key: str
    admin_password: str


@dataclass(frozen=True, slots=True)
class Host:
    """What the host is called and the addresses it has (Ansible's network facts): the names and
    addresses a browser may reach Open WebUI by when it listens on every interface."""

    names: tuple[str, ...] = ()
    addresses: tuple[str, ...] = ()


def origin(url: str) -> str:
    """The origin a browser sends for pages under ``url``: scheme, host and port (a default port
    left out), lower case, no path."""
    parts = urlsplit(url)
    host = (parts.hostname or "").lower()
    host = f"[{host}]" if ":" in host else host
    default = {"http": 80, "https": 443}.get(parts.scheme)
    port = "" if parts.port in (None, default) else f":{parts.port}"
    return f"{parts.scheme}://{host}{port}"


def own_origins(url: str, bind: str, port: int, host: Host) -> list[str]:
    """Every origin Open WebUI is served at, for CORS_ALLOW_ORIGIN (never ``*``): the origin of
    ``url`` when the public URL is set; otherwise http on ``port`` at the bind address, or, bound
    to every interface, at loopback, the host's names and each address of the bind's family
    (link-local IPv6 addresses left out: a browser's origin carries no zone)."""
    if url:
        return [origin(url)]
    if bind in WILDCARD_HOSTS:
        family = [a for a in host.addresses if bind == "::" or ":" not in a]
        hosts = ["127.0.0.1", "localhost", *host.names, *(a for a in family if not a.lower().startswith("fe80:"))]
    elif bind in ("127.0.0.1", "localhost", "::1"):
        hosts = [bind, "localhost"]
    else:
        hosts = [bind, *host.names]
    found: list[str] = []
    for name in hosts:
        entry = origin(f"http://{f'[{name}]' if ':' in name else name}:{port}")
        if name and entry not in found:
            found.append(entry)
    return found


def _set(value: Any) -> bool:
    """Whether a knob is set: true, a number other than 0, or a string that is neither empty nor
    one Ansible reads as false (a parser's name is set; ``"False"`` from a rendered bool is not)."""
    if isinstance(value, str):
        text = value.strip().lower()
        return bool(text) and text not in FALSE_STRINGS
    return bool(value)


def native_tools(engine: Engine, knobs: Mapping[str, Any], preset_tool_parser: str) -> bool:
    """Whether ``engine`` takes OpenAI ``tools`` (Open WebUI's native function calling sends them
    with every chat): when its row of the engine table names tool knobs, only with every one of
    them set in ``knobs`` (vLLM: a tool parser and auto tool choice); otherwise when the preset
    has a tool-call format (``preset_tool_parser`` not empty)."""
    if engine.tool_knobs:
        return all(_set(knobs.get(knob)) for knob in engine.tool_knobs)
    return bool(str(preset_tool_parser or "").strip())


def _flag(value: Any) -> str:
    return "True" if truthy(value) else "False"


def _one_item(name: str, value: str) -> str:
    """``value`` for a ``;``-separated list variable: it may not hold the separator itself."""
    if ";" in value:
        raise ConfigError(f"{name}: {value!r} holds ';', which Open WebUI reads as a list separator")
    return value


def default_model_params(params: Mapping[str, Any], stop: Sequence[str], *, native_tools: bool) -> dict[str, Any]:
    """``open_webui_default_model_params`` with the preset's stop strings when it sets none, and,
    for a model without a tool-call format (its preset names no parser), Open WebUI's prompt-based
    ``legacy`` function calling: its default, ``native``, sends ``tools`` with every chat, which
    vLLM refuses without a tool parser ("auto" tool choice requires --enable-auto-tool-choice)."""
    merged = dict(params)
    if stop and "stop" not in merged:
        merged["stop"] = list(stop)
    if not native_tools:
        merged.setdefault("function_calling", "legacy")
    return merged


def service_env(
    knobs: Mapping[str, Any],
    connection: Connection,
    secrets: Secrets,
    *,
    data_dir: str,
    static_dir: str,
    embedding_model_dir: str,
    stop: Sequence[str] = (),
    native_tools: bool = True,
    host: Host = Host(),
) -> dict[str, str]:
    """Every variable of Open WebUI's unit environment.

    ``knobs`` holds the open_webui_* knobs; ``embedding_model_dir`` is the shipped embedding
    model's directory ('' when ``open_webui_local_embeddings`` is off: retrieval is bypassed and
    attached documents go into the prompt whole); ``stop`` is the preset's stop strings, and
    ``native_tools`` whether the served model has a tool-call format (see :func:`default_model_params`),
    and ``host`` the names and addresses the UI is reached by (see :func:`own_origins`).
    """
    base_url = connection.base_url.rstrip("/")
    if not urlsplit(base_url).netloc:
        raise ConfigError(
            f"engine base URL {connection.base_url!r} has no host (llmrig_engine.local_base_url; a deployment.json "
            "of schema_version 1 records none: run site.yml)"
        )
    local_embeddings = truthy(knobs["open_webui_local_embeddings"])
    if local_embeddings and not embedding_model_dir:
        raise ConfigError("open_webui_local_embeddings: true, but the embedding model's directory is unknown")
    params = knobs["open_webui_default_model_params"]
    if problem := params_problem(params):
        raise ConfigError(f"open_webui_default_model_params: {problem}")
    url = str(knobs["open_webui_url"]).rstrip("/")
    if problem := url_problem(url):
        raise ConfigError(f"open_webui_url: {url!r} {problem}")
    offline = truthy(knobs["open_webui_offline_mode"])
    env = {
        # Ansible owns the connection: nothing is read back from the database.
        "ENABLE_PERSISTENT_CONFIG": "False",
        "ENABLE_OPENAI_API": "True",
        "OPENAI_API_BASE_URLS": _one_item("OPENAI_API_BASE_URLS", base_url),
        "OPENAI_API_KEYS": _one_item("OPENAI_API_KEYS", connection.api_key),
        # Ollama is reached through its OpenAI-compatible /v1 like every engine.
        "ENABLE_OLLAMA_API": "False",
        "DEFAULT_MODELS": connection.served_model_name,
        "DEFAULT_MODEL_PARAMS": json.dumps(
            default_model_params(params, stop, native_tools=native_tools), sort_keys=True
        ),
        # Accounts: the first admin from these, and never a sign-up (with persistent config off,
        # Open WebUI's own "signup off after the first admin" lasts only until a restart).
        "WEBUI_AUTH": "True",
        "ENABLE_SIGNUP": "False",
        "WEBUI_ADMIN_EMAIL": str(knobs["open_webui_admin_email"]),
        "WEBUI_ADMIN_NAME": str(knobs["open_webui_admin_name"]),
        "WEBUI_ADMIN_PASSWORD": secrets.admin_password,
        "WEBUI_SECRET_KEY": secrets.secret_key,
        "DATA_DIR": data_dir,
        "STATIC_DIR": static_dir,
        # No GPU for the UI: every byte of VRAM belongs to the engine.
        "CUDA_VISIBLE_DEVICES": "",
        "OFFLINE_MODE": _flag(offline),
        "HF_HUB_OFFLINE": "1" if offline else "0",
        "ENABLE_VERSION_UPDATE_CHECK": "False",
        "ENABLE_COMMUNITY_SHARING": "False",
        "SCARF_NO_ANALYTICS": "true",
        "DO_NOT_TRACK": "true",
        "ANONYMIZED_TELEMETRY": "false",
        "RAG_EMBEDDING_ENGINE": "",
        "RAG_EMBEDDING_MODEL": embedding_model_dir if local_embeddings else "",
        "BYPASS_EMBEDDING_AND_RETRIEVAL": _flag(not local_embeddings),
    }
    for knob, variables in TASK_KNOBS.items():
        env.update(dict.fromkeys(variables, _flag(knobs[knob])))
    if tls_on(knobs):
        env.update(behind_https(https_url(str(knobs["tls_server_name"]), knobs["tls_https_port"])))
        return env
    if url:
        env["WEBUI_URL"] = url
    port = int(str(knobs["open_webui_port"]))
    env["CORS_ALLOW_ORIGIN"] = ";".join(own_origins(url, str(knobs["open_webui_host"]), port, host))
    return env


def behind_https(url: str) -> dict[str, str]:
    """Open WebUI's settings behind the HTTPS proxy at ``url``: its URL and the only origin CORS and
    Socket.IO admit, cookies sent over HTTPS only, and X-Forwarded-* believed from the proxy on
    loopback alone (uvicorn's FORWARDED_ALLOW_IPS, ``*`` by default)."""
    return {
        "WEBUI_URL": url,
        "CORS_ALLOW_ORIGIN": origin(url),
        "WEBUI_SESSION_COOKIE_SECURE": "True",
        "WEBUI_AUTH_COOKIE_SECURE": "True",
        "FORWARDED_ALLOW_IPS": "127.0.0.1",
    }
