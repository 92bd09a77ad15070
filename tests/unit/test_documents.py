"""bench.documents, the one reader and writer of versioned files: the version is checked before the
shape, every refusal names the file, a write is atomic, and a type with or without a
``schema_version`` field of its own reads back what it wrote and validates against its schema."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

import jsonschema
import pytest

from bench.documents import Document
from bench.errors import ConfigError, ResultFileError


@dataclass(frozen=True, slots=True)
class Carried:
    """A document type that holds its version (as the run result does)."""

    schema_version: int
    name: str


@dataclass(frozen=True, slots=True)
class Bare:
    """A document type without one (as the probe result is)."""

    name: str
    count: int


def _kinds(tmp_path: Path) -> tuple[Document[Carried], Document[Bare]]:
    carried = Document(Carried, 3, "carried", "carried thing", "carried thing", tmp_path / "carried.schema.json")
    bare = Document(Bare, 2, "bare", "bare thing", "bare thing", tmp_path / "bare.schema.json", error=ConfigError)
    return carried, bare


def test_both_kinds_read_back_what_they_wrote_and_validate(tmp_path: Path) -> None:
    """The file holds schema_version either way; the schema requires exactly that version."""
    carried, bare = _kinds(tmp_path)
    for kind, value in ((carried, Carried(3, "a")), (bare, Bare("b", 4))):
        path = kind.write(tmp_path / "files" / f"{kind.name}.json", value)  # type: ignore[attr-defined]
        document = json.loads(path.read_text(encoding="utf-8"))
        assert document["schema_version"] == kind.version
        assert kind.read(path) == value
        jsonschema.validate(document, kind.schema())
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate({**document, "schema_version": kind.version + 1}, kind.schema())
        assert "schema_version" in kind.schema()["required"]  # type: ignore[operator]
    assert not list((tmp_path / "files").glob(".*"))  # no temporary file left


def test_refusals_name_the_file_and_both_versions_in_the_kinds_error(tmp_path: Path) -> None:
    """Another version, not an object, the wrong shape, not JSON: each its own words and the kind's error."""
    _, bare = _kinds(tmp_path)
    path = tmp_path / "x.json"
    cases = {
        '{"schema_version": 1, "name": "b", "count": 1}': (
            f"{path}: schema_version 1; this bench reads bare thing files of schema_version 2 only"
        ),
        "[1]": f"{path}: not a bare thing (a JSON object was expected)",
        '{"schema_version": 2, "name": "b"}': f"{path}: not a bare thing of schema_version 2: count: missing",
    }
    for text, message in cases.items():
        path.write_text(text, encoding="utf-8")
        with pytest.raises(ConfigError) as raised:
            bare.read(path)
        assert str(raised.value) == message
    path.write_text("{", encoding="utf-8")
    with pytest.raises(ConfigError, match=rf"^{path}: cannot read it as JSON"):
        bare.read(path)


@pytest.mark.parametrize("found", [True, 3.0, "3"])
def test_a_version_that_is_not_an_int_is_refused(tmp_path: Path, found: object) -> None:
    """true == 1 and 3.0 == 3 in Python, but the schema's const refuses them, and so does the reader."""
    carried, _ = _kinds(tmp_path)
    with pytest.raises(ResultFileError, match=rf"schema_version {re.escape(repr(found))}; this bench reads"):
        carried.parse({"schema_version": found, "name": "a"}, "somewhere")


def test_the_default_error_is_a_result_file_error(tmp_path: Path) -> None:
    """Result, capacity and probe files refuse with ResultFileError (exit 2)."""
    carried, _ = _kinds(tmp_path)
    with pytest.raises(ResultFileError):
        carried.parse({"schema_version": 1}, "somewhere")


def test_a_failed_write_leaves_the_old_file_whole(tmp_path: Path) -> None:
    """A value that cannot be encoded raises, and the file keeps its old content, no temporary left."""
    carried, _ = _kinds(tmp_path)
    path = carried.write(tmp_path / "c.json", Carried(3, "old"))
    with pytest.raises(TypeError):
        carried.write(path, Carried(3, object()))  # type: ignore[arg-type]
    assert carried.read(path) == Carried(3, "old")
    assert [item.name for item in tmp_path.iterdir()] == ["c.json"]
