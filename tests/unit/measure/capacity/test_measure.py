"""bench capacity against the scripted server (a protocol fake) whose per-stream decode speed
falls with the streams at once and with the prompt, and whose slots make the streams beyond
them wait, each in a known way, so the true capacity is known in advance and the search must
find it; the capacity file against its committed schema; flags refused by name.

Fake timings: a gap of ``itl_ms`` between token events (a stream decodes at 1000 / gap tok/s),
``slow_itl_ms`` past a number of streams at once or of prompt tokens. The step is wide (twice the
criterion's speed below it, two thirds of it above), so a busy machine's late wake-ups, which
only slow a stream, cannot move a level across the criterion: the searched answer is exact.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from bench.cli import main
from bench.codec import to_json
from bench.errors import ResultFileError
from bench.measure.capacity import result as capacity_results
from bench.measure.capacity.measure import CapacityOptions, execute
from bench.measure.capacity.result import CapacityResult, latest_capacity
from bench.measure.target import Target
from tests.helpers import REPO
from tests.scripted import KEY, Scripted, read_table

VALIDATOR = jsonschema.Draft202012Validator(
    json.loads(capacity_results.CAPACITY_FILE.schema_file.read_text(encoding="utf-8"))
)
MIN_DECODE = 50.0  # tok/s: a gap of 20 ms
FAST_MS, SLOW_MS = 10.0, 30.0  # one stream's gap: 100 tok/s, then 33.3 tok/s
CONTEXT_BOUNDARY = 5888  # the longest prompt that one stream decodes at 100 tok/s
# Half the requests: a level where every one met it passes after 4 measured requests (the 95%
# Wilson bound of 4 of 4 is 0.51), one where none did fails after 3 (0 of 3: at most 0.48).
TARGET = 0.5


def _target(server: Scripted) -> Target:
    return Target(base_url=server.base_url, api_key=KEY, model="scripted", tag="t", engine="vllm", deployment=None)


def _capacity(server: Scripted, tmp_path: Path, **changes: Any) -> tuple[CapacityResult, Path]:
    fields: dict[str, Any] = {
        "results_dir": tmp_path / "results",
        "min_decode_tps": MIN_DECODE,
        "max_concurrency": 16,
        "input_tokens": 256,
        "output_tokens": 32,  # a decode of 31 gaps: a late event moves the speed by under 1%
        "requests": 4,
        "context_requests": 3,
        "target_attainment": TARGET,
    }
    return asyncio.run(execute(_target(server), CapacityOptions(**{**fields, **changes})))


def _valid(path: Path) -> dict[str, Any]:
    document: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    problems = [error.message for error in VALIDATOR.iter_errors(document)]
    assert not problems, problems[:10]
    assert to_json(capacity_results.CAPACITY_FILE.read(path)) == document
    return document


def test_the_search_finds_exactly_the_users_the_fake_serves_at_the_speed(tmp_path: Path) -> None:
    """Up to 6 streams at once decode at 100 tok/s, more at 33.3, so 6 users keep 50 tok/s. The
    search measures 1, 2, 4, 8, 6, 7 and answers 6 (7 failed on decode speed); the file validates
    and is the tag's latest."""
    server = Scripted(
        tmp_path, ttft_ms=20.0, itl_ms=FAST_MS, slow_itl_ms=SLOW_MS, slow_above_streams=6, max_model_len=16384
    )
    try:
        result, path = _capacity(server, tmp_path, context=False)
    finally:
        server.close()
    users = result.probes
    assert [(p.value, p.verdict) for p in users] == [
        (1, "pass"), (2, "pass"), (4, "pass"), (8, "fail"), (6, "pass"), (7, "fail")
    ]  # fmt: skip
    assert (result.max_users.outcome, result.max_users.value, result.max_users.first_failed) == ("found", 6, 7)
    failed = users[-1]
    assert failed.requests_met == 0
    assert failed.because == [f"attainment below 0.5: at most {failed.interval_high:.2f} at 95% confidence"]
    assert failed.decode_tps_low is not None
    assert failed.decode_tps_low < 40  # the slow streams' speed, not the fast ones'
    assert result.longest_context is None
    document = _valid(path)
    assert document["schema_version"] == 2
    assert document["criteria"] == {
        "min_decode_tps": 50.0, "max_ttft_ms": 2000.0, "target_attainment": 0.5, "confidence": 0.95
    }  # fmt: skip
    assert path.parent == tmp_path / "results" / "t" / "capacity"
    assert to_json(latest_capacity(tmp_path / "results", "t")) == document


