"""bench report on result files of known figures: the cards' values, the plotted series, and the
files it writes (the browser test, tests/integration/test_report_browser.py, looks at the page)."""

from __future__ import annotations

import base64
import re
from pathlib import Path

import pytest

from bench.cli import main
from bench.measure.capacity import result as capacity_results
from bench.measure.compare import store
from bench.measure.report import data as report_data
from bench.measure.report import page
from tests import deployments
from tests.synthetic_runs import Shape, file_run, make_run


def test_the_card_holds_the_tags_figures(results: Path) -> None:
    card = report_data.card("mtp", store.runs(results, "mtp"), capacity="8 users", probes="passed", ttfo=(900.0, None))
    assert card.runs == 4
    assert card.decode_short is not None
    assert card.decode_short.x == 64
    assert card.decode_short.y == pytest.approx(1000 / 12, rel=0.05)
    assert card.decode_long is not None
    assert card.decode_long.x == 2048
    assert card.decode_long.y == pytest.approx(1000 / 14.4, rel=0.05)
    assert card.tokens_per_joule == 2.5
    assert card.kwh_per_million_tokens == pytest.approx(1e6 / 2.5 / 3.6e6)
    assert (card.capacity, card.probes, card.ttfo_thinking_on_ms, card.ttfo_thinking_off_ms) == (
        "8 users",
        "passed",
        900.0,
        None,
    )


def test_the_series_hold_what_each_plot_draws(results: Path) -> None:
    base = report_data.series("base", store.runs(results, "base"))
    mtp = report_data.series("mtp", store.runs(results, "mtp"))
    assert [point.x for point in base.throughput] == [1.0, 4.0]
    assert mtp.throughput[1].y > base.throughput[1].y
    assert [point.x for point in base.ttft_by_context] == [64.0, 2048.0]
    assert base.ttft_by_context[1].y == pytest.approx(900, rel=0.1)
    assert mtp.ttft_by_context[1].y == pytest.approx(765, rel=0.1)
    assert base.spec_acceptance is None
    assert mtp.spec_acceptance == pytest.approx(0.7)
    # The newest sweep's two levels, ten scrapes each, one after the other; usage in percent.
    assert len(mtp.kv_usage) == 20
    assert mtp.kv_usage[9].y == pytest.approx(20.0)
    assert mtp.kv_usage[19].y == pytest.approx(70.0)
    assert all(b.x > a.x for a, b in zip(mtp.kv_usage, mtp.kv_usage[1:], strict=False))
    assert len(base.ttft_ms) > 0
    assert len(base.itl_ms) > len(base.ttft_ms)


