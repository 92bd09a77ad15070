"""The JSON Schema of result files, generated from :class:`~bench.measure.results.RunResult`.

``result.schema.json`` beside this module is the committed copy (shipped with the package);
``python -m bench.measure.schema`` writes it again after a change to the result types, and a
unit test fails while the two differ.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from bench.measure.codec import JsonObject, schema_of
from bench.measure.results import SCHEMA_VERSION, RunResult

SCHEMA_FILE = Path(__file__).with_name("result.schema.json")
REGENERATE = "python -m bench.measure.schema"


def document_schema(kind: type, version: int, name: str, what: str) -> JsonObject:
    """The schema of a document of type ``kind`` whose ``schema_version`` is ``version``;
    ``name`` ("result", "capacity") goes into its id, ``what`` ("bench run result") its title."""
    schema = schema_of(kind)
    properties = schema["properties"]
    assert isinstance(properties, dict)
    properties["schema_version"] = {"const": version}
    return {
        "$schema": schema["$schema"],
        "$id": f"https://llmrig.invalid/bench/{name}-{version}.schema.json",
        "title": f"{what}, schema_version {version}",
        **{key: value for key, value in schema.items() if key != "$schema"},
    }


def dumps(schema: JsonObject) -> str:
    """A schema as the committed files hold it."""
    return json.dumps(schema, indent=1, sort_keys=True) + "\n"


def generate() -> JsonObject:
    """The schema of a result file of this bench's :data:`~bench.measure.results.SCHEMA_VERSION`."""
    return document_schema(RunResult, SCHEMA_VERSION, "result", "bench run result")


def text() -> str:
    """The schema as the committed file holds it."""
    return dumps(generate())


def committed() -> JsonObject:
    """The committed schema, as shipped with the package."""
    loaded: JsonObject = json.loads(SCHEMA_FILE.read_text(encoding="utf-8"))
    return loaded


def main() -> int:
    """Write the generated schema over the committed file."""
    SCHEMA_FILE.write_text(text(), encoding="utf-8")
    print(f"wrote {SCHEMA_FILE}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
