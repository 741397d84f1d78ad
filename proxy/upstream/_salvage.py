"""Salvaging a `tools/list` answer that one bad tool makes unreadable as a whole.

The SDK parses a message in one go, with a nesting limit: one tool whose schema nests ~100 levels
made the whole answer unreadable, so the server never registered and the log blamed the connect
timeout. Here such an answer is read with the standard library, the tools too deep (or otherwise
unreadable) are dropped with one named warning each, and the rest go through.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from mcp import types
from mcp.types import jsonrpc_message_adapter

logger = logging.getLogger(__name__)

__all__ = ["MAX_TOOL_DEPTH", "salvage_tool_list"]

MAX_TOOL_DEPTH = 128  # JSON nesting levels one tool definition may use


def _depth(value: Any) -> int:
    deepest, todo = 0, [(value, 1)]
    while todo:
        node, level = todo.pop()
        if isinstance(node, dict | list):
            deepest = max(deepest, level)
            todo.extend((child, level + 1) for child in (node.values() if isinstance(node, dict) else node))
    return deepest


def _readable(tool: Any, server: str) -> bool:
    name = tool.get("name") if isinstance(tool, dict) else None
    if _depth(tool) > MAX_TOOL_DEPTH:
        reason = f"its definition nests deeper than {MAX_TOOL_DEPTH} levels"
    else:
        try:
            types.Tool.model_validate(tool)
            return True
        except ValueError as exc:
            reason = f"its definition is invalid ({getattr(exc, 'error_count', lambda: 1)()} errors)"
    logger.warning("server %s: tool %.80r skipped: %s", server, name, reason)
    return False


def salvage_tool_list(line: bytes, server: str) -> types.JSONRPCMessage | None:
    """The message with its unreadable tools dropped, or None if it is not a tools/list answer."""
    try:
        data = json.loads(line)
    except (ValueError, RecursionError):
        return None
    result = data.get("result") if isinstance(data, dict) else None
    tools = result.get("tools") if isinstance(result, dict) else None
    if not isinstance(tools, list):
        return None
    result["tools"] = [tool for tool in tools if _readable(tool, server)]
    try:
        return jsonrpc_message_adapter.validate_json(json.dumps(data), by_name=False)
    except ValueError:
        return None
