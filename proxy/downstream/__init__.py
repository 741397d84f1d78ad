"""The downstream wing: what clients talk to.

`build_server(Handlers(...))` gives the SDK server for stdio or in-memory use; `HttpApp` serves it over
Streamable HTTP (`http`). Each request is answered from its session's view by the rooms: who it is and what
it shares (`session`), calls (`calls`), lists and notifications (`lists`), and the way back to the caller
(`rounds`).
"""

from proxy.downstream._lowlevel import build_server
from proxy.downstream._server import Handlers
from proxy.downstream._stdio import stdio_transport
from proxy.downstream.calls import (
    RESULTS_PREFIX,
    LargeResults,
    TaskIds,
    Tasks,
    bridge,
    check_arguments,
    coerce_arguments,
    new_replica_id,
)
from proxy.downstream.http import (
    CONSOLE_COOKIE,
    CONSOLE_PATH,
    CONSOLE_SIGN_IN,
    LOOPBACK_HOSTS,
    REPLICA_ID_PATTERN,
    HttpApp,
    ProtectedResource,
    ReplicaMarker,
    serve_http,
    transport_security,
)
from proxy.downstream.lists import ChangeNotifier, Promoter
from proxy.downstream.rounds import RequestStates
from proxy.downstream.session import BRIDGE_SERVER, CallRecord, principal_of

__all__ = [
    "BRIDGE_SERVER",
    "CONSOLE_COOKIE",
    "CONSOLE_PATH",
    "CONSOLE_SIGN_IN",
    "LOOPBACK_HOSTS",
    "REPLICA_ID_PATTERN",
    "RESULTS_PREFIX",
    "CallRecord",
    "ChangeNotifier",
    "Handlers",
    "HttpApp",
    "LargeResults",
    "Promoter",
    "ProtectedResource",
    "ReplicaMarker",
    "RequestStates",
    "TaskIds",
    "Tasks",
    "bridge",
    "build_server",
    "check_arguments",
    "coerce_arguments",
    "new_replica_id",
    "principal_of",
    "serve_http",
    "stdio_transport",
    "transport_security",
]
