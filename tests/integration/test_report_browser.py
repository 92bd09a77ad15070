"""bench report's page in a real browser: Debian's Chromium, headless, driven by Playwright
(tests/browser.py), opens the page from disk; every plot decodes at its size, both capability
cards show, compare's verdicts show under the plots, the page fetches nothing but itself, and a screenshot is kept
(build/artifacts/report/report.png, the one docs/bench-report.md shows)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests import browser
from tests.helpers import BIN, REPO
from tests.synthetic_runs import report_results

pytestmark = pytest.mark.integration
SCREENSHOT = REPO / "build" / "artifacts" / "report" / "report.png"
PLOTS = ["throughput", "ttft", "itl", "ttft_context", "kv_usage", "pareto", "spec_decode"]


def test_the_report_page_shows_every_plot_and_card_in_chromium(tmp_path: Path) -> None:
    results = tmp_path / "results"
    report_results(results)
    out = tmp_path / "report"
    # Relative folders, from tmp_path: the page (and the screenshot in the docs) says "under results".
    command = [str(BIN / "bench"), "report", "base", "mtp", "--results-dir", "results", "--out", "report"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False, cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    seen = browser.report(out / "report.html", SCREENSHOT)
    assert seen["plots"] == [[name, 700, 400] for name in PLOTS]
    cards = dict(seen["cards"])  # type: ignore[call-overload]
    assert list(cards) == ["base", "mtp"]
    for text in cards.values():
        assert "decode, one stream, long prompt" in text
        assert "tok/s at 2,048 tokens" in text
        assert "tokens per joule\t2.50" in text
    verdicts = dict(seen["verdicts"])  # type: ignore[call-overload]
    assert list(verdicts) == PLOTS
    assert "mtp against base: mtp decodes" not in verdicts["throughput"]  # only the plot's own metric
    assert "mtp against base: mtp's aggregate output is" in verdicts["throughput"]
    assert "mtp against base: mtp's TTFT p50 is" in verdicts["ttft"]
    assert verdicts["kv_usage"].startswith("not tested: ")
    assert seen["requests"] == [(out / "report.html").resolve().as_uri()]
    assert SCREENSHOT.stat().st_size > 10_000
