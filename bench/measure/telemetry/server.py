"""What the server itself reports: Prometheus ``/metrics`` of vLLM and llama.cpp, scraped
before, during (every second, its gauges only) and after a measurement, reduced to deltas and gauge statistics.
Which exposition sample feeds which field of the report is each engine's row of the engine table
(:data:`bench.rig.ENGINES`, its ``metrics``); a field several engines feed sums what a scrape holds.

Counters are summed over label sets (``engine``, ``model_name``); a counter missing from either
scrape gives ``None``, never zero. vLLM's ``cache_config_info`` labels are kept as they are
(the KV pool, block size, dtype). Behind a gateway (docs/gateway.md) the endpoint's /metrics is
vLLM Router's: its count of requests per engine box (:data:`ROUTER_SERVED`, labelled by the box's
URL) gives each box's share of a measurement. The exposition is parsed with ``prometheus_client``.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from dataclasses import dataclass, field

import httpx
from prometheus_client.parser import text_string_to_metric_families

from bench.measure.telemetry.server_types import (
    Bucketed,
    BucketedLatency,
    Counters,
    Derived,
    GaugePoint,
    Gauges,
    GaugeStats,
    ServerReport,
)
from bench.rig import ENGINES

__all__ = ["Counters", "Sampler", "Scrape", "ServerReport", "server_report"]


def _samples(kind: str) -> dict[str, tuple[str, ...]]:
    """Each report field of ``kind`` (counters, gauges, histograms) and the exposition samples
    that feed it, from the metrics of every engine in the engine table (:mod:`bench.rig`)."""
    found: dict[str, tuple[str, ...]] = {}
    for engine in ENGINES:
        if engine.metrics is not None:
            for name, sample in getattr(engine.metrics, kind).items():
                found[name] = (*found.get(name, ()), sample)
    return found


# Counters whose deltas a run reports: our name, and the exposition samples that feed it.
COUNTERS = _samples("counters")
# Gauges sampled during a run: our name, and the exposition samples that feed it.
GAUGES = _samples("gauges")
_GAUGE_LINES = tuple(f"{sample}{end}" for samples in GAUGES.values() for sample in samples for end in ("{", " "))
# Histograms whose bucket deltas give server-side latency percentiles: our name, and the families.
HISTOGRAMS = _samples("histograms")
# Info samples whose labels describe the KV cache (vLLM's cache_config_info).
CACHE_CONFIG = frozenset(
    engine.metrics.cache_config for engine in ENGINES if engine.metrics and engine.metrics.cache_config
)
# vLLM Router's requests served, per engine box (label ``worker``: the URL it reaches the box at).
ROUTER_SERVED = "vllm_router_processed_requests_total"


def _value(scrape: Scrape, samples: tuple[str, ...]) -> float | None:
    """The sum of those of ``samples`` that ``scrape`` holds; None when it holds none."""
    present = [scrape.values[sample] for sample in samples if sample in scrape.values]
    return sum(present) if present else None


@dataclass(frozen=True, slots=True)
class Scrape:
    """One /metrics read: every sample summed over its label sets, vLLM's cache config labels,
    and the cumulative buckets (upper bound -> count) of the latency histograms."""

    t_ns: int
    values: dict[str, float]
    cache_config: dict[str, str] = field(default_factory=dict)
    buckets: dict[str, dict[float, float]] = field(default_factory=dict)
    served_by: dict[str, float] = field(default_factory=dict)  # a gateway's router: requests per box


def parse(text: str, t_ns: int = 0) -> Scrape:
    """Parse a Prometheus exposition into a :class:`Scrape`."""
    values: dict[str, float] = {}
    cache_config: dict[str, str] = {}
    buckets: dict[str, dict[float, float]] = {}
    served_by: dict[str, float] = {}
    wanted = {f"{family}_bucket": name for name, families in HISTOGRAMS.items() for family in families}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name in wanted:
                bound = float(sample.labels["le"])
                series = buckets.setdefault(wanted[sample.name], {})
                series[bound] = series.get(bound, 0.0) + float(sample.value)
            # prometheus_client strips _total from counter family names but keeps it on samples.
            values[sample.name] = values.get(sample.name, 0.0) + float(sample.value)
            if sample.name in CACHE_CONFIG:
                cache_config = {key: str(value) for key, value in sample.labels.items()}
            if sample.name == ROUTER_SERVED and "worker" in sample.labels:
                served_by[sample.labels["worker"]] = float(sample.value)
    return Scrape(t_ns, values, cache_config, buckets, served_by)


async def scrape(http: httpx.AsyncClient, url: str, *, gauges_only: bool = False) -> Scrape | None:
    """GET ``url`` and parse it (with ``gauges_only``, just the lines of :data:`GAUGES`: what the
    scrapes during a run are for, at a tenth of the CPU of vLLM's whole exposition); None when
    the server has no usable /metrics."""
    try:
        response = await http.get(url, timeout=10.0)
    except httpx.HTTPError:
        return None
    if response.status_code != 200:
        return None
    text = response.text
    if gauges_only:
        text = "\n".join(line for line in text.splitlines() if line.startswith(_GAUGE_LINES))
    try:
        return parse(text, time.perf_counter_ns())
    except ValueError:
        return None


def counter_deltas(before: Scrape | None, after: Scrape | None) -> Counters:
    """Each counter's growth between two scrapes; None where either scrape lacks it."""
    if before is None or after is None:
        return Counters()
    deltas: dict[str, float] = {}
    for name, samples in COUNTERS.items():
        both = [sample for sample in samples if sample in before.values and sample in after.values]
        if both:
            deltas[name] = sum(after.values[sample] - before.values[sample] for sample in both)
    return Counters(**deltas)


def gauge_stats(samples: list[Scrape]) -> Gauges:
    """Mean and max of each gauge over the scrapes taken during a run."""
    stats: dict[str, GaugeStats] = {}
    for name, names in GAUGES.items():
        seen = [value for scrape in samples if (value := _value(scrape, names)) is not None]
        if seen:
            stats[name] = GaugeStats(mean=sum(seen) / len(seen), max=max(seen), n=float(len(seen)))
    kv = GAUGES["kv_cache_usage"]
    series = [
        GaugePoint(t_s=(scrape.t_ns - samples[0].t_ns) / 1e9, value=value)
        for scrape in samples
        if (value := _value(scrape, kv)) is not None
    ]
    return Gauges(**stats, kv_cache_usage_series=series or None)


def engine_of(counters: Counters) -> str | None:
    """The engine whose /metrics filled ``counters``: the first of the engine table that alone
    feeds one of the counters both scrapes had; None when no known counter is one engine's own."""
    known = set(counters.known())
    for engine in ENGINES:
        if engine.metrics is None:
            continue
        others = {name for other in ENGINES if other is not engine and other.metrics for name in other.metrics.counters}
        if known & (set(engine.metrics.counters) - others):
            return engine.name
    return None


def derived(deltas: Counters) -> Derived:
    """Rates from counter deltas: prefix-cache hit rate and speculative-decoding acceptance."""

    def ratio(top: float | None, bottom: float | None) -> float | None:
        return None if top is None or not bottom else top / bottom

    drafts_accepted = ratio(deltas.spec_decode_accepted_tokens, deltas.spec_decode_drafts)
    return Derived(
        prefix_cache_hit_rate=ratio(deltas.prefix_cache_hits, deltas.prefix_cache_queries),
        spec_decode_acceptance_rate=ratio(deltas.spec_decode_accepted_tokens, deltas.spec_decode_draft_tokens),
        spec_decode_mean_acceptance_length=None if drafts_accepted is None else 1 + drafts_accepted,
    )


class Sampler:
    """Scrapes the gauges of /metrics every ``interval_s`` in the background while a measurement runs."""

    def __init__(self, http: httpx.AsyncClient, url: str, interval_s: float = 1.0) -> None:
        self.http, self.url, self.interval_s = http, url, interval_s
        self.samples: list[Scrape] = []
        self._task: asyncio.Task[None] | None = None

    async def _loop(self) -> None:
        while True:
            sample = await scrape(self.http, self.url, gauges_only=True)
            if sample is not None:
                self.samples.append(sample)
            await asyncio.sleep(self.interval_s)

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._loop())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task


