"""The ``bench`` command line: parse arguments, call a plain function, map errors to exit codes.

Only this module prints. Exit codes: 0 ok, 1 unexpected bench error, 2 usage or configuration
error, 3 endpoint error. Tracebacks appear only with ``--debug``.
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rich import box
from rich.console import Console
from rich.table import Table

from bench import __version__, cli_plan, report
from bench.config import Target, environment, find_deployment, resolve
from bench.errors import BenchError, ConfigError
from bench.presets import Preset, find_models_file, load_presets
from bench.run import DEFAULT_CONTEXTS, WORKLOADS, RunOptions
from bench.run import run as run_benchmark

log = logging.getLogger(__name__)

EXAMPLES = """\
examples:
  bench presets                          list the model presets in group_vars/all/models.yml
  bench presets qwen3.8-27b-w4a16        show every field of one preset
  bench run single                       one stream against the deployed endpoint (artifacts/*/deployment.json)
  bench run sweep --concurrency 1 4 16   closed-loop levels of concurrency, filed under the deployment's tag
  bench run single --base-url http://127.0.0.1:8000/v1 --api-key KEY --tag my-test
  bench plan                             the KV pool and what fits, predicted before deploying
  bench plan --check                     that prediction versus the pool the deployed vLLM reported
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
    _add_run(commands)
    cli_plan.add_parser(commands)
    return parser


def _add_run(commands: Any) -> None:
    run = commands.add_parser(
        "run",
        help="measure an OpenAI-compatible endpoint and file the result under a tag",
        description="Measure TTFT, decode speed and throughput of an OpenAI-compatible endpoint. The endpoint, key, "
        "model and tag come from flags, BENCH_* variables, the fetched deployment.json, or group_vars (in that order).",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    run.add_argument(
        "workload",
        choices=WORKLOADS,
        help="single: one stream; sweep: closed-loop concurrency levels; rate: open loop, Poisson arrivals; "
        "context: one stream as the prompt grows",
    )
    target = run.add_argument_group("target")
    target.add_argument("--base-url", help="OpenAI base URL, e.g. http://127.0.0.1:8000/v1 (env BENCH_BASE_URL)")
    target.add_argument(
        "--api-key", help="API key (env BENCH_API_KEY; default: the key fetched beside deployment.json)"
    )
    target.add_argument(
        "--model", help="served model name (env BENCH_MODEL; default: deployment.json, else the only one)"
    )
    target.add_argument(
        "--tag", help="results go to RESULTS_DIR/TAG (env BENCH_TAG; default: the deployment's version)"
    )
    target.add_argument(
        "--deployment", type=Path, help="deployment.json to read (default: the only artifacts/*/deployment.json)"
    )
    shape = run.add_argument_group("workload")
    shape.add_argument(
        "--input-tokens", type=int, default=512, help="prompt length in tokens, as the server counts them"
    )
    shape.add_argument("--output-tokens", type=int, default=128, help="tokens to generate per request")
    shape.add_argument("--requests", type=int, default=20, help="requests per level (at least 4 per concurrent stream)")
    shape.add_argument(
        "--concurrency", type=int, nargs="+", default=None, help="sweep levels (default 1 2 4 8; single is always 1)"
    )
    shape.add_argument(
        "--rate", type=float, nargs="+", default=[0.5, 1.0, 2.0], help="rate levels, requests per second"
    )
    shape.add_argument(
        "--context",
        type=int,
        nargs="+",
        default=list(DEFAULT_CONTEXTS),
        help="context levels, prompt tokens (levels beyond the server's max_model_len are skipped and listed)",
    )
    shape.add_argument("--max-in-flight", type=int, default=256, help="rate: cap on requests in flight")
    shape.add_argument("--sessions", type=int, default=4, help="agent: sessions (run --concurrency at a time)")
    shape.add_argument("--turns", type=int, default=6, help="agent: turns per session (--input-tokens new each)")
    shape.add_argument("--system-tokens", type=int, default=2048, help="agent: shared system prompt and tool schemas")
    shape.add_argument(
        "--no-fixed-output", action="store_true", help="let the model stop early (no min_tokens/ignore_eos)"
    )
    shape.add_argument("--temperature", type=float, default=0.0, help="sampling temperature")
    shape.add_argument("--seed", type=int, default=0, help="seed of the prompt generator (the salt is always fresh)")
    shape.add_argument("--timeout", type=float, default=600.0, help="seconds one request may take")
    run.add_argument("--results-dir", type=Path, default=Path("results"), help="where result files go")


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


