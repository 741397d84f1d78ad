"""Results as they pass from one wing to the other."""

from __future__ import annotations

from typing import TypeVar

from mcp import types

__all__ = ["strip_server_info"]

R = TypeVar("R")


def strip_server_info(result: R) -> R:
    """Drop the upstream's identity stamp from a result so the proxy's own one shows downstream.

    In place: the result is the one the SDK client just parsed for us (no copy on every call).
    """
    if not isinstance(result, types.Result):
        return result
    if not result.meta or types.SERVER_INFO_META_KEY not in result.meta:
        return result
    del result.meta[types.SERVER_INFO_META_KEY]
    if not result.meta:
        result.meta = None
    return result
