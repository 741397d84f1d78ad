"""What every downstream handler knows of a request: who it acts for (`caller`), its era and context
(`RequestContext`, `handshake_era`, `takes_tasks`), the fleet port it routes to (`Upstreams`), one mapping of
errors (`protocol_error`), the operator's record of a call (`CallRecord`) and trace context (`TraceContext`).
"""

from proxy.downstream.session._context import (
    RequestContext,
    Upstreams,
    handshake_era,
    page,
    protocol_error,
    takes_tasks,
)
from proxy.downstream.session._identity import (
    Caller,
    Owner,
    caller,
    client_name,
    in_profile,
    principal_of,
    promotion_key,
)
from proxy.downstream.session._observe import BRIDGE_SERVER, CallObserver, CallRecord, ConnectionId, session_label
from proxy.downstream.session._scrub import scrub_error_result, scrub_log
from proxy.downstream.session._trace import TraceContext, record_tool_result, tool_attributes, upstream_span

__all__ = [
    "BRIDGE_SERVER",
    "CallObserver",
    "CallRecord",
    "Caller",
    "ConnectionId",
    "Owner",
    "RequestContext",
    "TraceContext",
    "Upstreams",
    "caller",
    "client_name",
    "handshake_era",
    "in_profile",
    "page",
    "principal_of",
    "promotion_key",
    "protocol_error",
    "record_tool_result",
    "scrub_error_result",
    "scrub_log",
    "session_label",
    "takes_tasks",
    "tool_attributes",
    "upstream_span",
]
