"""bench.cli.schemas: every committed schema (result, repeats, capacity, probe, deployment) is the one its types
generate and ships as package data; ``--check`` names a stale or missing schema and exits 1."""

from __future__ import annotations

import dataclasses
import tomllib
from pathlib import Path

import pytest

from bench.cli import schemas
from tests.helpers import REPO


def test_every_committed_schema_is_the_generated_one_and_ships() -> None:
    """The five documents, each schema up to date and listed in pyproject's package data."""
    assert [document.name for document in schemas.DOCUMENTS] == ["result", "repeats", "capacity", "probe", "deployment"]
    assert schemas.stale() == []
    assert schemas.main(["--check"]) == 0
    config = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    shipped = config["tool"]["setuptools"]["package-data"]["bench"]
    for document in schemas.DOCUMENTS:
        assert str(document.schema_file.relative_to(REPO / "bench")) in shipped


def test_check_names_a_stale_and_a_missing_schema(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A committed schema that differs, and one that is not there, are both named; writing fixes both."""
    stale_file, missing_file = tmp_path / "result.schema.json", tmp_path / "probe.schema.json"
    stale_file.write_text("{}\n", encoding="utf-8")
    result, repeats, capacity, probe, deployment = schemas.DOCUMENTS
    moved = (
        dataclasses.replace(result, schema_file=stale_file),
        repeats,
        capacity,
        dataclasses.replace(probe, schema_file=missing_file),
        deployment,
    )
    monkeypatch.setattr(schemas, "DOCUMENTS", moved)
    assert schemas.main(["--check"]) == 1
    err = capsys.readouterr().err
    assert "result.schema.json is out of date with its types: run `python -m bench.cli.schemas`" in err
    assert "probe.schema.json is out of date" in err
    assert "capacity" not in err
    assert "repeats" not in err
    assert "deployment" not in err
    monkeypatch.setattr(schemas, "DOCUMENTS", (moved[0], moved[3]))
    assert schemas.main([]) == 0
    assert schemas.main(["--check"]) == 0
    assert schemas.main(["--bogus"]) == 2
