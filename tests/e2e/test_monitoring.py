"""deploy/grafana/toolbridge.json and deploy/prometheus/rules.yaml name only series, and labels, that a running
`toolbridge serve --transport http` exports at `/metrics` (after a call and a search, so every series exists)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import httpx2
import pytest
from conftest import free_port
from fleetdir import serve_http, write_config
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from prometheus_client.parser import text_string_to_metric_families
from servers.harness import TINY
from test_deploy import dashboard_queries, rule_queries

pytestmark = pytest.mark.anyio

SCRAPE_LABELS = {"instance", "job"}  # added by Prometheus when it scrapes, not by toolbridge


def exported(text: str) -> dict[str, set[str]]:
    """Each sample name of an exposition with the label names it carries."""
    found: dict[str, set[str]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            found.setdefault(sample.name, set()).update(sample.labels)
    return found


def named(query: str) -> tuple[set[str], set[str]]:
    """The series a PromQL query names, and the label names it selects or aggregates by."""
    series = set(re.findall(r"\b(toolbridge_\w+)", query))
    selectors = re.findall(r"\{([^}]*)\}", query)
    labels = {label for selector in selectors for label in re.findall(r"(\w+)\s*!?=~?", selector)}
    labels |= {label.strip() for group in re.findall(r"\bby \(([^)]*)\)", query) for label in group.split(",")}
    return series, labels - SCRAPE_LABELS - {""}


async def test_the_dashboard_and_the_alerts_name_only_series_metrics_exports(tmp_path: Path) -> None:
    config = write_config(tmp_path / "config", {"tiny": {"command": sys.executable, "args": [TINY]}},
                          {"startup_wait": 20, "tool_search": {"semantic": "off"}})
    async with serve_http(config, free_port(), ready=(200,)) as base, httpx2.AsyncClient(timeout=30) as http:
        async with Client(streamable_http_client(f"{base}/mcp"), mode="legacy") as client:
            await client.call_tool("tool_search", {"queries": ["echo"]})
            await client.call_tool("tool_call", {"name": "tiny__echo", "arguments": {"text": "hi"}})
            await client.call_tool("tool_call", {"name": "tiny__nothing", "arguments": {}})  # an error, counted
        metrics = exported((await http.get(f"{base}/metrics")).text)
    queries = dashboard_queries() + rule_queries()
    assert len(queries) >= 16
    for query in queries:
        series, labels = named(query)
        assert series and series <= set(metrics), (query, series - set(metrics))
        carried = set().union(*(metrics[name] for name in series))
        assert labels <= carried, (query, labels - carried)
