"""What one session may see: its scope, core and deferred tools, and its `tools/list` surface.

Joins the registry, the configured toolsets and profiles, availability and the search indexes. A
view is computed once per (generation, unavailable servers, profile, context size) and cached,
so repeated `tools/list` calls and bridge calls cost a dictionary lookup. The optional semantic
index is only told what changed here; its embeddings are computed by the app's background task.

The lexical index is not built while tools register: a listing does not need it, and indexing
costs ~0.2 ms per tool, which would delay the first `tools/list` of a large fleet listed from its
cached catalogs. `index_when_idle` indexes changed servers in the background, yielding to the loop
every few milliseconds (`catch_up`), and `index` first indexes whatever is still waiting and not
being indexed already, so a search sees every tool (a server being indexed, as it was before its
change). The search package (and numpy under it) is imported then too, not at start-up.
"""

from __future__ import annotations

import difflib
import functools
import hashlib
import json
import logging
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from pathlib import Path
from typing import TYPE_CHECKING

import anyio
from mcp import types

from proxy.catalogs import Catalogs, CatalogView
from proxy.config import ProfileConfig, ToolsetsConfig
from proxy.listing import estimate_tokens, listing_budget
from proxy.names import SEPARATOR, server_toolset
from proxy.registry import Registry, Steps, ToolEntry, run_sliced, run_steps
from proxy.surface import ClientHints, Surface, build_surface
from proxy.toolsets import Toolsets, session_scope, session_servers, split_core

if TYPE_CHECKING:
    from proxy.search import SearchDoc, SearchIndex, SemanticIndex

logger = logging.getLogger(__name__)

_MAX_PROMOTED_SURFACES = 1024
RECENT_RANKINGS = 256  # rankings a view keeps by (query, limit)


class RecentRankings:
    """A view's last rankings by (query, limit), so an agent repeating a search pays no ranking. They are
    valid for one state of the indexes (`Views.search_state`) and all go when it changes."""

    def __init__(self) -> None:
        self._state: tuple[int, int] | None = None
        self._items: dict[tuple[str, int], list[str]] = {}

    def get(self, state: tuple[int, int], query: str, limit: int) -> list[str] | None:
        if state != self._state:
            self._state = state
            self._items.clear()
            return None
        ranking = self._items.pop((query, limit), None)
        if ranking is not None:
            self._items[(query, limit)] = ranking  # now the most recently used
        return ranking

    def put(self, query: str, limit: int, ranking: list[str]) -> None:
        """Keep a ranking for the state the last `get` was asked about."""
        self._items[(query, limit)] = ranking
        while len(self._items) > RECENT_RANKINGS:
            del self._items[next(iter(self._items))]


SUGGEST_MAX_CHARS = 128  # a longer unknown name gets no did-you-mean: no tool name is that long
SUGGEST_POOL = 4096  # names one suggestion compares at most


def _split(name: str) -> tuple[str, str]:
    """(server, tool part) of a qualified name, split where the server part ends; ("", name) for a bare one."""
    server, separator, tool = name.partition(SEPARATOR)
    return (server, tool) if separator else ("", name)


class Spellings:
    """A view's names grouped for did-you-mean, so a suggestion compares a bounded pool: the tools of the
    named server (or of the servers spelled closest to it), or the tool names with the same first letter.
    At 50,000 tools, difflib over every name took 0.3-0.8 s per unknown name."""

    def __init__(self, scope: Iterable[str]) -> None:
        self._by_tail: dict[str, list[str]] = defaultdict(list)  # tool part (after the server's) -> names
        self._by_server: dict[str, dict[str, str]] = defaultdict(dict)  # server -> tool part -> name
        self._tails: dict[str, list[str]] = defaultdict(list)  # first letter -> tool parts
        for name in sorted(scope):
            server, tail = _split(name)
            if tail not in self._by_tail:
                self._tails[tail[:1]].append(tail)
            self._by_tail[tail].append(name)
            if server:
                self._by_server[server][tail] = name

    def suggest(self, name: str, limit: int) -> list[str]:
        """`*__<name>` first; else close spellings of the tool part within the named (or closest) servers,
        or of a bare name among the tool names."""
        if len(name) > SUGGEST_MAX_CHARS:
            return []
        if name in self._by_tail:
            return [n for n in self._by_tail[name] if n != name][:limit]
        server, tool = _split(name)
        if server:
            servers = [server] if server in self._by_server else difflib.get_close_matches(
                server, list(self._by_server), n=3, cutoff=0.6)
            pool = {tail: qualified for s in servers for tail, qualified in self._by_server[s].items()}
            close = difflib.get_close_matches(tool, list(pool)[:SUGGEST_POOL], n=limit, cutoff=0.75)
            return sorted(pool[tail] for tail in close)[:limit]
        close = difflib.get_close_matches(name, self._tails.get(name[:1], [])[:SUGGEST_POOL], n=limit, cutoff=0.75)
        return sorted(self._by_tail[tail][-1] for tail in close)[:limit]


