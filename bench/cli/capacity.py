"""``bench capacity`` on the command line: its flags, a line per measured level on stderr, and
the table of the levels in the order they were measured with the two answers."""

from __future__ import annotations

import argparse

from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from bench import signals
from bench.cli.target import add_target_flags, config_dir_of, resolve_target
from bench.measure.capacity.measure import CapacityOptions, Hooks
from bench.measure.capacity.measure import run as run_capacity
from bench.measure.capacity.result import Axis, CapacityResult, Probe, describe
from bench.measure.run.loops import LevelSpec


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``bench capacity`` and its flags to the subcommands."""
    parser = commands.add_parser(
        "capacity",
        help="search the most users at a reading speed, and the longest context one user keeps it at",
        description="Search, level by measured level, the most concurrent users for which the slow streams "
        "(p10 of per-request decode tok/s) still decode at --min-decode and TTFT p95 stays under --max-ttft, "
        "and the longest prompt at which one stream keeps --min-decode. The answer goes to "
        "RESULTS_DIR/TAG/capacity/TIME.json, the tag's capability card.",
    )
    add_target_flags(parser)
    criteria = parser.add_argument_group("criteria")
    criteria.add_argument(
        "--min-decode",
        type=float,
        default=20.0,
        metavar="TOK_S",
        help="decode tok/s the slow streams (p10) must keep; about reading speed (default: 20)",
    )
    criteria.add_argument(
        "--max-ttft",
        type=float,
        default=2.0,
        metavar="SECONDS",
        help="TTFT p95 a concurrency level must stay under (default: 2)",
    )
    search = parser.add_argument_group("search")
    search.add_argument(
        "--max-concurrency", type=int, default=64, metavar="N", help="the most streams tried (default: 64)"
    )
    search.add_argument(
        "--context",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="also search the longest context of one stream (default: on)",
    )
    search.add_argument(
        "--max-context",
        type=int,
        metavar="TOKENS",
        help="the longest prompt tried (default: the served context less --output-tokens)",
    )
    shape = parser.add_argument_group("requests")
    shape.add_argument("--input-tokens", type=int, default=512, help="prompt tokens of the concurrency levels, "
                       "and the first context level (default: 512)")  # fmt: skip
    shape.add_argument("--output-tokens", type=int, default=128, help="tokens generated per request (default: 128)")
    shape.add_argument(
        "--requests", type=int, default=8, help="requests per concurrency level, at least 4 per stream (default: 8)"
    )
    shape.add_argument("--context-requests", type=int, default=4, help="requests per context level (default: 4)")


def _options(args: argparse.Namespace) -> CapacityOptions:
    options = CapacityOptions(
        results_dir=args.results_dir,
        min_decode_tps=args.min_decode,
        max_ttft_s=args.max_ttft,
        max_concurrency=args.max_concurrency,
        input_tokens=args.input_tokens,
        output_tokens=args.output_tokens,
        requests=args.requests,
        context=args.context,
        max_context=args.max_context,
        context_requests=args.context_requests,
    )
    options.check()
    return options


def _value(axis: Axis, value: int) -> str:
    return f"c={value}" if axis == "concurrency" else f"{value:,} tok"


def _figure(value: float | None, digits: int) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


def _verdict(probe: Probe) -> str:
    return "pass" if probe.passed else "fail: " + "; ".join(probe.failed_because)


def print_result(console: Console, result: CapacityResult) -> None:
    """The levels in the order measured, then the answers."""
    criteria = result.criteria
    title = f"capacity | tag {result.tag} | {result.model}"
    table = Table(title=escape(title), box=box.SIMPLE_HEAD, pad_edge=False)
    for column in ("search", "level", "ok", "decode p10", "TTFT p95", "verdict"):
        table.add_column(column, justify="left" if column in ("search", "verdict") else "right")
    for probe in result.probes:
        counts = probe.level.requests
        table.add_row(
            probe.axis,
            _value(probe.axis, probe.value),
            f"{counts.successful}/{counts.total}",
            _figure(probe.decode_tps_low, 1),
            _figure(probe.ttft_ms_high, 0),
            escape(_verdict(probe)),
        )
    table.caption = (
        f"pass: decode p10 >= {criteria.min_decode_tps:g} tok/s, TTFT p95 <= {criteria.max_ttft_ms:,.0f} ms "
        "(concurrency only), no failed request; decode in tok/s per stream, TTFT in ms"
    )
    console.print(table)
    console.print(f"max users: {describe(result.max_users, 'concurrency')}", soft_wrap=True)
    if result.longest_context is not None:
        console.print(f"longest context: {describe(result.longest_context, 'context')}", soft_wrap=True)


def command(args: argparse.Namespace, console: Console) -> int:
    """bench capacity: search, write the capacity file, print the levels and the answers."""
    options = _options(args)
    target = resolve_target(args, config_dir_of(args))
    err = Console(stderr=True)
    err.print(f"bench: {target.base_url} ({target.engine}), tag {target.tag}, results in {options.results_dir}")

    def started(axis: Axis, spec: LevelSpec) -> None:
        value = spec.in_flight if axis == "concurrency" else spec.input_tokens
        err.print(f"  {axis} {_value(axis, value)}: {spec.requests} requests ...", end="")

    def probed(probe: Probe) -> None:
        err.print(f" {escape(_verdict(probe))}")

    try:
        result, path = run_capacity(target, options, Hooks(level_started=started, probed=probed))
    except KeyboardInterrupt:
        err.print(f"\nbench: {signals.reason()}; nothing written (a search that stops early has no answer)")
        return signals.INTERRUPTED
    print_result(console, result)
    console.print(f"capacity: {path}", soft_wrap=True)
    return 0
