"""bench.measure.run.trace: reading a Mooncake-style trace (every refusal names the flag, the
file and the line), the prompts built from its hash ids (equal ids, equal text, block by block),
and the level the trace workload makes of it."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from bench.errors import ConfigError
from bench.measure.run.options import RunOptions
from bench.measure.run.prompts import Calibration, PromptFactory
from bench.measure.run.trace import TracePrompts, TraceRequest, read_trace

GOOD = [
    {"timestamp": 0, "input_length": 1000, "output_length": 10, "hash_ids": [5, 6]},
    {"timestamp": 0, "input_length": 512, "output_length": 3, "hash_ids": [5], "session_id": "kept aside"},
    {"timestamp": 27.5, "input_length": 7},
]


def _write(path: Path, lines: list[object] | list[str]) -> Path:
    text = "\n".join(line if isinstance(line, str) else json.dumps(line) for line in lines)
    path.write_text(text + "\n", encoding="utf-8")
    return path


def test_a_trace_is_read_in_file_order_with_its_digest(tmp_path: Path) -> None:
    """Equal timestamps are allowed (Mooncake's traces have them), a blank line is skipped, keys
    beside the four are ignored, hash_ids may be left out (that request shares nothing), and so
    may output_length (--output-tokens is asked for)."""
    path = _write(tmp_path / "t.jsonl", [json.dumps(GOOD[0]), "", *map(json.dumps, GOOD[1:])])
    trace = read_trace(path, 512, output_length=1)
    assert trace.requests == (
        TraceRequest(1, 0.0, 1000, 10, (5, 6)),
        TraceRequest(3, 0.0, 512, 3, (5,)),
        TraceRequest(4, 27.5, 7, 1, ()),  # output_length: the default given
    )
    assert trace.sha256 == hashlib.sha256(path.read_bytes()).hexdigest()
    assert trace.source(2.0, 512).file == "t.jsonl"


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("{not json", r"^--trace t\.jsonl line 2: not JSON \(Expecting property name"),
        ("[1, 2]", r"^--trace t\.jsonl line 2: a request is a JSON object, got list$"),
        ({"input_length": 5, "output_length": 1}, r"^--trace t\.jsonl line 2: timestamp must be .*got None$"),
        ({"timestamp": -1, "input_length": 5, "output_length": 1}, r"line 2: timestamp must be .* got -1$"),
        ({"timestamp": 1, "input_length": 0, "output_length": 1}, r"line 2: input_length must be .* least 1, got 0$"),
        ({"timestamp": 1, "input_length": 5, "output_length": True}, r"line 2: output_length .* got True$"),
        ({"timestamp": 1, "input_length": 5, "output_length": 1, "hash_ids": ["a"]}, r"line 2: hash_ids must be"),
        (
            {"timestamp": 1, "input_length": 600, "output_length": 1, "hash_ids": [1, 2, 3]},
            r"^--trace t\.jsonl line 2: 3 hash_ids for input_length 600; blocks of 512 tokens "
            r"\(--trace-block-size\) make 2$",
        ),
        (
            {"timestamp": 1, "input_length": 1025, "output_length": 1, "hash_ids": [1, 2]},
            r"line 2: 2 hash_ids for input_length 1025; blocks of 512 tokens \(--trace-block-size\) make 3$",
        ),
    ],
)
def test_a_bad_line_names_the_flag_the_file_and_the_line(tmp_path: Path, line: object, message: str) -> None:
    path = _write(tmp_path / "t.jsonl", [GOOD[0], line, GOOD[2]])  # type: ignore[list-item]
    with pytest.raises(ConfigError, match=message):
        read_trace(path, 512)


def test_timestamps_may_not_go_back(tmp_path: Path) -> None:
    path = _write(tmp_path / "t.jsonl", [GOOD[2], GOOD[0]])
    with pytest.raises(
        ConfigError, match=r"^--trace t\.jsonl line 2: timestamp 0 ms is before line 1's 27\.5 ms \(timestamps may"
    ):
        read_trace(path, 512)


def test_a_missing_file_an_empty_one_and_a_bad_block_size(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"^--trace: cannot read .*nope\.jsonl \(No such file or directory\)$"):
        read_trace(tmp_path / "nope.jsonl", 512)
    with pytest.raises(ConfigError, match=r"^--trace: .*one\.jsonl has 1 requests; a trace needs at least 2$"):
        read_trace(_write(tmp_path / "one.jsonl", [GOOD[0]]), 512)
    with pytest.raises(ConfigError, match=r"^--trace-block-size: must be at least 1 token, got 0$"):
        read_trace(_write(tmp_path / "t.jsonl", GOOD), 0)


# The scripted server's tokenizer: one token per word, 9 of chat template. Its calibration:
# salt (8 words) + tag (3) + instruction (3) + template (9) = 23 tokens of overhead, 1 per word.
SALT = "one two three four five six seven eight"
BUILDER = TracePrompts(PromptFactory(SALT, seed=3), Calibration(overhead=23.0, slope=1.0), block_size=64)


def _words(ids: tuple[int, ...], input_length: int, index: int = 0) -> list[str]:
    (message,) = BUILDER.messages(TraceRequest(1, 0.0, input_length, 1, ids), index)
    return message["content"].split()


def test_prompts_are_as_long_as_the_trace_says() -> None:
    """salt + content + instruction + template = input_length on a one-token-per-word server."""
    for length in (64, 100, 192, 200, 1000):
        blocks = tuple(range(-(-length // 64)))
        assert len(_words(blocks, length)) + 9 == length


def test_shared_hash_ids_give_identical_leading_blocks() -> None:
    """Block k (k >= 1) starts 64k - 20 words after the salt (23 tokens of overhead, 3 words of
    tag room); requests sharing j leading ids share 8 + 64j - 20 words, then differ."""
    a, b = _words((1, 2, 3), 192), _words((1, 2, 4), 150)
    assert a[: 8 + 128 - 20] == b[: 8 + 128 - 20]
    assert a[8 + 108 : 8 + 108 + 22] != b[8 + 108 : 8 + 108 + 22]
    partial = _words((1, 2), 100)  # block 2 holds 36 tokens: the first 36 words of id 2's block
    assert partial[:-3] == a[: 8 + 80]
    assert partial[-3:] == ["Continue", "this", "text."]
    other_salt = TracePrompts(PromptFactory("x " * 7 + "y", seed=3), BUILDER.calibration, 64)
    (message,) = other_salt.messages(TraceRequest(1, 0.0, 192, 1, (1, 2, 3)), 0)
    assert message["content"].split()[8:] != a[8:]  # another run, other text for the same ids


def test_requests_without_hash_ids_share_nothing_but_the_salt() -> None:
    a, b = _words((), 150, index=0), _words((), 150, index=1)
    assert a[:8] == b[:8]
    assert a[8:12] != b[8:12]


def test_a_request_below_the_prompt_overhead_is_refused_by_line() -> None:
    refusal = r"^--trace line 4: input_length 20 is not above this endpoint's fixed prompt overhead \(20 tokens"
    with pytest.raises(ConfigError, match=refusal):
        BUILDER.check(TraceRequest(4, 0.0, 20, 1, (1,)))
    BUILDER.check(TraceRequest(4, 0.0, 21, 1, (1,)))
    assert len(_words((1,), 21)) + 9 == 21  # one word after the salt


def _options(path: Path, **settings: object) -> RunOptions:
    given = {"trace": str(path), **settings}
    return RunOptions("trace", 20, 512, 128, Path("results"), settings=given)  # type: ignore[arg-type]


def test_the_trace_is_one_level_with_each_request_s_lengths(tmp_path: Path) -> None:
    """Its rate is the trace's mean arrival rate after the speed-up: 2 gaps over 27.5 ms / 2."""
    path = _write(tmp_path / "t.jsonl", GOOD)
    (level,) = _options(path, speedup=2.0, max_in_flight=3).levels()
    assert (level.requests, level.input_tokens, level.output_tokens, level.in_flight) == (3, 1000, 128, 3)
    assert level.targets == ((1000, 10), (512, 3), (7, 128))  # line 3 asks for --output-tokens
    assert level.rate == round(2 / 0.01375, 6)


def test_the_trace_workload_refuses_what_it_cannot_replay(tmp_path: Path) -> None:
    path = _write(tmp_path / "t.jsonl", GOOD)
    with pytest.raises(ConfigError, match=r"^--speedup: must be above 0, got 0$"):
        _options(path, speedup=0.0).levels()
    with pytest.raises(ConfigError, match=r"^--trace: the trace workload needs the JSONL file to replay$"):
        RunOptions("trace", 20, 512, 128, Path("results")).levels()
    with pytest.raises(ConfigError, match=r"^--max-in-flight: must be at least 1, got 0$"):
        _options(path, max_in_flight=0).levels()
    with pytest.raises(ConfigError, match=r"line 1: 2 hash_ids for input_length 1000; blocks of 1000"):
        _options(path, trace_block_size=1000).levels()
