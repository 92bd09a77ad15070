"""bench.measure.telemetry.server: /metrics parsing, counter deltas, derived rates and bucketed latency percentiles."""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path

import httpx
import pytest

from bench.measure.telemetry import server
from bench.measure.telemetry.server_types import Counters
from bench.rig import ENGINES

BEFORE = """\
# HELP vllm:request_success_total Count of successfully processed requests.
# TYPE vllm:request_success_total counter
vllm:request_success_total{engine="0",finished_reason="length",model_name="m"} 10.0
vllm:request_success_total{engine="0",finished_reason="stop",model_name="m"} 2.0
# TYPE vllm:prefix_cache_queries_total counter
vllm:prefix_cache_queries_total{engine="0",model_name="m"} 1000.0
# TYPE vllm:prefix_cache_hits_total counter
vllm:prefix_cache_hits_total{engine="0",model_name="m"} 100.0
# TYPE vllm:spec_decode_num_drafts_total counter
vllm:spec_decode_num_drafts_total{engine="0",model_name="m"} 0.0
# TYPE vllm:spec_decode_num_draft_tokens_total counter
vllm:spec_decode_num_draft_tokens_total{engine="0",model_name="m"} 0.0
# TYPE vllm:spec_decode_num_accepted_tokens_total counter
vllm:spec_decode_num_accepted_tokens_total{engine="0",model_name="m"} 0.0
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{engine="0",model_name="m"} 0.25
# TYPE vllm:cache_config_info gauge
vllm:cache_config_info{block_size="128",cache_dtype="auto",engine="0",num_gpu_blocks="432"} 1.0
# TYPE vllm:time_to_first_token_seconds histogram
vllm:time_to_first_token_seconds_bucket{engine="0",le="0.1",model_name="m"} 0.0
vllm:time_to_first_token_seconds_bucket{engine="0",le="0.2",model_name="m"} 0.0
vllm:time_to_first_token_seconds_bucket{engine="0",le="0.4",model_name="m"} 0.0
vllm:time_to_first_token_seconds_bucket{engine="0",le="+Inf",model_name="m"} 0.0
vllm:time_to_first_token_seconds_count{engine="0",model_name="m"} 0.0
vllm:time_to_first_token_seconds_sum{engine="0",model_name="m"} 0.0
"""

AFTER = (
    BEFORE.replace('finished_reason="length",model_name="m"} 10.0', 'finished_reason="length",model_name="m"} 14.0')
    .replace('queries_total{engine="0",model_name="m"} 1000.0', 'queries_total{engine="0",model_name="m"} 3000.0')
    .replace('hits_total{engine="0",model_name="m"} 100.0', 'hits_total{engine="0",model_name="m"} 1100.0')
    .replace('num_drafts_total{engine="0",model_name="m"} 0.0', 'num_drafts_total{engine="0",model_name="m"} 100.0')
    .replace('draft_tokens_total{engine="0",model_name="m"} 0.0', 'draft_tokens_total{engine="0",model_name="m"} 200.0')
    .replace(
        'accepted_tokens_total{engine="0",model_name="m"} 0.0', 'accepted_tokens_total{engine="0",model_name="m"} 150.0'
    )
    .replace('le="0.2",model_name="m"} 0.0', 'le="0.2",model_name="m"} 2.0')
    .replace('le="0.4",model_name="m"} 0.0', 'le="0.4",model_name="m"} 4.0')
    .replace('le="+Inf",model_name="m"} 0.0', 'le="+Inf",model_name="m"} 4.0')
)


def test_counters_sum_over_labels_and_deltas_are_exact() -> None:
    """Counters summed over finished_reason; deltas between two scrapes; absent ones are None."""
    deltas = server.counter_deltas(server.parse(BEFORE), server.parse(AFTER))
    assert deltas.requests_succeeded == 4.0
    assert deltas.prefix_cache_queries == 2000.0
    assert deltas.preemptions is None  # not in the exposition: unknown, not zero


def test_derived_rates_follow_the_metric_definitions() -> None:
    """Hit rate = hits/queries; acceptance = accepted/draft tokens; mean length = 1 + accepted/drafts."""
    derived = server.derived(server.counter_deltas(server.parse(BEFORE), server.parse(AFTER)))
    assert derived.prefix_cache_hit_rate == pytest.approx(0.5)
    assert derived.spec_decode_acceptance_rate == pytest.approx(0.75)
    assert derived.spec_decode_mean_acceptance_length == pytest.approx(2.5)


def test_cache_config_labels_are_kept() -> None:
    """vllm:cache_config_info keeps every label as a string."""
    assert server.parse(BEFORE).cache_config["num_gpu_blocks"] == "432"


