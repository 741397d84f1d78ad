"""Prometheus metrics: call counters and latencies as they happen, fleet and surface state at scrape time."""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from proxy.downstream import BRIDGE_SERVER, CallRecord, ChangeNotifier
from proxy.names import BRIDGE_NAMES
from proxy.replicated import Limits
from proxy.upstream import Fleet, UpstreamState
from proxy.views import Views

__all__ = ["OTHER_TOOL", "UNKNOWN_TOOL", "Metrics"]

OTHER_TOOL = "other"
UNKNOWN_TOOL = "unknown"  # the label of a call to a name no tool has: a client's text never becomes a label
_LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300)


class _StateCollector(Collector):
    """What the fleet and the surfaces look like right now, read at each scrape."""

    def __init__(self, fleet: Fleet, views: Views, notifier: ChangeNotifier, limits: Limits) -> None:
        self.fleet, self.views, self.notifier, self.limits = fleet, views, notifier, limits

    def collect(self) -> Iterator[Metric]:
        server = ["server"]
        up = GaugeMetricFamily("toolbridge_upstream_up", "1 while the upstream is connected", labels=server)
        restarts = CounterMetricFamily("toolbridge_upstream_restarts", "Reconnections after the first", labels=server)
        tools = GaugeMetricFamily("toolbridge_upstream_tools", "Tools the upstream registered", labels=server)
        for status in self.fleet.status():
            up.add_metric([status.name], float(status.state is UpstreamState.READY))
            restarts.add_metric([status.name], status.restarts)
            tools.add_metric([status.name], status.tools)
        yield from (up, restarts, tools)
        registered = len(self.views.registry.tools)
        yield GaugeMetricFamily("toolbridge_registry_tools", "Tools in the registry", value=registered)
        listing = GaugeMetricFamily("toolbridge_listing_tokens", "Tokens of the catalog listing", labels=["profile"])
        for profile in sorted(self.views.toolsets.profiles):
            listing.add_metric([profile], self.views.for_profile(profile).surface.listing_tokens)
        yield listing
        yield GaugeMetricFamily("toolbridge_active_sessions", "Sessions that would be told of a list change",
                                value=self.notifier.sessions)
        yield CounterMetricFamily("toolbridge_list_changed_sent", "tools/list_changed notifications sent",
                                  value=self.notifier.sent)
        refused = CounterMetricFamily("toolbridge_limit_refusals", "Tool calls refused by a `limits:` entry",
                                      labels=["limit"])
        for limit in sorted({*self.limits.rules, *self.limits.refused}):
            refused.add_metric([limit], self.limits.refused[limit])
        yield refused


class Metrics:
    """One gateway's metrics, in a registry of its own (never the process-global one)."""

    def __init__(self, fleet: Fleet, views: Views, notifier: ChangeNotifier, limits: Limits, *, top_tools: int
                 ) -> None:
        self.registry = CollectorRegistry()
        self.top_tools = top_tools
        self._labelled: set[str] = set()
        # Each call's series, by (server, tool label, outcome): `labels()` costs more than the update itself.
        self._series: dict[tuple[str, str, str], tuple[Counter, Histogram]] = {}
        self.calls = Counter("toolbridge_tool_calls", "Tool calls answered", ["server", "tool", "outcome"],
                             registry=self.registry)
        self.errors = Counter("toolbridge_tool_call_errors", "Tool calls that failed, by error class",
                              ["server", "error"], registry=self.registry)
        self.latency = Histogram("toolbridge_tool_call_seconds", "Tool call latency", ["server", "tool"],
                                 buckets=_LATENCY_BUCKETS, registry=self.registry)
        self.search = Histogram("toolbridge_search_seconds", "tool_search latency", buckets=_LATENCY_BUCKETS,
                                registry=self.registry)
        self.registry.register(_StateCollector(fleet, views, notifier, limits))

    def _tool_label(self, record: CallRecord) -> str:
        """The first `top_tools` tools called get a series each; later ones share `other` (bounded cardinality).
        A call that reached no tool (an unknown or out-of-scope name) counts as `unknown`."""
        tool = record.tool
        if record.server == BRIDGE_SERVER and tool not in BRIDGE_NAMES:
            return UNKNOWN_TOOL
        if tool in self._labelled:
            return tool
        if len(self._labelled) < self.top_tools:
            self._labelled.add(tool)
            return tool
        return OTHER_TOOL

    def observe(self, record: CallRecord) -> None:
        tool = self._tool_label(record)
        key = (record.server, tool, record.outcome)
        series = self._series.get(key)
        if series is None:
            series = self._series[key] = (self.calls.labels(*key), self.latency.labels(record.server, tool))
        series[0].inc()
        series[1].observe(record.duration)
        if record.error is not None:
            self.errors.labels(record.server, record.error).inc()
        if record.server == BRIDGE_SERVER and record.tool == "tool_search":
            self.search.observe(record.duration)

    def exposition(self) -> bytes:
        return generate_latest(self.registry)
