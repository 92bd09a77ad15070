"""The options of ``bench run`` (what the CLI parses its flags into) and the levels they make.

:class:`RunOptions` holds the flags every workload shares as fields and each workload's own
flags (:mod:`bench.measure.run.workloads`) in ``settings``. The result file's ``options`` holds both,
flat: the shared fields and the key of every registered workload's flag, so that every file has
the same keys whatever its workload.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from bench.codec import JsonObject, JsonValue, read_as, schema_for, to_json
from bench.errors import ConfigError, ShapeError
from bench.measure.run import trace_replay  # noqa: F401 (registers the trace workload, after the others)
from bench.measure.run.loops import LevelSpec
from bench.measure.run.workloads import DEFAULT_CONTEXTS, WORKLOADS, Option, OptionValue

__all__ = ["DEFAULT_CONTEXTS", "WORKLOADS", "RunOptions", "options_of", "settings_for"]


def options_of() -> dict[str, list[tuple[str, Option]]]:
    """Every registered workload flag by key, with the workloads that declare it, in registry order."""
    keys: dict[str, list[tuple[str, Option]]] = {}
    for name, workload in WORKLOADS.items():
        for option in workload.options:
            keys.setdefault(option.key, []).append((name, option))
    return keys


@dataclass(frozen=True, slots=True)
class RunOptions:
    """Everything a run needs besides the target."""

    workload: str
    requests: int
    input_tokens: int
    output_tokens: int
    results_dir: Path
    fixed_output: bool = True
    temperature: float = 0.0
    seed: int = 0
    read_timeout_s: float = 300.0  # the longest gap between two reads of one answer (the first token included)
    request_timeout_s: float = 600.0  # the longest one request may take, from dispatch to its last event
    weight_bytes_per_gpu: float | None = None  # for the decode bandwidth bound (preset weights / TP)
    gpu_telemetry: bool = True
    settings: Mapping[str, OptionValue] = field(default_factory=dict)  # workload flags given; see setting()

    def setting(self, key: str) -> OptionValue:
        """A workload flag's value: as given, else this workload's default, else what runs of
        workloads that do not take it record."""
        if key in self.settings:
            return self.settings[key]
        declared = options_of().get(key)
        if not declared:
            raise KeyError(f"no workload takes a setting {key!r}")
        own = [option for name, option in declared if name == self.workload]
        return own[0].default if own else declared[0][1].recorded_elsewhere

    def ints(self, key: str) -> tuple[int, ...]:
        value = self.setting(key)
        return tuple(int(v) for v in value) if isinstance(value, tuple) else (int(value),)

    def floats(self, key: str) -> tuple[float, ...]:
        value = self.setting(key)
        return tuple(float(v) for v in value) if isinstance(value, tuple) else (float(value),)

    def integer(self, key: str) -> int:
        (value,) = self.ints(key)
        return value

    def flag(self, key: str) -> bool:
        return self.setting(key) is True

    def text(self, key: str) -> str:
        return str(self.setting(key))

    def levels(self) -> list[LevelSpec]:
        """The levels of the run; a ConfigError naming the flag when a setting cannot run."""
        if self.workload not in WORKLOADS:
            raise ConfigError(f"workload: {self.workload!r} is not one of {', '.join(WORKLOADS)}")
        for name, value in (("--input-tokens", self.input_tokens), ("--output-tokens", self.output_tokens)):
            if value < 1:
                raise ConfigError(f"{name}: must be at least 1, got {value}")
        for name, seconds in (("--read-timeout", self.read_timeout_s), ("--request-timeout", self.request_timeout_s)):
            if seconds <= 0:
                raise ConfigError(f"{name}: must be above 0 seconds, got {seconds:g}")
        if self.requests < 2:
            raise ConfigError(f"--requests: at least 2 are needed for a window, got {self.requests}")
        return WORKLOADS[self.workload].levels(self)

    # The result file's form: the shared fields, then every workload flag, flat.

    def __to_json__(self) -> JsonObject:
        shared: JsonObject = {
            item.name: to_json(getattr(self, item.name)) for item in dataclasses.fields(self) if item.name != "settings"
        }
        return {**shared, **{key: to_json(self.setting(key)) for key in options_of()}}

    @classmethod
    def __from_json__(cls, data: JsonValue, path: str) -> RunOptions:
        if not isinstance(data, dict):
            raise ShapeError(path, "the options are not an object")
        hints = _shared_hints()
        unknown = sorted(set(data) - set(hints) - set(options_of()))
        if unknown:
            raise ShapeError(path, f"unknown keys {unknown}")
        shared = {name: read_as(hints[name], data[name], f"{path}.{name}") for name in hints if name in data}
        # A file written before a flag existed lacks it: the run went as that flag's default has it.
        given = {key: uses for key, uses in options_of().items() if key in data}
        settings = {key: _setting(uses[0][1], data[key], f"{path}.{key}") for key, uses in given.items()}
        try:
            return cls(**shared, settings=settings)
        except TypeError as exc:  # a shared field without a default is missing
            raise ShapeError(path, str(exc)) from exc

    @classmethod
    def __json_schema__(cls, definitions: dict[str, JsonValue]) -> JsonObject:
        hints = _shared_hints()
        properties: JsonObject = {name: schema_for(kind, definitions) for name, kind in hints.items()}
        for key, declared in options_of().items():
            properties[key] = schema_for(declared[0][1].value_type, definitions)
        return {
            "type": "object",
            "description": "The options of the run: those every workload shares, and every workload's own flags "
            "(what the run's workload was given or defaults to; the others record their usual value).",
            "properties": properties,
            "required": list(hints),  # a file written before a workload flag existed lacks that flag
            "additionalProperties": False,
        }


def _shared_hints() -> dict[str, object]:
    import typing  # noqa: PLC0415 (only the result file's reader and schema need the resolved hints)

    hints = typing.get_type_hints(RunOptions)
    return {name: kind for name, kind in hints.items() if name != "settings"}


def _setting(option: Option, value: JsonValue, path: str) -> OptionValue:
    if value is None:
        raise ShapeError(path, "missing")
    read: OptionValue = read_as(option.value_type, value, path)
    return read


def settings_for(workload: str, given: Mapping[str, OptionValue | None]) -> dict[str, OptionValue]:
    """The workload flags given on the command line (None: not given) that ``workload`` keeps;
    a flag that another workload declares with ``refused_elsewhere`` is refused unless it is that
    workload's usual value."""
    declared = options_of()
    mine = {option.key for option in WORKLOADS[workload].options}
    settings: dict[str, OptionValue] = {}
    for key, value in given.items():
        if value is None:
            continue
        if key not in mine:
            refusing = [option for _, option in declared[key] if option.refused_elsewhere]
            if refusing and value != refusing[0].recorded_elsewhere:
                option = refusing[0]
                raise ConfigError(
                    f"{option.flag}: the {workload} workload does not take it; {option.refused_elsewhere}"
                )
        settings[key] = value
    return settings
