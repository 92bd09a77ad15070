"""What `bench run` prints: the summary table read back cell by cell against the result file,
the help of `bench run`, and the progress bar's level labels."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from bench.cli import main
from bench.measure.run.progress import SUMMARY_CAPTION
from tests.result_files import load_result
from tests.scripted import FAST, read_table, result_files, run_args, scripted

COLUMNS = ["level", "in", "ok", "TTFT", "TPOT", "tok/s", "out tok/s", "stall", "trusted"]
FAULTS = {
    "3": {"status": 500},
    "5": {"truncate_after": 2},
    "7": {"malformed_after": 1},
    "9": {"status": 400, "error_message": "This model's maximum context length is 4096 tokens"},
}


def _number(cell: str) -> float | None:
    return None if cell == "-" else float(cell.replace(",", ""))


def _rounded(value: float | None, digits: int) -> float | None:
    return None if value is None else round(value, digits)


def _check_row(cells: list[str], level: dict[str, Any]) -> None:
    """Every cell of one row against the level's numbers in the result file."""
    row = dict(zip(COLUMNS, cells, strict=True))
    requests, latency = level["requests"], level["latency"]
    assert row["level"] == level["label"]
    assert int(row["in"]) == level["tokens"]["input_target"]
    assert row["ok"] == f"{requests['successful']}/{requests['total']}"
    assert _number(row["TTFT"]) == _rounded(latency["ttft_ms"]["p50"], 1)
    assert _number(row["TPOT"]) == _rounded(latency["tpot_ms"]["p50"], 2)
    assert _number(row["tok/s"]) == _rounded(level["decode_tps"]["p50"], 1)
    assert _number(row["out tok/s"]) == _rounded(level["throughput"]["output_tps"], 1)
    assert _number(row["stall"]) == _rounded(level["stall_max_ms"], 0)
    assert row["trusted"] == ("yes" if level["untrusted_because"] == [] else "no")


@pytest.mark.parametrize(
    ("scenario", "flags", "code"),
    [
        ({}, ["sweep", "--concurrency", "1", "2", "--requests", "4"], 0),
        ({"requests": FAULTS}, ["single", "--requests", "8"], 3),
    ],
    ids=["sweep", "failed-requests"],
)
def test_summary_table_cells_are_the_result_files_numbers(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], scenario: dict[str, Any], flags: list[str], code: int
) -> None:
    """The printed table, parsed back: the header is the column list, one row per level, and
    every cell is the number the result file holds for that level and column."""
    with scripted(tmp_path, **FAST, **scenario) as server:
        assert main(run_args(server, tmp_path, flags[0], *flags[1:])) == code
    out = capsys.readouterr().out
    (path,) = result_files(tmp_path)
    document = load_result(path)
    header, rows = read_table(out)
    assert header == COLUMNS
    assert len(rows) == len(document["levels"]) >= 1
    for cells, level in zip(rows, document["levels"], strict=True):
        _check_row(cells, level)
    assert SUMMARY_CAPTION in " ".join(out.split())  # the caption, wrapped to the table's width
    assert f"result: {path}" in out


def test_failed_requests_are_listed_by_kind_under_the_table(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """4 of 8 requests fail, one of each kind: the row says 4/8 and untrusted, the line under
    the table says how many failed and why, and the file's level and run are untrusted."""
    with scripted(tmp_path, **FAST, requests=FAULTS) as server:
        assert main(run_args(server, tmp_path, "single", "--requests", "8")) == 3
    captured = capsys.readouterr()
    (path,) = result_files(tmp_path)
    document = load_result(path)
    (level,) = document["levels"]
    kinds = {"context_overflow": 1, "http_500": 1, "malformed": 1, "truncated": 1}
    assert level["requests"]["errors_by_kind"] == kinds
    reason = "4 of 8 requests failed: context_overflow 1, http_500 1, malformed 1, truncated 1"
    assert level["untrusted_because"] == [reason]
    assert document["trusted"] is False
    assert f"c=1: {reason}" in captured.out
    _, rows = read_table(captured.out)
    assert [rows[0][2], rows[0][-1]] == ["4/8", "no"]
    assert captured.err.splitlines()[-1] == f"bench: error: {reason}; the result is marked untrusted"


def test_run_help_says_each_default_once_and_lists_every_workload(capsys: pytest.CaptureFixture[str]) -> None:
    """No "(default: None)" or "(default: False)", hand-written defaults not repeated, agent listed."""
    with pytest.raises(SystemExit) as done:
        main(["run", "--help"])
    assert done.value.code == 0
    text = " ".join(capsys.readouterr().out.split())  # undo argparse's wrapping
    assert "(default: None)" not in text
    assert "(default: False)" not in text
    assert "agent: coding-agent sessions" in text
    assert "--input-tokens INPUT_TOKENS prompt length in tokens, as the server counts them (default: 512)" in text
    assert "--rate RATE [RATE ...] rate levels, requests per second (default: 0.5 1 2)" in text
    assert "--read-timeout SECONDS longest wait for the next bytes of an answer" in text
    assert "--request-timeout SECONDS, --timeout SECONDS longest one request may take" in text
    options = re.split(r" (?=--[a-z-]+ )", text.split("options:", 1)[1])
    for option in options:  # an appended "(default: X)" only where the help says no default itself
        assert "(default:" not in option or option.count("default") == 1, option


def test_progress_labels_a_rate_level_by_its_rate(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The bar of an open-loop level shows its rate, not the in-flight cap (--max-in-flight)."""
    with scripted(tmp_path, **FAST) as server:
        assert main(run_args(server, tmp_path, "rate", "--requests", "4", "--rate", "20", "40")) == 0
    captured = capsys.readouterr()
    bars = [line for line in captured.err.splitlines() if "errors" in line]
    assert [line.split("━")[0].strip() for line in bars] == ["rate 20 req/s", "rate 40 req/s"]
    assert "concurrency" not in captured.err
    _, rows = read_table(captured.out)
    assert [row[0] for row in rows] == ["20 req/s", "40 req/s"]
