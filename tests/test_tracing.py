"""Trace context across the proxy hop, and the spans of the OpenTelemetry MCP conventions.

The SDK's span middleware is kept only when tracing is on (with no tracer provider its spans
record nothing, so toolbridge drops it). With a provider, a downstream request is the SDK's server
span and toolbridge adds the client span of the upstream call under it; the SDK's client carries
the context on to the upstream in `_meta`, where the upstream's own server span nests.

The global tracer provider can be set once per process: the span tests install an SDK provider
with an in-memory exporter the first time they run, and clear the exporter for each test.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from typing import Any

import pytest
from inprocess import Upstream, gateway, tool
from mcp import Client, types
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode
from servers import traced

from proxy.config import ToolsetsConfig
from proxy.ops import export_traces

pytestmark = pytest.mark.anyio

EXPORTER = InMemorySpanExporter()


class _Provider(trace.TracerProvider):
    """A tracer provider someone installed (its tracers record nothing; only its presence matters)."""

    def get_tracer(self, *args: Any, **kwargs: Any) -> trace.Tracer:
        return trace.NoOpTracer()


def _span_middleware(server: Any) -> list[str]:
    return [type(m).__name__ for m in server.middleware if "Telemetry" in type(m).__name__]


@pytest.mark.parametrize("installed", [False, True])
async def test_span_middleware_only_with_a_tracer_provider(installed: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(trace, "get_tracer_provider", _Provider if installed else trace.ProxyTracerProvider)
    upstream = Upstream("a", [tool("echo", properties={"x": {"type": "integer"}})])
    async with gateway([upstream], ToolsetsConfig(core=("*",))) as harness, \
            Client(harness.server) as client:
        assert bool(_span_middleware(harness.server)) is installed
        result = await client.call_tool("a__echo", {"x": 1})
    assert not result.is_error
    assert upstream.calls == [("echo", {"x": 1})]


@pytest.fixture(scope="module")
def provider() -> Iterator[None]:
    installed = trace.get_tracer_provider()
    if not isinstance(installed, TracerProvider):
        installed = TracerProvider()
        trace.set_tracer_provider(installed)
    processor = SimpleSpanProcessor(EXPORTER)
    installed.add_span_processor(processor)
    yield
    # The provider stays the process's (OpenTelemetry sets it once), so later tests' spans still end here:
    # a shut-down exporter drops them without a word, where a shut-down processor warned for every span.
    EXPORTER.shutdown()


@pytest.fixture
def spans(provider: None) -> Iterator[InMemorySpanExporter]:
    EXPORTER.clear()
    yield EXPORTER
    EXPORTER.clear()


def _named(spans: InMemorySpanExporter, name: str, kind: SpanKind) -> ReadableSpan:
    found = [s for s in spans.get_finished_spans() if s.name == name and s.kind == kind]
    assert len(found) == 1, [(s.name, s.kind) for s in spans.get_finished_spans()]
    return found[0]


def _lineage(spans: InMemorySpanExporter, span: ReadableSpan) -> list[str]:
    """The names of `span` and its ancestors, leaf first, without the SDK's transport-level send spans."""
    by_id = {s.context.span_id: s for s in spans.get_finished_spans()}
    names: list[str] = []
    current: ReadableSpan | None = span
    while current is not None:
        if not current.name.startswith("MCP send "):
            names.append(f"{current.kind.name.lower()} {current.name}")
        current = by_id.get(current.parent.span_id) if current.parent else None
    return names


def _carried(text: str) -> dict[str, str]:
    return json.loads(text)


async def _call(harness: Any, name: str, arguments: dict[str, Any]) -> tuple[types.CallToolResult, int]:
    tracer = trace.get_tracer("test")
    async with Client(harness.server, mode="legacy") as client:
        with tracer.start_as_current_span("agent") as agent:
            result = await client.call_tool(name, arguments)
    return result, agent.get_span_context().trace_id


async def test_a_direct_call_is_a_span_whose_child_calls_the_upstream_in_the_same_trace(
        spans: InMemorySpanExporter) -> None:
    async with gateway([], ToolsetsConfig(core=("*",)), servers={"t": traced.build()}) as harness:
        result, trace_id = await _call(harness, "t__echo", {})
    assert not result.is_error
    upstream = _named(spans, "tools/call echo", SpanKind.SERVER)
    assert _lineage(spans, upstream) == [
        "server tools/call echo", "client tools/call echo", "server tools/call t__echo", "internal agent"]
    downstream = _named(spans, "tools/call t__echo", SpanKind.SERVER)
    assert downstream.attributes["mcp.method.name"] == "tools/call"
    assert downstream.attributes["gen_ai.tool.name"] == "t__echo"
    assert "jsonrpc.request.id" in downstream.attributes
    child = _named(spans, "tools/call echo", SpanKind.CLIENT)
    assert dict(child.attributes) == {"mcp.method.name": "tools/call", "gen_ai.tool.name": "echo",
                                      "gen_ai.operation.name": "execute_tool", "toolbridge.upstream": "t"}
    assert child.status.status_code is StatusCode.UNSET
    traceparent = _carried(result.content[0].text)["traceparent"]
    assert traceparent.split("-")[1] == format(trace_id, "032x")
    assert int(traceparent.split("-")[2], 16) == upstream.parent.span_id


