"""Each upstream's resources, resource templates and prompts, and one session's aggregate of them.

Resource URIs pass unchanged, but for MCP Apps' `ui://` ones, namespaced per server
(`ui://<server>/<rest>`, see `proxy.upstream.ui_namespaced`), and for a URI that more than one server
in a session's scope claims. Neither name nor timing picks one of those: every copy is listed as
`toolbridge://server/<server>/<uri>`, a link a server hands out is rewritten to that form
(`CatalogView.address`), and a read of the plain URI is refused with the qualified forms named
(`AmbiguousUri`), so a hostile upstream that starts faster, or is named to sort first, never takes
over another's `file://` URIs. A server's claims outlive its connection, so its URIs do not pass to
another while it reconnects. A URI nobody lists is routed by the templates that match it, with the
same rule. Shadowing is logged once as a warning and reported by `shadowed()` (in `/status`).
Prompt names are exposed like tool names (`<server>__<prompt>`, or raw under `prefix: false`).
Synchronous, on one event loop; every change bumps the registry's generation, so the session views
and list_changed announcements keyed on it follow.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import TypeVar

from mcp import types
from mcp.shared.uri_template import InvalidUriTemplate, UriTemplate
from pydantic import BaseModel

from proxy.names import NameSource, assign_names
from proxy.protocol import (
    UI_EXTENSION,
    CacheHint,
    ListKind,
    ServerTraits,
    merge_extensions,
    ui_namespaced,
    ui_original,
)
from proxy.registry import Registry
from proxy.text import clean

__all__ = ["QUALIFIED_PREFIX", "AmbiguousUri", "CatalogView", "Catalogs", "ServerCatalog", "Shadowed", "qualified_uri"]

logger = logging.getLogger(__name__)

QUALIFIED_PREFIX = "toolbridge://server/"
MAX_URI_CHARS = 8192  # a longer resource URI is served by nobody (the longest a common HTTP server takes)


def qualified_uri(server: str, uri: str) -> str:
    """The form that reaches `server`'s copy of `uri` (or of a template) whoever owns the plain one."""
    return f"{QUALIFIED_PREFIX}{server}/{uri}"


def _unqualify(uri: str) -> tuple[str, str] | None:
    if not uri.startswith(QUALIFIED_PREFIX):
        return None
    server, slash, rest = uri[len(QUALIFIED_PREFIX):].partition("/")
    return (server, rest) if slash and server else None


@dataclass(frozen=True)
class ServerCatalog:
    """What one upstream lists besides tools."""

    resources: tuple[types.Resource, ...] = ()
    templates: tuple[types.ResourceTemplate, ...] = ()
    prompts: tuple[types.Prompt, ...] = ()

    @property
    def empty(self) -> bool:
        return not (self.resources or self.templates or self.prompts)


@dataclass(frozen=True)
class Shadowed:
    """A URI or template listed by more than one server: each copy is reachable only in its qualified form."""

    uri: str
    kind: str  # "resource" or "template"
    servers: tuple[str, ...]


class AmbiguousUri(LookupError):
    """More than one server in the session's scope claims a plain URI: it names their qualified forms."""

    def __init__(self, uri: str, servers: Iterable[str]) -> None:
        self.uri = uri
        self.alternatives = [qualified_uri(server, uri) for server in sorted(servers)]
        super().__init__(f"resource {uri[:200]!r} is served by more than one server in this session; "
                         f"ask for one of {', '.join(a[:300] for a in self.alternatives)}")


Claim = tuple[str, str]  # ("resource" or "template", the URI or template as listed)
Block = TypeVar("Block", bound=types.ContentBlock)


@dataclass(frozen=True)
class _Template:
    server: str
    template: types.ResourceTemplate
    parsed: UriTemplate | None


def _fingerprint(items: Iterable[BaseModel]) -> str:
    wire = [item.model_dump(by_alias=True, exclude_none=True, mode="json") for item in items]
    return hashlib.sha256(json.dumps(wire, sort_keys=True).encode()).hexdigest()


