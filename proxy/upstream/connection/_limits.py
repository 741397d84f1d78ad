"""Caps on what one upstream may list, so one server's listing cannot stall the others'.

Applied to every transport's listing (`Connection.list_tools`); a stdio upstream's large answers are
also read within them before the SDK parses anything (`connection/_sliced_reader`). Each is far above real servers.
"""

from __future__ import annotations

import logging

from mcp import types

logger = logging.getLogger(__name__)

__all__ = ["MAX_DESCRIPTION_CHARS", "MAX_TOOLS", "cut_description", "hold_to_caps"]

MAX_TOOLS = 5_000  # tools kept from one server, all pages together (the largest real server lists 235)
MAX_DESCRIPTION_CHARS = 64 * 1024  # a longer tool description is cut (the longest real one: 6.5 KB)
CUT_MARK = " …[cut by toolbridge]"


def cut_description(text: str) -> str:
    """`text` itself if within the cap, else its start and a mark saying it was cut."""
    if len(text) <= MAX_DESCRIPTION_CHARS:
        return text
    return text[:MAX_DESCRIPTION_CHARS - len(CUT_MARK)] + CUT_MARK


def hold_to_caps(tools: list[types.Tool], server: str) -> list[types.Tool]:
    """`tools` within `MAX_TOOLS` (the first ones) and with descriptions cut to `MAX_DESCRIPTION_CHARS`,
    with one warning per cap exceeded."""
    if len(tools) > MAX_TOOLS:
        logger.warning("server %s: listed %d tools; only the first %d are kept (the cap of tools a server)",
                       server, len(tools), MAX_TOOLS)
        tools = tools[:MAX_TOOLS]
    cut = 0
    for tool in tools:
        if tool.description is not None and (short := cut_description(tool.description)) is not tool.description:
            tool.description, cut = short, cut + 1
    if cut:
        logger.warning("server %s: %d tool descriptions cut to the cap of %d characters",
                       server, cut, MAX_DESCRIPTION_CHARS)
    return tools
