"""``bench tags``, ``bench compare`` and ``bench history`` on the command line."""

from __future__ import annotations

import argparse
import io
import math
from pathlib import Path
from typing import TYPE_CHECKING

from rich import box
from rich.console import Console
from rich.table import Table

from bench.cli.target import add_results_dir
from bench.errors import ConfigError

if TYPE_CHECKING:  # the statistics load numpy and scipy: only the commands that use them pay for it
    from bench.measure.compare import comparison as compare
    from bench.measure.compare import history, stats
    from bench.measure.compare.comparison import Comparison, LevelComparison, Row

COMPARE_HELP = """\
Each later tag is compared with the first. For every level both tags ran (same workload, level,
prompt and output length), every headline metric gets each side's figure with a 95% interval,
the difference in percent with its interval, a test (its p Holm-adjusted over the level's
metrics), and a verdict in words. With 2 runs or more on both sides the test uses one value per
run (requests inside a run are not independent): Welch t up to 5 runs a side, Mann-Whitney U from
6; with one run a side the verdict says it rests on one run. Untrusted or partial runs are left
out, and a tag whose latest `bench probe` failed is shown but not ranked, unless asked for.
"""


def add_parsers(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``bench tags``, ``bench compare`` and ``bench history``."""
    tags = commands.add_parser(
        "tags",
        help="list the tags with results: runs, dates, engine, preset, and the settings that differ",
        description="List every tag under RESULTS_DIR with its runs, and the configuration facts that differ "
        "between tags.",
    )
    add_results_dir(tags)
    cmp = commands.add_parser(
        "compare",
        help="tell two or more tags apart, with intervals, tests and verdicts",
        description=COMPARE_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    cmp.add_argument(
        "tags", nargs="+", metavar="TAG", help="the baseline tag, then one or more tags to compare with it"
    )
    _shared(cmp)
    past = commands.add_parser(
        "history",
        help="one preset's runs across tags in time order, with regressions flagged",
        description="List the tags that ran PRESET, oldest first, and flag every metric that got significantly "
        "worse (the same test as bench compare). Each level of a tag is compared with the newest earlier tag that "
        "ran that level, which the table names.",
    )
    past.add_argument("preset", nargs="?", metavar="PRESET", help="the preset (default: the only one with results)")
    _shared(past)


def _shared(parser: argparse.ArgumentParser) -> None:
    add_results_dir(parser)
    parser.add_argument("--include-untrusted", action="store_true", help="use untrusted and partial runs too")
    parser.add_argument("--include-failing", action="store_true", help="rank tags whose capability probes failed")


def command(args: argparse.Namespace, console: Console) -> int:
    """Dispatch ``tags``, ``compare`` or ``history``."""
    from bench.measure.compare import comparison as compare  # noqa: PLC0415
    from bench.measure.compare import history, store  # noqa: PLC0415
    from bench.measure.compare.gates import probe_gate  # noqa: PLC0415 - see TYPE_CHECKING above

    if args.command == "tags":
        show_tags(console, args.results_dir)
    elif args.command == "compare":
        if len(args.tags) < 2:
            raise ConfigError("TAG: give at least two tags, the baseline first")
        stored = {tag: store.runs(args.results_dir, tag) for tag in args.tags}
        base = args.tags[0]
        for other in args.tags[1:]:
            gates = (
                probe_gate(args.results_dir, base, args.include_failing),
                probe_gate(args.results_dir, other, args.include_failing),
            )
            result = compare.compare(stored[base], stored[other], gates, include_untrusted=args.include_untrusted)
            show_comparison(console, result, gates)
    else:
        preset, steps, skipped = history.history(
            args.results_dir,
            args.preset,
            lambda tag: probe_gate(args.results_dir, tag, args.include_failing),
            include_untrusted=args.include_untrusted,
        )
        show_history(console, preset, steps)
        for line in skipped:
            console.print(f"left out: {line}", soft_wrap=True)
    return 0


def show_tags(console: Console, results_dir: Path) -> None:
    """One row per tag, then the facts whose values differ between tags."""
    from bench.measure.compare import store  # noqa: PLC0415 - see TYPE_CHECKING above

    by_tag, skipped = store.readable(results_dir)
    for line in skipped:
        console.print(f"left out: {line}", soft_wrap=True)
    infos = [store.tag_info(tag, stored) for tag, stored in by_tag.items()]
    if not infos:
        console.print(f"no results under {results_dir}")
        return
    table = Table(title=f"Tags in {results_dir}", box=box.SIMPLE_HEAD, pad_edge=False)
    for column in ("tag", "runs", "untrusted", "first", "last", "engine", "preset", "workloads"):
        table.add_column(column, no_wrap=column != "workloads")
    for info in infos:
        workloads = ", ".join(f"{name} {count}" for name, count in sorted(info.workloads.items()))
        table.add_row(
            info.tag,
            str(info.runs),
            str(info.untrusted),
            info.first[:16],
            info.last[:16],
            info.engine,
            info.preset or "-",
            workloads,
        )
    console.print(table)
    keys = sorted({key for info in infos for key in info.config})
    differing = [key for key in keys if len({info.config.get(key) for info in infos}) > 1]
    if len(infos) > 1 and differing:
        facts = Table(title="Settings that differ between tags", box=box.SIMPLE_HEAD, pad_edge=False)
        facts.add_column("setting")
        for info in infos:
            facts.add_column(info.tag)
        for key in differing:
            facts.add_row(key, *(info.config.get(key, "-") for info in infos))
        console.print(facts)


def _figure(estimate: stats.Estimate, unit: str) -> str:
    digits = 1 if unit == "tok/s" or estimate.center >= 100 else 2
    text = f"{estimate.center:,.{digits}f}"
    if estimate.low is not None and estimate.high is not None:
        text += f" [{estimate.low:,.{digits}f}, {estimate.high:,.{digits}f}]"
    return text


def _delta(difference: stats.Difference) -> str:
    if not math.isfinite(difference.delta_pct):
        return "-"
    text = f"{difference.delta_pct:+.1f}%"
    if difference.low_pct is not None and difference.high_pct is not None:
        text += f" [{difference.low_pct:+.1f}, {difference.high_pct:+.1f}]"
    return text


def _cells(row: Row) -> tuple[str, str, str, str, str, str]:
    decisive = row.difference.p_adjusted if row.difference.p_adjusted is not None else row.difference.p_value
    return (
        f"{row.metric.short} {row.metric.unit}",
        _figure(row.base, row.metric.unit),
        _figure(row.other, row.metric.unit),
        _delta(row.difference),
        "-" if decisive is None else f"{decisive:.3g}",
        "sig." if row.difference.significant else "n.s.",
    )


def _level_table(result: Comparison, level: LevelComparison) -> Table:
    """The level's table. Its cells wrap at spaces, between a figure and its interval, never
    inside a figure."""
    table = Table(title=level.title, caption=level.note, box=box.SIMPLE_HEAD, pad_edge=False)
    table.add_column("metric")
    for header in (result.base, result.other, "Δ% [95% CI]", "p Holm"):
        table.add_column(header, justify="right")
    table.add_column("")
    for row in level.rows:
        table.add_row(*_cells(row))
    return table


def _cuts(console: Console, table: Table) -> bool:
    """Whether ``table`` at ``console``'s width would cut a cell (Rich marks a cut with an ellipsis)."""
    probe = Console(width=console.width, no_color=True, color_system=None, file=io.StringIO())
    with probe.capture() as captured:
        probe.print(table)
    return "…" in captured.get()


def show_level(console: Console, result: Comparison, level: LevelComparison) -> None:
    """The table of one level and its verdicts. Where the terminal is too narrow for the table
    without cutting a figure, each metric is a line of its own instead."""
    table = _level_table(result, level)
    if not _cuts(console, table):
        console.print(table)
    else:
        console.print(f"[bold]{level.title}[/bold] ({level.note})", soft_wrap=False)
        for row in level.rows:
            name, base, other, delta, p, mark = _cells(row)
            console.print(
                f"  {name} | {result.base} {base} | {result.other} {other} | Δ% {delta} | p Holm {p} {mark}",
                soft_wrap=False,
                highlight=False,
            )
    if result.not_ranked_because is None:
        for row in level.rows:
            console.print(f"  {'*' if row.difference.significant else '-'} {row.verdict}", soft_wrap=True)


def show_comparison(console: Console, result: Comparison, gates: tuple[compare.Gate, compare.Gate]) -> None:
    """A comparison: its levels, what was left out, what differs between the configurations."""
    console.print(f"[bold]{result.other} against {result.base}[/bold]")
    for gate in gates:
        if gate.note:
            console.print(f"  {gate.tag}: {gate.note}", soft_wrap=True)
    if result.not_ranked_because:
        console.print(f"  not ranked: {result.not_ranked_because}", soft_wrap=True)
    for level in result.levels:
        show_level(console, result, level)
    if not result.levels:
        console.print("  no level was run by both tags")
    for tag, only in ((result.base, result.only_base), (result.other, result.only_other)):
        if only:
            console.print(f"  only {tag} ran: {'; '.join(only)}", soft_wrap=True)
    for line in result.left_out:
        console.print(f"  left out: {line}", soft_wrap=True)
    console.print("What differs between the configurations (candidate causes):")
    if not result.differences:
        console.print("  nothing the runs recorded")
    for key, (a, b) in result.differences.items():
        console.print(f"  {key}: {a if a is not None else '-'} -> {b if b is not None else '-'}", soft_wrap=True)
    if result.outcomes:
        console.print("What the engines measured while they started (outcomes, not causes):")
    for key, (a, b) in result.outcomes.items():
        console.print(f"  {key}: {a if a is not None else '-'} -> {b if b is not None else '-'}", soft_wrap=True)


def _against(step: history.Step) -> str:
    """The history table's verdict on one tag, naming the tags it was compared with."""
    if step.usable_runs == 0:
        return "not compared: no usable run"
    if not step.has_earlier:
        return "-"
    if not step.against:
        return "not compared: no earlier tag ran its levels"
    versus = f"vs {', '.join(step.against)}"
    if step.not_ranked_because:
        return f"not ranked ({versus})"
    if step.regressions:
        return f"REGRESSION ({len(step.regressions)}, {versus})"
    return f"no regression ({step.improvements} better, {versus})"


def show_history(console: Console, preset: str, steps: list[history.Step]) -> None:
    """The preset's tags in time order and their regressions, each against the newest earlier tag
    that ran the level."""
    table = Table(title=f"History of {preset}", box=box.SIMPLE_HEAD, pad_edge=False)
    for column in ("tag", "first run", "runs", "engine", "decode tok/s c=1", "TTFT p50 ms c=1", "against earlier"):
        table.add_column(column, no_wrap=True)
    for step in steps:
        table.add_row(
            step.tag,
            step.first[:16],
            str(step.runs),
            step.engine,
            "-" if step.decode_tps is None else f"{step.decode_tps:.1f}",
            "-" if step.ttft_ms is None else f"{step.ttft_ms:,.1f}",
            _against(step),
        )
    console.print(table)
    for step in steps:
        if step.not_ranked_because:
            console.print(f"  {step.tag}: not ranked: {step.not_ranked_because}", soft_wrap=True)
        if step.uncompared and step.has_earlier:
            console.print(f"  {step.tag}: no earlier tag ran {'; '.join(step.uncompared)}", soft_wrap=True)
        for regression in step.regressions:
            console.print(
                f"  REGRESSION {step.tag} vs {regression.against}, {regression.level}: {regression.verdict}",
                soft_wrap=True,
            )
