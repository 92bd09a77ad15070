"""``bench trace export``: a filed ``bench run`` result as a Mooncake-style JSONL trace, which
``bench run trace --trace FILE`` (and AIPerf, and GuideLLM) replay."""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.console import Console

from bench.documents import write_bytes_atomic
from bench.measure.run.results import RESULT_FILE
from bench.measure.run.trace_export import export


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``bench trace`` and its one subcommand, ``export``."""
    trace = commands.add_parser(
        "trace",
        help="write a filed run as a Mooncake-style JSONL trace (bench run trace replays it)",
        description="Request traces: timestamp, input_length, output_length and hash_ids per line.",
    )
    actions = trace.add_subparsers(dest="trace_command", metavar="ACTION", required=True)
    out = actions.add_parser(
        "export",
        help="a bench run result file as a trace",
        description="Write a bench run result as a trace: each request's scheduled (else dispatch) time, prompt "
        "and output tokens as the server counted them, and hash ids for the prefixes its workload shared "
        "(an agent session's resent history and shared system prompt; nothing for the other workloads).",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    out.add_argument("result", type=Path, help="a result file under results/<tag>/")
    out.add_argument("-o", "--output", type=Path, required=True, help="the JSONL file to write")
    out.add_argument("--block-size", type=int, default=512, help="prompt tokens per hash id")


def command(args: argparse.Namespace, console: Console) -> int:
    """bench trace export: read the result, write the trace, say what was written."""
    exported = export(RESULT_FILE.read(args.result), args.block_size)
    write_bytes_atomic(args.output, "".join(f"{line}\n" for line in exported.lines()).encode())
    skipped = f"; {exported.skipped} without a prompt length left out" if exported.skipped else ""
    console.print(f"{len(exported.requests)} requests written to {args.output}{skipped}", soft_wrap=True)
    return 0
