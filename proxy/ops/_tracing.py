"""OTLP export of toolbridge's spans, configured the standard way: `OTEL_EXPORTER_OTLP_ENDPOINT`.

Only when the operator asks for it (the endpoint is set), no tracer provider is installed yet
(e.g. by `opentelemetry-instrument`), and the `otel` extra is installed. Everything else about the
exporter (headers, timeout, protocol paths, `OTEL_SERVICE_NAME`) is the OpenTelemetry SDK's own
environment configuration.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Mapping

from opentelemetry import trace

__all__ = ["ENDPOINT_VARIABLES", "export_traces"]

logger = logging.getLogger(__name__)

ENDPOINT_VARIABLES = ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")


def _nothing() -> None:
    """Nothing to flush."""


def export_traces(environ: Mapping[str, str] = os.environ) -> Callable[[], None]:
    """Install a tracer provider that exports spans over OTLP/HTTP, if configured; returns its flush-and-stop.

    Call it before the downstream server is built (whether tracing is on decides the SDK's span
    middleware), and call what it returns on the way out: the stdio transport exits without running
    `atexit` hooks, which would lose the spans still batched.
    """
    if not any(environ.get(name) for name in ENDPOINT_VARIABLES):
        return _nothing
    if not isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider | trace.NoOpTracerProvider):
        return _nothing  # someone else's provider (and exporter) is in charge
    try:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
    except ImportError:
        logger.warning("%s is set but the OpenTelemetry SDK is not installed: no spans are exported "
                       "(pip install 'toolbridge[otel]')", " or ".join(ENDPOINT_VARIABLES))
        return _nothing
    # OTEL_SERVICE_NAME, when set, overrides this name (the SDK's own rule).
    provider = TracerProvider(resource=Resource.create({"service.name": "toolbridge"}), shutdown_on_exit=False)
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    trace.set_tracer_provider(provider)
    return provider.shutdown
