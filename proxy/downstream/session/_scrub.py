"""What an upstream says that toolbridge passes on as an error or a log message: redacted, and unable
to act on whatever shows it.

Both are treated as toolbridge treats an upstream's error message it quotes: redacted (a configured
key the upstream echoes back is removed) and escaped (`proxy.text.escape`): each text stays one
line, with control characters and line breaks spelled out, so nothing an upstream says can act on
the terminal that shows it or pass for a line of toolbridge's own (a model reads `\n` as well as a
line break). Successful results pass unchanged: they are the data the call was made for.
"""

from __future__ import annotations

from mcp import types

from proxy.errors import redact
from proxy.text import escape, map_strings

__all__ = ["scrub_error_result", "scrub_log"]


def scrub_error_result(result: types.CallToolResult) -> types.CallToolResult:
    """An upstream's `isError` result with its text redacted and escaped; anything else as it is."""
    if not result.is_error:
        return result
    content = [block.model_copy(update={"text": _inert(block.text)})
               if isinstance(block, types.TextContent) else block for block in result.content]
    return result.model_copy(update={"content": content})


def scrub_log(params: types.LoggingMessageNotificationParams) -> types.LoggingMessageNotificationParams:
    """An upstream's log message with every string in it (and its logger's name) redacted and escaped."""
    logger = _inert(params.logger) if params.logger else params.logger
    return params.model_copy(update={"logger": logger, "data": map_strings(params.data, _inert)})


def _inert(text: str) -> str:
    return escape(redact(text))
