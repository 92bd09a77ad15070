"""Frozen dataclasses to JSON and back, and the JSON Schema of a dataclass, from the type hints.

The result types (:mod:`bench.measure.run.results` and the reports it holds) are plain frozen
dataclasses; this module is the one place that knows how they become JSON:

- :func:`to_json` writes every field under its own name; a field declared with
  ``field(metadata=OMIT_IF_NONE)`` is left out while it is None (the key is absent, not null);
- :func:`from_json` reads a JSON value back into a type, checking each value against its
  field's type and naming the path of the first one that does not fit (:class:`ShapeError`);
- :func:`schema_of` gives the JSON Schema (draft 2020-12) of a type: one ``$defs`` entry per
  dataclass, every field required unless it may be omitted, no other keys allowed.

A dataclass whose JSON keys are not its fields (the run options: common fields plus every
workload's own) defines ``__to_json__``, ``__from_json__(data, path)`` and
``__json_schema__(definitions)``, built on :func:`read_as` and :func:`schema_for`.

Supported field types: bool, int, float, str, None, ``Literal``, unions, ``list[X]``,
``tuple[X, ...]``, fixed tuples, ``dict[str, X]``, ``Path`` (as a string), dataclasses, and :data:`JsonValue`
(any JSON, for what bench keeps without reading it, such as an engine's own keys in deployment.json).
"""

from __future__ import annotations

import dataclasses
import functools
import types
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Literal, TypeAlias, TypeVar, Union, get_args, get_origin

from bench.errors import ShapeError

if TYPE_CHECKING:
    JsonValue: TypeAlias = bool | int | float | str | list["JsonValue"] | dict[str, "JsonValue"] | None
else:  # at run time a marker only: a field of this type is any JSON, copied as it is
    JsonValue = typing.Any
JsonObject: TypeAlias = dict[str, JsonValue]

OMIT_IF_NONE: Mapping[str, bool] = {"omit_if_none": True}
T = TypeVar("T")


def _omitted(item: dataclasses.Field[object]) -> bool:
    return bool(item.metadata.get("omit_if_none"))


@functools.cache
def _hints(cls: type) -> dict[str, object]:
    return typing.get_type_hints(cls)


def to_json(value: object) -> JsonValue:
    """``value`` as JSON: dataclasses as objects of their fields (or what their ``__to_json__``
    says, for a type whose keys are not its fields), tuples as lists."""
    custom = getattr(value, "__to_json__", None)
    if custom is not None and not isinstance(value, type):
        out: JsonValue = custom()
        return out
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields: JsonObject = {}
        for item in dataclasses.fields(value):
            field_value = getattr(value, item.name)
            if field_value is None and _omitted(item):
                continue
            fields[item.name] = to_json(field_value)
        return fields
    if isinstance(value, list | tuple):
        return [to_json(element) for element in value]
    if isinstance(value, dict):
        return {str(key): to_json(element) for key, element in value.items()}
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, Path):
        return str(value)
    raise TypeError(f"{type(value).__name__} has no JSON form")


def to_json_object(value: object) -> JsonObject:
    """:func:`to_json` of a dataclass instance, typed as the object it always is."""
    out = to_json(value)
    if not isinstance(out, dict):
        raise TypeError(f"{type(value).__name__} is not a dataclass instance")
    return out


def from_json(kind: type[T], data: object, path: str = "") -> T:
    """Read ``data`` (parsed JSON) as ``kind``; raises :class:`ShapeError` where it does not fit."""
    value: T = _read(kind, data, path)
    return value


def _is_union(kind: object) -> bool:
    return get_origin(kind) in (Union, types.UnionType)


@functools.cache
def _shape(kind: object) -> tuple[object, tuple[object, ...], bool]:
    """``kind``'s origin and arguments, and whether it is a union (read once per type: a result
    file has hundreds of thousands of values)."""
    return get_origin(kind), get_args(kind), _is_union(kind)


def _read(kind: object, data: object, path: str) -> typing.Any:  # noqa: PLR0912 (one branch per JSON kind)
    if kind is JsonValue or kind is object:
        return data
    origin, args, union = _shape(kind)
    if union:
        if data is None and type(None) in args:
            return None
        if len(args) == 2 and type(None) in args:  # X | None with a value: X or an error about X
            return _read(args[0] if args[1] is type(None) else args[1], data, path)
        errors = []
        for option in args:
            try:
                return _read(option, data, path)
            except ShapeError as exc:
                errors.append(str(exc))
        raise ShapeError(path, f"fits none of its types ({'; '.join(errors)})")
    if origin is Literal:
        if data not in args or type(data) is not type(args[args.index(data)]):
            raise ShapeError(path, f"{data!r} is not one of {list(args)}")
        return data
    if kind is type(None):
        if data is not None:
            raise ShapeError(path, f"{data!r} where null was expected")
        return None
    if kind is bool:
        if not isinstance(data, bool):
            raise ShapeError(path, f"{data!r} is not a boolean")
        return data
    if kind is int:
        if isinstance(data, bool) or not isinstance(data, int):
            raise ShapeError(path, f"{data!r} is not an integer")
        return data
    if kind is float:
        if isinstance(data, bool) or not isinstance(data, int | float):
            raise ShapeError(path, f"{data!r} is not a number")
        return float(data)
    if kind is str or kind is Path:
        if not isinstance(data, str):
            raise ShapeError(path, f"{data!r} is not a string")
        return data if kind is str else Path(data)
    if origin in (list, tuple):
        if not isinstance(data, list):
            raise ShapeError(path, f"{type(data).__name__} where a list was expected")
        if origin is list or (len(args) == 2 and args[1] is Ellipsis):
            items = [_read(args[0], element, f"{path}[{i}]") for i, element in enumerate(data)]
            return items if origin is list else tuple(items)
        if len(data) != len(args):
            raise ShapeError(path, f"{len(data)} items where {len(args)} were expected")
        pairs = enumerate(zip(args, data, strict=True))
        return tuple(_read(arg, element, f"{path}[{i}]") for i, (arg, element) in pairs)
    if origin is dict:
        if not isinstance(data, dict):
            raise ShapeError(path, f"{type(data).__name__} where an object was expected")
        return {key: _read(args[1], element, f"{path}.{key}") for key, element in data.items()}
    if isinstance(kind, type) and hasattr(kind, "__from_json__"):
        return kind.__from_json__(data, path)
    if isinstance(kind, type) and dataclasses.is_dataclass(kind):
        return _read_dataclass(kind, data, path)
    raise TypeError(f"{kind!r} has no JSON form")


