"""The capabilities a caller declared, carried to the 2026-era upstream request made for it.

One upstream connection carries every caller, and the SDK stamps each 2026-era request with the
connection's capabilities: toolbridge's, which take sampling, elicitation and roots for anyone. But
what toolbridge relays is the caller's to declare, so the upstream must judge a request by the
caller's own declaration (and refuse it with -32021 where the caller lacks what it needs, as it
would directly). So a request names the caller's declaration under a private `_meta` key
(`caller_meta`), and just before it leaves, `carried` puts that in place of toolbridge's relayed
capabilities and drops the private key (on every request, of either era).
"""

from __future__ import annotations

from typing import Any

from mcp import types

__all__ = ["caller_meta", "carried"]

CALLER_CAPABILITIES = "toolbridge/callerCapabilities"
RELAYED = ("sampling", "elicitation", "roots")  # what toolbridge relays: the caller's alone to declare


def caller_meta(capabilities: types.ClientCapabilities | None) -> dict[str, Any] | None:
    """The `_meta` of a request made for a caller that declared `capabilities` (None: no caller)."""
    if capabilities is None:
        return None
    declared = capabilities.model_dump(by_alias=True, mode="json", exclude_none=True)
    return {CALLER_CAPABILITIES: {key: value for key, value in declared.items() if key in RELAYED}}


def carried(params: dict[str, Any] | None) -> dict[str, Any] | None:
    """A request's params as they leave: the stamped capabilities with the caller's relayed ones in place
    of toolbridge's, no private key; `params` itself when it names no caller."""
    meta = (params or {}).get("_meta")
    if params is None or not isinstance(meta, dict) or CALLER_CAPABILITIES not in meta:
        return params
    meta = dict(meta)
    caller = meta.pop(CALLER_CAPABILITIES)
    stamped = meta.get(types.CLIENT_CAPABILITIES_META_KEY)
    if isinstance(stamped, dict) and isinstance(caller, dict):
        own = {key: value for key, value in stamped.items() if key not in RELAYED}
        meta[types.CLIENT_CAPABILITIES_META_KEY] = {**own, **caller}
    return {**params, "_meta": meta}
