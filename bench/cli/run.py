"""``bench run`` on the command line: its flags and help, and the run with its summary table."""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

from rich.console import Console

from bench import signals
from bench.cli import repeat
from bench.cli.target import add_target_flags, config_dir_of, resolve_target
from bench.errors import BenchError, ConfigError, EndpointError, UntrustedRun
from bench.measure.run import progress as report
from bench.measure.run.benchmark import Progress as Hooks
from bench.measure.run.benchmark import run as run_benchmark
from bench.measure.run.options import WORKLOADS, RunOptions, options_of, settings_for
from bench.measure.run.results import RunResult
from bench.measure.run.workloads import Option, OptionValue
from bench.measure.target import Target
from bench.rig.presets import load_presets


class _DefaultsHelp(argparse.ArgumentDefaultsHelpFormatter):
    """Appends "(default: X)" to a flag's help, except where the help already says its default
    or there is none to say (None, a switch that is off)."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        default = action.default
        if not action.option_strings or "default" in text or default is None or default is False:
            return text
        if default is argparse.SUPPRESS:
            return text
        values = default if isinstance(default, list | tuple) else [default]
        shown = " ".join(f"{value:g}" if isinstance(value, float) else str(value) for value in values)
        return f"{text} (default: {shown})"


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``bench run`` and its flags to the subcommands."""
    run = commands.add_parser(
        "run",
        help="measure an OpenAI-compatible endpoint and file the result under a tag",
        description="Measure TTFT, decode speed and throughput of an OpenAI-compatible endpoint. The endpoint, key, "
        "model and tag come from flags, BENCH_* variables, the fetched deployment.json, or group_vars (in that order).",
        formatter_class=_DefaultsHelp,
    )
    run.add_argument(
        "workload",
        choices=list(WORKLOADS),
        help="; ".join(f"{name}: {workload.summary}" for name, workload in WORKLOADS.items()),
    )
    add_target_flags(run)
    shape = run.add_argument_group("workload")
    shape.add_argument(
        "--input-tokens", type=int, default=512, help="prompt length in tokens, as the server counts them"
    )
    shape.add_argument("--output-tokens", type=int, default=128, help="tokens to generate per request")
    shape.add_argument("--requests", type=int, default=20, help="requests per level (at least 4 per concurrent stream)")
    for uses in options_of().values():
        option = uses[0][1]
        if option.kind is bool:
            shape.add_argument(option.flag, action=argparse.BooleanOptionalAction, default=None, help=_help(uses))
        else:
            shape.add_argument(
                option.flag, type=option.kind, nargs="+" if option.many else None, default=None, help=_help(uses)
            )
    shape.add_argument(
        "--no-fixed-output", action="store_true", help="let the model stop early (no min_tokens/ignore_eos)"
    )
    shape.add_argument("--temperature", type=float, default=0.0, help="sampling temperature")
    shape.add_argument("--seed", type=int, default=0, help="seed of the prompt generator (the salt is always fresh)")
    shape.add_argument(
        "--repeat",
        type=int,
        default=1,
        metavar="N",
        help="run the workload N times with the same seed, file each run, then a summary of them under "
        "RESULTS_DIR/TAG/repeats/: per level and metric the runs' mean, sd, CV, standard error and Student-t "
        "95%% interval, and the runs that failed, left out",
    )
    limits = run.add_argument_group("timeouts (a request that runs past one fails with that kind)")
    limits.add_argument(
        "--read-timeout",
        type=float,
        default=300.0,
        metavar="SECONDS",
        help="longest wait for the next bytes of an answer, the first token included (read_timeout)",
    )
    limits.add_argument(
        "--request-timeout",
        "--timeout",
        dest="request_timeout",
        type=float,
        default=600.0,
        metavar="SECONDS",
        help="longest one request may take, from dispatch to its last token (request_timeout; "
        "--timeout is its old name)",
    )


def _shown(value: OptionValue) -> str:
    values = value if isinstance(value, tuple) else (value,)
    if isinstance(value, bool):
        return "on" if value else "off"
    return " ".join(f"{v:g}" if isinstance(v, float) else str(v) or "none" for v in values)


def _help(uses: list[tuple[str, Option]]) -> str:
    """A workload flag's help: its own with its default, or, taken by several workloads, what it
    means to each (and to the others)."""
    if len(uses) == 1:
        option = uses[0][1]
        return f"{option.help} (default: {_shown(option.default)})"
    meanings = [f"{name}: {option.help} (default {_shown(option.default)})" for name, option in uses]
    others = [option.others for _, option in uses if option.others]
    return "; ".join(meanings + others[:1])


