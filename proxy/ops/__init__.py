"""What an operator sees and does: status, Prometheus metrics, the audit log, config reload."""

from proxy.ops._audit import AuditLog, argument_digest
from proxy.ops._log_format import SafeFormatter
from proxy.ops._metrics import OTHER_TOOL, Metrics
from proxy.ops._reload import reload_on_sighup, watch_config
from proxy.ops._status import PROFILE_COLUMNS, UPSTREAM_COLUMNS, plain_table, status_report, status_rows
from proxy.ops._tracing import export_traces

__all__ = [
    "OTHER_TOOL",
    "PROFILE_COLUMNS",
    "UPSTREAM_COLUMNS",
    "AuditLog",
    "Metrics",
    "SafeFormatter",
    "argument_digest",
    "export_traces",
    "plain_table",
    "reload_on_sighup",
    "status_report",
    "status_rows",
    "watch_config",
]
