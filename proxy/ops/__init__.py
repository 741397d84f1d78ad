"""What an operator sees and does: status, Prometheus metrics, the audit log, config reload, writing a config dir."""

from proxy.ops._audit import AuditLog, argument_digest
from proxy.ops._config_dir import EXAMPLE, Written, connect_hint, init_config_dir, write_upstreams
from proxy.ops._log_format import SafeFormatter
from proxy.ops._metrics import OTHER_TOOL, Metrics
from proxy.ops._reload import reload_on_sighup, watch_config
from proxy.ops._status import PROFILE_COLUMNS, UPSTREAM_COLUMNS, plain_table, status_report, status_rows
from proxy.ops._tracing import export_traces

__all__ = [
    "EXAMPLE",
    "OTHER_TOOL",
    "PROFILE_COLUMNS",
    "UPSTREAM_COLUMNS",
    "AuditLog",
    "Metrics",
    "SafeFormatter",
    "Written",
    "argument_digest",
    "connect_hint",
    "export_traces",
    "init_config_dir",
    "plain_table",
    "reload_on_sighup",
    "status_report",
    "status_rows",
    "watch_config",
    "write_upstreams",
]