@dataclass(frozen=True)
class CatalogView:
    """The resources, templates and prompts of the servers in one session's scope, with routes."""

    servers: tuple[str, ...]
    resources: tuple[types.Resource, ...]
    templates: tuple[types.ResourceTemplate, ...]
    prompts: tuple[types.Prompt, ...]
    prompt_routes: Mapping[str, tuple[str, str]]
    uri_claims: Mapping[str, tuple[str, ...]]  # plain URI → the servers in scope that claim it
    template_routes: tuple[_Template, ...] = field(repr=False)
    reachable: frozenset[str] = frozenset()  # every server in scope, with a catalog or not: who owns a `ui://` URI
    extensions: Mapping[str, Mapping[str, object]] = field(default_factory=dict)  # carried, of the servers in scope
    hints: Mapping[ListKind, CacheHint] = field(default_factory=dict)  # each list's, merged over the servers in scope

    def hint(self, kind: ListKind) -> CacheHint:
        """The merged list's hint; a list no server contributes to is toolbridge's own: not cached."""
        return self.hints.get(kind, CacheHint())

    @cached_property
    def resources_fingerprint(self) -> str:
        return _fingerprint((*self.resources, *self.templates))

    @cached_property
    def prompts_fingerprint(self) -> str:
        return _fingerprint(self.prompts)

    def route_uri(self, uri: str) -> tuple[str, str] | None:
        """(server, upstream URI) for a qualified form, a URI one server in scope claims, or one that only one
        server's templates match; else None. A URI over `MAX_URI_CHARS` is nobody's: each template would scan it.

        Raises:
            AmbiguousUri: more than one server in scope claims the plain URI (or, unlisted, matches it).
        """
        if len(uri) > MAX_URI_CHARS:
            return None
        app = ui_original(uri, self.reachable)
        if app is not None:
            return app
        qualified = _unqualify(uri)
        if qualified is not None:
            return qualified if qualified[0] in self.reachable else None
        servers = self.uri_claims.get(uri) or tuple(dict.fromkeys(
            entry.server for entry in self.template_routes if entry.parsed is not None and entry.parsed.match(uri)))
        if len(servers) > 1:
            raise AmbiguousUri(uri, servers)
        return (servers[0], uri) if servers else None

    def route_template(self, uri_template: str) -> tuple[str, str] | None:
        """(server, upstream template) for a completion `ref/resource`: exact template, else as a URI.

        Raises:
            AmbiguousUri: more than one server in scope lists the template, or claims it as a URI.
        """
        qualified = _unqualify(uri_template)
        if qualified is not None:
            return qualified if qualified[0] in self.reachable else None
        servers = tuple(dict.fromkeys(
            entry.server for entry in self.template_routes if entry.template.uri_template == uri_template))
        if len(servers) > 1:
            raise AmbiguousUri(uri_template, servers)
        return (servers[0], uri_template) if servers else self.route_uri(uri_template)

    def address(self, server: str, uri: str) -> str:
        """How `server` handing out `uri` is told to this session: plain when a read of it reaches `server`,
        else the qualified form, so the link reads back from the server that gave it, whoever else claims it."""
        if uri.startswith("ui://"):  # namespaced per server already (`ui://<server>/…`)
            return uri
        try:
            routed = self.route_uri(uri)
        except AmbiguousUri:
            routed = None
        return uri if routed == (server, uri) else qualified_uri(server, uri)

    def addressed(self, server: str, block: Block) -> Block:
        """A resource link or embedded resource `server` sent, under the URI that reads it back (`address`)."""
        if isinstance(block, types.ResourceLink) and (uri := self.address(server, block.uri)) != block.uri:
            return block.model_copy(update={"uri": uri})
        if isinstance(block, types.EmbeddedResource) and (
                uri := self.address(server, block.resource.uri)) != block.resource.uri:
            return block.model_copy(update={"resource": block.resource.model_copy(update={"uri": uri})})
        return block


