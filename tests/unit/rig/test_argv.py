"""bench.rig.argv: the one parser of a recorded engine command line, read the way the engines'
own argument parsers read it (the three parsers it replaced disagreed on each case below)."""

from __future__ import annotations

import pytest

from bench.rig.argv import flag_name, flag_value, has_flag, parse_flags


def test_values_switches_and_inline_values() -> None:
    """``--flag value``, ``--flag=value`` and a switch; the order flags were first given is kept."""
    args = ["--model", "/m", "--enforce-eager", "--reasoning-parser=qwen3", "--max-model-len", "2048"]
    assert parse_flags(args) == {
        "--model": "/m",
        "--enforce-eager": None,
        "--reasoning-parser": "qwen3",
        "--max-model-len": "2048",
    }
    assert list(parse_flags(args)) == ["--model", "--enforce-eager", "--reasoning-parser", "--max-model-len"]


def test_a_short_flag_after_a_switch_is_a_flag_not_its_value() -> None:
    """``--enforce-eager -tp 2``: -tp is a flag of its own (the result store read it as the switch's value)."""
    assert parse_flags(["--enforce-eager", "-tp", "2", "-c", "8192"]) == {
        "--enforce-eager": None,
        "-tp": "2",
        "-c": "8192",
    }


@pytest.mark.parametrize("value", ["-1", "-0.5", "{}", "/health,/metrics"])
def test_a_value_that_starts_like_a_flag_but_is_none_stays_a_value(value: str) -> None:
    """A negative number (vLLM's -1 for auto) and other values are the flag's value."""
    assert flag_value(["--max-model-len", value], "--max-model-len") == value


def test_the_last_occurrence_wins_as_in_argparse() -> None:
    """A flag given twice has its last value (the planner's old reader took the first)."""
    assert flag_value(["--max-model-len", "1024", "--max-model-len=4096"], "--max-model-len") == "4096"


def test_underscores_are_the_dashed_flag() -> None:
    """vLLM reads --max_model_len as --max-model-len; a short flag keeps its spelling."""
    assert flag_name("--max_model_len=4096") == "--max-model-len"
    assert flag_name("-tp") == "-tp"
    assert flag_value(["--max_model_len", "4096"], "--max-model-len") == "4096"


@pytest.mark.parametrize("token", ["serve", "/m", "-1", "", "-", "--"])
def test_tokens_that_are_not_flags(token: str) -> None:
    """Positionals, numbers and bare dashes name no flag."""
    assert flag_name(token) is None


def test_positionals_are_left_out_and_presence_is_told_apart_from_a_value() -> None:
    """``serve /m``: no flags; a switch is present but has no value."""
    args = ["serve", "/m", "--enable-auto-tool-choice"]
    assert parse_flags(args) == {"--enable-auto-tool-choice": None}
    assert has_flag(args, "--enable-auto-tool-choice")
    assert flag_value(args, "--enable-auto-tool-choice") is None
    assert not has_flag(args, "--tool-call-parser")
