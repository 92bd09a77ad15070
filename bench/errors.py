"""One exception tree for everything the bench package raises.

::

    BenchError                 base class; the CLI maps it to an exit code and one line
    ├── ConfigError            a setting (group_vars knob, preset, flag) is missing or wrong (exit 2)
    │   ├── PresetError        a model preset is malformed or unknown
    │   └── PlanError          a setting the KV planner cannot model
    ├── ShapeError             a JSON value does not fit the type it is read as; ``path`` says where
    │                              (raised by the codec, turned into ResultFileError or ConfigError by
    │                              whoever knows the file or the flag)
    ├── ResultFileError        a result file cannot be read: not JSON, another schema_version, or
    │                              not the shape of a result (exit 2)
    ├── ProbeFailed            bench probe: a capability check failed that the deployment did not
    │                              say would fail (exit 5, after its table and file; checks that
    │                              fail as expected alone exit 0)
    ├── UntrustedRun           bench run finished and filed its result, but it is not trusted for
    │                              a reason other than failed requests: answers shorter than asked,
    │                              a stall, another client on the server (exit 6, after its table)
    └── EndpointError          the served endpoint misbehaves (exit 3; also a finished run in which
        │                          requests failed, raised after its table and file)
        ├── EndpointUnreachable    connection refused, DNS failure, connect timeout, the server lost
        ├── EndpointAuthError      401: the API key is wrong or missing
        ├── EndpointModelError     the endpoint does not serve the requested model
        └── EndpointProtocolError  an answer that breaks the OpenAI protocol
"""

from __future__ import annotations


class BenchError(Exception):
    """Base of every error this package raises on purpose."""

    exit_code = 1


class ConfigError(BenchError):
    """Raised when a configuration value is missing or invalid; the message names the variable."""

    exit_code = 2


class PresetError(ConfigError):
    """Raised when a model preset is unknown or lacks a field, or a field has the wrong type."""


class PlanError(ConfigError):
    """Raised when the KV planner cannot model a setting; the message names the variable."""


class ShapeError(BenchError):
    """Raised when a JSON value does not fit the type it is read as; ``path`` says where
    (``levels[0].latency``)."""

    def __init__(self, path: str, message: str) -> None:
        super().__init__(f"{path or 'the document'}: {message}")
        self.path = path


class ResultFileError(BenchError):
    """Raised when a result file cannot be read: the message names the file, and for another
    ``schema_version`` the version found and the one this bench reads."""

    exit_code = 2


class ProbeFailed(BenchError):
    """Raised by ``bench probe`` after its table and file when a check failed that the deployment
    did not mark as an expected failure; the message names those checks."""

    exit_code = 5


class UntrustedRun(BenchError):
    """Raised by ``bench run`` after its table and file when the finished run is not trusted for a
    reason other than failed requests (those raise :class:`EndpointError`); the message says why."""

    exit_code = 6


class EndpointError(BenchError):
    """Raised when the OpenAI-compatible endpoint cannot be used."""

    exit_code = 3


class EndpointUnreachable(EndpointError):
    """Raised when no connection to the endpoint can be made."""


class EndpointAuthError(EndpointError):
    """Raised when the endpoint answers 401: the API key is wrong or missing."""


class EndpointModelError(EndpointError):
    """Raised when the endpoint does not serve the model the run asks for."""


class EndpointProtocolError(EndpointError):
    """Raised when the endpoint answers with something the OpenAI protocol does not allow."""
