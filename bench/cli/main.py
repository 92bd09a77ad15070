"""The ``bench`` command line: parse arguments, call a plain function, map errors to exit codes.

Only this module prints. Exit codes: 0 ok, 1 unexpected bench error, 2 usage or configuration
error, 3 endpoint error (also a finished run in which requests failed: its table and file are
there, marked untrusted), 4 ``bench clients --check`` found a written configuration stale, 5 a
probe check failed that the deployment does not explain (its table and file are there), 6 a
finished run that is not trusted for another reason than failed requests (its table, reasons and
file are there), 130 interrupted (Ctrl-C), 143 stopped by SIGTERM, 129 by SIGHUP (what was
measured is filed, as for Ctrl-C: :mod:`bench.signals`). Tracebacks appear only with ``--debug``.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from rich import box
from rich.console import Console
from rich.table import Table

from bench import __version__, signals
from bench.cli import capacity as cli_capacity
from bench.cli import clients as cli_clients
from bench.cli import compare as cli_compare
from bench.cli import plan as cli_plan
from bench.cli import probe as cli_probe
from bench.cli import report as cli_report
from bench.cli import run as cli_run
from bench.cli import trace as cli_trace
from bench.errors import BenchError, ConfigError
from bench.rig.presets import Preset, find_models_file, load_presets

log = logging.getLogger(__name__)

EXAMPLES = """\
examples:
  bench presets                          list the model presets in group_vars/all/models.yml
  bench presets qwen3.8-27b-w4a16        show every field of one preset
  bench run single                       one stream against the deployed endpoint (artifacts/*/deployment.json,
                                         else the box scripts/demo left in build/demo/bench.env)
  bench run sweep --concurrency 1 4 16   closed-loop levels of concurrency, filed under the deployment's tag
  bench run single --base-url http://127.0.0.1:8000/v1 --api-key-file KEY_FILE --tag my-test
  bench capacity --min-decode 20         the most users at 20 tok/s each, and the longest context of one
  bench probe                            tool calls, reasoning, context limit, JSON output; filed under the tag
  bench plan                             the KV pool and what fits, predicted before deploying
  bench plan --check                     that prediction versus the pool the deployed vLLM reported
  bench tags                             the tags under results/: runs, dates, engine, preset, what differs
  bench compare v1.2 v1.3                v1.3 against v1.2: intervals, tests, verdicts, candidate causes
  bench history qwen3.8-27b-w4a16        one preset across tags in time order, regressions flagged
  bench report v1.2 v1.3                 capability cards, and reports/v1.2+v1.3/report.html with the plots
  bench run trace --trace t.jsonl        replay a Mooncake-style trace on its timestamps (--speedup 2: twice as fast)
  bench trace export RUN -o t.jsonl      a filed run as such a trace, to replay here, in AIPerf or in GuideLLM
  bench clients                          OpenCode, Aider, Continue, Hermes Agent and OpenAI SDK configurations
  bench clients --check                  exit 4, naming each field, when the written ones no longer match the server
"""


def build_parser() -> argparse.ArgumentParser:
    """The argument parser, with help a newcomer can follow."""
    parser = argparse.ArgumentParser(
        prog="bench",
        description="Measure and inspect an llmrig LLM server.",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    parser.add_argument(
        "--config-dir",
        type=Path,
        default=None,
        help="llmrig checkout whose group_vars/all to read (default: the current "
        "directory or its nearest parent that has one)",
    )
    parser.add_argument("--debug", action="store_true", help="show tracebacks and debug logs (default: off)")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    presets = commands.add_parser(
        "presets",
        help="list model presets, or show one",
        description="List the model presets from group_vars/all/models.yml.",
    )
    presets.add_argument("name", nargs="?", help="preset to show in full (default: list all)")
    cli_run.add_parser(commands)
    cli_capacity.add_parser(commands)
    cli_probe.add_parser(commands)
    cli_plan.add_parser(commands)
    cli_compare.add_parsers(commands)
    cli_report.add_parser(commands)
    cli_clients.add_parser(commands)
    cli_trace.add_parser(commands)
    return parser


def _presets(config_dir: Path | None) -> dict[str, Preset]:
    models_file = find_models_file((config_dir or Path.cwd()).resolve())
    log.debug("reading presets from %s", models_file)
    return load_presets(models_file)


def show_presets(console: Console, presets: dict[str, Preset]) -> None:
    """Print one row per preset."""
    table = Table(title="Model presets (group_vars/all/models.yml)", box=box.SIMPLE_HEAD, pad_edge=False)
    for column in ("preset", "served as", "format", "context", "GB"):
        table.add_column(column, no_wrap=True)
    for preset in presets.values():
        table.add_row(
            preset.name,
            preset.served_name,
            preset.checkpoint_format,
            f"{preset.native_context:,}",
            f"{preset.weights_gb:g}",
        )
    console.print(table)


def show_preset(console: Console, preset: Preset) -> None:
    """Print every field of one preset."""
    table = Table(title=f"Preset {preset.name}", show_header=False)
    table.add_column("field")
    table.add_column("value")
    for field in Preset.__slots__:
        value = getattr(preset, field)
        if field == "architecture":
            for arch_field in type(value).__slots__:
                table.add_row(f"architecture.{arch_field}", str(getattr(value, arch_field)))
        else:
            table.add_row(field, str(value))
    console.print(table)


def _console() -> Console:
    """Standard output; 120 columns wide when it is not a terminal and COLUMNS is not set (rich's
    default of 80 would wrap the comparison tables of a file or a pipe)."""
    if sys.stdout.isatty() or os.environ.get("COLUMNS"):
        return Console()
    return Console(width=120)


def run(args: argparse.Namespace, console: Console) -> int:
    """Dispatch a parsed command line."""
    if args.command == "run":
        return cli_run.command(args, console)
    if args.command == "capacity":
        return cli_capacity.command(args, console)
    if args.command == "probe":
        return cli_probe.command(args, console)
    if args.command == "plan":
        return cli_plan.command(args, console)
    if args.command in ("tags", "compare", "history"):
        return cli_compare.command(args, console)
    if args.command == "report":
        return cli_report.command(args, console)
    if args.command == "clients":
        return cli_clients.command(args, console)
    if args.command == "trace":
        return cli_trace.command(args, console)
    presets = _presets(args.config_dir)
    if args.name is None:
        show_presets(console, presets)
    elif args.name in presets:
        show_preset(console, presets[args.name])
    else:
        raise ConfigError(f"no preset {args.name!r}; known: {', '.join(presets)}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``bench`` console script."""
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.debug else logging.WARNING, format="%(levelname)s %(name)s: %(message)s"
    )
    with signals.stop_like_ctrl_c():
        try:
            status = run(args, _console())
        except KeyboardInterrupt:
            if args.debug:
                raise
            with contextlib.suppress(OSError):  # a hangup may have taken the terminal with it
                print(f"bench: {signals.reason()}", file=sys.stderr)  # a command that keeps nothing when stopped
            status = signals.INTERRUPTED
        except OSError:
            if not signals.stopped():
                raise
            status = signals.INTERRUPTED  # the terminal went with the hangup: what was measured is filed
        except BenchError as exc:
            if args.debug:
                raise
            print(f"bench: error: {exc}", file=sys.stderr)
            return exc.exit_code
        return signals.exit_status() if status == signals.INTERRUPTED else status
