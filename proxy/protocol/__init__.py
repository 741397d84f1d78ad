"""The MCP vocabulary both wings speak: what passes between the upstream fleet and the downstream server.

`BackChannel` is a downstream call's way back for an upstream's requests, progress and logs, and a
`NoticeSink` takes what no call claims. MCP Apps' `ui://` URIs are namespaced per server (`ui_namespaced`,
and the `rewrite_ui_*` of results and reads). Lists carry `CacheHint`s, servers advertise extensions
(`ServerTraits`, `merge_extensions` of the `CARRIED` ones). The tasks extension's results and requests
(`CreatedTask`, `TaskState`, `get_task`…) and `HandedOver`, a call whose task went to its caller. A 2026-era
upstream request carries its caller's declared capabilities (`caller_meta`, `carried`). JSON-RPC is
framed on stdio pipes by `MessageReader`/`MessageWriter`, for either side. A tool whose output schema only the
2026 era takes is listed to handshake-era clients without it (`for_handshake_era`).
"""

from proxy.protocol._apps import (
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
from proxy.protocol._back_channel import BackChannel, Notice, NoticeSink, ProgressCallback, SamplingAnswer
from proxy.protocol._cache_hints import CacheHint, ListKind
from proxy.protocol._caller_capabilities import caller_meta, carried
from proxy.protocol._extensions import CARRIED, ServerTraits, client_extensions, merge_extensions
from proxy.protocol._framing import LineTooLong, MessageReader, MessageWriter, Pipes, encode, open_pipes, parsed_or
from proxy.protocol._results import strip_server_info
from proxy.protocol._tasks import (
    TASKS,
    CreatedTask,
    HandedOver,
    TaskBody,
    TaskState,
    cancel_task,
    get_task,
    update_task,
)
from proxy.protocol._tool_eras import for_handshake_era

__all__ = [
    "APP_MIME_TYPE",
    "CARRIED",
    "TASKS",
    "UI_EXTENSION",
    "AppRole",
    "BackChannel",
    "CacheHint",
    "CreatedTask",
    "HandedOver",
    "LineTooLong",
    "ListKind",
    "MessageReader",
    "MessageWriter",
    "Notice",
    "NoticeSink",
    "Pipes",
    "ProgressCallback",
    "SamplingAnswer",
    "ServerTraits",
    "TaskBody",
    "TaskState",
    "app_role",
    "caller_meta",
    "cancel_task",
    "carried",
    "client_extensions",
    "encode",
    "for_handshake_era",
    "get_task",
    "merge_extensions",
    "open_pipes",
    "parsed_or",
    "rewrite_ui_meta",
    "rewrite_ui_read",
    "rewrite_ui_result",
    "strip_server_info",
    "ui_namespaced",
    "ui_original",
    "update_task",
]