def bucket_percentile(cumulative: dict[float, float], fraction: float) -> float | None:
    """Percentile from cumulative bucket counts, interpolating linearly inside the bucket
    (what Prometheus' histogram_quantile does); None when the histogram is empty."""
    bounds = sorted(cumulative)
    total = cumulative[bounds[-1]] if bounds else 0.0
    if total <= 0:
        return None
    target = fraction * total
    lower_bound, lower_count = 0.0, 0.0
    for bound in bounds:
        count = cumulative[bound]
        if count >= target:
            if bound == float("inf"):
                return lower_bound  # beyond the last finite bucket: its bound is all we know
            share = (target - lower_count) / (count - lower_count) if count > lower_count else 0.0
            return lower_bound + (bound - lower_bound) * share
        lower_bound, lower_count = bound, count
    return lower_bound


def histogram_stats(before: Scrape | None, after: Scrape | None) -> BucketedLatency:
    """Server-side latency percentiles (ms) from the bucket deltas between two scrapes."""
    stats: dict[str, Bucketed] = {}
    for name in HISTOGRAMS:
        if before is None or after is None or name not in after.buckets:
            continue
        old = before.buckets.get(name, {})
        delta = {bound: count - old.get(bound, 0.0) for bound, count in after.buckets[name].items()}
        n = delta.get(float("inf"), 0.0)
        if n <= 0:
            continue
        stats[name] = Bucketed(
            n=n,
            p50=_ms(bucket_percentile(delta, 0.5)),
            p90=_ms(bucket_percentile(delta, 0.9)),
            p99=_ms(bucket_percentile(delta, 0.99)) if n >= 100 else None,
        )
    return BucketedLatency(**stats)


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else seconds * 1000.0


def backend_deltas(before: Scrape | None, after: Scrape | None) -> dict[str, int] | None:
    """The requests each engine box served between two scrapes of a gateway's router (a box that
    joined in between counts from zero); None when the endpoint is no gateway."""
    if before is None or after is None or not after.served_by:
        return None
    return {box: round(count - before.served_by.get(box, 0.0)) for box, count in sorted(after.served_by.items())}


def server_report(before: Scrape | None, after: Scrape | None, during: list[Scrape]) -> ServerReport:
    """Everything the server said about one measurement, ready for the result file."""
    deltas = counter_deltas(before, after)
    latest = after or before
    return ServerReport(
        scraped=before is not None and after is not None,
        counters=deltas,
        derived=derived(deltas),
        gauges=gauge_stats(during),
        latency_bucketed=histogram_stats(before, after),
        cache_config=dict(latest.cache_config) if latest is not None else {},
        backends=backend_deltas(before, after),
    )
