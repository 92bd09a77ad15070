"""bench compare, tags and history on result files of known distributions, filed and read back
as bench run files them (tests/synthetic_runs.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.errors import ConfigError
from bench.measure.compare import comparison as compare
from bench.measure.compare import history, store
from bench.measure.compare.comparison import Comparison, Gate
from tests import deployments
from tests.synthetic_runs import Shape, deployment, file_run, make_run

SLOW = Shape(ttft_ms=100.0, tpot_ms=20.0, requests=24)
FAST = Shape(ttft_ms=100.0, tpot_ms=10.0, requests=24)
AUTO = deployment(kv_cache_dtype="auto")
FP8 = deployment(kv_cache_dtype="fp8")


def _file(results: Path, tag: str, shape: Shape, seeds: range, day: int, **kwargs: object) -> None:
    for seed in seeds:
        started = f"2026-11-{day:02d}T10:{seed % 60:02d}:00+00:00"
        file_run(results, make_run(tag, [shape], seed, started_at=started, **kwargs))  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("results")
    _file(folder, "base", SLOW, range(1, 4), 1, deployment=AUTO)
    _file(folder, "same", SLOW, range(11, 14), 2, deployment=AUTO)
    _file(folder, "faster", FAST, range(21, 24), 3, deployment=FP8)
    _file(folder, "one-run", FAST, range(31, 32), 4, deployment=FP8)
    _file(folder, "mixed", FAST, range(41, 43), 5, deployment=FP8)
    _file(folder, "mixed", SLOW, range(43, 44), 5, deployment=FP8, trusted=False)
    return folder


def _compare(results: Path, a: str, b: str, gates: tuple[Gate, Gate] | None = None, **kwargs: bool) -> Comparison:
    gates = gates or (Gate(a, None), Gate(b, None))
    return compare.compare(store.runs(results, a), store.runs(results, b), gates, **kwargs)


def _rows(result: Comparison) -> dict[str, compare.Row]:
    (level,) = result.levels
    return {row.metric.key: row for row in level.rows}


def test_a_real_difference_is_named_with_its_direction(results: Path) -> None:
    result = _compare(results, "base", "faster")
    (level,) = result.levels
    assert level.key == ("sweep", "c=1", 64, 16)
    assert level.design == "between runs"
    assert level.runs == (3, 3)
    assert level.note == "tested between runs (3 and 3 runs; one value per run; Welch t)"
    rows = _rows(result)
    decode = rows["decode_p50"]
    assert decode.difference.significant
    assert decode.base.center == pytest.approx(50, rel=0.05)
    assert decode.other.center == pytest.approx(100, rel=0.05)
    assert decode.verdict.startswith("faster decodes 2.0x faster per stream at one stream (better), significant")
    assert rows["tpot_p50"].verdict.startswith("faster's TPOT p50 is 2.0x lower at one stream (better), significant")
    assert rows["e2e_p50"].difference.significant
    assert rows["e2e_p50"].difference.delta_pct < 0
    # TTFT was drawn from one distribution on both sides.
    for key in ("ttft_p50", "ttft_p90", "ttfo_p50"):
        assert not rows[key].difference.significant, rows[key]
        assert rows[key].verdict.startswith("no significant difference in ")


def test_the_same_configuration_twice_is_not_significantly_different(results: Path) -> None:
    result = _compare(results, "base", "same")
    for row in _rows(result).values():
        assert not row.difference.significant, row
        assert row.verdict.startswith("no significant difference"), row.verdict
    assert result.differences == {}


def test_what_differs_between_the_configurations_is_listed(results: Path) -> None:
    result = _compare(results, "base", "faster")
    assert result.differences == {"vllm.args --kv-cache-dtype": ("auto", "fp8")}


def test_start_up_timings_are_outcomes_not_causes(tmp_path: Path) -> None:
    """Load times, memory, the KV pool the engine found and its unit's start to first answer (or why
    that was not measured) are what a configuration led to: listed apart from the configuration's
    differences, which alone are candidate causes."""
    ready = ({"ready_s": 95.72, "health_s": 95.3}, {"ready_s": None, "ready_reason": "not timed"})
    for tag, seed, dtype, load_s, tokens in (("a", 1, "auto", 41.5, 120_000), ("b", 2, "fp8", 38.25, 240_000)):
        facts = {
            **ready[seed - 1],
            "model_load_seconds": load_s,
            "graph_capture_gib": 0.5 * seed,
            "kv_cache_tokens": tokens,
            "attention_backend": "TRITON_ATTN" if seed == 1 else "FLASHINFER",
        }
        record = deployments.record(args=["--model", "/srv/models/m", "--kv-cache-dtype", dtype], startup=facts)
        file_run(tmp_path, make_run(tag, [FAST], seed, deployment=record))
    result = _compare(tmp_path, "a", "b")
    assert result.differences == {
        "startup.attention_backend": ("TRITON_ATTN", "FLASHINFER"),
        "vllm.args --kv-cache-dtype": ("auto", "fp8"),
    }
    assert result.outcomes == {
        "startup.graph_capture_gib": ("0.5", "1.0"),
        "startup.health_s": ("95.3", None),
        "startup.kv_cache_tokens": ("120000", "240000"),
        "startup.model_load_seconds": ("41.5", "38.25"),
        "startup.ready_reason": (None, "not timed"),
        "startup.ready_s": ("95.72", None),
    }


def test_with_one_run_a_side_the_verdict_says_it_rests_on_one_run(results: Path) -> None:
    result = _compare(results, "base", "one-run")
    (level,) = result.levels
    assert level.design == "within one run"
    assert level.note.startswith("the verdict rests on one run (3 and 1 runs)")
    assert _rows(result)["decode_p50"].difference.significant


def test_untrusted_runs_are_left_out_unless_asked_for(results: Path) -> None:
    result = _compare(results, "faster", "mixed")
    (level,) = result.levels
    assert level.runs == (3, 2)
    assert len(result.left_out) == 1
    assert result.left_out[0].startswith("mixed/")
    assert "untrusted (--include-untrusted to use it)" in result.left_out[0]
    with_it = _compare(results, "faster", "mixed", include_untrusted=True)
    assert with_it.levels[0].runs == (3, 3)
    assert with_it.left_out == []


def test_a_tag_that_failed_its_probes_is_shown_but_not_ranked(results: Path) -> None:
    gates = (Gate("base", None), Gate("faster", "failed probes: tool_call_single", "failed probes"))
    result = _compare(results, "base", "faster", gates)
    assert result.not_ranked_because == "faster: failed probes: tool_call_single"
    rows = _rows(result)
    assert rows["decode_p50"].difference.significant  # the figures are there
    assert {row.verdict for row in rows.values()} == {"not ranked"}


def test_levels_only_one_side_ran_are_listed_not_compared(tmp_path: Path) -> None:
    file_run(tmp_path, make_run("a", [SLOW], 1))
    file_run(tmp_path, make_run("b", [Shape(100.0, 20.0, concurrency=2, requests=24)], 2))
    result = _compare(tmp_path, "a", "b")
    assert result.levels == []
    assert result.only_base == ["sweep c=1 (64 in/16 out)"]
    assert result.only_other == ["sweep c=2 (64 in/16 out)"]


def test_tags_lists_runs_and_configuration(results: Path) -> None:
    assert store.tags(results) == ["base", "faster", "mixed", "one-run", "same"]
    info = store.tag_info("mixed", store.runs(results, "mixed"))
    assert (info.runs, info.untrusted, info.workloads, info.engine) == (3, 1, {"sweep": 3}, "vllm")
    assert info.first == "2026-11-05T10:41:00+00:00"
    assert info.last == "2026-11-05T10:43:00+00:00"
    assert info.preset == "qwen3.8-27b-w4a16"
    assert info.config["vllm.args --kv-cache-dtype"] == "fp8"
    assert "startup.invocation_id" not in info.config  # changes with every restart


def test_an_unknown_tag_names_the_tags_there_are(results: Path) -> None:
    with pytest.raises(ConfigError, match=r"tag 'nope': no result files .* \(tags in .*: base, faster, mixed"):
        store.runs(results, "nope")


def test_flags_of_a_command_line() -> None:
    assert store.flags(["--a", "1", "--b", "--c=x", "pos", "--d"]) == {"--a": "1", "--b": "on", "--c": "x", "--d": "on"}


def test_history_flags_a_regression_against_the_newest_tag_that_ran_the_level(tmp_path: Path) -> None:
    _file(tmp_path, "v1", FAST, range(1, 4), 1, deployment=AUTO)
    _file(tmp_path, "v2", FAST, range(4, 7), 2, deployment=AUTO)
    _file(tmp_path, "v3", SLOW, range(7, 10), 3, deployment=FP8)
    _file(tmp_path, "other-model", SLOW, range(10, 12), 4, deployment=deployment("gemma3-270m"))
    preset, steps, skipped = history.history(tmp_path, "qwen3.8-27b-w4a16", lambda tag: Gate(tag, None))
    assert preset == "qwen3.8-27b-w4a16"
    assert skipped == []
    assert [step.tag for step in steps] == ["v1", "v2", "v3"]
    assert [(step.against, step.has_earlier) for step in steps] == [([], False), (["v1"], True), (["v2"], True)]
    assert steps[1].regressions == []
    assert {regression.against for regression in steps[2].regressions} == {"v2"}
    worse = {regression.metric for regression in steps[2].regressions}
    assert {"per-stream decode p50", "TPOT p50", "E2E p50", "aggregate output"} <= worse
    assert "TTFT p50" not in worse
    assert steps[2].decode_tps == pytest.approx(50, rel=0.05)


def test_history_needs_a_preset_when_there_are_several(tmp_path: Path) -> None:
    _file(tmp_path, "v1", FAST, range(1, 2), 1, deployment=AUTO)
    _file(tmp_path, "v2", FAST, range(2, 3), 2, deployment=deployment("gemma3-270m"))
    with pytest.raises(ConfigError, match=r"PRESET: name one of the presets with results: gemma3-270m, qwen3.8-27b"):
        history.history(tmp_path, None, lambda tag: Gate(tag, None))
    with pytest.raises(ConfigError, match=r"PRESET 'x': no runs of it"):
        history.history(tmp_path, "x", lambda tag: Gate(tag, None))


def test_history_compares_past_a_tag_without_usable_runs(tmp_path: Path) -> None:
    _file(tmp_path, "v1", FAST, range(1, 3), 1, deployment=AUTO)
    _file(tmp_path, "v2", FAST, range(3, 5), 2, deployment=AUTO, trusted=False)
    _file(tmp_path, "v3", SLOW, range(5, 7), 3, deployment=AUTO)
    _, steps, _ = history.history(tmp_path, None, lambda tag: Gate(tag, None))
    assert [(step.tag, step.against, step.usable_runs) for step in steps] == [
        ("v1", [], 2),
        ("v2", [], 0),
        ("v3", ["v1"], 2),
    ]
    assert steps[2].regressions


def test_history_compares_each_level_with_the_newest_tag_that_ran_it(tmp_path: Path) -> None:
    """v2 ran one stream only; v3's four streams got slower than v1's: flagged against v1, and
    its one stream against v2 (before, v3 was compared with v2 alone: "no regression")."""
    one = FAST
    four_fast = Shape(ttft_ms=100.0, tpot_ms=10.0, requests=24, concurrency=4)
    four_slow = Shape(ttft_ms=100.0, tpot_ms=20.0, requests=24, concurrency=4)
    for tag, shapes, day in (("v1", [one, four_fast], 1), ("v2", [one], 2), ("v3", [one, four_slow], 3)):
        for seed in range(day * 10, day * 10 + 3):
            started = f"2026-11-{day:02d}T10:{seed:02d}:00+00:00"
            file_run(tmp_path, make_run(tag, shapes, seed, started_at=started, deployment=AUTO))
    _, steps, _ = history.history(tmp_path, None, lambda tag: Gate(tag, None))
    assert [(step.tag, step.against, step.uncompared) for step in steps] == [
        ("v1", [], ["sweep c=1 (64 in/16 out)", "sweep c=4 (64 in/16 out)"]),
        ("v2", ["v1"], []),
        ("v3", ["v2", "v1"], []),
    ]
    worse = {(regression.level, regression.against) for regression in steps[2].regressions}
    assert worse == {("sweep c=4, 64 in / 16 out", "v1")}
    assert "TPOT p50" in {regression.metric for regression in steps[2].regressions}


def test_a_folder_of_other_files_is_left_out_of_tags_and_history(tmp_path: Path) -> None:
    _file(tmp_path, "v1", FAST, range(1, 2), 1, deployment=AUTO)
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "x.json").write_text("{}")
    found, skipped = store.readable(tmp_path)
    assert list(found) == ["v1"]
    assert len(skipped) == 1
    assert skipped[0].startswith("notes: ")
    _, steps, left = history.history(tmp_path, None, lambda tag: Gate(tag, None))
    assert [step.tag for step in steps] == ["v1"]
    assert left == skipped


def test_a_tag_not_ranked_has_no_regressions(tmp_path: Path) -> None:
    _file(tmp_path, "v1", FAST, range(1, 3), 1, deployment=AUTO)
    _file(tmp_path, "v2", SLOW, range(3, 5), 2, deployment=AUTO)
    gates = {"v1": Gate("v1", None), "v2": Gate("v2", "failed probes: x", "failed probes: x")}
    _, steps, _ = history.history(tmp_path, None, gates.__getitem__)
    assert steps[1].not_ranked_because == "v2: failed probes: x"
    assert steps[1].regressions == []
