"""Tool calls: `ToolCalls` answers each, the bridge tools search, describe and forward (`bridge`), arguments
are checked before any upstream is asked (`check_arguments`), large results are cut into links (`LargeResults`)
and tasks are handed to their caller under signed ids (`Tasks`, `TaskIds`).
"""

from proxy.downstream.calls import _bridge as bridge
from proxy.downstream.calls._arguments import check_arguments, coerce_arguments
from proxy.downstream.calls._calls import ToolCalls
from proxy.downstream.calls._large import RESULTS_PREFIX, LargeResults, result_owner
from proxy.downstream.calls._tasks import TaskIdParams, TaskIds, Tasks, TaskUpdateParams, new_replica_id

__all__ = [
    "RESULTS_PREFIX",
    "LargeResults",
    "TaskIdParams",
    "TaskIds",
    "TaskUpdateParams",
    "Tasks",
    "ToolCalls",
    "bridge",
    "check_arguments",
    "coerce_arguments",
    "new_replica_id",
    "result_owner",
]
