"""The Grafana dashboards under roles/grafana/files/dashboards, and the metric names their
queries read: a PromQL tokenizer good enough for dashboard queries (functions, aggregations and
their grouping, binary operators and their matching, label matchers, ranges, offsets, strings,
numbers and Grafana's variables are not metric names; every other identifier is)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tests.helpers import REPO

DASHBOARDS = REPO / "roles" / "grafana" / "files" / "dashboards"
# The uid of the Prometheus data source the grafana role provisions; each dashboard's
# `datasource` variable starts on it (any Grafana that imports the JSON picks its own).
DATASOURCE_UID = "llmrig-prometheus"
DATASOURCE_REF = {"type": "prometheus", "uid": "${datasource}"}

# Keywords followed by a parenthesised list of label names (skipped with the list).
_GROUPING = {"by", "without", "on", "ignoring", "group_left", "group_right"}
# Aggregation operators may take their grouping before the parenthesis: `sum by (le) (x)`.
_AGGREGATIONS = {"sum", "min", "max", "avg", "group", "stddev", "stdvar", "count", "count_values", "bottomk", "topk"}
_AGGREGATIONS |= {"quantile", "limitk", "limit_ratio"}
_KEYWORDS = {"and", "or", "unless", "bool", "offset", "atan2", "inf", "nan", "start", "end"}
_STRING = re.compile(r'"(?:\\.|[^"\\])*"|\'(?:\\.|[^\'\\])*\'|`[^`]*`')
_BRACES = re.compile(r"\{[^{}]*\}")
_BRACKETS = re.compile(r"\[[^\[\]]*\]")
_VARIABLE = re.compile(r"\$\{[^}]*\}|\$\w+")
_GLUED = re.compile(r"\$\{[^}]*\}[A-Za-z0-9_:]|[A-Za-z0-9_:]\$")
_TOKEN = re.compile(
    r"(?P<number>0x[0-9a-fA-F]+|(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?(?:ms|[smhdwy])*)"
    r"|(?P<ident>[A-Za-z_:][A-Za-z0-9_:]*)"
    r"|(?P<open>\()|(?P<close>\))"
    r"|(?P<other>\S)"
)


def metric_names(expr: str) -> set[str]:
    """The metric names a PromQL expression reads (Grafana variables allowed anywhere)."""
    text = _STRING.sub(" ", expr)
    if _GLUED.search(text):
        raise ValueError(f"a metric name built from a Grafana variable cannot be checked: {expr}")
    text = _VARIABLE.sub(" 1 ", text)
    text = _BRACES.sub(" ", text)
    text = _BRACKETS.sub(" ", text)
    tokens = [(match.lastgroup, match.group()) for match in _TOKEN.finditer(text)]
    names: set[str] = set()
    index = 0
    while index < len(tokens):
        kind, value = tokens[index]
        following = tokens[index + 1][0] if index + 1 < len(tokens) else None
        if kind == "ident" and value.lower() in _GROUPING and following == "open":
            depth = 0
            index += 1
            while index < len(tokens):  # skip the label list up to its closing parenthesis
                depth += {"open": 1, "close": -1}.get(tokens[index][0] or "", 0)
                if depth == 0:
                    break
                index += 1
        elif kind == "ident" and value in _AGGREGATIONS and tokens[index + 1][1] in {"by", "without"}:
            pass  # `sum by (...)`: the grouping is skipped at the next token
        elif kind == "ident" and following != "open" and value.lower() not in _KEYWORDS | _GROUPING:
            names.add(value)
        index += 1
    return names


def load_all() -> dict[str, dict[str, Any]]:
    """Every dashboard, by file name (json.loads fails loudly on a broken file)."""
    paths = sorted(DASHBOARDS.glob("*.json"))
    assert paths, f"no dashboards under {DASHBOARDS}"
    return {path.name: json.loads(path.read_text(encoding="utf-8")) for path in paths}


def panels(container: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Every panel, rows' nested panels included."""
    for panel in container.get("panels", []):
        yield panel
        yield from panels(panel)


def _variable_query(variable: dict[str, Any]) -> str | None:
    """The PromQL a templating variable of type query runs, if any."""
    query = variable.get("query")
    if isinstance(query, dict):
        query = query.get("query")
    if not query:
        return None
    assert isinstance(query, str), variable
    if values := re.fullmatch(r"\s*label_values\((.*),\s*\w+\s*\)\s*", query, re.DOTALL):
        return values.group(1)
    if re.fullmatch(r"\s*label_values\(\s*\w+\s*\)\s*", query):
        return None  # a label's values across every series: no metric named
    if result := re.fullmatch(r"\s*query_result\((.*)\)\s*", query, re.DOTALL):
        return result.group(1)
    raise AssertionError(f"variable {variable.get('name')}: a query form this test does not read: {query}")


def expressions(dashboard: dict[str, Any]) -> list[str]:
    """Every PromQL expression in a dashboard: panel targets (rows included) and query variables."""
    found = [target["expr"] for panel in panels(dashboard) for target in panel.get("targets", []) if target.get("expr")]
    for variable in dashboard.get("templating", {}).get("list", []):
        if variable.get("type") == "query" and (query := _variable_query(variable)):
            found.append(query)
    return found


def datasources(node: Any) -> Iterator[Any]:
    """Every value of a `datasource` key anywhere in a dashboard."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "datasource":
                yield value
            yield from datasources(value)
    elif isinstance(node, list):
        for item in node:
            yield from datasources(item)


def dashboard_paths() -> list[Path]:
    return sorted(DASHBOARDS.glob("*.json"))
