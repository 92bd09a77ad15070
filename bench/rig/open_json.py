"""Open objects in JSON: a record section with fields of its own beside keys that belong to someone else.

deployment.json's start-up facts and engine section hold a few keys every engine has (the unit,
its command line) beside keys only one engine's role writes (vLLM's versions, llama.cpp's slots).
A dataclass for such a section names its ``known`` fields and keeps every other key in a
``facts`` mapping; these functions are its ``__to_json__``, ``__from_json__`` and
``__json_schema__`` (:mod:`bench.codec`): one JSON object either way, the known fields typed, the
others any JSON.
"""

from __future__ import annotations

from typing import Any

from bench.codec import JsonObject, JsonValue, read_as, schema_for, to_json
from bench.errors import ShapeError

Known = tuple[tuple[str, object], ...]  # an open object's own fields: (name, type)


def _optional(hint: object) -> bool:
    return type(None) in getattr(hint, "__args__", ())


def open_to_json(value: object, known: Known, facts: JsonObject) -> JsonObject:
    """An open object (a record section whose other keys are the engine's own) as JSON: its
    ``known`` fields (one that may be None left out while it is None) beside ``facts``."""
    own = {name: to_json(getattr(value, name)) for name, hint in known if getattr(value, name) is not None}
    return {**facts, **own}


def open_from_json(data: object, path: str, known: Known) -> tuple[dict[str, Any], JsonObject]:
    """The ``known`` fields of an open object, read as their types, and every other key as it is."""
    if not isinstance(data, dict):
        raise ShapeError(path, f"{type(data).__name__} where an object was expected")
    values: dict[str, Any] = {}
    for name, hint in known:
        where = f"{path}.{name}" if path else name
        if name in data:
            values[name] = read_as(hint, data[name], where)
        elif _optional(hint):
            values[name] = None
        else:
            raise ShapeError(where, "missing")
    names = {name for name, _ in known}
    return values, {key: value for key, value in data.items() if key not in names}


def open_schema(kind: type, known: Known, definitions: dict[str, JsonValue]) -> JsonObject:
    """The JSON Schema of an open object: its ``known`` fields typed, any other key allowed."""
    return {
        "type": "object",
        "description": " ".join((kind.__doc__ or "").strip().split("\n\n")[0].split()),
        "properties": {name: schema_for(hint, definitions) for name, hint in known},
        "required": [name for name, hint in known if not _optional(hint)],
        "additionalProperties": {},
    }
