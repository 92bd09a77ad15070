"""A stall (a gap between two tokens of one answer over 10 times the level's median gap and over
2 s) makes its level untrusted, with the reason and the worst gap: exactly on recorded requests,
and live against the scripted server, whose stalls are scheduled to the millisecond."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.cli import main
from bench.measure.metrics import NS_PER_MS, Event, RequestRecord, request_metrics
from bench.measure.run.levels import STALL_MIN_MS, level_summary, stall_bound_ms
from bench.measure.run.loops import LevelRun, LevelSpec
from tests.result_files import load_result
from tests.scripted import read_table, result_files, run_args, scripted

TOKENS = 9


def _request(index: int, start_ns: int, gap_ms: float, stall_ms: float | None) -> RequestRecord:
    """Nine tokens ``gap_ms`` apart, the fifth gap ``stall_ms`` long where given."""
    times, t = [], start_ns + 50 * NS_PER_MS
    for token in range(TOKENS):
        times.append(t)
        t += round((stall_ms if stall_ms is not None and token == 4 else gap_ms) * NS_PER_MS)
    return RequestRecord(
        index=index,
        t_disp_ns=start_ns,
        t_end_ns=times[-1] + NS_PER_MS,
        events=tuple(Event(t_ns=time, content_chars=5) for time in times),
        requested_tokens=TOKENS,
        prompt_tokens=64,
        completion_tokens=TOKENS,
        finish_reason="length",
    )


def _level(gap_ms: float, stalls: dict[int, float]) -> LevelRun:
    """Twelve requests one after another (concurrency 1), those in ``stalls`` with that stall."""
    level = LevelRun(LevelSpec(requests=12, input_tokens=64, output_tokens=TOKENS), complete=True)
    start = 10**12
    for index in range(12):
        record = _request(index, start, gap_ms, stalls.get(index))
        level.records.append(record)
        start = record.t_end_ns + NS_PER_MS
    return level


def test_a_third_of_the_requests_stalling_makes_the_level_untrusted() -> None:
    """Gaps of 20 ms, a 10 s gap in 4 of the 10 measured requests (the first two are warm-up): TPOT p50
    barely moves, the reason names the 4 and the 10,000 ms, the worst gap is the level's stall max."""
    result = level_summary(_level(20.0, {2: 10_000.0, 5: 10_000.0, 8: 10_000.0, 11: 9_000.0}))
    assert result.requests.measured == 10
    assert result.stall_max_ms == 10_000.0
    assert result.untrusted_because == [
        "4 of 10 requests stalled: up to 10,000 ms between two tokens "
        "(a stall: over 10 times the level's median gap and over 2,000 ms)"
    ]


def test_a_stall_in_every_request_is_one_too() -> None:
    """One gap of eight is long in each request: the median gap stays 20 ms, each is a stall."""
    result = level_summary(_level(20.0, dict.fromkeys(range(12), 10_000.0)))
    assert result.untrusted_because == [
        "10 of 10 requests stalled: up to 10,000 ms between two tokens "
        "(a stall: over 10 times the level's median gap and over 2,000 ms)"
    ]


@pytest.mark.parametrize(
    ("gap_ms", "stall_ms", "bound_ms"),
    [
        (20.0, 1_999.0, STALL_MIN_MS),  # under the absolute bound: a hiccup, not a stall
        (20.0, 2_000.0, STALL_MIN_MS),  # the bound itself is not over it
        (300.0, 2_999.0, 3_000.0),  # a slow server: 10 times its median gap of 300 ms
    ],
)
def test_a_gap_within_both_bounds_is_not_a_stall(gap_ms: float, stall_ms: float, bound_ms: float) -> None:
    level = _level(gap_ms, {3: stall_ms, 7: stall_ms})
    result = level_summary(level)
    assert result.untrusted_because == []
    assert result.stall_max_ms == stall_ms
    measured = [m for m in map(request_metrics, level.records) if m is not None]
    assert stall_bound_ms(measured) == bound_ms


def test_a_live_stall_is_untrusted_in_the_table_and_the_exit_status(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The scripted server holds the fifth token of two measured answers for 2.6 s (gaps of 10 ms
    otherwise): the table's stall column shows it, the level is untrusted with the reason, exit 6."""
    stall = {"stall_after": 4, "stall_ms": 2600.0}
    scenario = {"ttft_ms": 20.0, "itl_ms": 10.0, "content_tokens": 8, "requests": {"5": stall, "8": stall}}
    with scripted(tmp_path, **scenario) as server:
        assert main([*run_args(server, tmp_path), "--requests", "8"]) == 6
    captured = capsys.readouterr()
    (path,) = result_files(tmp_path)
    (level,) = load_result(path)["levels"]
    assert 2600.0 <= level["stall_max_ms"] < 10_000.0  # the scheduled 2.6 s, and whatever the load adds
    (reason,) = level["untrusted_because"]
    assert reason.startswith("2 of 7 requests stalled: up to 2,")
    header, rows = read_table(captured.out)
    assert header[-2:] == ["stall", "trusted"]
    assert rows[0][-2:] == [f"{level['stall_max_ms']:,.0f}", "no"]
    assert captured.err.splitlines()[-1].startswith(
        "bench: error: the run is not trusted (c=1: 2 of 7 requests stalled"
    )
