"""``bench run --repeat N`` on the command line: the runs one after the other, then the summary of
them (bench.measure.run.repeats) printed and filed. A run that fails is listed and left out of the
summary; an endpoint that cannot be used at all (unreachable, wrong key, no such model) ends the
series there, after the summary of the runs before it."""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Callable
from pathlib import Path

from rich import box
from rich.console import Console
from rich.table import Table

from bench import signals
from bench.errors import BenchError, EndpointAuthError, EndpointError, EndpointModelError, EndpointUnreachable
from bench.measure.run.options import RunOptions
from bench.measure.run.repeats import FailedRun, RepeatResult, summarise, write_repeats
from bench.measure.run.results import RunResult
from bench.measure.target import Target

FATAL = (EndpointUnreachable, EndpointAuthError, EndpointModelError)


def command(
    target: Target,
    options: RunOptions,
    repeats: int,
    *,
    measure: Callable[[], tuple[RunResult, Path] | None],
    verdict: Callable[[RunResult], BenchError | None],
    console: Console,
) -> int:
    """Run ``measure`` ``repeats`` times (``verdict`` says why a finished run failed, if it did),
    then file and print the summary."""
    started = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    runs: list[RunResult] = []
    failed: list[FailedRun] = []
    stopped: EndpointError | None = None
    for index in range(1, repeats + 1):
        console.print(f"[bold]run {index} of {repeats}[/bold]")
        try:
            measured = measure()
        except FATAL as exc:
            failed.append(FailedRun(index, None, str(exc)))
            failed += [
                FailedRun(later, None, "not run: the endpoint could not be used")
                for later in range(index + 1, repeats + 1)
            ]
            stopped = exc
            break
        except EndpointError as exc:  # this run was lost; the next may not be
            failed.append(FailedRun(index, None, str(exc)))
            continue
        if measured is None:
            console.print(f"interrupted at run {index} of {repeats}: no summary written (the finished runs are filed)")
            return signals.INTERRUPTED
        result = measured[0]
        runs.append(result)
        problem = verdict(result)
        if problem is not None:
            failed.append(FailedRun(index, result.run_id, str(problem)))
    summary = summarise(
        tag=target.tag,
        workload=options.workload,
        started_at=started,
        seed=options.seed,
        repeats=repeats,
        runs=runs,
        failed=failed,
    )
    path = write_repeats(options.results_dir, summary)
    show(console, summary)
    console.print(f"summary: {path}", soft_wrap=True)
    if stopped is not None:
        raise stopped
    if failed:
        said = "; ".join(f"run {run.index}: {run.reason}" for run in failed)
        raise EndpointError(
            f"{len(failed)} of {repeats} runs failed ({said}); the summary covers the other {repeats - len(failed)}"
        )
    return 0


def _decimals(value: float) -> int:
    """Decimals that give a figure three significant digits (none from 100 up)."""
    if value == 0 or not math.isfinite(value):
        return 2
    return max(0, 2 - math.floor(math.log10(abs(value))))


def _number(value: float, decimals: int | None = None) -> str:
    return f"{value:,.{_decimals(value) if decimals is None else decimals}f}"


def show(console: Console, summary: RepeatResult) -> None:
    """One table per level: each metric's mean with its 95 % interval, sd, CV and n."""
    kept = summary.repeats - len(summary.failed)
    console.print(f"[bold]{kept} of {summary.repeats} runs summarised[/bold] (seed {summary.seed})")
    for level in summary.levels:
        title = f"{summary.workload} {level.label}, {level.input_tokens:,} in / {level.output_tokens:,} out"
        table = Table(title=title, box=box.SIMPLE_HEAD, pad_edge=False)
        for column in ("metric", "mean [95% CI]", "sd", "CV", "n"):
            table.add_column(column, justify="left" if column == "metric" else "right")
        for metric in level.metrics:
            digits = _decimals(metric.mean)  # the interval in the mean's precision
            interval = (
                ""
                if metric.ci95 is None
                else f" [{_number(metric.ci95[0], digits)}, {_number(metric.ci95[1], digits)}]"
            )
            table.add_row(
                f"{metric.metric} {metric.unit}",
                _number(metric.mean, digits) + interval,
                "-" if metric.sd is None else _number(metric.sd),
                "-" if metric.cv is None or not math.isfinite(metric.cv) else f"{metric.cv * 100:.1f}%",
                str(metric.n),
            )
        console.print(table)
    for run in summary.failed:
        console.print(f"  left out, run {run.index}: {run.reason}", soft_wrap=True)
