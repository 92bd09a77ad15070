"""What ``bench report`` draws and prints, gathered from each tag's result files: throughput
against concurrency, the TTFT and inter-token distributions, TTFT against prompt length, the KV
pool's usage over time, the per-user against aggregate trade-off (:mod:`.pareto`),
speculative-decoding acceptance, and the tag's capability card (with the start-up of the engine the
newest run measured: its unit's start to its first answer, from deployment.json).

Figures over several runs of a tag are medians over its runs; distributions pool the measured
requests of every run (the same warm-up and window as ``bench run``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from statistics import median

from bench.measure.capacity.result import CapacityResult
from bench.measure.capacity.words import describe
from bench.measure.compare.store import StoredRun
from bench.measure.report import pareto
from bench.measure.report.pareto import ParetoPoint
from bench.measure.run import levels, results
from bench.measure.run.results import LevelResult
from bench.rig import Deployment

JOULES_PER_KWH = 3.6e6


@dataclass(frozen=True, slots=True)
class Point:
    """One point of a plotted line."""

    x: float
    y: float


@dataclass(frozen=True, slots=True)
class TagSeries:
    """Everything plotted for one tag."""

    tag: str
    throughput: list[Point]  # concurrency -> aggregate output tok/s (sweep levels)
    ttft_ms: list[float]  # every measured request of every level
    itl_ms: list[float]  # every inter-token gap (ms per token of the chunk that ended it), one per gap
    ttft_by_context: list[Point]  # prompt tokens -> TTFT p50 (one-stream levels)
    kv_usage: list[Point]  # the newest run that scraped it, its levels end to end: seconds -> percent used
    spec_acceptance: float | None  # accepted draft tokens over proposed ones, over every level
    kv_pool_tokens: int | None = None  # that run's pool: vLLM's blocks times their size, when it said
    pareto: list[ParetoPoint] = field(default_factory=list)  # sweep levels: aggregate against per-user


@dataclass(frozen=True, slots=True)
class Card:
    """A tag's capability card: what one stream decodes at its shortest and longest prompt, how
    many users it serves, time to first answer with thinking on and off, its probes, energy, and
    how long the engine took from its unit's start to its first answer."""

    tag: str
    engine: str
    preset: str | None
    group: str  # the boxes behind the gateway that served the newest run ('' for one box)
    runs: int
    decode_short: Point | None  # prompt tokens, per-stream decode tok/s p50 (median over runs)
    decode_long: Point | None
    ttft_short_ms: float | None
    capacity: str  # the latest bench capacity, in words
    ttfo_thinking_on_ms: float | None
    ttfo_thinking_off_ms: float | None
    probes: str
    tokens_per_joule: float | None
    kwh_per_million_tokens: float | None
    spec_per_request: tuple[float, float] | None = None  # per-request acceptance p50 and pooled, medians over levels
    startup: str = "not recorded (no deployment.json)"  # the newest run's unit start to first answer, in words


def _one_stream(level: LevelResult) -> bool:
    return level.concurrency == 1 and level.rate_per_s is None and level.agent_turns is None


def _median_by(pairs: list[tuple[float, float]]) -> list[Point]:
    grouped: dict[float, list[float]] = {}
    for x, y in pairs:
        grouped.setdefault(x, []).append(y)
    return [Point(x, median(ys)) for x, ys in sorted(grouped.items())]


def _pool_tokens(run_levels: list[LevelResult]) -> int | None:
    """The KV pool in tokens that vLLM's cache_config_info gave (blocks times block size)."""
    for level in run_levels:
        config = level.server.cache_config
        blocks, size = config.get("num_gpu_blocks", ""), config.get("block_size", "")
        if blocks.isdigit() and size.isdigit() and int(blocks) > 0:
            return int(blocks) * int(size)
    return None


def series(tag: str, stored: list[StoredRun]) -> TagSeries:
    """The plotted figures of one tag's runs."""
    throughput, by_context, ttft, itl, acceptance = [], [], [], [], []
    kv: list[Point] = []
    pool: int | None = None
    for run in stored:
        run_kv: list[Point] = []
        offset = 0.0
        for level, records in zip(run.result.levels, results.records_by_level(run.result), strict=True):
            measured = levels.measured_requests(records, level)
            ttft += [m.ttft_ms for m in measured if m.ttft_ms is not None]
            itl += [gap for m in measured for gap, _ in m.itl_samples]
            if run.result.workload == "sweep" and level.rate_per_s is None and level.throughput.output_tps:
                throughput.append((float(level.concurrency), level.throughput.output_tps))
            if _one_stream(level) and level.latency.ttft_ms is not None:
                by_context.append((float(level.tokens.input_target), level.latency.ttft_ms.p50))
            rate = level.server.derived.spec_decode_acceptance_rate
            if rate is not None:
                acceptance.append(rate)
            points = level.server.gauges.kv_cache_usage_series or []
            run_kv += [Point(offset + point.t_s, point.value * 100) for point in points]
            offset = run_kv[-1].x + 1.0 if run_kv else offset
        if run_kv:  # the newest run that scraped the pool
            kv, pool = run_kv, _pool_tokens(run.result.levels)
    return TagSeries(
        tag=tag,
        throughput=_median_by(throughput),
        ttft_ms=ttft,
        itl_ms=itl,
        ttft_by_context=_median_by(by_context),
        kv_usage=kv,
        spec_acceptance=median(acceptance) if acceptance else None,
        kv_pool_tokens=pool,
        pareto=pareto.points(tag, stored),
    )