def test_the_search_finds_the_longest_context_within_its_precision(tmp_path: Path) -> None:
    """One stream decodes prompts up to 5,888 tokens at 100 tok/s and longer ones at 33.3, so
    prompts up to 5,888 tokens keep 50 tok/s: the answer passed, is at most 5,888, and the first
    failure is above 5,888 and at most max(64, answer / 8) further; the search ran from
    --input-tokens up to the served context less the output."""
    server = Scripted(
        tmp_path,
        ttft_ms=20.0,
        itl_ms=FAST_MS,
        slow_itl_ms=SLOW_MS,
        slow_above_prompt_tokens=CONTEXT_BOUNDARY,
        max_model_len=16384,
    )
    try:
        result, path = _capacity(server, tmp_path, max_concurrency=1)
    finally:
        server.close()
    assert result.max_users.outcome == "cap_passed"  # one stream, and the cap of 1 passed
    answer = result.longest_context
    assert answer is not None
    assert answer.value is not None
    assert answer.first_failed is not None
    assert answer.outcome == "found"
    assert answer.value <= CONTEXT_BOUNDARY < answer.first_failed
    assert answer.first_failed - answer.value <= max(64, answer.value // 8)
    assert (answer.lowest, answer.cap) == (256, 16384 - 32)
    context = [probe.value for probe in result.probes if probe.axis == "context"]
    assert context[:6] == [256, 512, 1024, 2048, 4096, 8192]
    _valid(path)


def test_streams_beyond_the_slots_wait_and_ttft_fails_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Three slots: a fourth stream waits for one to free (TTFT up by most of an answer, 330 ms),
    so with --max-ttft 0.15 a quarter to a third of the requests at 4 streams miss it, too many
    for 0.9 of them to meet it, and the answer is 3 users; the CLI prints the levels in the order
    measured, each level's attainment, and the answer, and files what it printed. (80%
    confidence: 15 requests, all met, show 0.9, where 95% would take 35.)"""
    monkeypatch.setenv("COLUMNS", "200")  # one line per level: the verdicts are long
    server = Scripted(tmp_path, ttft_ms=20.0, itl_ms=10.0, slots=3, max_model_len=0)
    try:
        args = ["capacity", "--base-url", server.base_url, "--api-key", KEY, "--tag", "t"]
        args += ["--results-dir", str(tmp_path / "results"), "--min-decode", "20", "--max-ttft", "0.15"]
        args += ["--target-attainment", "0.9", "--confidence", "0.8"]
        args += ["--max-concurrency", "8", "--input-tokens", "64", "--output-tokens", "32", "--requests", "4"]
        code = main([*args, "--no-context"])
        out = capsys.readouterr().out
        no_length = main(args)
        err = capsys.readouterr().err
    finally:
        server.close()
    assert code == 0, out
    header, rows = read_table(out, "search")
    columns = ["search", "level", "sent", "met", "attainment [interval]", "decode p10", "TTFT p95", "verdict"]
    assert header == columns
    assert [row[1] for row in rows] == ["c=1", "c=2", "c=4", "c=3"]
    assert [row[7].split(":")[0] for row in rows] == ["pass", "pass", "fail", "pass"]
    assert rows[2][7].startswith("fail: attainment below 0.9: at most 0.")
    assert rows[2][7].endswith(" at 80% confidence")
    assert "max users: 3 (4 failed)" in out
    assert "longest context" not in out
    (path,) = (tmp_path / "results" / "t" / "capacity").glob("*.json")
    document = _valid(path)
    assert document["longest_context"] is None
    assert document["max_users"]["value"] == 3
    assert no_length == 2
    assert "--max-context: the server does not say its context length" in err


def test_a_context_level_at_the_target_is_inconclusive_and_the_cli_gives_no_number(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past 350 prompt tokens every second request decodes slowly, so half of them meet the
    service level, the target 0.5 (of the measured ones, a third or two thirds: each batch's
    first request is warm-up). Those levels stay inconclusive through the batches that
    --max-requests-per-level 12 allows (3 or 6 of 9 leave 0.5 inside the interval); 320 passes,
    384 is the first level that did not, and it is inconclusive, so the longest context has no
    number: the CLI names 384, its attainment and interval, and the flag that samples more; the
    file says the same."""
    monkeypatch.setenv("COLUMNS", "250")
    server = Scripted(
        tmp_path,
        ttft_ms=20.0,
        itl_ms=FAST_MS,
        slow_itl_ms=SLOW_MS,
        slow_above_prompt_tokens=350,
        slow_every=2,
        max_model_len=16384,
    )
    try:
        args = ["capacity", "--base-url", server.base_url, "--api-key", KEY, "--tag", "t"]
        args += ["--results-dir", str(tmp_path / "results"), "--min-decode", str(MIN_DECODE)]
        args += ["--target-attainment", str(TARGET), "--max-concurrency", "1", "--input-tokens", "256"]
        args += ["--output-tokens", "32", "--requests", "4", "--context-requests", "4"]
        code = main([*args, "--max-requests-per-level", "12", "--max-context", "1024"])
        out = capsys.readouterr().out
    finally:
        server.close()
    assert code == 0, out
    (path,) = (tmp_path / "results" / "t" / "capacity").glob("*.json")
    _valid(path)
    result = capacity_results.CAPACITY_FILE.read(path)
    context = [probe for probe in result.probes if probe.axis == "context"]
    assert [(p.value, p.verdict) for p in context] == [
        (256, "pass"), (512, "inconclusive"), (384, "inconclusive"), (320, "pass")
    ]  # fmt: skip
    answer = result.longest_context
    assert answer is not None
    assert (answer.outcome, answer.value, answer.first_failed, answer.undecided) == ("inconclusive", 320, None, 384)
    undecided = context[2]
    assert undecided.requests_sent == 12  # three batches of 4, the most the level may send
    assert undecided.interval_low is not None
    assert undecided.interval_high is not None
    assert undecided.interval_low < TARGET <= undecided.interval_high
    assert undecided.because == ["no room for another batch of 4 under --max-requests-per-level 12"]
    assert result.max_users.outcome == "cap_passed"
    line = next(line for line in out.splitlines() if line.startswith("longest context:"))
    assert line == (
        f"longest context: no answer (320 prompt tokens passed): 384 tok is inconclusive, attainment "
        f"{undecided.attainment:.2f} [{undecided.interval_low:.2f}, {undecided.interval_high:.2f}] after "
        f"{undecided.requests_measured} measured requests, its 95% interval straddling 0.5; no room for another "
        "batch of 4 under --max-requests-per-level 12: raise it to sample more"
    )
    assert "longest context: 320" not in out


