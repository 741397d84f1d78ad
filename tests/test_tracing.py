"""The SDK's per-request span middleware is kept only when tracing is on.

With no OpenTelemetry tracer provider installed, the SDK's spans record nothing; toolbridge drops
that middleware (the SDK's documented opt-out) so calls do not pay for it. Installed before the
server is built, a provider keeps it, and calls are answered either way.
"""

from __future__ import annotations

from typing import Any

import pytest
from inprocess import Upstream, gateway, tool
from mcp import Client
from opentelemetry import trace

from proxy.config import ToolsetsConfig

pytestmark = pytest.mark.anyio


class _Provider(trace.TracerProvider):
    """A tracer provider someone installed (its tracers record nothing; only its presence matters)."""

    def get_tracer(self, *args: Any, **kwargs: Any) -> trace.Tracer:
        return trace.NoOpTracer()


def _span_middleware(server: Any) -> list[str]:
    return [type(m).__name__ for m in server.middleware if "Telemetry" in type(m).__name__]


@pytest.mark.parametrize("installed", [False, True])
async def test_span_middleware_only_with_a_tracer_provider(installed: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    if installed:
        monkeypatch.setattr(trace, "get_tracer_provider", _Provider)
    upstream = Upstream("a", [tool("echo", properties={"x": {"type": "integer"}})])
    async with gateway([upstream], ToolsetsConfig(core=("*",))) as harness, \
            Client(harness.server) as client:
        assert bool(_span_middleware(harness.server)) is installed
        result = await client.call_tool("a__echo", {"x": 1})
    assert not result.is_error
    assert upstream.calls == [("echo", {"x": 1})]
