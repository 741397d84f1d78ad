"""Trace context across the proxy hop (SEP-414) and the span of each upstream request.

A downstream request's W3C trace context (`traceparent`, `tracestate`, `baggage`) arrives in its
`_meta`, or in the HTTP request's headers. `TraceContext` makes it the current OpenTelemetry
context for the request, so the SDK's own machinery carries it on: its server span nests under it,
and its client injects the current context into the upstream request's `_meta`. With the
OpenTelemetry API alone (no SDK) nothing records, and the upstream receives the downstream's
context unchanged; with an SDK, `upstream_span` adds the semantic-convention client span of the
upstream call, a child of the downstream request's span.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import replace
from typing import Any

from mcp import types
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from opentelemetry import context as otel_context
from opentelemetry import propagate, trace
from opentelemetry.trace import SpanKind, StatusCode

__all__ = ["TraceContext", "record_tool_result", "tool_attributes", "upstream_span"]

CARRIER_KEYS = ("traceparent", "tracestate", "baggage")
_tracer = trace.get_tracer("toolbridge")


def _carrier(ctx: ServerRequestContext[Any, Any]) -> dict[str, str] | None:
    """The request's trace context: its `_meta` first (SEP-414), else the HTTP headers, else none.

    Only text values count: the propagators raise on anything else a client may put in `_meta`.
    """
    for source in (ctx.meta, getattr(ctx.request, "headers", None)):
        if source and (carrier := {key: value for key in CARRIER_KEYS
                                   if isinstance(value := source.get(key), str)}):
            return carrier
    return None


class TraceContext:
    """Context-tier middleware, outermost: the downstream request's trace context becomes current.

    A malformed carrier is ignored: values that are not text are dropped, and the propagators
    drop text they cannot parse.
    """

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        if ctx.meta and any(not isinstance(ctx.meta.get(key, ""), str) for key in CARRIER_KEYS):
            # The SDK's span middleware, inside this one, fails the request on such a value.
            meta = {key: value for key, value in ctx.meta.items() if key not in CARRIER_KEYS or isinstance(value, str)}
            ctx = replace(ctx, meta=meta)  # type: ignore[arg-type]
        carrier = _carrier(ctx)
        if carrier is None:
            return await call_next(ctx)
        token = otel_context.attach(propagate.extract(carrier))
        try:
            return await call_next(ctx)
        finally:
            otel_context.detach(token)


@contextmanager
def upstream_span(server: str, method: str, target: str | None = None,
                  attributes: Mapping[str, Any] | None = None) -> Iterator[trace.Span]:
    """The client span of one request to `server`, named `{method} {target}` by the MCP conventions.

    A failure records its class as `error.type` (the span's status and exception event are the tracer's).
    """
    with _tracer.start_as_current_span(
        f"{method} {target}" if target else method,
        kind=SpanKind.CLIENT,
        attributes={"mcp.method.name": method, "toolbridge.upstream": server, **(attributes or {})},
    ) as span:
        try:
            yield span
        except Exception as exc:
            span.set_attribute("error.type", type(exc).__name__)
            raise


def tool_attributes(raw_name: str) -> dict[str, str]:
    """What the conventions add to a `tools/call` span."""
    return {"gen_ai.tool.name": raw_name, "gen_ai.operation.name": "execute_tool"}


def record_tool_result(span: trace.Span, result: types.CallToolResult) -> types.CallToolResult:
    """An `isError` result is a failed call to the conventions: `error.type=tool_error`."""
    if result.is_error:
        span.set_attribute("error.type", "tool_error")
        span.set_status(StatusCode.ERROR)
    return result