def test_a_budget_that_runs_out_answers_at_least_the_highest_pass(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every level passes, but --budget 40 pays only for the first levels: the search stops when
    the next level's first batch would pass it, and the answer is "at least" the highest level
    that passed, never a plain number; the file records what was sent and where it stopped."""
    monkeypatch.setenv("COLUMNS", "200")
    server = Scripted(tmp_path, ttft_ms=20.0, itl_ms=FAST_MS, max_model_len=16384)
    try:
        args = ["capacity", "--base-url", server.base_url, "--api-key", KEY, "--tag", "t", "--no-context"]
        args += ["--results-dir", str(tmp_path / "results"), "--min-decode", str(MIN_DECODE)]
        args += ["--target-attainment", str(TARGET), "--input-tokens", "256", "--output-tokens", "32"]
        code = main([*args, "--requests", "4", "--budget", "40"])
        out = capsys.readouterr().out
    finally:
        server.close()
    assert code == 0, out
    (path,) = (tmp_path / "results" / "t" / "capacity").glob("*.json")
    _valid(path)
    result = capacity_results.CAPACITY_FILE.read(path)
    users = result.max_users
    assert users.outcome == "at_least"
    assert all(probe.verdict == "pass" for probe in result.probes)
    assert users.value == result.probes[-1].value
    assert users.requests_sent == sum(probe.requests_sent for probe in result.probes) <= 40
    assert users.undecided == 2 * users.value  # the next level of the growth
    assert users.requests_sent + max(4, 4 * users.undecided) > 40  # its first batch would not fit
    assert (
        f"max users: at least {users.value}: the budget of 40 requests ran out before c={users.undecided} "
        f"({users.requests_sent} sent); raise --budget to search further"
    ) in out


@pytest.mark.parametrize(
    ("flags", "named"),
    [
        (["--min-decode", "0"], "--min-decode: must be above 0"),
        (["--max-ttft", "-1"], "--max-ttft: must be above 0"),
        (["--max-concurrency", "0"], "--max-concurrency: must be at least 1"),
        (["--requests", "1"], "--requests: must be at least 2"),
        (["--output-tokens", "1"], "--output-tokens: must be at least 2"),
        (["--max-context", "100", "--input-tokens", "512"], "--max-context: must be at least 512"),
        (["--target-attainment", "1"], "--target-attainment: must be between 0 and 1"),
        (["--confidence", "0"], "--confidence: must be between 0 and 1"),
        (["--max-requests-per-level", "4"], "--max-requests-per-level: must be at least 8"),
        (["--budget", "7"], "--budget: must be at least 8"),
    ],
)
def test_bad_flags_are_refused_by_name_before_any_request(
    flags: list[str], named: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Each impossible setting exits 2 with one line naming its flag (the URL is never tried)."""
    code = main(["capacity", "--base-url", "http://127.0.0.1:9/v1", "--tag", "t", *flags])
    assert code == 2
    assert named in capsys.readouterr().err


def test_the_committed_capacity_schema_is_the_generated_one() -> None:
    """capacity.schema.json equals what the capacity types generate, and ships as package data."""
    committed = json.loads(capacity_results.CAPACITY_FILE.schema_file.read_text(encoding="utf-8"))
    assert committed == capacity_results.CAPACITY_FILE.schema(), "run `python -m bench.cli.schemas`"
    pyproject = (REPO / "pyproject.toml").read_text(encoding="utf-8")
    assert '"measure/capacity/capacity.schema.json"' in pyproject


def test_latest_capacity_reads_the_newest_and_refuses_other_versions(tmp_path: Path) -> None:
    """No file: None; a file of another schema_version is refused naming it and both versions."""
    assert latest_capacity(tmp_path, "t") is None
    folder = tmp_path / "t" / "capacity"
    folder.mkdir(parents=True)
    (folder / "20260101T000000.000000Z.json").write_text('{"schema_version": 7}', encoding="utf-8")
    with pytest.raises(
        ResultFileError, match="schema_version 7; this bench reads bench capacity files of schema_version 2"
    ):
        latest_capacity(tmp_path, "t")
