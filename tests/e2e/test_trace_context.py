"""Trace context through a real `toolbridge serve` to a stdio upstream, and spans exported over OTLP.

The proxy process has the OpenTelemetry API only (no provider) unless `OTEL_EXPORTER_OTLP_ENDPOINT`
is set; the upstream (`servers/traced.py`) answers with the trace context its request carried.
"""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import anyio
import pytest
import yaml
from conftest import free_port
from fleetdir import REPO, serve_http
from mcp import Client, StdioServerParameters, stdio_client
from mcp.types.version import MODERN_PROTOCOL_VERSIONS
from opentelemetry import context as otel_context
from opentelemetry import propagate
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

pytestmark = pytest.mark.anyio

TRACED = str(Path(__file__).parent.parent / "servers" / "traced.py")
TRACE_ID = "0af7651916cd43dd8448eb211c80319c"
CARRIER = {"traceparent": f"00-{TRACE_ID}-b7ad6b7169203331-01", "tracestate": "vendor=opaque",
           "baggage": "tenant=acme"}


def _fleet(directory: Path) -> Path:
    (directory / "upstreams").mkdir(parents=True)
    spec = {"command": sys.executable, "args": [TRACED], "connect_timeout": 20}
    (directory / "upstreams" / "t.yaml").write_text(yaml.safe_dump(spec))
    (directory / "toolsets.yaml").write_text(yaml.safe_dump({"core": ["*"], "startup_wait": 20}))
    return directory


def _serve(config: Path, env: dict[str, str]) -> object:
    params = StdioServerParameters(command=sys.executable, args=["-m", "proxy", "serve", "--config-dir", str(config)],
                                   env={"TOOLBRIDGE_LOG_LEVEL": "warning", **env}, cwd=str(REPO))
    return stdio_client(params, errlog=sys.stderr)


@contextmanager
def _context(carrier: dict[str, str]) -> Iterator[None]:
    """The caller's trace context. A tracer provider in this test process (another module's) would
    start the client's own span under it: same trace, state and baggage, another parent span id."""
    token = otel_context.attach(propagate.extract(carrier))
    try:
        yield
    finally:
        otel_context.detach(token)


@pytest.mark.parametrize("mode", ["legacy", "auto"])  # a handshake-era client, and a 2026-era one
async def test_the_upstream_receives_the_downstreams_trace_context(tmp_path: Path, mode: str) -> None:
    async with Client(_serve(_fleet(tmp_path), {}), mode=mode) as client:
        with _context(CARRIER):
            result = await client.call_tool("t__echo", {})
        assert (mode == "legacy") is (client.protocol_version not in MODERN_PROTOCOL_VERSIONS)
    assert not result.is_error, result.content
    carried = json.loads(result.content[0].text)
    assert carried["traceparent"].split("-")[1] == TRACE_ID
    assert carried["tracestate"] == CARRIER["tracestate"]
    assert carried["baggage"] == CARRIER["baggage"]


# A downstream client in its own process: no tracer provider there, so its requests carry no `_meta`
# trace context and only the HTTP headers have one.
HEADER_CLIENT = """
import json, sys
import anyio, httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

async def main():
    async with httpx2.AsyncClient(headers=json.loads(sys.argv[2])) as http, \\
            Client(streamable_http_client(sys.argv[1], http_client=http)) as client:
        print((await client.call_tool("t__echo", {})).content[0].text)

anyio.run(main)
"""


async def test_the_trace_context_of_the_http_headers_reaches_the_upstream(tmp_path: Path) -> None:
    async with serve_http(_fleet(tmp_path), free_port()) as base:
        with anyio.fail_after(120):  # a fresh interpreter importing the SDK: slow on a loaded machine
            done = await anyio.run_process([sys.executable, "-c", HEADER_CLIENT, f"{base}/mcp", json.dumps(CARRIER)])
    carried = json.loads(done.stdout)
    assert carried == CARRIER


class _Collector(BaseHTTPRequestHandler):
    """An OTLP/HTTP trace receiver on 127.0.0.1: keeps the span names and trace ids it is sent."""

    received: list[tuple[str, str]] = []  # noqa: RUF012 (one receiver per test, reset by it)

    def do_POST(self) -> None:
        request = ExportTraceServiceRequest()
        request.ParseFromString(self.rfile.read(int(self.headers["Content-Length"])))
        for resource in request.resource_spans:
            for scope in resource.scope_spans:
                self.received += [(span.name, span.trace_id.hex()) for span in scope.spans]
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.end_headers()

    def log_message(self, *args: object) -> None:
        """Quiet."""


async def test_spans_are_exported_over_otlp_when_an_endpoint_is_set(tmp_path: Path) -> None:
    _Collector.received = []
    collector = ThreadingHTTPServer(("127.0.0.1", 0), _Collector)
    threading.Thread(target=collector.serve_forever, daemon=True).start()
    endpoint = f"http://127.0.0.1:{collector.server_address[1]}"
    try:
        # The batch goes out every 200 ms (an SDK setting), while the client is still there.
        env = {"OTEL_EXPORTER_OTLP_ENDPOINT": endpoint, "OTEL_BSP_SCHEDULE_DELAY": "200"}
        async with Client(_serve(_fleet(tmp_path), env)) as client:
            with _context(CARRIER):
                result = await client.call_tool("t__echo", {})
            with anyio.fail_after(20):
                while not {"tools/call t__echo", "tools/call echo"} <= {name for name, _ in _Collector.received}:
                    await anyio.sleep(0.05)
    finally:
        collector.shutdown()
        collector.server_close()
    assert not result.is_error
    assert ("tools/call t__echo", TRACE_ID) in _Collector.received, _Collector.received
    assert ("tools/call echo", TRACE_ID) in _Collector.received