class Catalogs:
    """Every upstream's `ServerCatalog`, and each session's `CatalogView` computed once per state."""

    def __init__(self, registry: Registry) -> None:
        self.registry = registry
        self._catalogs: dict[str, ServerCatalog] = {}
        self._prefix: dict[str, bool] = {}
        self._prompt_names: dict[str, dict[str, str]] = {}
        self._views: dict[tuple[int, frozenset[str]], CatalogView] = {}
        self._traits: dict[str, ServerTraits] = {}
        self._logged: set[str] = set()
        # What each server lists. A withdrawn server keeps its claims, so nobody else takes its URIs while it
        # reconnects; a new listing replaces them.
        self._claims: dict[str, frozenset[Claim]] = {}

    @property
    def servers(self) -> list[str]:
        return sorted(self._catalogs)

    def set_server_catalog(
        self, server: str, resources: Iterable[types.Resource], templates: Iterable[types.ResourceTemplate],
        prompts: Iterable[types.Prompt], *, prefix: bool = True,
    ) -> None:
        """Make these the server's whole catalog; bumps the generation only when something changed."""
        catalog = ServerCatalog(tuple(resources), tuple(templates), tuple(prompts))
        if self._catalogs.get(server) == catalog and self._prefix.get(server, True) == prefix:
            return
        self._claim(server, catalog)
        self._publish(server, catalog, prefix)

    def remove_server(self, server: str) -> None:
        """The server is gone for now: its catalog and traits leave, its claims stay for when it returns."""
        self._traits.pop(server, None)
        if server in self._catalogs:
            self._publish(server, ServerCatalog(), True)

    def _claim(self, server: str, catalog: ServerCatalog) -> None:
        claims = frozenset([*(("resource", uri) for uri in _listed(server, catalog, "resource")),
                            *(("template", uri) for uri in _listed(server, catalog, "template"))])
        if claims:
            self._claims[server] = claims
        else:
            self._claims.pop(server, None)

    def _claimers(self, servers: Iterable[str], kind: str) -> dict[str, tuple[str, ...]]:
        """URI (or template) → which of `servers` claim it, connected or not, in name order."""
        claimers: dict[str, tuple[str, ...]] = {}
        for server in sorted(servers):
            for claim_kind, uri in self._claims.get(server, ()):
                if claim_kind == kind:
                    claimers[uri] = (*claimers.get(uri, ()), server)
        return claimers

    def _publish(self, server: str, catalog: ServerCatalog, prefix: bool) -> None:
        if catalog.empty:
            self._catalogs.pop(server, None)
            self._prefix.pop(server, None)
        else:
            self._catalogs[server], self._prefix[server] = catalog, prefix
        sources = {s: NameSource(frozenset(p.name for p in c.prompts), self._prefix[s])
                   for s, c in self._catalogs.items()}
        self._prompt_names, warnings = assign_names(sources)
        for warning in warnings:
            self._log_once(f"prompts: {warning}")
        self._log_collisions()
        self.registry.bump()

    def set_server_traits(self, server: str, traits: ServerTraits) -> None:
        """Record what the server advertises and its lists' cache hints; bumps the generation when they changed."""
        if self._traits.get(server) != traits:
            self._traits[server] = traits
            self.registry.bump()

    def view(self, servers: Iterable[str]) -> CatalogView:
        """The aggregate over `servers` (those with a catalog), in server-name order."""
        reachable = frozenset(servers)
        chosen = tuple(sorted(s for s in reachable if s in self._catalogs))
        key = (self.registry.generation, reachable)
        view = self._views.get(key)
        if view is None:
            if any(k[0] != key[0] for k in self._views):
                self._views.clear()
            view = self._views[key] = self._build(chosen, reachable)
        return view

    def _build(self, servers: tuple[str, ...], reachable: frozenset[str]) -> CatalogView:
        claimers = self._claimers(reachable, "resource")
        template_claimers = self._claimers(reachable, "template")
        resources: list[types.Resource] = []
        templates: list[types.ResourceTemplate] = []
        routes: list[_Template] = []
        prompts: list[types.Prompt] = []
        prompt_routes: dict[str, tuple[str, str]] = {}
        for server in servers:
            catalog = self._catalogs[server]
            plain: set[str] = set()
            for resource in catalog.resources:
                if (uri := ui_namespaced(server, resource.uri)) != resource.uri:
                    resource = resource.model_copy(update={"uri": uri})
                elif len(claimers[resource.uri]) > 1 or resource.uri in plain:
                    resource = resource.model_copy(update={"uri": qualified_uri(server, resource.uri)})
                plain.add(resource.uri)
                resources.append(resource)
            for template in catalog.templates:
                routes.append(_Template(server, template, _parse(template.uri_template)))
                if (uri := ui_namespaced(server, template.uri_template)) != template.uri_template:
                    template = template.model_copy(update={"uri_template": uri})
                elif len(template_claimers[template.uri_template]) > 1 or template.uri_template in plain:
                    template = template.model_copy(
                        update={"uri_template": qualified_uri(server, template.uri_template)})
                plain.add(template.uri_template)
                templates.append(template)
            for prompt in catalog.prompts:
                name = self._prompt_names[server][prompt.name]
                prompt_routes[name] = (server, prompt.name)
                prompts.append(prompt.model_copy(update={"name": name}))
        extensions, hints = self._carried(reachable)
        return CatalogView(servers, tuple(resources), tuple(templates), tuple(prompts), prompt_routes, claimers,
                           tuple(routes), reachable, extensions, hints)

    def _carried(self, reachable: frozenset[str]) -> tuple[dict[str, dict[str, object]], dict[ListKind, CacheHint]]:
        """The extensions the servers in scope advertise (MCP Apps also when a tool has a UI: the handshake
        era cannot advertise it), and each list's hint, merged over the servers with something in it."""
        ordered = sorted(reachable)
        apps = self.registry.app_servers
        advertised = [{**({UI_EXTENSION: {}} if s in apps else {}), **self._traits.get(s, ServerTraits()).extensions}
                      for s in ordered]
        hints: dict[ListKind, CacheHint] = {}
        for server in ordered:
            traits = self._traits.get(server, ServerTraits())
            catalog = self._catalogs.get(server, ServerCatalog())
            lists: tuple[tuple[ListKind, Collection[object]], ...] = (
                ("tools", self.registry.server_tools(server)), ("resources", catalog.resources),
                ("templates", catalog.templates), ("prompts", catalog.prompts))
            for kind, listed in lists:
                if listed:
                    hints[kind] = traits.hint(kind).merge(hints[kind]) if kind in hints else traits.hint(kind)
        return merge_extensions(advertised), hints


    def shadowed(self) -> list[Shadowed]:
        """Every URI and template more than one connected server lists, by kind and URI."""
        return [Shadowed(uri, kind, servers)
                for kind in ("resource", "template")
                for uri, servers in sorted(self._claimers(self.servers, kind).items()) if len(servers) > 1]

    def _log_collisions(self) -> None:
        for entry in self.shadowed():
            self._log_once(f"servers {', '.join(entry.servers)} all list the {entry.kind} {entry.uri!r}: sessions "
                           f"that reach more than one of them get only the qualified forms "
                           f"({', '.join(qualified_uri(s, entry.uri) for s in entry.servers)})")

    def _log_once(self, message: str) -> None:
        if message not in self._logged:
            self._logged.add(message)
            logger.warning("%s", clean(message))


def _listed(server: str, catalog: ServerCatalog, kind: str) -> list[str]:
    """The URIs (or templates) a server lists that another could share: its `ui://` ones are its own."""
    listed = [r.uri for r in catalog.resources] if kind == "resource" else [t.uri_template for t in catalog.templates]
    return [uri for uri in listed if ui_namespaced(server, uri) == uri]


def _parse(template: str) -> UriTemplate | None:
    try:
        return UriTemplate.parse(template)
    except InvalidUriTemplate:
        return None