def startup_text(record: Deployment | None) -> str:
    """The card's start-up line from a deployment record: its unit's start to its first answer
    (bench.rig.ready), split into vLLM's model load, torch.compile and CUDA graphs and the rest
    where its log gave them, else into the health wait and the first answer; or why not measured."""
    if record is None:
        return "not recorded (no deployment.json)"
    startup = record.startup
    if startup.ready_s is None:
        return f"not measured: {startup.ready_reason or 'recorded before start-ups were timed'}"
    load = startup.number("model_load_seconds")
    graphs = [value for value in map(startup.number, ("torch_compile_seconds", "graph_capture_seconds")) if value]
    parts = [f"load {load:,.1f} s"] if load is not None else []
    parts += [f"compile and graphs {sum(graphs):,.1f} s"] if graphs else []
    if parts:
        parts.append(f"rest {startup.ready_s - (load or 0.0) - sum(graphs):,.1f} s")
    elif startup.health_s is not None and startup.first_answer_s is not None:
        loads = ", which loads the model" if record.engine == "ollama" else ""
        parts = [f"health {startup.health_s:,.1f} s", f"first answer {startup.first_answer_s:,.2f} s{loads}"]
    split = f" ({', '.join(parts)})" if parts else ""
    return f"unit start to first answer {startup.ready_s:,.1f} s{split}"


def card(
    tag: str, stored: list[StoredRun], *, capacity: str, probes: str, ttfo: tuple[float | None, float | None]
) -> Card:
    """The capability card of one tag; ``capacity``, ``probes`` and ``ttfo`` (thinking on, off)
    come from its latest ``bench capacity`` and ``bench probe``."""
    decode: list[tuple[float, float]] = []
    ttft: list[tuple[float, float]] = []
    energy = [run.result.gpu for run in stored if run.result.gpu is not None and run.result.gpu.available]
    for run in stored:
        for level in run.result.levels:
            if _one_stream(level) and level.decode_tps is not None:
                decode.append((float(level.tokens.input_target), level.decode_tps.p50))
            if _one_stream(level) and level.latency.ttft_ms is not None:
                ttft.append((float(level.tokens.input_target), level.latency.ttft_ms.p50))
    by_prompt = _median_by(decode)
    first_ttft = _median_by(ttft)
    spec = [level.spec_decode_requests for run in stored for level in run.result.levels if level.spec_decode_requests]
    per_joule = [gpu.tokens_per_joule for gpu in energy if gpu.available and gpu.tokens_per_joule]
    tokens_per_joule = median(per_joule) if per_joule else None
    newest = stored[-1]
    return Card(
        tag=tag,
        engine=newest.result.environment.engine,
        preset=newest.preset,
        group=newest.group,
        runs=len(stored),
        decode_short=by_prompt[0] if by_prompt else None,
        decode_long=by_prompt[-1] if len(by_prompt) > 1 else None,
        ttft_short_ms=first_ttft[0].y if first_ttft else None,
        capacity=capacity,
        ttfo_thinking_on_ms=ttfo[0],
        ttfo_thinking_off_ms=ttfo[1],
        probes=probes,
        tokens_per_joule=tokens_per_joule,
        kwh_per_million_tokens=1e6 / tokens_per_joule / JOULES_PER_KWH if tokens_per_joule else None,
        spec_per_request=(median(s.acceptance.p50 for s in spec), median(s.pooled_acceptance for s in spec))
        if spec
        else None,
        startup=startup_text(newest.result.environment.deployment_record),
    )


def capacity_text(found: CapacityResult | None) -> str:
    """The card's capacity line from the latest ``bench capacity`` of a tag."""
    if found is None:
        return "not measured (bench capacity)"
    criteria = found.criteria
    text = f"users: {describe(found, 'concurrency')}"
    if found.longest_context is not None:
        text += f"; one stream's prompt: {describe(found, 'context')}"
    text += (
        f"; served means {criteria.target_attainment * 100:g}% of requests at {criteria.min_decode_tps:g} tok/s or "
        f"faster, TTFT under {criteria.max_ttft_ms:,.0f} ms ({criteria.confidence * 100:g}% confidence)"
    )
    return text
