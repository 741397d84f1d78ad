"""What an operator sees and does: status, a profile's catalog, Prometheus metrics, the audit log, config reload,
writing a config dir."""

from proxy.ops._audit import AuditLog, argument_digest, latest_records
from proxy.ops._catalog import catalog_report
from proxy.ops._config_dir import EXAMPLE, Written, connect_hint, init_config_dir, write_upstreams
from proxy.ops._log_format import SafeFormatter
from proxy.ops._metrics import OTHER_TOOL, Metrics, ServerTraffic, quantile
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
    "ServerTraffic",
    "Written",
    "argument_digest",
    "catalog_report",
    "connect_hint",
    "export_traces",
    "init_config_dir",
    "latest_records",
    "plain_table",
    "quantile",
    "reload_on_sighup",
    "status_report",
    "status_rows",
    "watch_config",
    "write_upstreams",
]
