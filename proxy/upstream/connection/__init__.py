"""One live MCP client connection to an upstream server, of either protocol era.

`connect` opens it over stdio (a child process tied to our life), Streamable HTTP or SSE and yields a
`Connection`: its tools read in slices within limits, its calls with their back channel (`InFlight`,
`client_callbacks`), tasks the upstream makes, and the resource URIs it keeps asking for (`SubscribedUris`).
"""

from proxy.upstream.connection._client import KEEPALIVE_TIMEOUT, Connection, TransportChoice, filter_tools
from proxy.upstream.connection._connect import connect
from proxy.upstream.connection._relay import InFlight, client_callbacks
from proxy.upstream.connection._stdio import resolve_command
from proxy.upstream.connection._subscribed import keep_subscribed
from proxy.upstream.connection._subscribed_uris import SubscribedUris

__all__ = [
    "KEEPALIVE_TIMEOUT",
    "Connection",
    "InFlight",
    "SubscribedUris",
    "TransportChoice",
    "client_callbacks",
    "connect",
    "filter_tools",
    "keep_subscribed",
    "resolve_command",
]
