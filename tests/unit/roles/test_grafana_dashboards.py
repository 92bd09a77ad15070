"""The dashboards the grafana role provisions: valid JSON, a uid each (unique), unique panel ids,
and every query on the `${datasource}` variable, which starts on the provisioned data source.
The metric names in their queries are checked against real servers in
tests/integration/test_dashboards.py; the tokenizer that reads them is tested here."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from tests.dashboards import (
    DATASOURCE_REF,
    DATASOURCE_UID,
    dashboard_paths,
    datasources,
    expressions,
    load_all,
    metric_names,
    panels,
)

GRAFANA_BUILTIN = {"type": "grafana", "uid": "-- Grafana --"}
DASHBOARDS = load_all()


@pytest.mark.parametrize(
    ("expr", "names"),
    [
        ("up", {"up"}),
        ("rate(vllm:generation_tokens_total[$__rate_interval])", {"vllm:generation_tokens_total"}),
        (
            "histogram_quantile(0.99, sum by (le, model_name) (rate(vllm:e2e_request_latency_seconds_bucket"
            '{model_name=~"$Deployment_id"}[5m])))',
            {"vllm:e2e_request_latency_seconds_bucket"},
        ),
        ("sum(rate(a_total[1m])) by (job) / on(job) group_left(instance) b", {"a_total", "b"}),
        (
            'node_filesystem_avail_bytes < on(mountpoint) group_left llmrig_headroom{x="a{b}"}',
            {"node_filesystem_avail_bytes", "llmrig_headroom"},
        ),
        ("1 - x offset 5m > bool 0.5e3 and without (a) y unless z or w", {"x", "y", "z", "w"}),
        ("max_over_time(deriv(m[10m:1m])[1h:]) @ start()", {"m"}),
        ("topk(5, sum without(le) (c)) == Inf", {"c"}),
        ('label_replace(m, "dst", "$1", "src", "(.*)")', {"m"}),
        ("histogram_quantile($quantile, m_bucket) + 0x1F", {"m_bucket"}),
    ],
)
def test_metric_names_reads_promql(expr: str, names: set[str]) -> None:
    assert metric_names(expr) == names


@pytest.mark.parametrize("expr", ["rate(${prefix}_total[1m])", "rate(vllm:$name[1m])"])
def test_a_metric_name_built_from_a_variable_is_refused(expr: str) -> None:
    with pytest.raises(ValueError, match="built from a Grafana variable"):
        metric_names(expr)


def test_every_dashboard_file_is_loaded() -> None:
    assert sorted(DASHBOARDS) == [path.name for path in dashboard_paths()]
    assert "llmrig-overview.json" in DASHBOARDS
    assert all(expressions(doc) for doc in DASHBOARDS.values())


@pytest.mark.parametrize("name", sorted(DASHBOARDS))
def test_dashboard_has_a_uid_unique_panel_ids_and_titles(name: str) -> None:
    doc = DASHBOARDS[name]
    assert isinstance(doc.get("uid"), str)
    assert re.fullmatch(r"[A-Za-z0-9_-]{1,40}", doc["uid"]), doc["uid"]  # Grafana's uid limits
    assert doc.get("title")
    ids = [panel.get("id") for panel in panels(doc)]
    assert all(isinstance(panel_id, int) for panel_id in ids), ids
    assert len(ids) == len(set(ids)), f"duplicate panel ids in {name}: {ids}"


def test_dashboard_uids_are_unique() -> None:
    uids = [doc["uid"] for doc in DASHBOARDS.values()]
    assert len(uids) == len(set(uids))


def _reference(value: Any) -> Any:
    """A data source reference without the `"default": false` flag some of vLLM's panels carry."""
    return {k: v for k, v in value.items() if k != "default"} if isinstance(value, dict) else value


def _datasource_variables(doc: dict[str, Any]) -> list[dict[str, Any]]:
    return [v for v in doc["templating"]["list"] if v.get("type") == "datasource"]


@pytest.mark.parametrize("name", sorted(DASHBOARDS))
def test_dashboard_queries_use_only_the_datasource_variable(name: str) -> None:
    doc = DASHBOARDS[name]
    (variable,) = _datasource_variables(doc)
    assert variable["name"] == "datasource"
    assert variable["query"] == "prometheus"
    assert variable["current"]["value"] == DATASOURCE_UID
    for value in datasources(doc):
        assert _reference(value) in (None, DATASOURCE_REF, GRAFANA_BUILTIN), f"{name}: datasource {value!r}"
    for panel in panels(doc):
        if panel.get("targets"):
            assert _reference(panel.get("datasource")) == DATASOURCE_REF, f"{name}: panel {panel['id']}"
    text = json.dumps(doc)
    leftovers = set(re.findall(r"\$\{?(DS_\w+)", text))
    assert not leftovers, f"{name}: datasource placeholders of an export left: {leftovers}"