def _run_options(args: argparse.Namespace) -> RunOptions:
    if args.workload == "agent":
        if args.concurrency is not None and len(args.concurrency) != 1:
            raise ConfigError("--concurrency: the agent workload takes one value, the sessions run at a time")
        concurrency: tuple[int, ...] = tuple(args.concurrency or (1,))
    elif args.workload != "sweep":
        if args.concurrency not in (None, [1]):
            raise ConfigError(f"--concurrency: the {args.workload} workload does not take it; use sweep for levels")
        concurrency = (1,)
    else:
        concurrency = tuple(args.concurrency or (1, 2, 4, 8))
    return RunOptions(
        workload=args.workload,
        concurrency=concurrency,
        requests=args.requests,
        input_tokens=args.input_tokens,
        output_tokens=args.output_tokens,
        results_dir=args.results_dir,
        fixed_output=not args.no_fixed_output,
        temperature=args.temperature,
        seed=args.seed,
        timeout_s=args.timeout,
        rates=tuple(args.rate),
        contexts=tuple(args.context),
        max_in_flight=args.max_in_flight,
        sessions=args.sessions,
        turns=args.turns,
        system_tokens=args.system_tokens,
    )


def _weight_bytes_per_gpu(target: Target, config_dir: Path | None) -> float | None:
    """The deployed preset's weights divided by tensor parallelism: bytes each GPU streams per token."""
    deployment = target.deployment or {}
    args = list((deployment.get("vllm") or {}).get("args") or [])
    if config_dir is None or "preset" not in deployment or "--tensor-parallel-size" not in args:
        return None
    presets = load_presets(config_dir / "models.yml")
    preset = presets.get(str(deployment["preset"]))
    if preset is None:
        return None
    return preset.weights_gb * 1e9 / int(args[args.index("--tensor-parallel-size") + 1])


def run_command(args: argparse.Namespace, console: Console) -> int:
    """bench run: measure, write the result file, print the summary table."""
    options = _run_options(args)
    try:
        config_dir: Path | None = find_models_file((args.config_dir or Path.cwd()).resolve()).parent
    except ConfigError:
        config_dir = None
    flags = {name: getattr(args, name) for name in ("base_url", "api_key", "model", "tag")}
    deployment = find_deployment(args.deployment, config_dir)
    target = resolve(flags, environment(), deployment_path=deployment, config_dir=config_dir)
    options = dataclasses.replace(options, weight_bytes_per_gpu=_weight_bytes_per_gpu(target, config_dir))
    err = Console(stderr=True)
    err.print(f"bench: {target.base_url} ({target.engine}), tag {target.tag}, results in {options.results_dir}")
    progress = report.LiveProgress(err)
    try:
        with progress:
            document, path = run_benchmark(target, options, progress.hooks)
    except KeyboardInterrupt:
        written = progress.hooks.written
        err.print(
            f"bench: interrupted; partial results in {written}" if written else "bench: interrupted; nothing written"
        )
        return 130
    report.print_summary(console, document)
    console.print(f"result: {path}", soft_wrap=True)
    return 0


def run(args: argparse.Namespace, console: Console) -> int:
    """Dispatch a parsed command line."""
    if args.command == "run":
        return run_command(args, console)
    if args.command == "plan":
        return cli_plan.command(args, console)
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
    try:
        return run(args, Console())
    except BenchError as exc:
        if args.debug:
            raise
        print(f"bench: error: {exc}", file=sys.stderr)
        return exc.exit_code
