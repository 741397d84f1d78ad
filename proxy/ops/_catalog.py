"""What one profile's client gets, with its token cost: `toolbridge catalog` prints it, the console's
profiles page shows it, both from this one report so their numbers agree."""

from __future__ import annotations

import json
from typing import Any

from proxy.listing import estimate_tokens
from proxy.views import Views

__all__ = ["catalog_report"]


def catalog_report(views: Views, profile: str) -> dict[str, Any]:
    view = views.for_profile(profile)
    tools = [t.model_dump(by_alias=True, exclude_none=True, mode="json") for t in view.surface.tools]
    raw = [views.registry.tools[n].tool.model_dump(by_alias=True, exclude_none=True, mode="json")
           for n in sorted(view.scope)]
    sent, full = estimate_tokens(json.dumps(tools)), estimate_tokens(json.dumps(raw))
    return {
        "profile": profile,
        "context_tokens": view.context_tokens,
        "tier": view.surface.tier,
        "form": view.surface.form,
        "budget": view.surface.budget,
        "listing_tokens": view.surface.listing_tokens,
        "deferred_tools": view.surface.deferred_count,
        "core_tools": len(view.core),
        "tokens": sent,
        "raw_schema_tokens": full,
        "reduction_pct": round(100 * (1 - sent / full), 1) if full else 0.0,
        "tools": tools,
    }
