"""What a client configuration says about the server: built from deployment.json and the preset.

Every value comes from the deployed record, so that a written configuration can be checked
against the server later (:mod:`bench.rig.clients.drift`):

- the base URL as clients reach it (``endpoint.base_url``: the API proxy's address, https when
  ``reverse_proxy_tls``; on a gateway host ``gateway.base_url``, the front of the group) and, for
  https, the CA root the controller fetched beside deployment.json (``tls-root.crt``);
- the served model name;
- the context one request may use: vLLM's ``--max-model-len``, llama.cpp's ``--ctx-size`` shared
  by its ``--parallel`` slots (each slot gets its share), Ollama's ``OLLAMA_CONTEXT_LENGTH``;
- the longest answer a client should ask for: a quarter of that context, at most 32,768 tokens
  (:func:`max_output`), so that a long conversation still has room for its reply;
- whether answers carry tool calls and separated reasoning: vLLM's command line
  (``--enable-auto-tool-choice`` with a ``--tool-call-parser``, ``--reasoning-parser``), else the
  preset's ``tool_call_parser`` and ``reasoning_parser``;
- the preset's stop strings.

Sampling is left to the server: vLLM applies the model's own ``generation_config.json``
(``--generation-config auto``, its default) to any request that leaves temperature and top-p out,
so the configurations leave them out. The key is never written: every configuration names the
environment variable that holds it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from bench.errors import ConfigError
from bench.rig.argv import context_tokens, flag_value, has_flag
from bench.rig.deployment import Deployment

KEY_ENV = "LLMRIG_API_KEY"  # the environment variable the configurations read the key from
MAX_OUTPUT_CAP = 32768
CA_FILE = "tls-root.crt"  # the CA root the controller fetches beside deployment.json


@dataclass(frozen=True, slots=True)
class PresetCapabilities:
    """The preset fields a client configuration needs ('' parsers: the model has no such format)."""

    tool_call_parser: str
    reasoning_parser: str
    stop: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class ClientTarget:
    """The server as every client configuration describes it."""

    base_url: str
    served_name: str
    context: int
    max_output: int
    tools: bool
    reasoning: bool
    stop: tuple[str, ...]
    ca_file: str  # absolute path of the CA root to trust; '' for plain HTTP
    key_env: str  # the environment variable that holds the key; '' when the endpoint takes none
    key_file: str  # where the controller keeps the key ('' when none): what to export it from
    engine: str
    preset: str


def max_output(context: int) -> int:
    """The longest answer to ask for: a quarter of ``context``, at most :data:`MAX_OUTPUT_CAP`."""
    return max(1, min(MAX_OUTPUT_CAP, context // 4))


def _tokens(value: str | None, where: str) -> int:
    if value is None or not re.fullmatch(r"\d+", value.strip()) or int(value) < 1:
        raise ConfigError(f"{where}: {value!r} is not a context length in tokens; bench clients needs one")
    return int(value)


def served_context(deployment: Deployment) -> int:
    """The context one request may use, from the engine's recorded command line or environment."""
    args = deployment.section.args or []
    if deployment.engine == "vllm":
        length = flag_value(args, "--max-model-len")
        tokens = context_tokens(length) if length else None
        if tokens is None:
            raise ConfigError(f"deployment.json vllm.args: --max-model-len {length!r} is not a length bench can read")
        return tokens
    if deployment.engine == "llamacpp":
        size = _tokens(
            flag_value(args, "--ctx-size") or flag_value(args, "-c"), "deployment.json llamacpp.args --ctx-size"
        )
        slots = _tokens(flag_value(args, "--parallel") or flag_value(args, "-np") or "1", "llamacpp.args --parallel")
        return size // slots
    env = deployment.section.env or {}
    return _tokens(
        str(env.get("OLLAMA_CONTEXT_LENGTH", "")) or None, "deployment.json ollama.env OLLAMA_CONTEXT_LENGTH"
    )


def _capabilities(deployment: Deployment, preset: PresetCapabilities) -> tuple[bool, bool]:
    args = deployment.section.args
    if deployment.engine == "vllm" and args is not None:
        tools = bool(flag_value(args, "--tool-call-parser")) and has_flag(args, "--enable-auto-tool-choice")
        return tools, bool(flag_value(args, "--reasoning-parser"))
    return bool(preset.tool_call_parser), bool(preset.reasoning_parser)


def client_target(
    deployment: Deployment,
    preset: PresetCapabilities,
    *,
    artifacts: Path,
    base_url: str = "",
    key_env: str = KEY_ENV,
) -> ClientTarget:
    """The server ``deployment`` (read from ``artifacts``/deployment.json) serves, as clients see
    it; ``base_url`` replaces the recorded one (a published port, a name clients resolve)."""
    url = (base_url or deployment.client_base_url).rstrip("/")
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(f"--base-url: {url!r} is not an http(s) URL")
    ca_file = ""
    if parts.scheme == "https":
        ca = artifacts / CA_FILE
        ca_file = str(ca.resolve()) if ca.is_file() else ""
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key_env):
        raise ConfigError(f"--key-env: {key_env!r} is not an environment variable name")
    takes_key = bool(deployment.endpoint.api_key_file) or deployment.gateway is not None  # the front checks it
    context = served_context(deployment)
    tools, reasoning = _capabilities(deployment, preset)
    return ClientTarget(
        base_url=url,
        served_name=deployment.served_model_name,
        context=context,
        max_output=max_output(context),
        tools=tools,
        reasoning=reasoning,
        stop=preset.stop,
        ca_file=ca_file,
        key_env=key_env if takes_key else "",
        key_file=str((artifacts / "api_key").resolve()) if takes_key else "",
        engine=deployment.engine,
        preset=deployment.preset,
    )
