"""Versioned JSON documents: every file bench writes or reads that carries a ``schema_version``.

One :class:`Document` per kind of file (a run's result, a capacity search, a probe, the
deployment record) says which type it decodes to, which ``schema_version`` this bench reads and
writes, what the file is called in errors, and where its committed JSON Schema lies. Through it
every kind is read the same way (JSON, then the version, then the shape, each refusal naming the
file), written the same way (a temporary file in the same folder, then a rename), and its schema
is generated and compared with the committed copy the same way (``python -m bench.cli.schemas``
writes every committed schema again).

A type may hold ``schema_version`` as a field of its own (the run result does) or not (the probe
result): the version is checked, written and put in the schema either way.
"""

from __future__ import annotations

import dataclasses
import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Generic, TypeVar

from bench.codec import JsonObject, from_json, schema_of, to_json_object
from bench.errors import BenchError, ResultFileError, ShapeError

T = TypeVar("T")


def write_bytes_atomic(path: Path, data: bytes, *, mode: int | None = None) -> Path:
    """Write ``data`` to ``path`` through a temporary file in the same folder and a rename, so a
    reader sees the old file or the whole new one, never a part; ``mode`` set before the rename
    (the temporary file's 0600 otherwise)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "wb") as stream:
            stream.write(data)
            stream.flush()
            os.fsync(stream.fileno())
        if mode is not None:
            os.chmod(temporary, mode)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    return path


def write_json_atomic(path: Path, document: JsonObject) -> Path:
    """Write ``document`` to ``path`` as :func:`write_bytes_atomic` does (indented, keys sorted)."""
    return write_bytes_atomic(path, (json.dumps(document, indent=1, sort_keys=True) + "\n").encode("utf-8"))


def dumps(schema: JsonObject) -> str:
    """A schema as the committed files hold it."""
    return json.dumps(schema, indent=1, sort_keys=True) + "\n"


@dataclass(frozen=True)
class Document(Generic[T]):
    """One kind of versioned file: its type, its version, its words and its committed schema."""

    kind: type[T]
    version: int  # the schema_version this bench writes, and the only one it reads
    name: str  # "result": the schema's id and the committed file <name>.schema.json
    title: str  # "bench run result": the schema's title
    noun: str  # "bench result": errors say "<file>: not a <noun> ..."
    schema_file: Path  # the committed schema, shipped with the package
    error: type[BenchError] = ResultFileError

    @property
    def _own_field(self) -> bool:
        return any(item.name == "schema_version" for item in dataclasses.fields(self.kind))  # type: ignore[arg-type]

    def parse(self, document: object, where: str) -> T:
        """A parsed document as :attr:`kind`; ``where`` names it in errors."""
        if not isinstance(document, dict):
            raise self.error(f"{where}: not a {self.noun} (a JSON object was expected)")
        found = document.get("schema_version")
        if type(found) is not int or found != self.version:  # true == 1 and 1.0 == 1 in Python
            raise self.error(
                f"{where}: schema_version {found!r}; this bench reads {self.noun} files of "
                f"schema_version {self.version} only"
            )
        body = (
            document if self._own_field else {key: value for key, value in document.items() if key != "schema_version"}
        )
        try:
            return from_json(self.kind, body)
        except ShapeError as exc:
            raise self.error(f"{where}: not a {self.noun} of schema_version {self.version}: {exc}") from exc

    def read(self, path: Path) -> T:
        """Read a file of this kind; the error names ``path`` when it is not JSON, has another
        ``schema_version``, or does not have the shape of :attr:`kind`."""
        try:
            document = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise self.error(f"{path}: cannot read it as JSON: {exc}") from exc
        return self.parse(document, str(path))

    def to_document(self, value: T) -> JsonObject:
        """``value`` as the JSON object its file holds, ``schema_version`` included."""
        return {"schema_version": self.version, **to_json_object(value)}

    def write(self, path: Path, value: T) -> Path:
        """Write ``value`` to ``path`` atomically (:func:`write_json_atomic`); the path."""
        return write_json_atomic(path, self.to_document(value))

    def schema(self) -> JsonObject:
        """The JSON Schema of a file of this kind, generated from :attr:`kind`."""
        schema = schema_of(self.kind)
        properties = schema["properties"]
        assert isinstance(properties, dict)
        properties["schema_version"] = {"const": self.version}
        required = schema.get("required")
        if isinstance(required, list) and "schema_version" not in required:
            required.insert(0, "schema_version")
        return {
            "$schema": schema["$schema"],
            "$id": f"https://llmrig.invalid/bench/{self.name}-{self.version}.schema.json",
            "title": f"{self.title}, schema_version {self.version}",
            **{key: value for key, value in schema.items() if key != "$schema"},
        }

    def schema_text(self) -> str:
        """The generated schema as the committed file holds it."""
        return dumps(self.schema())

    def committed(self) -> JsonObject:
        """The committed schema, as shipped with the package."""
        loaded: JsonObject = json.loads(self.schema_file.read_text(encoding="utf-8"))
        return loaded

    def write_schema(self) -> Path:
        """Write the generated schema over the committed file; its path."""
        self.schema_file.write_text(self.schema_text(), encoding="utf-8")
        return self.schema_file
