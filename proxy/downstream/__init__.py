"""What downstream clients talk to: the SDK server, its handlers, the bridge tools and HTTP.

`build_server(Handlers(...))` gives the SDK server for stdio or in-memory use; `HttpApp` serves it
over Streamable HTTP behind the Host/Origin and bearer checks, its session ids marked with the
replica's id when one is given (`ReplicaMarker`); `ProtectedResource` makes that endpoint an OAuth
protected resource whose tokens' claims choose the profile.
"""

from proxy.downstream import _bridge as bridge
from proxy.downstream._arguments import check_arguments, coerce_arguments
from proxy.downstream._http import LOOPBACK_HOSTS, HttpApp, check_bearer, serve_http, transport_security
from proxy.downstream._large import RESULTS_PREFIX, LargeResults
from proxy.downstream._lowlevel import build_server
from proxy.downstream._notifier import ChangeNotifier
from proxy.downstream._observe import BRIDGE_SERVER, CallObserver, CallRecord
from proxy.downstream._protocol import Upstreams
from proxy.downstream._replica import REPLICA_ID_PATTERN, ReplicaMarker
from proxy.downstream._request_state import RequestStates
from proxy.downstream._resource import ProtectedResource
from proxy.downstream._server import Handlers
from proxy.downstream._stdio import stdio_transport
from proxy.downstream._tasks import TaskIds, Tasks, new_replica_id

__all__ = [
    "BRIDGE_SERVER",
    "LOOPBACK_HOSTS",
    "REPLICA_ID_PATTERN",
    "RESULTS_PREFIX",
    "CallObserver",
    "CallRecord",
    "ChangeNotifier",
    "Handlers",
    "HttpApp",
    "LargeResults",
    "ProtectedResource",
    "ReplicaMarker",
    "RequestStates",
    "TaskIds",
    "Tasks",
    "Upstreams",
    "bridge",
    "build_server",
    "check_arguments",
    "check_bearer",
    "coerce_arguments",
    "new_replica_id",
    "serve_http",
    "stdio_transport",
    "transport_security",
]