read_as = _read  # for a type's own __from_json__: one value of a type, at a path


@functools.cache
def _fields(kind: type) -> tuple[frozenset[str], tuple[tuple[str, object, bool], ...]]:
    """A dataclass's field names, and each field's name, type and whether it may be omitted."""
    hints = _hints(kind)
    fields = tuple((item.name, hints[item.name], _omitted(item)) for item in dataclasses.fields(kind))
    return frozenset(name for name, _, _ in fields), fields


def _read_dataclass(kind: type, data: object, path: str) -> object:
    if not isinstance(data, dict):
        raise ShapeError(path, f"{type(data).__name__} where an object was expected")
    names, fields = _fields(kind)
    if not names.issuperset(data):
        raise ShapeError(path, f"unknown keys {sorted(set(data) - names)}")
    values: dict[str, object] = {}
    for name, hint, omitted in fields:
        where = f"{path}.{name}" if path else name
        if name not in data:
            if omitted:
                values[name] = None
                continue
            raise ShapeError(where, "missing")
        values[name] = _read(hint, data[name], where)
    return kind(**values)


def schema_of(kind: object) -> JsonObject:
    """The JSON Schema of ``kind``: its own schema, with every dataclass it uses under ``$defs``."""
    definitions: dict[str, JsonValue] = {}
    root = _as_object(_schema(kind, definitions))
    if isinstance(kind, type) and root.get("$ref") == f"#/$defs/{kind.__name__}":
        root = _as_object(definitions.pop(kind.__name__))  # the type itself at the top, its parts under $defs
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", **root, "$defs": definitions}


def _as_object(value: JsonValue) -> JsonObject:
    assert isinstance(value, dict)
    return value


def _schema(kind: object, definitions: dict[str, JsonValue]) -> JsonValue:
    if kind is JsonValue or kind is object:
        return {}
    if _is_union(kind):
        options = [_as_object(_schema(option, definitions)) for option in get_args(kind)]
        if all(list(option) == ["type"] for option in options):  # int | None: {"type": ["integer", "null"]}
            return {"type": [option["type"] for option in options]}
        return {"anyOf": list(options)}
    origin, args = get_origin(kind), get_args(kind)
    if origin is Literal:
        return {"const": args[0]} if len(args) == 1 else {"enum": list(args)}
    simple = {type(None): "null", bool: "boolean", int: "integer", float: "number", str: "string", Path: "string"}
    if isinstance(kind, type) and kind in simple:
        return {"type": simple[kind]}
    if origin is list or (origin is tuple and len(args) == 2 and args[1] is Ellipsis):
        return {"type": "array", "items": _schema(args[0], definitions)}
    if origin is tuple:
        items = [_schema(arg, definitions) for arg in args]
        return {"type": "array", "prefixItems": items, "minItems": len(args), "maxItems": len(args)}
    if origin is dict:
        return {"type": "object", "additionalProperties": _schema(args[1], definitions)}
    if isinstance(kind, type) and dataclasses.is_dataclass(kind):
        if kind.__name__ not in definitions:
            definitions[kind.__name__] = {}  # reserved first, so a type that contains itself terminates
            custom = getattr(kind, "__json_schema__", None)
            definitions[kind.__name__] = custom(definitions) if custom else _dataclass_schema(kind, definitions)
        return {"$ref": f"#/$defs/{kind.__name__}"}
    raise TypeError(f"{kind!r} has no JSON form")


schema_for = _schema  # for a type's own __json_schema__: the schema of one value, its parts in definitions


def _dataclass_schema(kind: type, definitions: dict[str, JsonValue]) -> JsonObject:
    hints = _hints(kind)
    fields = dataclasses.fields(kind)
    description = (kind.__doc__ or "").strip().split("\n\n")[0]
    return {
        "type": "object",
        "description": " ".join(description.split()),
        "properties": {item.name: _schema(hints[item.name], definitions) for item in fields},
        "required": [item.name for item in fields if not _omitted(item)],
        "additionalProperties": False,
    }
