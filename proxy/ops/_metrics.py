"""Prometheus metrics: call counters and latencies as they happen, fleet and surface state at scrape time."""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from proxy.downstream import BRIDGE_SERVER, CallRecord, ChangeNotifier
from proxy.names import BRIDGE_NAMES
from proxy.replicated import Limits
from proxy.upstream import FingerprintStore, Fleet, UpstreamState
from proxy.views import Views

__all__ = ["OTHER_TOOL", "UNKNOWN_TOOL", "Metrics", "ServerTraffic", "quantile"]

OTHER_TOOL = "other"
UNKNOWN_TOOL = "unknown"  # the label of a call to a name no tool has: a client's text never becomes a label
_LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300)


@dataclass(frozen=True)
class ServerTraffic:
    """One server's calls as `/metrics` counts them; latencies in seconds, None before any call."""

    calls: int
    errors: int
    p50: float | None
    p99: float | None


def quantile(q: float, buckets: Sequence[tuple[float, float]]) -> float | None:
    """Prometheus's `histogram_quantile`: (upper bound, cumulative count) pairs, ascending, +Inf last;
    linear within the bucket, the highest finite bound for a rank in +Inf."""
    total = buckets[-1][1] if buckets else 0.0
    if not total:
        return None
    rank, lower, below = q * total, 0.0, 0.0
    for bound, count in buckets:
        if count >= rank:
            if math.isinf(bound):
                return lower
            return lower + (bound - lower) * ((rank - below) / (count - below) if count > below else 0.0)
        lower, below = bound, count
    return lower


class _StateCollector(Collector):
    """What the fleet and the surfaces look like right now, read at each scrape."""

    def __init__(self, fleet: Fleet, views: Views, notifier: ChangeNotifier, store: FingerprintStore, limits: Limits
                 ) -> None:
        self.fleet, self.views, self.notifier, self.store, self.limits = fleet, views, notifier, store, limits

    def collect(self) -> Iterator[Metric]:
        server = ["server"]
        up = GaugeMetricFamily("toolbridge_upstream_up", "1 while the upstream is connected", labels=server)
        state = GaugeMetricFamily("toolbridge_upstream_state", "1 for the state the upstream is in, 0 for the others",
                                  labels=["server", "state"])
        restarts = CounterMetricFamily("toolbridge_upstream_restarts", "Reconnections after the first", labels=server)
        tools = GaugeMetricFamily("toolbridge_upstream_tools", "Tools the upstream registered", labels=server)
        pending = GaugeMetricFamily("toolbridge_tool_changes_pending",
                                    "Changed or new tool definitions awaiting `toolbridge approve`", labels=server)
        prints = self.store.load()
        for status in self.fleet.status():
            up.add_metric([status.name], float(status.state is UpstreamState.READY))
            for each in UpstreamState:
                state.add_metric([status.name, each.value], float(status.state is each))
            restarts.add_metric([status.name], status.restarts)
            tools.add_metric([status.name], status.tools)
            pending.add_metric([status.name], len(prints[status.name].pending) if status.name in prints else 0)
        yield from (up, state, restarts, tools, pending)
        registered = len(self.views.registry.tools)
        yield GaugeMetricFamily("toolbridge_registry_tools", "Tools in the registry", value=registered)
        listing = GaugeMetricFamily("toolbridge_listing_tokens", "Tokens of the listing", labels=["profile"])
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

    def __init__(self, fleet: Fleet, views: Views, notifier: ChangeNotifier, store: FingerprintStore, limits: Limits,
                 *, top_tools: int) -> None:
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
        self.registry.register(_StateCollector(fleet, views, notifier, store, limits))

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

    def by_server(self) -> dict[str, ServerTraffic]:
        """Calls, errors and p50/p99 latency per server, read from the series `/metrics` exports."""
        calls: dict[str, float] = {}
        errors: dict[str, float] = {}
        buckets: dict[str, dict[float, float]] = {}
        for family in (*self.calls.collect(), *self.errors.collect(), *self.latency.collect()):
            for sample in family.samples:
                server = sample.labels["server"]
                if sample.name == "toolbridge_tool_calls_total":
                    calls[server] = calls.get(server, 0.0) + sample.value
                elif sample.name == "toolbridge_tool_call_errors_total":
                    errors[server] = errors.get(server, 0.0) + sample.value
                elif sample.name == "toolbridge_tool_call_seconds_bucket":
                    bound = float(sample.labels["le"])
                    per_bound = buckets.setdefault(server, {})
                    per_bound[bound] = per_bound.get(bound, 0.0) + sample.value
        traffic = {}
        for server in calls.keys() | errors.keys():
            ladder = sorted(buckets.get(server, {}).items())
            traffic[server] = ServerTraffic(int(calls.get(server, 0)), int(errors.get(server, 0)),
                                            quantile(0.5, ladder), quantile(0.99, ladder))
        return traffic

    def exposition(self) -> bytes:
        return generate_latest(self.registry)
