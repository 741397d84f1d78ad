"""The Streamable HTTP edge: `HttpApp` behind Host/Origin checks, the bearer token or the OAuth protected
resource (`ProtectedResource`), session caps, the graceful drain, and replica markers (`ReplicaMarker`).
"""

from proxy.downstream.http._app import (
    CONSOLE_COOKIE,
    CONSOLE_PATH,
    CONSOLE_SIGN_IN,
    LOOPBACK_HOSTS,
    PROFILE_SCOPE_KEY,
    HttpApp,
    check_bearer,
    serve_http,
    transport_security,
)
from proxy.downstream.http._protected_resource import ALLOWED_PROFILES_SCOPE_KEY, ProtectedResource
from proxy.downstream.http._replica import REPLICA_ID_PATTERN, ReplicaMarker

__all__ = [
    "ALLOWED_PROFILES_SCOPE_KEY",
    "CONSOLE_COOKIE",
    "CONSOLE_PATH",
    "CONSOLE_SIGN_IN",
    "LOOPBACK_HOSTS",
    "PROFILE_SCOPE_KEY",
    "REPLICA_ID_PATTERN",
    "HttpApp",
    "ProtectedResource",
    "ReplicaMarker",
    "check_bearer",
    "serve_http",
    "transport_security",
]
