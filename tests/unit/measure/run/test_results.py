"""bench.measure.run.results and its schema: the committed JSON Schema is the one the types
generate, it ships with the package, and a file of another schema_version or shape is refused
with an error that names the file."""

from __future__ import annotations

import base64
import gzip
import json
import tomllib
from dataclasses import replace
from pathlib import Path

import pytest

from bench.cli.schemas import REGENERATE
from bench.errors import BenchError, ResultFileError
from bench.measure.run.results import RESULT_FILE, decode_events, records_by_level
from tests.helpers import REPO
from tests.result_files import VALIDATOR, check_results_under
from tests.synthetic_runs import Shape, make_run


def test_the_committed_schema_is_the_generated_one() -> None:
    """result.schema.json equals what the result types generate today."""
    assert RESULT_FILE.committed() == RESULT_FILE.schema(), (
        f"{RESULT_FILE.schema_file.name} is out of date with the result types: run `{REGENERATE}` and commit it"
    )


def test_the_schema_ships_as_package_data() -> None:
    """pyproject.toml lists the schema as package data of bench, so an installed bench has it."""
    config = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    shipped = config["tool"]["setuptools"]["package-data"]["bench"]
    assert "measure/run/result.schema.json" in shipped
    assert (REPO / "bench" / "measure" / "run" / "result.schema.json").is_file()


def test_the_schema_pins_the_schema_version() -> None:
    """A file validates only with the schema_version this bench writes."""
    assert RESULT_FILE.schema()["properties"]["schema_version"] == {"const": RESULT_FILE.version}  # type: ignore[index]


@pytest.mark.parametrize("found", [2, 0, "1", None])
def test_another_schema_version_is_refused_naming_the_file_and_both_versions(tmp_path: Path, found: object) -> None:
    """Reading a file of another schema_version fails with a ResultFileError (exit 2)."""
    path = tmp_path / "old.json"
    path.write_text(json.dumps({"schema_version": found, "levels": []}), encoding="utf-8")
    with pytest.raises(ResultFileError) as raised:
        RESULT_FILE.read(path)
    assert str(raised.value) == (
        f"{path}: schema_version {found!r}; this bench reads bench result files "
        f"of schema_version {RESULT_FILE.version} only"
    )
    assert isinstance(raised.value, BenchError)
    assert raised.value.exit_code == 2


def test_a_file_of_the_right_version_but_the_wrong_shape_names_the_key(tmp_path: Path) -> None:
    """A missing key is named with its path in the document."""
    path = tmp_path / "broken.json"
    path.write_text(json.dumps({"schema_version": RESULT_FILE.version, "run_id": "r"}), encoding="utf-8")
    with pytest.raises(ResultFileError, match=rf"^{path}: not a bench result of schema_version 1: tag: missing$"):
        RESULT_FILE.read(path)


def test_a_file_that_is_not_json_names_the_file(tmp_path: Path) -> None:
    """Unreadable JSON is a ResultFileError too, never a traceback."""
    path = tmp_path / "cut.json"
    path.write_text('{"schema_version": 1, ', encoding="utf-8")
    with pytest.raises(ResultFileError, match=rf"^{path}: cannot read it as JSON"):
        RESULT_FILE.read(path)


def test_the_result_file_check_finds_a_file_that_breaks_the_schema(tmp_path: Path) -> None:
    """The check every test's tmp_path gets (tests/conftest.py) fails on a file the schema refuses."""
    broken = tmp_path / "results" / "t" / "run.json"
    broken.parent.mkdir(parents=True)
    broken.write_text(json.dumps({"schema_version": RESULT_FILE.version}), encoding="utf-8")
    with pytest.raises(AssertionError, match=r"does not match result\.schema\.json"):
        check_results_under(tmp_path)
    broken.unlink()  # so this test's own check passes
    assert check_results_under(tmp_path) == 0


def test_requests_filed_before_bench_kept_the_servers_message_read_back() -> None:
    """Files written before RequestRecord had ``error_message`` hold records without the key:
    they read back (bench compare and bench report read every request), the message None."""
    run = make_run("t", [Shape(ttft_ms=100.0, tpot_ms=20.0, requests=4)], seed=1)
    entries = decode_events(run.requests_events_gzip_b64)
    assert all("error_message" in entry for entry in entries)
    older = [{key: value for key, value in entry.items() if key != "error_message"} for entry in entries]
    blob = base64.b64encode(gzip.compress("\n".join(map(json.dumps, older)).encode())).decode()
    (records,) = records_by_level(replace(run, requests_events_gzip_b64=blob))
    assert [record.index for record in records] == [0, 1, 2, 3]
    assert {record.error_message for record in records} == {None}


def test_a_file_written_before_a_workload_flag_existed_reads_with_that_flags_default(tmp_path: Path) -> None:
    """An agent run filed before --tool-rounds, --cold-prefix and the trace flags existed: its
    options lack them; it still validates and reads, and those flags read as their defaults."""
    run = make_run("old", [Shape(100.0, 20.0)], 0, workload="agent")
    path = RESULT_FILE.write(tmp_path / "old" / "run.json", run)
    document = json.loads(path.read_text(encoding="utf-8"))
    added = ("tool_rounds", "tool_result_tokens", "think_time", "session_interval", "cold_prefix", "trace", "speedup")
    for key in added:
        del document["options"][key]
    path.write_text(json.dumps(document), encoding="utf-8")
    assert list(VALIDATOR.iter_errors(document)) == []  # the schema takes it
    options = RESULT_FILE.read(path).options
    assert (options.integer("tool_rounds"), options.flag("cold_prefix"), options.text("trace")) == (0, False, "")
    assert options.floats("think_time") == (0.0,)