@dataclass(frozen=True)
class SessionView:
    """One session's world. `allowed` includes tools of servers that are down right now."""

    profile: str
    context_tokens: int | None
    allowed: frozenset[str]
    core: frozenset[str]
    deferred: frozenset[str]
    surface: Surface
    fingerprint: str
    catalog: CatalogView  # resources, templates and prompts of the servers in scope (and up)
    servers: tuple[str, ...]  # every server in scope and up, whether it has a catalog or only tools
    deferred_by_server: tuple[tuple[str, int], ...]  # (server, deferred tools), in server order
    promote: int = 0  # how many used deferred tools a session of this profile may have listed directly
    reserved_tokens: int = 0  # of the listing budget, what the tools with a UI listed directly take
    app_calls: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # see `_app_calls`
    rankings: RecentRankings = field(default_factory=RecentRankings, compare=False, repr=False)

    @property
    def scope(self) -> frozenset[str]:
        return self.core | self.deferred

    @functools.cached_property
    def spellings(self) -> Spellings:
        """Built on the view's first unknown name."""
        return Spellings(self.scope)


def _semantic_index(setting: str, cache_dir: Path | None) -> SemanticIndex | None:
    """The semantic index unless turned off or not installed (`on` but missing is a warning). Tools are
    embedded in the background (`proxy.app.keep_embeddings`), so search is lexical until they are in."""
    if setting == "off":
        return None
    from proxy.search import SemanticIndex, semantic

    if not semantic.available():
        if setting == "on":
            logger.warning("tool_search.semantic is on but its extra is not installed; searching lexically. "
                           "Install it with: %s", semantic.INSTALL_HINT)
        else:
            logger.info("tool_search ranks lexically: no semantic extra (%s)", semantic.INSTALL_HINT)
        return None
    logger.info("tool_search ranks lexically until the tools are embedded in the background (semantic: off "
                "never embeds)")
    return SemanticIndex(cache_dir)


def _docs(entries: list[ToolEntry]) -> Steps[list[SearchDoc]]:
    """The entries' search documents, a step per tool."""
    from proxy.search import doc_from_tool

    docs = []
    for e in entries:
        docs.append(doc_from_tool(e.name, e.server, e.raw_name, e.description, e.input_schema))
        yield
    return docs


def _built(docs: list[SearchDoc]) -> Steps[list[SearchDoc]]:
    return docs
    yield  # a generator, of no steps


def _app_calls(registry: Registry, scope: frozenset[str], apps: frozenset[str]) -> dict[str, tuple[str, ...]]:
    """The tools an app may call back, by the names it may know them by: the qualified name, and the
    upstream's raw name (the one an app's code holds). Only tools of servers serving apps, in the
    session's scope, that do not exclude apps; a raw name two such servers share maps to both."""
    calls: dict[str, list[str]] = {}
    for server in sorted(apps):
        for name, entry in sorted(registry.server_tools(server).items()):
            if name not in scope or entry.app == "model":
                continue
            calls.setdefault(name, []).append(name)
            if entry.raw_name != name:
                calls.setdefault(entry.raw_name, []).append(name)
    return {known: tuple(dict.fromkeys(names)) for known, names in calls.items()}


def _fingerprint(tools: tuple[types.Tool, ...]) -> str:
    wire = [tool.model_dump(by_alias=True, exclude_none=True, mode="json") for tool in tools]
    return hashlib.sha256(json.dumps(wire, sort_keys=True).encode()).hexdigest()


