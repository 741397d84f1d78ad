"""The three bridge tools: `tool_search`, `tool_describe`, `tool_call` (SPEC §6.5).

Everything here sees one session's view only, so a session can never search, describe or call
outside its scope. The answers are JSON text, built to be read by a model.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import anyio

from proxy.downstream.calls._arguments import check_call
from proxy.errors import BridgeError, UnknownTool
from proxy.registry import ToolEntry
from proxy.surface import MAX_DESCRIBE, MAX_QUERIES
from proxy.views import SessionView, Views

DESCRIPTION_LIMIT = 500
SUGGESTED_NAMES = 3  # unknown names in one `tool_describe` that get did-you-mean suggestions
SUGGESTIONS = 5  # did-you-mean candidates per unknown name
# Room for a pasted fragment (LiveMCPBench's longest question, with a base64 image, has 18,686 characters);
# longer is a clear error, as more than MAX_QUERIES queries is.
MAX_QUERY_CHARS = 20_000
FUSION_DEPTH = 50  # candidates each ranking brings to the fusion
SEMANTIC_ONLY_FLOOR = 0.3  # cosine below which a query with no known word matches nothing
_NO_MATCH_HINT = (
    "No tool matched. Retry with the service name plus an action and an object "
    "(for example 'github create issue'), or pick a source below."
)
_NOT_FOUND_HINT = "Unknown or unavailable names. Use tool_search to find exact names."


def _as_list(value: Any, field: str, maximum: int) -> list[str]:
    """Accept a list of strings or one bare string; refuse anything else clearly."""
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not value or not all(isinstance(v, str) and v.strip() for v in value):
        raise BridgeError(f"'{field}' must be a non-empty list of strings")
    if len(value) > maximum:
        raise BridgeError(f"'{field}' takes at most {maximum} entries, got {len(value)}; split the request")
    return [v.strip() for v in value]


def _queries(arguments: Mapping[str, Any]) -> list[str]:
    queries = _as_list(arguments.get("queries"), "queries", MAX_QUERIES)
    for query in queries:
        if len(query) > MAX_QUERY_CHARS:
            raise BridgeError(f"a query takes at most {MAX_QUERY_CHARS} characters, got {len(query)}; "
                              "search for the capability in a few words")
    return queries


def _search_limit(views: Views, arguments: Mapping[str, Any]) -> int:
    settings, value = views.toolsets.tool_search, arguments.get("limit")
    if value is None:
        return settings.search_default_limit
    try:
        number = int(value)
    except (TypeError, ValueError):
        raise BridgeError("'limit' must be an integer") from None
    return min(max(number, 1), settings.max_search_limit)


def _truncate(text: str, limit: int = DESCRIPTION_LIMIT) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def _required(entry: ToolEntry) -> list[str]:
    required = entry.input_schema.get("required")
    return [r for r in required if isinstance(r, str)] if isinstance(required, list) else []


def rank(views: Views, view: SessionView, query: str, limit: int) -> list[str]:
    """The view's ranking for the query: kept from an earlier search while the indexes are unchanged."""
    state = views.search_state()
    ranking = view.rankings.get(state, query, limit)
    if ranking is None:
        ranking = _rank(views, view, query, limit)
        view.rankings.put(query, limit, ranking)
    return ranking


def _rank(views: Views, view: SessionView, query: str, limit: int) -> list[str]:
    """Lexical ranking, fused with the semantic one once every deferred tool has its embedding.

    All or nothing: a tool without a vector would lose to embedded ones on rank fusion alone, so
    until a server's vectors are in, the whole session's search stays lexical. Exact names lead.
    """
    semantic = views.semantic
    if semantic is None or not semantic.ready(view.deferred):
        return views.index.search(query, limit=limit, scope=view.deferred)
    exact = views.index.exact(query, view.deferred)
    lexical = views.index.scored(query, limit=FUSION_DEPTH, scope=view.deferred, exact=exact)
    if not lexical and not exact:  # no known word: only clear semantic matches, so nonsense still gets the hint
        return [name for name, _ in semantic.rank(query, limit, view.deferred, min_similarity=SEMANTIC_ONLY_FLOOR)]
    similarity = dict(semantic.rank(query, FUSION_DEPTH, view.deferred, also=[name for name, _ in lexical]))
    from proxy.search import fuse  # with the index: numpy is not imported at start-up

    return (exact + [name for name in fuse(lexical, similarity, limit + len(exact)) if name not in exact])[:limit]


def explain(views: Views, view: SessionView, query: str, limit: int) -> dict[str, Any]:
    """The ranking `tool_search` gives `query` in this view (`rank`), each tool with why: its BM25F score
    when the search is lexical; its lexical and semantic shares of the fused score when both legs run.
    An exact name leads with no score. Semantic query vectors come from `prepare_search`, called first."""
    names = rank(views, view, query, limit)
    semantic = views.semantic
    exact = set(views.index.exact(query, view.deferred))
    if semantic is None or not semantic.ready(view.deferred):
        scores = dict(views.index.search_scored(query, limit=limit, scope=view.deferred))
        why = {name: (scores.get(name), None) for name in names}
        mode = "lexical"
    else:
        from proxy.search import fused_shares  # with the index: numpy is not imported at start-up

        lexical = views.index.scored(query, limit=FUSION_DEPTH, scope=view.deferred, exact=sorted(exact))
        similarity = dict(semantic.rank(query, FUSION_DEPTH, view.deferred, also=names))
        shares = fused_shares(lexical, similarity)
        why = {name: shares.get(name, (None, None)) for name in names}
        mode = "fused"
    tools = views.registry.tools
    return {"query": query, "mode": mode, "total_available": len(view.deferred), "matches": [
        {"tool": name, "server": tools[name].server, "description": _truncate(tools[name].description),
         "exact": name in exact, "lexical": why[name][0], "semantic": why[name][1]}
        for name in names]}


