"""``bench probe`` on the command line: the capability checks that gate comparisons.

It prints one row per check (PASS, FAIL, expected FAIL, not run, and what came back), then one
per agent client whose recorded requests it replayed (:mod:`bench.measure.probe.clients`), files
the result under ``RESULTS_DIR/<tag>/probes/`` and prints its path. Exit 0 when every check that
ran passed or failed only where the deployment said it would (a line names those); exit 5
(:class:`~bench.errors.ProbeFailed`) when any other check failed, or a client named by
``--clients`` is not served, after the tables and the file.
"""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path

from rich import box
from rich.console import Console
from rich.table import Table

from bench import signals
from bench.cli.target import add_target_flags, config_dir_of, resolve_target
from bench.errors import ProbeFailed
from bench.measure.probe.checks import CHECKS, run_probe
from bench.measure.probe.clients import CLIENT_TITLES
from bench.measure.probe.expect import Expectations, PresetFacts, expectations
from bench.measure.probe.result import TTFO_RUNS, CheckResult, ProbeResult, write_probe
from bench.measure.target import Target
from bench.rig.presets import load_presets

STYLES = {"PASS": "green", "FAIL": "bold red", "expected FAIL": "yellow", "not run": "dim"}


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``bench probe`` and its flags to the subcommands."""
    probe = commands.add_parser(
        "probe",
        help="check tool calls, reasoning, context limits and JSON output; file the result under the tag",
        description="Capability checks of an OpenAI-compatible endpoint, filed under RESULTS_DIR/TAG/probes/. "
        "Checks the deployment says will fail (no tool-call or reasoning parser) are reported as expected failures.",
    )
    add_target_flags(probe)
    probe.add_argument(
        "--only", nargs="+", choices=list(CHECKS), metavar="CHECK", help=f"run only these checks: {', '.join(CHECKS)}"
    )
    probe.add_argument(
        "--clients",
        nargs="+",
        choices=list(CLIENT_TITLES),
        metavar="CLIENT",
        help="replay the recorded requests of these agent clients only, and exit 5 when one is not served "
        f"({', '.join(CLIENT_TITLES)}; default: all of them, reported without changing the exit status; "
        "none with --only)",
    )
    probe.add_argument(
        "--expect-context",
        type=int,
        metavar="TOKENS",
        help="context length the server should report (default: --max-model-len of deployment.json vllm.args)",
    )
    probe.add_argument(
        "--timeout", type=float, default=120.0, metavar="SECONDS", help="longest one request may take (default: 120)"
    )


def _preset_facts(target: Target, config_dir: Path | None) -> PresetFacts | None:
    name = target.deployment.preset if target.deployment else None
    if config_dir is None or not name:
        return None
    preset = load_presets(config_dir / "models.yml").get(name)
    return PresetFacts(preset.tool_call_parser, preset.reasoning_parser) if preset else None


def _expectations(args: argparse.Namespace, target: Target, config_dir: Path | None) -> Expectations:
    found = expectations(target.deployment, preset=_preset_facts(target, config_dir))
    if args.expect_context is not None:
        return Expectations(found.absent, args.expect_context, "--expect-context")
    return found


def show(console: Console, result: ProbeResult) -> None:
    """One row per check: its name, its verdict and what came back."""
    table = Table(title=f"Probe of {result.model} at {result.base_url}, tag {result.tag}", box=box.SIMPLE_HEAD)
    for column in ("check", "result", "detail"):
        table.add_column(column, no_wrap=column != "detail")
    for check in result.checks:
        table.add_row(check.name, f"[{STYLES[check.verdict]}]{check.verdict}[/]", check.detail)
    console.print(table)
    console.print(
        f"time to first answer (median of {TTFO_RUNS}, streamed): thinking on {_ms(result.ttfo_thinking_on_ms)}, "
        f"thinking off {_ms(result.ttfo_thinking_off_ms)}",
        soft_wrap=True,
    )
    if result.clients is not None:
        show_clients(console, result.clients)


def show_clients(console: Console, clients: list[CheckResult]) -> None:
    """One row per agent client whose requests were replayed, then who is served correctly."""
    table = Table(title="Agent clients: their recorded requests replayed", box=box.SIMPLE_HEAD)
    for column in ("client", "result", "detail"):
        table.add_column(column, no_wrap=column != "detail")
    for client in clients:
        verdict = client.verdict.replace("PASS", "served").replace("FAIL", "not served")
        table.add_row(client.name, f"[{STYLES[client.verdict]}]{verdict}[/]", client.detail)
    console.print(table)
    served = [CLIENT_TITLES[client.name] for client in clients if client.passed]
    unserved = [CLIENT_TITLES[client.name] for client in clients if client.ran and not client.passed]
    unknown = [CLIENT_TITLES[client.name] for client in clients if not client.ran]
    line = f"served correctly: {', '.join(served) or 'none'}" + (f"; not: {', '.join(unserved)}" if unserved else "")
    console.print(line + (f"; not known: {', '.join(unknown)}" if unknown else ""), soft_wrap=True)


def _ms(value: float | None) -> str:
    return "no answer" if value is None else f"{value:,.0f} ms"


def command(args: argparse.Namespace, console: Console) -> int:
    """bench probe: run the checks, print the table, write the file; exit 5 on an unexpected failure."""
    config_dir = config_dir_of(args)
    target = resolve_target(args, config_dir)
    expected = _expectations(args, target, config_dir)
    err = Console(stderr=True)
    err.print(f"bench: probing {target.base_url}, tag {target.tag}")
    clients = args.clients or ([] if args.only else list(CLIENT_TITLES))
    try:
        result = asyncio.run(run_probe(target, expected, args.only or list(CHECKS), args.timeout, clients))
    except KeyboardInterrupt:
        err.print(f"bench: {signals.reason()}; nothing written (a probe that stops early files nothing)")
        return signals.INTERRUPTED
    show(console, result)
    path = write_probe(args.results_dir, result)
    console.print(f"probe: {path}", soft_wrap=True)
    if result.unexpected:
        names = ", ".join(check.name for check in result.unexpected)
        raise ProbeFailed(f"{len(result.unexpected)} check(s) failed that the deployment does not explain: {names}")
    if result.failed:
        names = ", ".join(check.name for check in result.failed)
        console.print(
            f"expected failures only ({names}): the deployment lacks these capabilities; bench compare shows "
            f"tag {result.tag} but does not rank it (--include-failing ranks it anyway)",
            soft_wrap=True,
        )
    unserved = [client.name for client in result.clients or [] if client.ran and not client.passed]
    if args.clients and unserved:  # named: expected failures count, the clients cannot use the deployment
        raise ProbeFailed(f"not served as they ask: {', '.join(CLIENT_TITLES[name] for name in unserved)} (--clients)")
    return 0