class Views:
    """Each profile's `SessionView` over the live registry, recomputed only when something changed."""

    def __init__(
        self,
        registry: Registry,
        toolsets: ToolsetsConfig,
        is_available: Callable[[str], bool],
        *,
        default_context_tokens: int | None = None,
        cache_dir: Path | None = None,
        catalogs: Catalogs | None = None,
        settled: anyio.Event | None = None,
    ) -> None:
        self.registry = registry
        # Every upstream registered or failed once. Until then a session whose scope knows no deferred tool still
        # gets the bridge tools: its servers' tools are on their way, and a client that finds no tool at all may
        # drop the server (Gemini CLI marks it disconnected).
        self.settled = settled
        self.catalogs = catalogs or Catalogs(registry)
        self.toolsets = toolsets
        self.is_available = is_available
        self.default_context_tokens = default_context_tokens
        self.semantic = _semantic_index(toolsets.tool_search.semantic, cache_dir)
        self._index: SearchIndex | None = None
        # Servers whose tools changed since they were indexed, with how to get their documents.
        self._unindexed: dict[str, Callable[[], Steps[list[SearchDoc]]]] = {}
        self._indexing = anyio.Lock()  # one `catch_up` at a time
        self._views: dict[tuple[object, ...], SessionView] = {}
        self._promoted_surfaces: dict[tuple[str, tuple[str, ...]], tuple[Surface, str]] = {}
        for server in registry.servers:
            self._server_changed(server, list(registry.server_tools(server).values()))
        registry.add_listener(self._server_changed)

    def _server_changed(self, server: str, entries: list[ToolEntry]) -> None:
        if self.semantic is None:
            self._unindexed[server] = lambda: _docs(entries)  # built when indexed, off the registration path
            return
        docs = run_steps(_docs(entries))  # built once, for both legs
        self.semantic.set_server(server, docs)
        self._unindexed[server] = lambda: _built(docs)

    @property
    def index(self) -> SearchIndex:
        """The lexical index over every registered tool (indexing first what is still waiting, unless `catch_up`
        is at it: then a server it has not finished is searched as it was before its change)."""
        while self._unindexed and not self._indexing.locked():
            self._index_next()
        return self._lexical()

    def search_state(self) -> tuple[int, int]:
        """The versions of the indexes a ranking comes from, once every tool is indexed."""
        return self.index.version, self.semantic.version if self.semantic is not None else 0

    def _lexical(self) -> SearchIndex:
        if self._index is None:
            from proxy.search import SearchIndex

            self._index = SearchIndex()
        return self._index

    def _index_next(self) -> None:
        run_steps(self._index_steps())

    def _index_steps(self) -> Steps[None]:
        server = next(iter(self._unindexed))
        docs = yield from self._unindexed.pop(server)()
        yield from self._lexical().set_server_steps(server, docs)

    async def catch_up(self) -> None:
        """Index what is waiting, yielding to the loop as it goes (a server of thousands of tools takes seconds), so
        that `index` then has nothing left to do at once."""
        async with self._indexing:
            while self._unindexed:
                await run_sliced(self._index_steps())

    async def index_when_idle(self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Index changed servers as soon as they change, a slice at a time (`catch_up`), for as long as it runs."""
        task_status.started()
        while True:
            since = self.registry.generation
            await self.catch_up()
            await self.registry.wait_for_change(since)

    def update_toolsets(self, toolsets: ToolsetsConfig) -> None:
        """Adopt an edited `toolsets.yaml` (hot reload): every view is rebuilt, no upstream is touched."""
        if toolsets == self.toolsets:
            return
        self.toolsets = toolsets
        self._views.clear()
        self.registry.bump()

    # --- profiles ----------------------------------------------------------------------------

    def has_profile(self, name: str) -> bool:
        return name in self.toolsets.profiles

    def profile_for_client(self, client_name: str | None) -> str:
        """The first profile (by name) whose `match` glob matches the client's name, else `default`."""
        if client_name:
            for name, profile in sorted(self.toolsets.profiles.items()):
                if profile.match and fnmatchcase(client_name.lower(), profile.match.lower()):
                    return name
        return "default"

    def _profile(self, name: str) -> ProfileConfig:
        return self.toolsets.profiles.get(name) or self.toolsets.profiles["default"]

    # --- views -------------------------------------------------------------------------------

    def unavailable_servers(self) -> frozenset[str]:
        known = {*self.registry.servers, *self.catalogs.servers}
        return frozenset(s for s in known if not self.is_available(s))

    def for_profile(self, profile: str) -> SessionView:
        """The session view for a profile, computed once per catalog state."""
        unavailable = self.unavailable_servers()
        key = (self.registry.generation, unavailable, self.starting, profile)
        view = self._views.get(key)
        if view is None:
            if any(k[:3] != key[:3] for k in self._views):
                self._views.clear()
            view = self._views[key] = self._build_view(profile, unavailable)
        return view

    @property
    def starting(self) -> bool:
        return self.settled is not None and not self.settled.is_set()

    def _build_view(self, profile_name: str, unavailable: frozenset[str]) -> SessionView:
        profile = self._profile(profile_name)
        dynamic = {server_toolset(s): frozenset[str]() for s in self.catalogs.servers}
        toolsets = Toolsets(self.toolsets.toolsets, {**dynamic, **self.registry.toolsets()})
        allowed = session_scope(profile, toolsets)
        tools = self.registry.tools
        servers = session_servers(profile, toolsets, (tools[n].server for n in allowed)) - unavailable
        # The same set once where nothing is down or core: a view holds each name set of 50,000 once.
        scope = frozenset(n for n in allowed if tools[n].server not in unavailable) if unavailable else allowed
        core, deferred = split_core(scope, self.toolsets.core)
        known_deferred = deferred if scope is allowed else split_core(allowed, self.toolsets.core)[1]
        context = profile.context_tokens or self.default_context_tokens
        hints, reserved = self._hints(profile), 0
        apps = self.registry.app_servers & servers
        if apps and self._bridged(hints, known_deferred):
            deferred, shown, reserved = self._apps_apart(
                deferred, apps, listing_budget(context, self.toolsets.tool_search) // 2)
            core = core | shown
        by_server: dict[str, list[ToolEntry]] = {}
        for name in deferred:
            by_server.setdefault(tools[name].server, []).append(tools[name])
        surface = build_surface(
            [tools[n].tool for n in core], by_server, self.toolsets.tool_search, context, hints,
            reserved_tokens=reserved, deferrable=bool(known_deferred) or self.starting,
        )
        return SessionView(
            profile_name, context, allowed, core, deferred, surface, _fingerprint(surface.tools),
            self.catalogs.view(servers), tuple(sorted(servers)),
            tuple(sorted((server, len(entries)) for server, entries in by_server.items())),
            profile.promote if surface.tier == "bridge" else 0, reserved, _app_calls(self.registry, scope, apps),
        )

    def _bridged(self, hints: ClientHints, known_deferred: frozenset[str]) -> bool:
        """Whether the session gets the bridge tier (`build_surface` decides the same way)."""
        return hints.exposure != "direct" and bool(known_deferred) and self.toolsets.tool_search.enabled != "off"

    def _apps_apart(
        self, deferred: frozenset[str], apps: frozenset[str], allowance: int
    ) -> tuple[frozenset[str], frozenset[str], int]:
        """(deferred, listed directly, their tokens): app-only tools leave the listing and search, and tools
        with a UI are listed directly with their `_meta` (by name, while half the listing budget lasts)."""
        tools = self.registry.tools
        app_tools = sorted(name for server in apps for name, entry in self.registry.server_tools(server).items()
                           if name in deferred and entry.app in ("ui", "app"))
        shown: list[str] = []
        spent = 0
        for name in app_tools:
            cost = estimate_tokens(self._wire(name)) if tools[name].app == "ui" else None
            if cost is not None and spent + cost <= allowance:
                shown.append(name)
                spent += cost
        hidden = {n for n in app_tools if tools[n].app == "app"}
        return deferred.difference(shown, hidden), frozenset(shown), spent

    def _hints(self, profile: ProfileConfig) -> ClientHints:
        return ClientHints(profile.exposure, profile.always_load, self.toolsets.large_results.max_chars)

    # --- promotion: a session's used tools listed directly --------------------------------------

    def promotable(self, view: SessionView, used: list[str]) -> tuple[str, ...]:
        """Of a session's used deferred tools (least recently used first), those it gets listed directly.

        At most `view.promote`, most recent first, and together at most half the listing budget: the
        listing gives up what they take, so the session's surface stays within its budget.
        """
        allowance = view.surface.budget // 2
        kept: list[str] = []
        for name in reversed(used):
            if len(kept) == view.promote or name not in view.deferred:
                continue
            cost = estimate_tokens(self._wire(name))
            if cost <= allowance:
                kept.append(name)
                allowance -= cost
        return tuple(sorted(kept))

    def session_surface(self, view: SessionView, promoted: tuple[str, ...]) -> tuple[Surface, str]:
        """A session's surface and its fingerprint: the profile's, plus the tools promoted for it."""
        if not promoted:
            return view.surface, view.fingerprint
        key = (view.fingerprint, promoted)
        cached = self._promoted_surfaces.get(key)
        if cached is None:
            tools = self.registry.tools
            core = [tools[n].tool for n in (*view.core, *promoted)]
            by_server: dict[str, list[ToolEntry]] = {}
            for name in view.deferred.difference(promoted):
                by_server.setdefault(tools[name].server, []).append(tools[name])
            reserved = view.reserved_tokens + sum(estimate_tokens(self._wire(n)) for n in promoted)
            surface = build_surface(core, by_server, self.toolsets.tool_search, view.context_tokens,
                                    self._hints(self._profile(view.profile)), reserved_tokens=reserved,
                                    deferrable=True)
            if len(self._promoted_surfaces) >= _MAX_PROMOTED_SURFACES:
                self._promoted_surfaces.clear()
            cached = self._promoted_surfaces[key] = (surface, _fingerprint(surface.tools))
        return cached

    def _wire(self, name: str) -> str:
        tool = self.registry.tools[name].tool
        return json.dumps(tool.model_dump(by_alias=True, exclude_none=True, mode="json"))