async def prepare_search(views: Views, view: SessionView, arguments: Mapping[str, Any]) -> None:
    """Compute the queries' semantic vectors in a worker thread, so `search` never blocks the loop; none
    while the session's search is still lexical, nor for a query whose ranking the view keeps."""
    semantic = views.semantic
    if semantic is None:
        return
    state, limit = views.search_state(), _search_limit(views, arguments)
    fresh = [q for q in _queries(arguments) if view.rankings.get(state, q, limit) is None]
    if not fresh or not semantic.ready(view.deferred):
        return
    missing = semantic.missing_queries(fresh)
    if missing:
        semantic.remember_queries(missing, await anyio.to_thread.run_sync(semantic.encode_queries, missing))


def search(views: Views, view: SessionView, arguments: Mapping[str, Any]) -> dict[str, Any]:
    """Run each query over the session's deferred tools.

    Raises:
        BridgeError: malformed arguments or more than `MAX_QUERIES` queries.
    """
    queries, limit = _queries(arguments), _search_limit(views, arguments)
    tools = views.registry.tools
    results: list[dict[str, Any]] = []
    found: dict[str, dict[str, Any]] = {}
    for query in queries:
        matches = rank(views, view, query, limit)
        group: dict[str, Any] = {"query": query, "matches": matches}
        if not matches:
            group["available_sources"] = [{"server": s, "tools": n} for s, n in view.deferred_by_server]
            group["hint"] = _NO_MATCH_HINT
        results.append(group)
        for name in matches:
            entry = tools[name]
            found[name] = {
                "server": entry.server,
                "description": _truncate(entry.description),
                "required": _required(entry),
            }
    return {
        "queries": queries,
        "total_available": len(view.deferred),
        "results": results,
        "tools": found,
    }


def describe(views: Views, view: SessionView, arguments: Mapping[str, Any]) -> dict[str, Any]:
    """Full schemas for tools in scope; unknown or out-of-scope names go to `not_found`.

    Raises:
        BridgeError: malformed arguments or more than `MAX_DESCRIBE` names.
    """
    names = _as_list(arguments.get("names"), "names", MAX_DESCRIBE)
    described: dict[str, Any] = {}
    not_found: list[str] = []
    for name in names:
        entry = views.registry.get(name)
        if entry is None or name not in view.scope:
            not_found.append(name)
            continue
        described[name] = {"description": entry.description, "inputSchema": entry.input_schema}
        if entry.tool.output_schema is not None:
            described[name]["outputSchema"] = entry.tool.output_schema
        if entry.tool.annotations is not None:
            described[name]["annotations"] = entry.tool.annotations.model_dump(by_alias=True, exclude_none=True)
        if entry.tool.meta:
            described[name]["_meta"] = entry.tool.meta
    answer: dict[str, Any] = {"tools": described}
    if not_found:
        answer["not_found"] = not_found
        suggestions = sorted({s for name in not_found[:SUGGESTED_NAMES] for s in suggest(view, name)})
        answer["hint"] = _NOT_FOUND_HINT + (f" Did you mean: {', '.join(suggestions)}?" if suggestions else "")
    return answer


def pin_request(arguments: Mapping[str, Any]) -> bool | None:
    """`tool_describe`'s `pin`: True pins the described tools, False unpins them, absent leaves them.

    Raises:
        BridgeError: `pin` is neither a boolean nor absent.
    """
    pin = arguments.get("pin")
    if isinstance(pin, str) and pin.strip().lower() in ("true", "false"):
        return pin.strip().lower() == "true"
    if pin is None or isinstance(pin, bool):
        return pin
    raise BridgeError("'pin' must be true or false")


def suggest(view: SessionView, name: str) -> list[str]:
    """Did-you-mean candidates from the session's scope (`SessionView.spellings`)."""
    return view.spellings.suggest(name, SUGGESTIONS)


@dataclass(frozen=True)
class PreparedCall:
    entry: ToolEntry
    arguments: dict[str, Any]


async def prepare_call(views: Views, view: SessionView, arguments: Mapping[str, Any]) -> PreparedCall:
    """Check a `tool_call`: in scope, then the arguments. A core tool is called too: refusing it would only
    cost the model a turn.

    Raises:
        BridgeError: the bridge call itself is malformed, or the name is an app-only tool.
        UnknownTool: no such tool in this session's scope (with did-you-mean candidates from it); a tool outside
            the scope is answered exactly like one that does not exist.
        InvalidArguments: the arguments do not fit the tool's schema; nothing was invoked.
    """
    name = arguments.get("name")
    if not isinstance(name, str) or not name:
        raise BridgeError("'name' must be the exact tool name from tool_search")
    tool_arguments = arguments.get("arguments") or {}
    if isinstance(tool_arguments, str):
        try:
            tool_arguments = json.loads(tool_arguments)
        except ValueError:
            raise BridgeError("'arguments' must be a JSON object") from None
    if not isinstance(tool_arguments, dict):
        raise BridgeError("'arguments' must be a JSON object")
    entry = views.registry.get(name)
    if entry is None or name not in view.allowed:
        raise UnknownTool(name, suggest(view, name), searchable=view.surface.tier == "bridge")
    if entry.app == "app":  # its `_meta.ui.visibility` hides it from the model
        raise BridgeError(f"'{name}' is called by its MCP App only, not through tool_call")
    return PreparedCall(entry, await check_call(tool_arguments, entry))