async def test_a_bridge_call_is_the_span_of_tool_call_with_the_upstream_tool_as_its_child(
        spans: InMemorySpanExporter) -> None:
    async with gateway([], ToolsetsConfig(), servers={"t": traced.build()}) as harness:
        result, trace_id = await _call(harness, "tool_call", {"name": "t__echo", "arguments": {}})
    assert not result.is_error, result.content
    upstream = _named(spans, "tools/call echo", SpanKind.SERVER)
    assert _lineage(spans, upstream) == [
        "server tools/call echo", "client tools/call echo", "server tools/call tool_call", "internal agent"]
    assert _named(spans, "tools/call echo", SpanKind.CLIENT).attributes["gen_ai.tool.name"] == "echo"
    assert _carried(result.content[0].text)["traceparent"].split("-")[1] == format(trace_id, "032x")


async def test_an_upstream_is_error_result_marks_both_spans_a_tool_error(spans: InMemorySpanExporter) -> None:
    async with gateway([], ToolsetsConfig(core=("*",)), servers={"t": traced.build()}) as harness:
        result, _ = await _call(harness, "t__broken", {})
    assert result.is_error
    for span in (_named(spans, "tools/call broken", SpanKind.CLIENT),
                 _named(spans, "tools/call t__broken", SpanKind.SERVER)):
        assert span.attributes["error.type"] == "tool_error"
        assert span.status.status_code is StatusCode.ERROR


async def test_a_resource_read_is_parented_across_the_hop(spans: InMemorySpanExporter) -> None:
    tracer = trace.get_tracer("test")
    async with gateway([], ToolsetsConfig(core=("*",)), servers={"t": traced.build()}) as harness, \
            Client(harness.server, mode="legacy") as client:
        (listed,) = (await client.list_resources()).resources
        with tracer.start_as_current_span("agent") as agent:
            read = await client.read_resource(listed.uri)
    servers = [s for s in spans.get_finished_spans() if s.kind == SpanKind.SERVER and s.name == "resources/read"]
    upstream = max(servers, key=lambda span: len(_lineage(spans, span)))
    assert _lineage(spans, upstream) == [
        "server resources/read", "client resources/read", "server resources/read", "internal agent"]
    child = _named(spans, "resources/read", SpanKind.CLIENT)
    assert child.attributes["mcp.resource.uri"] == traced.META_URI
    assert child.attributes["toolbridge.upstream"] == "t"
    (contents,) = read.contents
    assert isinstance(contents, types.TextResourceContents)
    traceparent = _carried(contents.text)["traceparent"]
    assert traceparent.split("-")[1] == format(agent.get_span_context().trace_id, "032x")


async def test_a_prompt_is_a_span_named_for_the_upstreams_prompt(spans: InMemorySpanExporter) -> None:
    tracer = trace.get_tracer("test")
    async with gateway([], ToolsetsConfig(core=("*",)), servers={"t": traced.build()}) as harness, \
            Client(harness.server, mode="legacy") as client:
        (listed,) = (await client.list_prompts()).prompts
        with tracer.start_as_current_span("agent") as agent:
            prompt = await client.get_prompt(listed.name)
    upstream = _named(spans, "prompts/get meta", SpanKind.SERVER)
    assert _lineage(spans, upstream) == [
        "server prompts/get meta", "client prompts/get meta", f"server prompts/get {listed.name}", "internal agent"]
    assert _named(spans, "prompts/get meta", SpanKind.CLIENT).attributes["gen_ai.prompt.name"] == "meta"
    content = prompt.messages[0].content
    assert isinstance(content, types.TextContent)
    assert _carried(content.text)["traceparent"].split("-")[1] == format(agent.get_span_context().trace_id, "032x")


@pytest.mark.parametrize("meta", [{"traceparent": 123}, {"baggage": 5}, {"traceparent": "not-a-traceparent"}])
async def test_a_malformed_trace_context_is_ignored(meta: dict[str, Any], spans: InMemorySpanExporter) -> None:
    async with gateway([], ToolsetsConfig(core=("*",)), servers={"t": traced.build()}) as harness, \
            Client(harness.server, mode="legacy") as client:
        result = await client.call_tool("t__echo", {}, meta=meta)  # type: ignore[arg-type]
    assert not result.is_error
    assert "tracestate" not in _carried(result.content[0].text)


def test_no_endpoint_no_export() -> None:
    before = trace.get_tracer_provider()
    export_traces({})()
    assert trace.get_tracer_provider() is before


def test_an_endpoint_without_the_sdk_is_a_warning_and_nothing_else(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setattr(trace, "get_tracer_provider", trace.ProxyTracerProvider)
    monkeypatch.setitem(sys.modules, "opentelemetry.sdk.trace", None)  # what an install without the extra has
    stop = export_traces({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"})
    stop()
    assert "pip install 'toolbridge[otel]'" in caplog.text
    assert isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider)
