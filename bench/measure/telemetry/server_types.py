"""The server's report of one measurement, as a result file holds it: counter deltas, gauge
statistics (and the KV pool's usage scrape by scrape), rates derived from the counters, and the
latency percentiles of the server's own histograms. :mod:`bench.measure.telemetry.server` fills them in."""

from __future__ import annotations

from dataclasses import dataclass, field, fields

from bench.codec import OMIT_IF_NONE


@dataclass(frozen=True, slots=True)
class Counters:
    """Growth of each server counter over one interval (the names of :data:`COUNTERS`); None where
    either scrape lacked it: unknown, never zero."""

    requests_succeeded: float | None = None
    prompt_tokens: float | None = None
    generation_tokens: float | None = None
    preemptions: float | None = None
    prefix_cache_queries: float | None = None
    prefix_cache_hits: float | None = None
    spec_decode_drafts: float | None = None
    spec_decode_draft_tokens: float | None = None
    spec_decode_accepted_tokens: float | None = None
    llamacpp_prompt_tokens: float | None = None
    llamacpp_tokens_predicted: float | None = None
    llamacpp_decode_calls: float | None = None

    def known(self) -> dict[str, float]:
        """The counters both scrapes had, by name."""
        return {name: getattr(self, name) for name in _names(self) if getattr(self, name) is not None}


@dataclass(frozen=True, slots=True)
class GaugeStats:
    """One gauge over the scrapes taken during a measurement: mean, max and how many scrapes had it."""

    mean: float
    max: float
    n: float


@dataclass(frozen=True, slots=True)
class GaugePoint:
    """One scrape's value of a gauge, ``t_s`` seconds after the measurement's first scrape."""

    t_s: float
    value: float


@dataclass(frozen=True, slots=True)
class Gauges:
    """Each gauge of :data:`GAUGES` during a measurement; None where no scrape had it. The KV
    pool's usage is also kept scrape by scrape, for ``bench report``'s plot of it over time."""

    kv_cache_usage: GaugeStats | None = None
    requests_running: GaugeStats | None = None
    requests_waiting: GaugeStats | None = None
    llamacpp_requests_processing: GaugeStats | None = None
    llamacpp_requests_deferred: GaugeStats | None = None
    kv_cache_usage_series: list[GaugePoint] | None = field(default=None, metadata=OMIT_IF_NONE)


@dataclass(frozen=True, slots=True)
class Derived:
    """Rates from counter deltas; None where a counter is unknown or its denominator is zero."""

    prefix_cache_hit_rate: float | None
    spec_decode_acceptance_rate: float | None
    spec_decode_mean_acceptance_length: float | None


@dataclass(frozen=True, slots=True)
class Bucketed:
    """A server-side latency distribution in ms, interpolated within histogram buckets."""

    n: float
    p50: float | None
    p90: float | None
    p99: float | None  # only from 100 observations up


@dataclass(frozen=True, slots=True)
class BucketedLatency:
    """Each histogram of :data:`HISTOGRAMS` over one measurement; None where the server observed nothing."""

    ttft_ms: Bucketed | None = None
    itl_ms: Bucketed | None = None
    e2e_ms: Bucketed | None = None
    queue_ms: Bucketed | None = None
    prefill_ms: Bucketed | None = None
    decode_ms: Bucketed | None = None


@dataclass(frozen=True, slots=True)
class ServerReport:
    """Everything the server's /metrics said about one measurement (the ``server`` of a level)."""

    scraped: bool  # both the scrape before and the one after answered
    counters: Counters
    derived: Derived
    gauges: Gauges
    latency_bucketed: BucketedLatency
    cache_config: dict[str, str]  # vLLM's cache_config_info labels: KV pool blocks, block size, dtype
    # Behind a gateway: the requests each engine box served during the measurement, by the URL the
    # router reaches it at, as the router counted them (it says so per box, not per request).
    backends: dict[str, int] | None = field(default=None, metadata=OMIT_IF_NONE)


def _names(counters: Counters) -> list[str]:
    return [item.name for item in fields(counters)]
