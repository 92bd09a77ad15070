"""Where ``bench run`` sends requests, resolved from flags, environment, deployment.json and
group_vars, in that order of precedence; each value remembers where it came from.

- base URL: ``--base-url`` > ``BENCH_BASE_URL`` > deployment.json ``endpoint.base_url`` (on a
  gateway host, ``gateway.base_url``: the front of every box behind it) >
  ``vllm_host``/``vllm_port`` (or the Ollama / llama.cpp pair, by ``inference_engine``) in
  ``group_vars/all``;
- API key: ``--api-key`` (or the first line of ``--api-key-file``) > ``BENCH_API_KEY`` > the ``api_key``
  file fetched beside deployment.json;
- model: ``--model`` > ``BENCH_MODEL`` > deployment.json ``served_model_name`` > the only model
  that ``/v1/models`` lists (decided later by the caller);
- tag: ``--tag`` > ``BENCH_TAG`` > deployment.json ``config_version`` > ``untagged``.

deployment.json is ``--deployment PATH``, or the only ``*/deployment.json`` under
``llmrig_artifacts_dir`` (``artifacts/`` in the repository that holds ``group_vars``; see
:func:`bench.rig.artifacts_dir`), of several the one gateway host's; the command line adds
``BENCH_DEPLOYMENT`` and the demo box (:func:`bench.cli.target.discover`).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.errors import ConfigError
from bench.rig import (
    DEFAULT_ENGINE,
    ENGINES_BY_NAME,
    Deployment,
    artifacts_dir,
    dial_host,
    literal_knobs,
    read_deployment,
)

TAG = re.compile(r"^[A-Za-z0-9._+-]{1,100}$")


@dataclass(frozen=True, slots=True)
class Target:
    """The resolved endpoint of a run, and where each value came from."""

    base_url: str
    api_key: str
    model: str | None
    tag: str
    engine: str
    deployment: Deployment | None  # deployment.json as read (bench.rig.deployment)
    sources: dict[str, str] = field(default_factory=dict)

    @property
    def server_url(self) -> str:
        """The server's root: the OpenAI base URL without its ``/v1`` (Ollama's native API is there)."""
        return re.sub(r"/v1/?$", "", self.base_url.rstrip("/"))

    @property
    def metrics_url(self) -> str | None:
        """Prometheus endpoint: the one deployment.json records for the endpoint it records (None
        for an engine that serves none), else beside /v1 on the same server (as vLLM and llama.cpp
        serve it)."""
        if self.deployment is not None:
            if not self.deployment.client_metrics_url:
                return None  # the engine serves none, wherever it is reached (Ollama)
            if self.deployment.client_base_url == self.base_url:
                return self.deployment.client_metrics_url
        return self.server_url + "/metrics"


def find_deployment(explicit: Path | None, config_dir: Path | None) -> Path | None:
    """``explicit``, or the single deployment.json under ``llmrig_artifacts_dir``/*/ (read from
    ``config_dir``, group_vars/all); None if none."""
    if explicit is not None:
        if not explicit.is_file():
            raise ConfigError(f"--deployment: {explicit} does not exist")
        return explicit
    if config_dir is None:
        return None
    value = str(literal_knobs(config_dir).get("llmrig_artifacts_dir") or "artifacts")
    found = sorted(artifacts_dir(config_dir.parent.parent, value).glob("*/deployment.json"))
    if len(found) > 1:
        gateways = [path for path in found if _is_gateway(path)]
        if len(gateways) == 1:
            return gateways[0]  # several engine boxes behind one gateway: clients use the gateway
        names = ", ".join(str(path.parent.name) for path in found)
        raise ConfigError(f"--deployment: several hosts have a deployment.json ({names}); name one")
    return found[0] if found else None


def _is_gateway(path: Path) -> bool:
    """Whether the deployment.json at ``path`` is a gateway host's (it records a ``gateway``)."""
    try:
        return read_deployment(path).gateway is not None
    except ConfigError:
        return False


def resolve(
    flags: Mapping[str, str | None],
    env: Mapping[str, str],
    *,
    deployment_path: Path | None,
    config_dir: Path | None,
    origins: Mapping[str, str] | None = None,
) -> Target:
    """Resolve the run's target from ``flags`` (None = not given), ``env`` and the files;
    ``origins`` names the file a variable of ``env`` was read from, when not this process."""
    deployment = read_deployment(deployment_path) if deployment_path is not None else None
    knobs = literal_knobs(config_dir, "engine.yml", "endpoint.yml") if config_dir else {}
    sources: dict[str, str] = {}

    def pick(name: str, env_name: str, *fallbacks: tuple[str, Any]) -> Any:
        env_source = f"{env_name} ({origins[env_name]})" if origins and env_name in origins else env_name
        candidates = [(f"--{name.replace('_', '-')}", flags.get(name)), (env_source, env.get(env_name)), *fallbacks]
        for source, value in candidates:
            if value not in (None, ""):
                sources[name] = source
                return value
        return None

    engine = deployment.engine if deployment else str(knobs.get("inference_engine") or DEFAULT_ENGINE.name)
    explicit_url = bool(flags.get("base_url") or env.get("BENCH_BASE_URL"))
    spec = ENGINES_BY_NAME.get(engine, DEFAULT_ENGINE)
    host_knob, port_knob = spec.host_knob, spec.port_knob
    host = knobs.get(host_knob)
    default_url = f"http://{dial_host(str(host))}:{knobs[port_knob]}/v1" if host else None
    where = str(deployment_path) if deployment_path else ""
    base_url = pick(
        "base_url",
        "BENCH_BASE_URL",
        (where, deployment.client_base_url if deployment else None),
        (f"group_vars/all/endpoint.yml ({host_knob}, {port_knob})", default_url),
    )
    if not base_url:
        raise ConfigError("--base-url: no endpoint given and no deployment.json or group_vars/all/endpoint.yml found")
    key_file = deployment_path.parent / "api_key" if deployment_path else None
    file_key = key_file.read_text(encoding="utf-8").strip() if key_file and key_file.is_file() else None
    api_key = pick("api_key", "BENCH_API_KEY", (str(key_file), file_key)) or ""
    model = pick("model", "BENCH_MODEL", (where, deployment.served_model_name if deployment else None))
    tag = pick("tag", "BENCH_TAG", (where, deployment.config_version if deployment else None), ("default", "untagged"))
    if not TAG.match(str(tag)):
        raise ConfigError(f"--tag: {tag!r} must be 1-100 letters, digits, '.', '_', '+' or '-'")
    if explicit_url and deployment is None:
        engine = "unknown"  # decided from the server's /metrics once the run has scraped it
    return Target(str(base_url), str(api_key), model, str(tag), engine, deployment, sources)


def environment() -> dict[str, str]:
    """The BENCH_* variables of this process."""
    return {name: value for name, value in os.environ.items() if name.startswith("BENCH_")}
