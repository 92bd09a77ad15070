"""Every committed JSON Schema of bench's versioned files, written or checked in one place.

``python -m bench.cli.schemas`` writes each schema again from its types (after a change to a
result type); ``python -m bench.cli.schemas --check`` (scripts/lint runs it) exits 1 naming each
committed schema that differs from its types. It lives in the CLI package because it names the
documents of both the rig core and the harness.
"""

from __future__ import annotations

import sys
from typing import Any

from bench.documents import Document
from bench.measure.capacity.result import CAPACITY_FILE
from bench.measure.probe.result import PROBE_FILE
from bench.measure.run.repeats import REPEAT_FILE
from bench.measure.run.results import RESULT_FILE
from bench.rig import DEPLOYMENT_FILE

REGENERATE = "python -m bench.cli.schemas"
DOCUMENTS: tuple[Document[Any], ...] = (RESULT_FILE, REPEAT_FILE, CAPACITY_FILE, PROBE_FILE, DEPLOYMENT_FILE)


def stale() -> list[Document[Any]]:
    """The documents whose committed schema differs from the one their types generate."""
    return [
        document
        for document in DOCUMENTS
        if not document.schema_file.is_file() or document.committed() != document.schema()
    ]


def main(argv: list[str] | None = None) -> int:
    """Write every schema, or with ``--check`` report the stale ones (exit 1)."""
    args = sys.argv[1:] if argv is None else argv
    if args == ["--check"]:
        out_of_date = stale()
        for document in out_of_date:
            print(f"{document.schema_file.name} is out of date with its types: run `{REGENERATE}`", file=sys.stderr)
        return 1 if out_of_date else 0
    if args:
        print(f"usage: {REGENERATE} [--check]", file=sys.stderr)
        return 2
    for document in DOCUMENTS:
        print(f"wrote {document.write_schema()}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
