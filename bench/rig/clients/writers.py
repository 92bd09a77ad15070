"""One writer per client: the files that point it at the server, as text, by relative path.

Each writer takes a :class:`~bench.rig.clients.target.ClientTarget` and returns the files it
writes. The key is referenced, never written: OpenCode's ``{env:VAR}``, Continue's
``${{ secrets.VAR }}`` (its CLI reads the environment first), Hermes Agent's ``${VAR}``; Aider
and the OpenAI SDK read ``OPENAI_API_KEY`` from the environment, which the usage lines set from
the variable. The exact keys are each client's own (OpenCode 1.18, Aider 0.86, Continue CLI 1.5,
Hermes Agent 0.19, the OpenAI SDK): docs/clients.md lists them with their sources.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

import yaml

from bench.rig.clients.target import ClientTarget

PROVIDER = "llmrig"  # the provider's id in every client that names one
HEADER = "# Written by `bench clients` from deployment.json; `bench clients --check` says when it is stale.\n"
# Hermes Agent refuses a window under this (agent/model_metadata.py MINIMUM_CONTEXT_LENGTH).
HERMES_MIN_CONTEXT = 64000
# Hermes' compression threshold for windows under 512K tokens (its floor there).
HERMES_THRESHOLD = 0.75


class _Dumper(yaml.SafeDumper):
    """PyYAML's safe dumper, with lists indented under their key and strings that hold a line
    break or a tab double-quoted ("\\n"): the style yamllint's defaults accept."""

    def increase_indent(self, flow: bool = False, indentless: bool = False) -> None:
        super().increase_indent(flow, False)


def _string(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = '"' if any(char in value for char in "\n\r\t") else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _string)


def _yaml(document: Mapping[str, Any] | list[Any]) -> str:
    body = yaml.dump(document, Dumper=_Dumper, sort_keys=False, allow_unicode=True, width=1000, explicit_start=True)
    return HEADER + body


def _json(document: Mapping[str, Any]) -> str:
    return json.dumps(document, indent=2) + "\n"


def opencode(target: ClientTarget) -> dict[str, str]:
    """``opencode.json``: an openai-compatible provider with the model's limits; temperature is not
    sent (the server's generation config applies), tool calls only where the server returns them."""
    options: dict[str, Any] = {"baseURL": target.base_url}
    if target.key_env:
        options["apiKey"] = f"{{env:{target.key_env}}}"
    model: dict[str, Any] = {
        "name": f"{target.served_name} ({target.engine}, llmrig)",
        "limit": {"context": target.context, "output": target.max_output},
        "tool_call": target.tools,
        "reasoning": target.reasoning,
        "temperature": False,
    }
    document = {
        "$schema": "https://opencode.ai/config.json",
        "model": f"{PROVIDER}/{target.served_name}",
        "small_model": f"{PROVIDER}/{target.served_name}",
        "provider": {
            PROVIDER: {
                "npm": "@ai-sdk/openai-compatible",
                "name": "llmrig",
                "options": options,
                "models": {target.served_name: model},
            }
        },
    }
    return {"opencode.json": _json(document)}


def aider(target: ClientTarget) -> dict[str, str]:
    """``.aider.conf.yml`` with its model settings and metadata files beside it. Aider edits with
    text edit formats, no tool calls: ``diff`` for a model with a tool-call format (an instruct
    model that follows it), else ``whole`` (Aider's own default for a model it does not know).
    ``use_temperature: false`` leaves sampling to the server (Aider sends 0 otherwise); the
    reasoning tag is stripped where the model thinks in ``<think>``."""
    name = f"openai/{target.served_name}"
    settings: dict[str, Any] = {
        "name": name,
        "edit_format": "diff" if target.tools else "whole",
        "use_temperature": False,
        "weak_model_name": name,
        "editor_model_name": name,
        "extra_params": {"max_tokens": target.max_output},
    }
    if target.stop:
        settings["extra_params"]["stop"] = list(target.stop)
    if target.reasoning:
        settings["reasoning_tag"] = "think"
    metadata = {
        name: {
            "max_tokens": target.max_output,
            "max_input_tokens": target.context,
            "max_output_tokens": target.max_output,
            "input_cost_per_token": 0,
            "output_cost_per_token": 0,
            "litellm_provider": "openai",
            "mode": "chat",
        }
    }
    conf = {
        "model": name,
        "weak-model": name,
        "editor-model": name,
        "openai-api-base": target.base_url,
        "model-settings-file": ".aider.model.settings.yml",
        "model-metadata-file": ".aider.model.metadata.json",
        "show-model-warnings": False,
        "check-update": False,
        "analytics-disable": True,
    }
    return {
        "aider/.aider.conf.yml": _yaml(conf),
        "aider/.aider.model.settings.yml": _yaml([settings]),
        "aider/.aider.model.metadata.json": _json(metadata),
    }


