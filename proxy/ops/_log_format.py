"""How toolbridge's own log records are written: redacted, and with upstream text unable to forge
a record or act on the terminal.

Upstream text reaches the logs as arguments of records (`"server %s: %s", name, reason`), so the
one place to make it safe is where a record becomes text. The message of a record is one line:
control characters and line breaks in it are spelled out (`proxy.text.escape`). A traceback keeps
its line breaks, but each of its lines is indented: only the first line of a record starts at the
margin, so no line a record writes can pass for a record of its own ("2026-12-01 22:00:00,000
ERROR proxy: …").
"""

from __future__ import annotations

import copy
import logging
from types import TracebackType

from proxy.errors import redact
from proxy.text import escape

__all__ = ["SafeFormatter"]

ExcInfo = tuple[type[BaseException], BaseException, TracebackType | None] | tuple[None, None, None]
CONTINUATION = "  "


def _indented(block: str) -> str:
    return "\n".join(CONTINUATION + escape(line) for line in block.split("\n"))


class SafeFormatter(logging.Formatter):
    """A `logging.Formatter` whose every record is redacted and safe to print (see the module)."""

    def format(self, record: logging.LogRecord) -> str:
        return redact(super().format(record))

    def formatMessage(self, record: logging.LogRecord) -> str:
        line = copy.copy(record)  # other handlers of the record see it unchanged
        line.message = escape(record.message)
        return super().formatMessage(line)

    def formatException(self, ei: ExcInfo) -> str:
        return _indented(super().formatException(ei))

    def formatStack(self, stack_info: str) -> str:
        return _indented(super().formatStack(stack_info))
