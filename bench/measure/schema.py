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


def generate() -> JsonObject:
    """The schema of a result file of this bench's :data:`~bench.measure.results.SCHEMA_VERSION`."""
    schema = schema_of(RunResult)
    properties = schema["properties"]
    assert isinstance(properties, dict)
    properties["schema_version"] = {"const": SCHEMA_VERSION}
    return {
        "$schema": schema["$schema"],
        "$id": f"https://llmrig.invalid/bench/result-{SCHEMA_VERSION}.schema.json",
        "title": f"bench run result, schema_version {SCHEMA_VERSION}",
        **{key: value for key, value in schema.items() if key != "$schema"},
    }


def text() -> str:
    """The schema as the committed file holds it."""
    return json.dumps(generate(), indent=1, sort_keys=True) + "\n"


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
