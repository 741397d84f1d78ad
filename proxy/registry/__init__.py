"""The live registry of upstream tools, grouped in `mcp-<server>` toolsets: the `Registry` (`_registry`), each
tool as registered (`ToolEntry`, `_entries`), and work done a step at a time so registering thousands of tools
can yield to the event loop (`_steps`).
"""

from proxy.registry._entries import ToolEntry
from proxy.registry._registry import Listener, Registry, ServerChange
from proxy.registry._steps import SLICE_SECONDS, Steps, run_sliced, run_steps

__all__ = ["SLICE_SECONDS", "Listener", "Registry", "ServerChange", "Steps", "ToolEntry", "run_sliced", "run_steps"]
