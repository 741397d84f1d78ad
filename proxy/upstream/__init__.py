"""The upstream fleet: one supervised MCP client connection per configured server.

`Fleet` keeps every upstream connected (stdio children, Streamable HTTP, SSE), puts each server's
tools into a `ToolSink` (the registry) and its resources and prompts into a `CatalogSink`, and
routes calls and requests to the live connection, with a `BackChannel` to the downstream caller.
A `ToolGate` screens each listing against the approved tool fingerprints (rug-pull detection, `pin:`).
`login` gets the user's consent for an OAuth upstream; its tokens live where `token_store` says.
`open_pipes`, `MessageReader` and `MessageWriter` frame JSON-RPC on stdio pipes, for either side.
"""

from proxy.upstream._apps import (
    APP_MIME_TYPE,
    UI_EXTENSION,
    AppRole,
    app_role,
    rewrite_ui_meta,
    rewrite_ui_read,
    rewrite_ui_result,
    ui_namespaced,
    ui_original,
)
from proxy.upstream._availability import Availability
from proxy.upstream._backchannel import BackChannel, InFlight, NoticeSink, client_callbacks
from proxy.upstream._backoff import next_delay
from proxy.upstream._cache import CatalogCache, config_key
from proxy.upstream._client import Connection, ProgressCallback, filter_tools, strip_server_info
from proxy.upstream._connect import connect
from proxy.upstream._fingerprints import FingerprintStore, Pending, ServerPrints, fingerprint
from proxy.upstream._fleet import Fleet
from proxy.upstream._gate import ToolChange, ToolGate
from proxy.upstream._login import login
from proxy.upstream._member import ServerStatus, UpstreamState
from proxy.upstream._oauth import token_store
from proxy.upstream._publisher import CatalogSink, ToolSink
from proxy.upstream._stdio import resolve_command
from proxy.upstream._tasks import (
    TASKS,
    CreatedTask,
    HandedOver,
    TaskState,
    accepting_tasks,
    cancel_task,
    get_task,
    update_task,
)
from proxy.upstream._traits import CARRIED, CacheHint, ListKind, ServerTraits, merge_extensions
from proxy.upstream._wire import LineTooLong, MessageReader, MessageWriter, encode, open_pipes, parsed_or

__all__ = [
    "APP_MIME_TYPE",
    "CARRIED",
    "TASKS",
    "UI_EXTENSION",
    "AppRole",
    "Availability",
    "BackChannel",
    "CacheHint",
    "CatalogCache",
    "CatalogSink",
    "Connection",
    "CreatedTask",
    "FingerprintStore",
    "Fleet",
    "HandedOver",
    "InFlight",
    "LineTooLong",
    "ListKind",
    "MessageReader",
    "MessageWriter",
    "NoticeSink",
    "Pending",
    "ProgressCallback",
    "ServerPrints",
    "ServerStatus",
    "ServerTraits",
    "TaskState",
    "ToolChange",
    "ToolGate",
    "ToolSink",
    "UpstreamState",
    "accepting_tasks",
    "app_role",
    "cancel_task",
    "client_callbacks",
    "config_key",
    "connect",
    "encode",
    "filter_tools",
    "fingerprint",
    "get_task",
    "login",
    "merge_extensions",
    "next_delay",
    "open_pipes",
    "parsed_or",
    "resolve_command",
    "rewrite_ui_meta",
    "rewrite_ui_read",
    "rewrite_ui_result",
    "strip_server_info",
    "token_store",
    "ui_namespaced",
    "ui_original",
    "update_task",
]
