"""Terminal output of ``bench run``: live progress on stderr, a compact table at the end."""

from __future__ import annotations

from types import TracebackType

from rich import box
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn
from rich.table import Table

from bench.measure.metrics import RequestRecord
from bench.measure.run.agent_report import print_agent
from bench.measure.run.benchmark import Progress as Hooks
from bench.measure.run.figures import fmt, p50
from bench.measure.run.loops import LevelSpec
from bench.measure.run.results import LevelResult, RunResult
from bench.measure.telemetry.gpu import GpuAbsent


def level_label(spec: LevelSpec) -> str:
    """What a level is: its rate for open-loop levels (the in-flight cap is not the level)."""
    if spec.rate is not None:
        return f"rate {spec.rate:g} req/s"
    return f"concurrency {spec.in_flight}"


class LiveProgress:
    """A rich progress bar per level, fed by the run's hooks."""

    def __init__(self, console: Console) -> None:
        self._bar = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[errors]} errors"),
            TimeElapsedColumn(),
            console=console,
            transient=False,
            # Redrawn twice a second on a terminal, not at all into a pipe: a redraw costs about
            # 0.4 ms of CPU, as much as a slow server's streamed event (scripts/bench-peers).
            auto_refresh=console.is_terminal,
            refresh_per_second=2,
        )
        self._task: TaskID | None = None
        self.hooks = Hooks(level_started=self._level, request_done=self._done)

    def _level(self, spec: LevelSpec) -> None:
        self._task = self._bar.add_task(level_label(spec), total=spec.requests, errors=0)

    def _done(self, record: RequestRecord) -> None:
        if self._task is None:
            return
        errors = self._bar.tasks[self._task].fields["errors"] + (record.error is not None)
        self._bar.update(self._task, advance=1, errors=errors)

    def __enter__(self) -> LiveProgress:
        self._bar.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self._bar.stop()


SUMMARY_COLUMNS = ("level", "in", "ok", "TTFT", "TPOT", "tok/s", "out tok/s", "stall", "trusted")
SUMMARY_CAPTION = "times in ms; TTFT, TPOT, tok/s: per-stream medians; stall: longest gap"


def summary_row(level: LevelResult) -> tuple[str, ...]:
    """The cells of one level's row, in the order of :data:`SUMMARY_COLUMNS`."""
    latency, requests = level.latency, level.requests
    return (
        level.label,
        str(level.tokens.input_target),
        f"{requests.successful}/{requests.total}",
        p50(latency.ttft_ms),
        p50(latency.tpot_ms, digits=2),
        p50(level.decode_tps),
        fmt(level.throughput.output_tps),
        fmt(level.stall_max_ms, digits=0),
        "yes" if not level.untrusted_because else "no",
    )


def print_summary(console: Console, result: RunResult) -> None:
    """One row per level: prompt length, requests that succeeded, latency medians, per-stream
    and aggregate speed, trust; then why a level is untrusted (failed requests by kind first)."""
    title = f"{result.workload} | tag {result.tag} | {result.environment.model}"
    table = Table(title=title, caption=SUMMARY_CAPTION, box=box.SIMPLE_HEAD, pad_edge=False)
    for column in SUMMARY_COLUMNS:
        table.add_column(column, justify="right", no_wrap=True)
    for level in result.levels:
        table.add_row(*summary_row(level))
    console.print(table)
    for level in result.levels:
        for reason in level.untrusted_because:
            console.print(f"[yellow]{level.label}: {escape(reason)}[/yellow]", soft_wrap=True)
    for skipped in result.skipped_levels or []:
        console.print(f"[yellow]skipped (beyond the server's max_model_len): {skipped}[/yellow]")
    print_agent(console, result.levels)
    _level_notes(console, result)
    _print_facts(console, result)
    if result.partial:
        why = result.stopped_because or "interrupted"
        console.print(f"[yellow]partial: the run stopped early ({escape(why)})[/yellow]", soft_wrap=True)


def _level_notes(console: Console, result: RunResult) -> None:
    """Under the table: the boxes that served each level, a level stopped as saturated, and the
    per-request speculative decoding."""
    for level in result.levels:
        if level.server.backends:  # behind a gateway: each box's share, as its router counted them
            shares = ", ".join(f"{box} {count}" for box, count in level.server.backends.items())
            console.print(f"{level.label}: served by {escape(shares)}", soft_wrap=True)
    for level in result.levels:
        if level.saturated is not None:
            sent = f"{level.requests.total} of {result.options.requests}"  # the rate workload's requests a level
            console.print(
                f"[yellow]{level.label}: {escape(level.saturated)}; stopped after {sent} requests[/yellow]",
                soft_wrap=True,
            )
    for level in result.levels:
        if level.spec_decode_requests is not None:
            console.print(f"{level.label}: {spec_decode_line(level)}", soft_wrap=True)


def spec_decode_line(level: LevelResult) -> str:
    """A level's per-request speculative decoding in words (the server's own counter beside it)."""
    found = level.spec_decode_requests
    if found is None:
        return "no per-request speculative decoding figures"
    line = (
        f"draft tokens accepted per request p50 {found.acceptance.p50:.0%} (mean {found.acceptance.mean:.0%}, "
        f"{found.requests} requests), pooled {found.pooled_acceptance:.0%}"
    )
    if found.acceptance_length is not None:
        line += f", {found.acceptance_length.p50:.2f} tokens per step p50"
    counter = level.server.derived.spec_decode_acceptance_rate
    if counter is not None:
        line += f"; server counter {counter:.0%}"
    if found.zero_acceptance:
        line += f"; {found.zero_acceptance} accepted none"
    return line


def _print_facts(console: Console, result: RunResult) -> None:
    """Start-up KV pool, GPU telemetry (or why there is none) and Ollama's own timings."""
    record = result.environment.deployment_record
    tokens = record.startup.kv_cache_tokens if record else None
    if record is not None and tokens is not None:
        startup = record.startup
        console.print(
            f"KV pool at start-up (deployment.json): {tokens:,} tokens, maximum concurrency "
            f"{startup.facts.get('max_concurrency')}x at {startup.facts.get('max_concurrency_tokens_per_request')} "
            "tokens each"
        )
    gpu = result.gpu
    if isinstance(gpu, GpuAbsent):
        console.print(gpu.reason)  # said once; the run went on without telemetry
    elif gpu is not None:
        for card in gpu.gpus:
            console.print(
                f"GPU {card.index} {card.name}: {fmt(card.power_w_mean)} W mean, "
                f"{fmt(card.utilization_pct_mean)} % busy, SM clock min {fmt(card.sm_clock_mhz_min, 0)} MHz, "
                f"throttle reasons {card.throttle_reasons_seen:#x}"
            )
        console.print(
            f"energy {fmt(gpu.energy_j)} J, {fmt(gpu.tokens_per_joule, 2)} tokens per joule; single-stream "
            f"decode at {fmt((gpu.decode_fraction_of_bound or 0) * 100)} % of the memory-bandwidth bound "
            f"({fmt(gpu.decode_bound_tps)} tok/s)"
        )
    native = result.ollama_native
    if native:
        console.print(
            f"Ollama's own timings ({native.requests} native requests): decode "
            f"{fmt(native.server_decode_tps_p50)} tok/s server-side, {fmt(native.client_decode_tps_p50)} "
            f"measured from the stream (ratio {fmt(native.client_over_server, 3)})"
        )
        for warning in native.warnings:
            console.print(f"[yellow]Ollama cross-check: {warning}[/yellow]")