def continue_cli(target: ClientTarget) -> dict[str, str]:
    """Continue's ``config.yaml``: one model with the context and answer length (its CLI assumes
    200,000 tokens without them), ``tool_use`` where the server returns tool calls, the CA bundle
    when the API is served over https."""
    model: dict[str, Any] = {
        "name": target.served_name,
        "provider": "openai",
        "model": target.served_name,
        "apiBase": target.base_url,
    }
    if target.key_env:
        model["apiKey"] = f"${{{{ secrets.{target.key_env} }}}}"
    model["roles"] = ["chat", "edit", "apply", "summarize"]
    if target.tools:
        model["capabilities"] = ["tool_use"]
    options: dict[str, Any] = {"contextLength": target.context, "maxTokens": target.max_output}
    if target.stop:
        options["stop"] = list(target.stop)
    model["defaultCompletionOptions"] = options
    if target.ca_file:
        model["requestOptions"] = {"caBundlePath": target.ca_file, "verifySsl": True}
    return {"continue/config.yaml": _yaml({"name": "llmrig", "version": "1.0.0", "schema": "v1", "models": [model]})}


def _hermes_config(target: ClientTarget) -> dict[str, Any]:
    model: dict[str, Any] = {
        "provider": f"custom:{PROVIDER}",
        "default": target.served_name,
        "base_url": target.base_url,
        "context_length": target.context,
        "max_tokens": target.max_output,
    }
    provider: dict[str, Any] = {
        "name": PROVIDER,
        "base_url": target.base_url,
        "api_mode": "chat_completions",
        "models": {target.served_name: {"context_length": target.context}},
    }
    if target.key_env:
        provider["key_env"] = target.key_env
    if target.ca_file:
        provider["ssl_ca_cert"] = target.ca_file
    return {
        "model": model,
        "custom_providers": [provider],
        "compression": {"enabled": True, "threshold": HERMES_THRESHOLD},
    }


def hermes_compaction_at(target: ClientTarget) -> int:
    """The prompt size in tokens at which Hermes Agent compacts this window (its own formula)."""
    trigger = max(int((target.context - target.max_output) * HERMES_THRESHOLD), HERMES_MIN_CONTEXT)
    return trigger if trigger < target.context else int(target.context * 0.85)


def hermes(target: ClientTarget) -> dict[str, str]:
    """Hermes Agent: ``config.yaml`` for ``~/.hermes``, and the same as a team profile
    (``profile/``: a profile distribution that ``hermes profile install`` takes, the key named
    in its ``env_requires``)."""
    config = _yaml(_hermes_config(target))
    distribution = {
        "name": PROVIDER,
        "version": "1.0.0",
        "description": f"{target.served_name} on the team's llmrig server ({target.base_url})",
        "env_requires": (
            [{"name": target.key_env, "description": "the llmrig server's API key", "required": True}]
            if target.key_env
            else []
        ),
        "distribution_owned": ["config.yaml"],
    }
    return {
        "hermes/config.yaml": config,
        "hermes/profile/config.yaml": config,
        "hermes/profile/distribution.yaml": _yaml(distribution),
    }


def openai_env(target: ClientTarget) -> dict[str, str]:
    """``openai.env`` for the OpenAI SDKs (``OPENAI_BASE_URL``; ``SSL_CERT_FILE`` over https). The
    key stays out: ``OPENAI_API_KEY`` is set from the variable when the file is sourced."""
    lines = [HEADER.rstrip("\n"), f"OPENAI_BASE_URL={target.base_url}"]
    if target.ca_file:
        lines.append(f"SSL_CERT_FILE={target.ca_file}")
    if target.key_env:
        lines.append(f'# The key: export OPENAI_API_KEY="${target.key_env}" (never in this file)')
    return {"openai.env": "\n".join(lines) + "\n"}


WRITERS: Mapping[str, Callable[[ClientTarget], dict[str, str]]] = {
    "opencode": opencode,
    "aider": aider,
    "continue": continue_cli,
    "hermes": hermes,
    "openai": openai_env,
}
CLIENT_NAMES: tuple[str, ...] = tuple(WRITERS)
