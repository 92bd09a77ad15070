"""``bench report`` on the command line: the capability card of each tag in the terminal, and
one self-contained HTML page with the plots (and each plot as a PNG beside it)."""

from __future__ import annotations

import argparse
import datetime as dt
from pathlib import Path
from typing import TYPE_CHECKING

from rich import box
from rich.console import Console
from rich.table import Table

from bench.cli.target import add_results_dir
from bench.errors import ConfigError

if TYPE_CHECKING:  # matplotlib, numpy and scipy load only when a report is made
    from bench.measure.report.data import Card

DESCRIPTION = """\
For each TAG: its capability card (the engine's start-up, unit start to first answer, from the
deployment.json of its newest run; one-stream decode at the shortest and longest prompt it ran,
capacity from its latest `bench capacity`, time to first answer with thinking on and off and the
checks of its latest `bench probe`, tokens per joule and energy per million tokens where NVML
measured them), printed here and on the page; and the plots of all tags together: throughput
against concurrency, TTFT and inter-token distributions, TTFT against prompt length, KV pool usage
over time, per-user decode against aggregate output with the Pareto frontier over every tag and
level, speculative-decoding acceptance. Beside each plot, `bench compare`'s verdicts on what it
draws, every later TAG against the first (or why none applies). Every value axis starts at zero;
a plot with one point per tag draws bars. Untrusted and partial runs are left out unless asked for.
"""


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``bench report``."""
    parser = commands.add_parser(
        "report",
        help="capability cards and an HTML page of plots for one or more tags",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("tags", nargs="+", metavar="TAG", help="the tags to report on, in the order to show them")
    add_results_dir(parser)
    parser.add_argument(
        "--out", type=Path, default=None, help="folder for report.html and the PNGs (default: reports/TAG+TAG...)"
    )
    parser.add_argument("--include-untrusted", action="store_true", help="use untrusted and partial runs too")
    parser.add_argument(
        "--include-failing", action="store_true", help="give verdicts on tags whose capability probes failed"
    )


def show_cards(console: Console, cards: list[Card]) -> None:
    """The cards side by side, one column per tag."""
    from bench.measure.report import page as report_page  # noqa: PLC0415 - see TYPE_CHECKING above

    table = Table(title="Capability cards", box=box.SIMPLE_HEAD, pad_edge=False)
    table.add_column("")
    for card in cards:
        table.add_column(card.tag)
    rows = [report_page.card_rows(card) for card in cards]
    for index, (label, _) in enumerate(rows[0]):
        table.add_row(label, *(row[index][1] for row in rows))
    console.print(table)


def command(args: argparse.Namespace, console: Console) -> int:
    """Gather, draw, write, print."""
    from bench.measure.capacity.result import latest_capacity  # noqa: PLC0415
    from bench.measure.compare import comparison as compare  # noqa: PLC0415
    from bench.measure.compare import store  # noqa: PLC0415
    from bench.measure.compare.gates import probe_gate  # noqa: PLC0415 - see TYPE_CHECKING above
    from bench.measure.probe.result import latest_probe  # noqa: PLC0415
    from bench.measure.report import data as report_data  # noqa: PLC0415
    from bench.measure.report import page as report_page  # noqa: PLC0415
    from bench.measure.report import plots  # noqa: PLC0415
    from bench.measure.report.verdicts import plot_verdicts  # noqa: PLC0415

    cards, series, reported = [], [], []
    used = 0
    for tag in args.tags:
        kept, left = compare.usable(store.runs(args.results_dir, tag), args.include_untrusted)
        for line in left:
            console.print(f"left out: {line}", soft_wrap=True)
        if not kept:
            console.print(f"{tag}: every run was left out; nothing to report", soft_wrap=True)
            continue
        used += len(kept)
        gate = probe_gate(args.results_dir, tag, include_failing=True)
        probes = (
            "no probe on record (bench probe)" if gate.note is None or gate.note.startswith("no probe") else gate.note
        )
        probe = latest_probe(args.results_dir, tag)
        ttfo = (probe.ttfo_thinking_on_ms, probe.ttfo_thinking_off_ms) if probe is not None else (None, None)
        cards.append(
            report_data.card(
                tag,
                kept,
                capacity=report_data.capacity_text(latest_capacity(args.results_dir, tag)),
                probes=probes,
                ttfo=ttfo,
            )
        )
        series.append(report_data.series(tag, kept))
        reported.append((tag, kept))
    if not cards:
        raise ConfigError(
            "TAG: every run of these tags was left out (untrusted or partial); --include-untrusted to use them"
        )
    # compare's verdicts, every later tag against the first, gated on probes as compare gates them.
    base_tag, base_runs = reported[0]
    comparisons = [
        compare.compare(
            base_runs,
            runs,
            (
                probe_gate(args.results_dir, base_tag, args.include_failing),
                probe_gate(args.results_dir, tag, args.include_failing),
            ),
            include_untrusted=args.include_untrusted,
        )
        for tag, runs in reported[1:]
    ]
    out = args.out or Path("reports") / "+".join(args.tags)
    written = report_page.write(
        out,
        cards=cards,
        plots=plots.plots(series),
        verdicts=plot_verdicts(comparisons),
        runs=used,
        results_dir=args.results_dir,
        written=dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
    )
    show_cards(console, cards)
    console.print(f"wrote {written.page} and {len(written.images)} PNGs beside it", soft_wrap=True)
    return 0