def test_bucketed_ttft_percentiles_interpolate_within_buckets() -> None:
    """Two requests in (0.1, 0.2], two in (0.2, 0.4]: p50 at 200 ms, p90 at 360 ms, as histogram_quantile."""
    stats = server.histogram_stats(server.parse(BEFORE), server.parse(AFTER)).ttft_ms
    assert stats is not None
    assert stats.n == 4
    assert stats.p50 == pytest.approx(200.0)
    assert stats.p90 == pytest.approx(360.0)
    assert stats.p99 is None  # fewer than 100 samples


def test_gauge_statistics() -> None:
    """Gauges sampled during a run give mean and max; absent gauges are None."""
    stats = server.gauge_stats([server.parse(BEFORE), server.parse(BEFORE.replace("} 0.25", "} 0.75"))])
    assert stats.kv_cache_usage == server.GaugeStats(mean=0.5, max=0.75, n=2.0)
    assert stats.requests_waiting is None


def test_the_scrapes_during_a_run_keep_just_the_gauges() -> None:
    """``gauges_only`` (the once-a-second scrapes) gives the gauges exactly as the whole parse does,
    with and without labels, and nothing else: no counters, no buckets, no longer names."""
    text = BEFORE + "llamacpp:requests_processing 2\nvllm:num_requests_running_extra 7\n"

    def answer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, text=text)

    async def both() -> tuple[server.Scrape | None, server.Scrape | None]:
        async with httpx.AsyncClient(transport=httpx.MockTransport(answer)) as http:
            url = "http://metrics.invalid/metrics"
            return await server.scrape(http, url), await server.scrape(http, url, gauges_only=True)

    whole, gauges = asyncio.run(both())
    assert whole is not None
    assert gauges is not None
    assert gauges.values == {
        "vllm:kv_cache_usage_perc": 0.25,
        "llamacpp:requests_processing": 2.0,
    }
    assert all(whole.values[name] == value for name, value in gauges.values.items())
    assert gauges.buckets == {}
    assert gauges.cache_config == {}


def test_the_samples_come_from_the_engine_table() -> None:
    """Every field's samples are those the engines' rows name; each field is one of the report's."""
    for engine in ENGINES:
        if engine.metrics is None:
            continue
        for name, sample in engine.metrics.counters.items():
            assert sample in server.COUNTERS[name]
            assert name in {item.name for item in dataclasses.fields(Counters)}
        for name, sample in engine.metrics.gauges.items():
            assert sample in server.GAUGES[name]
    assert "vllm:prompt_tokens_total" in server.COUNTERS["prompt_tokens"]
    assert "vllm:cache_config_info" in server.CACHE_CONFIG


def test_a_field_two_engines_feed_sums_what_the_scrape_holds(monkeypatch: pytest.MonkeyPatch) -> None:
    """With a second engine's sample on a field, a scrape holding either one (or both) fills it."""
    monkeypatch.setitem(server.COUNTERS, "prompt_tokens", ("vllm:prompt_tokens_total", "other:prompt_tokens_total"))
    before = server.Scrape(0, {"other:prompt_tokens_total": 5.0})
    after = server.Scrape(1, {"other:prompt_tokens_total": 12.0})
    assert server.counter_deltas(before, after).prompt_tokens == 7.0
    assert server.counter_deltas(before, None).prompt_tokens is None


def test_the_engine_is_told_by_a_counter_only_it_feeds() -> None:
    """vLLM's and llama.cpp's own counters name their engine; no known counter names none."""
    assert server.engine_of(Counters(requests_succeeded=4.0)) == "vllm"
    assert server.engine_of(Counters(llamacpp_decode_calls=9.0)) == "llamacpp"
    assert server.engine_of(Counters()) is None


# /metrics of vLLM Router 0.1.17 after 5 requests over two boxes (recorded; the boxes' URLs renamed).
ROUTER = (Path(__file__).with_name("vllm_router_0.1.17.prom")).read_text(encoding="utf-8")


def test_a_gateways_router_says_how_many_requests_each_box_served() -> None:
    """The router's count per box between two scrapes; a box that joined in between counts from
    zero; an engine's own /metrics has no such count."""
    after = server.parse(ROUTER)
    assert after.served_by == {"http://box1:8001": 3.0, "http://box2:8001": 2.0}
    served = "vllm_router_processed_requests_total"
    earlier = ROUTER.replace(f'{served}{{worker="http://box1:8001"}} 3', f'{served}{{worker="http://box1:8001"}} 1')
    before = server.parse(earlier.replace(f'{served}{{worker="http://box2:8001"}} 2\n', ""))
    assert server.backend_deltas(before, after) == {"http://box1:8001": 2, "http://box2:8001": 2}
    assert server.server_report(before, after, []).backends == {"http://box1:8001": 2, "http://box2:8001": 2}
    assert server.backend_deltas(None, after) is None
    vllm = server.parse(BEFORE)
    assert server.backend_deltas(vllm, vllm) is None
    assert server.server_report(vllm, vllm, []).backends is None