def _given(args: argparse.Namespace) -> dict[str, OptionValue | None]:
    """The workload flags as given (None: not given), by their key in RunOptions.settings."""
    given: dict[str, OptionValue | None] = {}
    for key, uses in options_of().items():
        value = getattr(args, uses[0][1].flag.removeprefix("--").replace("-", "_"))
        given[key] = tuple(value) if isinstance(value, list) else value
    return given


def _run_options(args: argparse.Namespace) -> RunOptions:
    options = RunOptions(
        workload=args.workload,
        requests=args.requests,
        input_tokens=args.input_tokens,
        output_tokens=args.output_tokens,
        results_dir=args.results_dir,
        fixed_output=not args.no_fixed_output,
        temperature=args.temperature,
        seed=args.seed,
        read_timeout_s=args.read_timeout,
        request_timeout_s=args.request_timeout,
        settings=settings_for(args.workload, _given(args)),
    )
    WORKLOADS[args.workload].check(options)
    return options


def _weight_bytes_per_gpu(target: Target, config_dir: Path | None) -> float | None:
    """The deployed preset's weights divided by tensor parallelism: bytes each GPU streams per token."""
    deployment = target.deployment
    tensor_parallel = deployment.section.flags().get("--tensor-parallel-size") if deployment else None
    if config_dir is None or deployment is None or not tensor_parallel:
        return None
    preset = load_presets(config_dir / "models.yml").get(deployment.preset)
    if preset is None:
        return None
    return preset.weights_gb * 1e9 / int(tensor_parallel)


def command(args: argparse.Namespace, console: Console) -> int:
    """bench run: measure, write the result file, print the summary table (with --repeat, N times
    and a summary of the runs)."""
    if args.repeat < 1:
        raise ConfigError(f"--repeat: {args.repeat} runs; give 1 or more")
    options = _run_options(args)
    config_dir = config_dir_of(args)
    target = resolve_target(args, config_dir)
    options = dataclasses.replace(options, weight_bytes_per_gpu=_weight_bytes_per_gpu(target, config_dir))
    err = Console(stderr=True)
    err.print(f"bench: {target.base_url} ({target.engine}), tag {target.tag}, results in {options.results_dir}")
    if args.repeat > 1:
        return repeat.command(
            target,
            options,
            args.repeat,
            measure=lambda: measure(target, options, console, err),
            verdict=verdict,
            console=console,
        )
    measured = measure(target, options, console, err)
    if measured is None:
        return signals.INTERRUPTED
    problem = verdict(measured[0])
    if problem is not None:
        raise problem
    return 0


def measure(target: Target, options: RunOptions, console: Console, err: Console) -> tuple[RunResult, Path] | None:
    """One run with live progress, its table and file printed; None when interrupted (what was
    measured before is shown and filed as partial)."""
    progress = report.LiveProgress(err)
    try:
        with progress:
            result, path = run_benchmark(target, options, progress.hooks)
    except KeyboardInterrupt:
        if not _print_partial(console, progress.hooks):
            err.print(f"bench: {signals.reason()}; nothing written")
        return None
    except BenchError:
        _print_partial(console, progress.hooks)  # what was measured before the error, then the error
        raise
    report.print_summary(console, result)
    console.print(f"result: {path}", soft_wrap=True)
    return result, path


def verdict(result: RunResult) -> BenchError | None:
    """Why a finished run failed (failed requests, or not trusted), as the error to raise; None if it did not."""
    failed = result.failed_requests()
    if failed:
        return EndpointError(f"{failed}; the result is marked untrusted")
    if not result.trusted:
        reasons = [f"{level.label}: {reason}" for level in result.levels for reason in level.untrusted_because]
        more = f", and {len(reasons) - 1} more above" if len(reasons) > 1 else ""
        return UntrustedRun(f"the run is not trusted ({reasons[0]}{more}); the result is marked untrusted")
    return None


def _print_partial(console: Console, hooks: Hooks) -> bool:
    """The table of a run that stopped early and the path of its partial file; False if none."""
    if hooks.written is None or hooks.result is None:
        return False
    report.print_summary(console, hooks.result)
    console.print(f"partial result: {hooks.written}", soft_wrap=True)
    return True
