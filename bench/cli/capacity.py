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
from bench.measure.capacity import words
from bench.measure.capacity.measure import CapacityOptions, Hooks
from bench.measure.capacity.measure import run as run_capacity
from bench.measure.capacity.result import Axis, CapacityResult, Probe
from bench.measure.run.loops import LevelSpec


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``bench capacity`` and its flags to the subcommands."""
    parser = commands.add_parser(
        "capacity",
        help="search the most users at a reading speed, and the longest context one user keeps it at",
        description="Search, level by measured level, the most concurrent users for which --target-attainment "
        "of the requests (with --confidence) decode at --min-decode with TTFT under --max-ttft, and the longest "
        "prompt at which one stream keeps --min-decode. A level whose interval straddles the target gets more "
        "requests; an answer that hangs on a level still undecided is refused, and one cut short by --budget "
        "reads 'at least N'. The answer goes to RESULTS_DIR/TAG/capacity/TIME.json, the tag's capability card.",
    )
    add_target_flags(parser)
    criteria = parser.add_argument_group("criteria")
    criteria.add_argument(
        "--min-decode",
        type=float,
        default=20.0,
        metavar="TOK_S",
        help="decode tok/s a request must keep to meet the service level; about reading speed (default: 20)",
    )
    criteria.add_argument(
        "--max-ttft",
        type=float,
        default=2.0,
        metavar="SECONDS",
        help="TTFT a request of a concurrency level must stay under (default: 2)",
    )
    criteria.add_argument(
        "--target-attainment",
        type=float,
        default=0.9,
        metavar="FRACTION",
        help="the fraction of a level's requests that must meet the service level (default: 0.9)",
    )
    criteria.add_argument(
        "--confidence",
        type=float,
        default=0.95,
        metavar="FRACTION",
        help="confidence of the Wilson interval of the attainment (default: 0.95)",
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
        "--requests", type=int, default=8, help="requests per concurrency batch, at least 4 per stream (default: 8)"
    )
    shape.add_argument("--context-requests", type=int, default=4, help="requests per context batch (default: 4)")
    shape.add_argument("--max-requests-per-level", type=int, default=256, metavar="N", help="the most requests one "
                       "level may send, in batches, before it is called inconclusive (default: 256)")  # fmt: skip
    shape.add_argument("--budget", type=int, default=3000, metavar="REQUESTS", help="the most requests each search "
                       "may send; past it the answer is 'at least' (default: 3000)")  # fmt: skip


def _options(args: argparse.Namespace) -> CapacityOptions:
    options = CapacityOptions(
        results_dir=args.results_dir,
        min_decode_tps=args.min_decode,
        max_ttft_s=args.max_ttft,
        max_concurrency=args.max_concurrency,
        input_tokens=args.input_tokens,
        output_tokens=args.output_tokens,
        requests=args.requests,
        target_attainment=args.target_attainment,
        confidence=args.confidence,
        max_requests_per_level=args.max_requests_per_level,
        budget=args.budget,
        context=args.context,
        max_context=args.max_context,
        context_requests=args.context_requests,
    )
    options.check()
    return options


def _figure(value: float | None, digits: int) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


def _verdict(probe: Probe) -> str:
    if probe.verdict == "pass":
        return "pass"
    return f"{probe.verdict}: " + "; ".join(probe.because)


def print_result(console: Console, result: CapacityResult) -> None:
    """The levels in the order measured, then the answers."""
    criteria = result.criteria
    title = f"capacity | tag {result.tag} | {result.model}"
    table = Table(title=escape(title), box=box.SIMPLE_HEAD, pad_edge=False)
    columns = ("search", "level", "sent", "met", "attainment [interval]", "decode p10", "TTFT p95", "verdict")
    for column in columns:
        table.add_column(escape(column), justify="left" if column in ("search", "verdict") else "right")
    for probe in result.probes:
        table.add_row(
            probe.axis,
            words.level(probe.axis, probe.value),
            str(probe.requests_sent),
            f"{probe.requests_met}/{probe.requests_measured}",
            words.interval(probe),
            _figure(probe.decode_tps_low, 1),
            _figure(probe.ttft_ms_high, 0),
            escape(_verdict(probe)),
        )
    table.caption = (
        f"a request meets the service level at decode >= {criteria.min_decode_tps:g} tok/s and TTFT <= "
        f"{criteria.max_ttft_ms:,.0f} ms (TTFT: concurrency only); a level passes when the "
        f"{criteria.confidence * 100:g}% Wilson interval of the fraction that met it lies at or above "
        f"{criteria.target_attainment:g}, with no failed request; decode p10 and TTFT p95 are shown, not judged"
    )
    console.print(table)
    console.print(f"max users: {escape(words.describe(result, 'concurrency'))}", soft_wrap=True)
    if result.longest_context is not None:
        console.print(f"longest context: {escape(words.describe(result, 'context'))}", soft_wrap=True)


def command(args: argparse.Namespace, console: Console) -> int:
    """bench capacity: search, write the capacity file, print the levels and the answers."""
    options = _options(args)
    target = resolve_target(args, config_dir_of(args))
    err = Console(stderr=True)
    err.print(f"bench: {target.base_url} ({target.engine}), tag {target.tag}, results in {options.results_dir}")

    def started(axis: Axis, spec: LevelSpec) -> None:
        value = spec.in_flight if axis == "concurrency" else spec.input_tokens
        err.print(f"  {axis} {words.level(axis, value)}: {spec.requests} requests ...", end="")

    def probed(probe: Probe, last: bool) -> None:
        settled = escape(_verdict(probe)) if last else "more requests"
        err.print(f" {probe.requests_met}/{probe.requests_measured} met, {words.interval(probe)}: {settled}")

    try:
        result, path = run_capacity(target, options, Hooks(level_started=started, probed=probed))
    except KeyboardInterrupt:
        err.print(f"\nbench: {signals.reason()}; nothing written (a search that stops early has no answer)")
        return signals.INTERRUPTED
    print_result(console, result)
    console.print(f"capacity: {path}", soft_wrap=True)
    return 0
