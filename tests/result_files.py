"""Result files as every test tier reads them: checked against the committed JSON Schema
(``bench/measure/run/result.schema.json``) with the ``jsonschema`` package, then read through
bench's own types, which must give back every key and value of the file.

The tests that read a file ``bench run`` wrote call :func:`load_result` (the unit tier's
scripted-server runs, the integration tier's runs against real engines); ``tests/conftest.py``
also calls :func:`check_results_under` after every test that used ``tmp_path``, so a file no
test reads (a partial result, a second level's file) is checked too.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema

from bench.codec import to_json
from bench.measure.run.results import RESULT_FILE

VALIDATOR = jsonschema.Draft202012Validator(RESULT_FILE.committed())


def load_result(path: Path) -> dict[str, Any]:
    """The result file at ``path``, valid against the schema and read back whole by the types."""
    document: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    errors = VALIDATOR.iter_errors(document)
    problems = [f"{'/'.join(map(str, error.absolute_path))}: {error.message}" for error in errors]
    assert not problems, f"{path} does not match {RESULT_FILE.schema_file.name}:\n" + "\n".join(problems[:20])
    assert to_json(RESULT_FILE.read(path)) == document, f"{path}: the result types do not read back what the file holds"
    return document


def result_files_under(root: Path) -> list[Path]:
    """Every result file (``results/<tag>/<run>.json``) below ``root``."""
    return sorted(path for path in root.rglob("*.json") if path.parent.parent.name == "results")


def check_results_under(root: Path) -> int:
    """Check every result file below ``root`` as :func:`load_result` does; how many there were."""
    found = result_files_under(root)
    for path in found:
        load_result(path)
    return len(found)