def test_report_writes_one_page_with_every_plot_and_the_pngs(
    results: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "200")
    out = tmp_path / "report"
    assert main(["report", "base", "mtp", "--results-dir", str(results), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "Capability cards" in printed
    assert re.search(r"decode, one stream, long prompt +[0-9.]+ tok/s at 2,048 tokens +[0-9.]+ tok/s at 2,048", printed)
    assert "2.50" in printed
    assert f"wrote {out / 'report.html'} and 7 PNGs beside it" in printed
    names = ["throughput", "ttft", "itl", "ttft_context", "kv_usage", "pareto", "spec_decode"]
    assert sorted(path.name for path in out.iterdir()) == sorted([*(f"{name}.png" for name in names), "report.html"])
    page = (out / "report.html").read_text()
    embedded = dict(re.findall(r'data-plot="([a-z_]+)"[^>]*src="data:image/png;base64,([A-Za-z0-9+/=]+)"', page))
    assert list(embedded) == names
    for name, data in embedded.items():
        assert base64.b64decode(data) == (out / f"{name}.png").read_bytes()
    assert page.count('class="card"') == 2
    # Self-contained and static: nothing to fetch, nothing to run.
    assert re.findall(r'(?:src|href)="(?!data:)', page) == []
    assert "<script" not in page


def test_report_of_an_unknown_tag_is_a_config_error(results: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["report", "nope", "--results-dir", str(results)]) == 2
    assert capsys.readouterr().err.startswith("bench: error: tag 'nope': no result files under ")


def _capacity(users: capacity_results.Answer) -> capacity_results.CapacityResult:
    return capacity_results.CapacityResult(
        schema_version=capacity_results.CAPACITY_FILE.version,
        tag="mtp",
        started_at="2026-11-11T12:00:00+00:00",
        base_url="http://127.0.0.1:1/v1",
        model="m",
        engine="vllm",
        served_context=65536,
        criteria=capacity_results.Criteria(min_decode_tps=20, max_ttft_ms=2000, target_attainment=0.9, confidence=0.95),
        shape=capacity_results.Shape(
            512, 128, requests=16, context_requests=3, max_requests_per_level=256, budget_requests=3000
        ),
        probes=[],
        max_users=users,
        longest_context=capacity_results.Answer(
            outcome="cap_passed",
            value=65408,
            first_failed=None,
            undecided=None,
            lowest=512,
            cap=65408,
            requests_sent=30,
        ),
    )


def test_the_capacity_line_comes_from_the_latest_capacity_search() -> None:
    """A found answer is a number, with the service level it was judged on; a cap that passed and
    a budget that ran out read "at least"; an answer that hangs on an inconclusive level names it
    and gives no number."""
    found = _capacity(capacity_results.Answer("found", 6, 7, None, lowest=1, cap=64, requests_sent=900))
    served = "served means 90% of requests at 20 tok/s or faster, TTFT under 2,000 ms (95% confidence)"
    assert report_data.capacity_text(found) == (
        f"users: 6 (7 failed); one stream's prompt: at least 65,408 prompt tokens (the cap passed); {served}"
    )
    budget = _capacity(capacity_results.Answer("at_least", 4, None, 8, lowest=1, cap=64, requests_sent=2990))
    assert report_data.capacity_text(budget).startswith(
        "users: at least 4: the budget of 3,000 requests ran out before c=8 (2,990 sent); raise --budget"
    )
    undecided = _capacity(capacity_results.Answer("inconclusive", 7, None, 8, lowest=1, cap=64, requests_sent=1200))
    assert report_data.capacity_text(undecided).startswith("users: no answer (7 passed): c=8 is inconclusive; ")
    assert report_data.capacity_text(None) == "not measured (bench capacity)"


def test_a_report_with_every_run_left_out_is_a_config_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    file_run(tmp_path, make_run("shaky", [Shape(100.0, 20.0, requests=12)], 1, trusted=False))
    assert main(["report", "shaky", "--results-dir", str(tmp_path), "--out", str(tmp_path / "out")]) == 2
    captured = capsys.readouterr()
    assert "left out: shaky/" in captured.out
    assert "--include-untrusted to use them" in captured.err
    assert not (tmp_path / "out").exists()


VLLM_TIMED = {
    "ready_s": 95.72,
    "health_s": 95.3,
    "first_answer_s": 0.42,
    "model_load_seconds": 68.4,
    "torch_compile_seconds": 12.5,
    "graph_capture_seconds": 4.0,
}


def test_the_start_up_line_splits_vllm_into_load_compile_and_graphs_and_the_rest() -> None:
    """95.72 s in all: 68.4 s load, 12.5 + 4.0 s compile and graphs, 10.82 s the rest."""
    record = deployments.deployment("vllm", startup=VLLM_TIMED)
    assert report_data.startup_text(record) == (
        "unit start to first answer 95.7 s (load 68.4 s, compile and graphs 16.5 s, rest 10.8 s)"
    )


def test_the_start_up_line_of_llamacpp_and_ollama_splits_health_and_first_answer() -> None:
    """Without vLLM's log figures: the health wait and the first answer; Ollama's holds its model load."""
    timed = {"ready_s": 3.57, "health_s": 3.2, "first_answer_s": 0.37}
    assert report_data.startup_text(deployments.deployment("llamacpp", startup=timed)) == (
        "unit start to first answer 3.6 s (health 3.2 s, first answer 0.37 s)"
    )
    assert report_data.startup_text(deployments.deployment("ollama", startup=timed)) == (
        "unit start to first answer 3.6 s (health 3.2 s, first answer 0.37 s, which loads the model)"
    )


def test_an_unmeasured_start_up_says_why() -> None:
    untimed = {"ready_s": None, "ready_reason": "the unit was restarted by the watchdog"}
    assert report_data.startup_text(deployments.deployment("vllm", startup=untimed)) == (
        "not measured: the unit was restarted by the watchdog"
    )
    assert report_data.startup_text(deployments.deployment("vllm")) == (
        "not measured: recorded before start-ups were timed"
    )
    assert report_data.startup_text(None) == "not recorded (no deployment.json)"


def test_the_card_shows_the_newest_runs_start_up(tmp_path: Path) -> None:
    """Two runs of one tag, each on its own start of the engine: the card shows the newest one's."""
    older = deployments.record("vllm", startup={**VLLM_TIMED, "ready_s": 120.0})
    file_run(tmp_path, make_run("t", [Shape(20.0, 2.0)], 1, deployment=older))
    newer = deployments.record("vllm", startup=VLLM_TIMED)
    file_run(tmp_path, make_run("t", [Shape(20.0, 2.0)], 2, started_at="2026-11-02T10:00:00+00:00", deployment=newer))
    card = report_data.card("t", store.runs(tmp_path, "t"), capacity="", probes="", ttfo=(None, None))
    assert card.startup.startswith("unit start to first answer 95.7 s (load 68.4 s")
    assert ("start-up", card.startup) in page.card_rows(card)
