"""deployment.json: the one typed record of what runs on a host, the contract between the roles and bench.

The engine role writes ``/etc/llmrig/deployment.json`` after every deploy through the
``llmrig_deployment`` filter, which builds it with :func:`record`: a document that does not fit
these types never reaches the host. The role fetches it to the controller
(``llmrig_artifacts_dir``/<host>/), where ``bench`` reads it with :func:`read_deployment`:

- the engine that runs and those the role stopped, the device, the preset, the served model name
  and the configuration's ``git describe`` (bench's default tag);
- :class:`Endpoint`: the OpenAI base URL as clients reach it (``base_url``) and as the host itself
  does (``local_base_url``, loopback for an engine bound to every interface), the health and
  metrics URLs and the API key file, each written once by the engine's role, never rebuilt from
  another URL;
- :class:`Startup`: the unit's invocation, its start to its first answer (:mod:`bench.rig.ready`),
  and what the engine said about itself once it served;
- :class:`~bench.rig.host_record.HostFacts`: the GPUs, driver and CPU that preflight found;
- the engine's own section, under its name (``vllm``: its arguments, environment, versions and
  model; :class:`EngineSection`);
- on a gateway host only, ``gateway``: the front clients reach the group through and the boxes
  behind it (:class:`~bench.rig.gateway_record.Gateway`); :attr:`Deployment.client_base_url` is
  then the front's.

A record is a versioned document (:mod:`bench.documents`; its committed schema is
``deployment.schema.json`` beside this module, written by ``python -m bench.cli.schemas``).
Records of schema_version 1, written before the local base URL was recorded, are still read:
they are the same record without ``endpoint.local_base_url``, which reads as ''; records of
schema_version 2, written before the gateway, are the same record without ``gateway``. A record that
does not fit is a :class:`~bench.errors.ConfigError` naming the file and the field.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.codec import JsonObject, JsonValue, read_as, schema_for, to_json
from bench.documents import Document
from bench.errors import ConfigError, ShapeError
from bench.rig.argv import parse_flags
from bench.rig.gateway_record import Gateway
from bench.rig.host_record import HostFacts
from bench.rig.open_json import Known, open_from_json, open_schema, open_to_json

DEPLOYMENT_VERSION = 3
# The schema_version before endpoint.local_base_url; :func:`parse_deployment` still reads it.
_FIRST_VERSION = 1
# The schema_version before the gateway section; read as a record without one.
_SECOND_VERSION = 2


@dataclass(frozen=True, slots=True)
class Endpoint:
    """Where the engine answers: its OpenAI base URL as clients reach it and as the host itself
    reaches it, its health and metrics URLs, and the file that holds its API key."""

    base_url: str  # clients: the inventory address when the engine binds every interface
    local_base_url: str  # the host itself: loopback for a wildcard bind ('' in a schema_version 1 record)
    health_url: str  # the host itself
    metrics_url: str  # clients; '' when the engine serves no /metrics
    api_key_file: str  # on the host; '' when the engine takes no key


@dataclass(frozen=True, slots=True)
class Engines:
    """Which engine runs, and the engines the engine role stopped and disabled."""

    active: str
    stopped: list[str]


@dataclass(frozen=True, slots=True)
class Startup:
    """What the running engine said about itself once it served (vLLM's start-up log, llama.cpp's
    /props, Ollama's version), beside the unit's invocation, when it became active, and how long it
    took from the unit's start to its first answer (:mod:`bench.rig.ready`)."""

    invocation_id: str
    active_since: str
    ready_s: float | None = None  # unit start to the first chat completion answered (health_s + first_answer_s)
    health_s: float | None = None  # unit start to the health URL's first 200
    first_answer_s: float | None = None  # the first chat completion, sent to answered
    ready_reason: str | None = None  # why ready_s is null (then written as null); None when measured
    facts: JsonObject = field(default_factory=dict)  # the engine's own keys, as its role recorded them

    def number(self, name: str) -> float | None:
        """The fact ``name`` when it is a number; None when absent or not a number."""
        value = self.facts.get(name)
        return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None

    @property
    def kv_cache_tokens(self) -> int | None:
        """The KV pool in tokens that the engine reported at start-up (vLLM); None when unsaid."""
        tokens = self.number("kv_cache_tokens")
        return int(tokens) if tokens is not None and tokens > 0 else None

    def __to_json__(self) -> JsonObject:
        unknown = {"ready_s": None} if self.ready_reason is not None else {}  # null beside its reason
        return {**unknown, **open_to_json(self, _STARTUP, self.facts)}

    @staticmethod
    def __from_json__(data: object, path: str) -> Startup:
        values, facts = open_from_json(data, path, _STARTUP)
        return Startup(**values, facts=facts)

    @staticmethod
    def __json_schema__(definitions: dict[str, JsonValue]) -> JsonObject:
        return open_schema(Startup, _STARTUP, definitions)


@dataclass(frozen=True, slots=True)
class EngineSection:
    """The engine's own section: its unit, the command line and environment it runs with (those it
    has), its model, and whatever else its role recorded (versions, the release it runs)."""

    unit: str
    model: JsonObject
    args: list[str] | None = None  # the command line (Ollama has none: its settings are environment)
    env: JsonObject | None = None  # the unit's environment, credentials by name only
    facts: JsonObject = field(default_factory=dict)

    def flags(self) -> dict[str, str | None]:
        """The flags of :attr:`args` (:func:`bench.rig.argv.parse_flags`; none without a command line)."""
        return parse_flags(self.args or [])

    def __to_json__(self) -> JsonObject:
        return open_to_json(self, _SECTION, self.facts)

    @staticmethod
    def __from_json__(data: object, path: str) -> EngineSection:
        values, facts = open_from_json(data, path, _SECTION)
        return EngineSection(**values, facts=facts)

    @staticmethod
    def __json_schema__(definitions: dict[str, JsonValue]) -> JsonObject:
        return open_schema(EngineSection, _SECTION, definitions)


_STARTUP: Known = (
    ("invocation_id", str),
    ("active_since", str),
    ("ready_s", float | None),
    ("health_s", float | None),
    ("first_answer_s", float | None),
    ("ready_reason", str | None),
)
_SECTION: Known = (("unit", str), ("model", JsonObject), ("args", list[str] | None), ("env", JsonObject | None))


@dataclass(frozen=True, slots=True)
class Deployment:
    """What runs on one host: the engine and its endpoint, its start-up facts, the host, and the
    engine's own section (under the engine's name in the file)."""

    engine: str
    engines: Engines
    device: str
    preset: str
    served_model_name: str
    config_version: str  # the configuration repository's git describe ('unknown' outside git)
    unit: str
    endpoint: Endpoint
    startup: Startup
    host: HostFacts
    section: EngineSection
    gateway: Gateway | None = None  # on a host of llmrig_gateway only

    @property
    def client_base_url(self) -> str:
        """Where clients send requests: the gateway's front on a gateway host, else the engine's."""
        return self.gateway.base_url if self.gateway else self.endpoint.base_url

    @property
    def client_metrics_url(self) -> str:
        """The Prometheus endpoint beside :attr:`client_base_url` ('' when it serves none)."""
        return self.gateway.metrics_url if self.gateway else self.endpoint.metrics_url

    def __to_json__(self) -> JsonObject:
        fields = {name: to_json(getattr(self, name)) for name in _TOP if name != "section"}
        gateway = {"gateway": to_json(self.gateway)} if self.gateway else {}
        return {**fields, **gateway, self.engine: to_json(self.section)}

    @staticmethod
    def __from_json__(data: object, path: str) -> Deployment:
        if not isinstance(data, dict):
            raise ShapeError(path, f"{type(data).__name__} where an object was expected")
        values: dict[str, Any] = {}
        for name, hint in _TOP.items():
            if name == "section":
                continue
            if name not in data:
                raise ShapeError(name, "missing")
            values[name] = read_as(hint, data[name], name)
        engine = values["engine"]
        if engine not in data:
            raise ShapeError(engine, f"missing: the section of engine {engine!r}")
        known = (set(_TOP) - {"section"}) | {engine, "gateway"}  # "section" is the field, not a key
        unknown = sorted(set(data) - known)
        if unknown:
            raise ShapeError(path, f"unknown keys {unknown}")
        gateway = read_as(Gateway, data["gateway"], "gateway") if "gateway" in data else None
        return Deployment(**values, section=read_as(EngineSection, data[engine], engine), gateway=gateway)

    @staticmethod
    def __json_schema__(definitions: dict[str, JsonValue]) -> JsonObject:
        top = {name: hint for name, hint in _TOP.items() if name != "section"}
        return {
            "type": "object",
            "description": " ".join((Deployment.__doc__ or "").split()),
            "properties": {
                **{name: schema_for(hint, definitions) for name, hint in top.items()},
                "gateway": schema_for(Gateway, definitions),
            },
            "required": list(top),
            # The one other key is the engine's name, holding its section; the document has these,
            # schema_version (bench.documents adds it), that one and, on a gateway host, gateway.
            "additionalProperties": schema_for(EngineSection, definitions),
            "minProperties": len(top) + 2,
            "maxProperties": len(top) + 3,
        }


_TOP: dict[str, object] = {
    "engine": str,
    "engines": Engines,
    "device": str,
    "preset": str,
    "served_model_name": str,
    "config_version": str,
    "unit": str,
    "endpoint": Endpoint,
    "startup": Startup,
    "host": HostFacts,
    "section": EngineSection,
}


DEPLOYMENT_FILE: Document[Deployment] = Document(
    Deployment,
    version=DEPLOYMENT_VERSION,
    name="deployment",
    title="llmrig deployment record",
    noun="deployment record",
    schema_file=Path(__file__).with_name("deployment.schema.json"),
    error=ConfigError,
)
"""deployment.json: read, written and schema-checked through this (:mod:`bench.documents`)."""


def _current(document: object) -> object:
    """``document`` as a record of this version: one of schema_version 1 gains an empty
    ``endpoint.local_base_url`` (it was not recorded), one of 1 or 2 this version's number (neither
    had a gateway); anything else is left as it is."""
    found = document.get("schema_version") if isinstance(document, dict) else None
    if not isinstance(document, dict) or type(found) is not int or found not in (_FIRST_VERSION, _SECOND_VERSION):
        return document
    endpoint = document.get("endpoint")
    if found == _FIRST_VERSION and isinstance(endpoint, dict):
        endpoint = {"local_base_url": "", **endpoint}
    return {**document, "schema_version": DEPLOYMENT_VERSION, "endpoint": endpoint}


def parse_deployment(document: object, where: str) -> Deployment:
    """A parsed deployment.json (schema_version 1, 2 or 3) as a :class:`Deployment`; a ConfigError
    naming ``where`` and the field that does not fit."""
    return DEPLOYMENT_FILE.parse(_current(document), where)


def read_deployment(path: Path) -> Deployment:
    """deployment.json at ``path``; a ConfigError naming ``--deployment``, the file and the field
    when it cannot be read or does not fit."""
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ConfigError(f"--deployment: cannot read {path}: {exc}") from exc
    try:
        return parse_deployment(document, str(path))
    except ConfigError as exc:
        raise ConfigError(f"--deployment: {exc}") from exc


def recorded_deployment(document: JsonValue) -> Deployment | None:
    """The record a result file keeps of the deployment it measured (``environment.deployment``);
    None when it kept none (``{}``) or a copy of no version this bench reads (an old file's)."""
    if not document:
        return None
    try:
        return parse_deployment(document, "environment.deployment")
    except ConfigError:
        return None


def record(parts: JsonObject) -> JsonObject:
    """The document the engine role writes: ``parts`` (every key but ``schema_version``) read as a
    :class:`Deployment`, so a part that does not fit is a ConfigError naming it, and written back
    with this version."""
    return DEPLOYMENT_FILE.to_document(
        DEPLOYMENT_FILE.parse({"schema_version": DEPLOYMENT_VERSION, **parts}, "deployment.json")
    )
