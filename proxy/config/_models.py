"""The config models: one frozen pydantic model per file kind, parsed once and passed around."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationInfo,
    field_validator,
    model_validator,
)

from proxy.errors import ConfigError

MAX_MESSAGE_BYTES = 64 * 1024 * 1024
DEFAULT_REDIRECT_PORT = 8976
SERVER_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")  # use with fullmatch: `$` accepts a trailing newline


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class ToolFilter(_Frozen):
    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()


class OAuthSettings(_Frozen):
    """`auth: oauth` on a remote upstream; the short form means every setting is discovered.

    Without `client_id` the client identifies itself by `client_metadata_url` (a Client ID Metadata
    Document the operator hosts) where the authorization server supports that, and registers
    itself (RFC 7591) otherwise; `redirect_port` is the loopback port `toolbridge login` listens on
    for the authorization code.
    """

    type: Literal["oauth"] = "oauth"
    client_id: str | None = None
    client_secret: str | None = None
    client_metadata_url: str | None = None
    scopes: tuple[str, ...] = ()
    redirect_port: int = Field(default=DEFAULT_REDIRECT_PORT, ge=1, le=65535)

    @model_validator(mode="after")
    def _one_client_identity(self) -> OAuthSettings:
        if self.client_secret is not None and self.client_id is None:
            raise ValueError("'client_secret' needs a 'client_id'")
        if self.client_metadata_url is not None:
            if self.client_id is not None:
                raise ValueError("'client_id' and 'client_metadata_url' are two client identities; set one")
            url = urlsplit(self.client_metadata_url)
            if url.scheme != "https" or not url.netloc or url.path in ("", "/"):
                raise ValueError("'client_metadata_url' must be an https URL with a path "
                                 "(the Client ID Metadata Document's address)")
        return self


class UpstreamConfig(_Frozen):
    """One upstream server: a stdio command or a remote URL."""

    name: str
    command: str | None = None
    args: tuple[str, ...] = ()
    env: dict[str, str] = Field(default_factory=dict)
    # Names or `PREFIX_*` globs of toolbridge's environment a stdio child also gets, or never gets (block wins);
    # network, CA, package-manager and locale variables pass by default, secrets only when named here.
    env_passthrough: tuple[str, ...] = ()
    env_block: tuple[str, ...] = ()
    cwd: str | None = None
    url: str | None = None
    transport: Literal["streamable-http", "sse"] | None = None
    headers: dict[str, str] = Field(default_factory=dict)
    enabled: bool = True
    timeout: float = Field(default=300, gt=0)
    connect_timeout: float = Field(default=60, gt=0)
    # The largest message accepted from this upstream (a stdio line, a Streamable HTTP event).
    max_message_bytes: int = Field(default=MAX_MESSAGE_BYTES, gt=0)
    restart_wait: float = Field(default=5, ge=0)  # how long a call waits for a restarting server
    tools: ToolFilter = ToolFilter()
    auth: OAuthSettings | None = None

    @field_validator("auth", mode="before")
    @classmethod
    def _auth_short_form(cls, value: Any) -> Any:
        if isinstance(value, str):
            if value != "oauth":
                raise ValueError(f"unknown auth {value!r}; the only kind is 'oauth' (static keys go in 'headers')")
            return {"type": "oauth"}
        return value
    # The protocol era to speak upstream: `auto` probes 2026-07-28 and falls back to the handshake.
    protocol: Literal["auto", "legacy", "2026"] = "auto"
    # False: the server's tools and prompts keep their own names (collisions stay qualified).
    prefix: bool = True
    # True: a tool whose definition changed since it was approved (or that is new) is withheld until
    # `toolbridge approve` (docs/integrity.md).
    pin: bool = False
    # None: the `toolsets.yaml` default. Lazy: listed from the cached catalog, started on first use.
    lazy: bool | None = None
    idle_timeout: float | None = Field(default=None, gt=0)  # stdio only: stop after this long unused

    @field_validator("args", mode="before")
    @classmethod
    def _args_as_strings(cls, value: Any) -> Any:
        if isinstance(value, list | tuple):
            return tuple(str(v) for v in value)
        return value

    @field_validator("env_passthrough", "env_block")
    @classmethod
    def _variable_patterns(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for pattern in value:
            if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*\*?", pattern):
                raise ValueError(f"{pattern!r} is not a variable name or a `PREFIX_*` glob")
        return value

    @field_validator("env", "headers", mode="before")
    @classmethod
    def _values_as_strings(cls, value: Any) -> Any:
        if isinstance(value, Mapping):
            return {str(k): "" if v is None else str(v) for k, v in value.items()}
        return value

    @field_validator("url")
    @classmethod
    def _url_excludes_command(cls, value: str | None, info: ValidationInfo) -> str | None:
        if value is not None and info.data.get("command") is not None:
            raise ValueError("'command' (stdio) and 'url' (remote) are exclusive; give one")
        return value

    @field_validator("transport")
    @classmethod
    def _transport_needs_url(cls, value: str | None, info: ValidationInfo) -> str | None:
        if value is not None and info.data.get("command") is not None:
            raise ValueError("'transport' applies to 'url' upstreams only")
        return value

    @model_validator(mode="after")
    def _one_target(self) -> UpstreamConfig:
        if self.command is None and self.url is None:
            raise ValueError("one of 'command' (stdio) or 'url' (remote) is required")
        if self.auth is not None and self.command is not None:
            raise ValueError("'auth' applies to 'url' upstreams only")
        return self

    @property
    def is_stdio(self) -> bool:
        return self.command is not None

    @property
    def client_mode(self) -> str:
        """The SDK `Client(mode=...)` for `protocol`."""
        return {"auto": "auto", "legacy": "legacy", "2026": "2026-07-28"}[self.protocol]


class ToolsetConfig(_Frozen):
    description: str = ""
    tools: tuple[str, ...] = ()
    includes: tuple[str, ...] = ()


class ProfileConfig(_Frozen):
    match: str | None = None
    toolsets: tuple[str, ...] = ("all",)
    disabled: tuple[str, ...] = ()
    context_tokens: int | None = Field(default=None, gt=0)
    # `bridge`: core tools + tool_search/describe/call with the listing; `direct`: every tool in scope with
    # its schema, for clients that defer tools themselves.
    exposure: Literal["bridge", "direct"] = "bridge"
    # Mark core and bridge tools `anthropic/alwaysLoad`, so clients that defer tools still load them.
    always_load: bool = True
    # After a session uses a deferred tool, list it directly (at most this many per session; 0 = never).
    promote: int = Field(default=0, ge=0, le=64)


Switch = Literal["auto", "on", "off"]


class ToolSearchSettings(_Frozen):
    """The `tool_search` block, already clamped (see `parse_tool_search`)."""

    enabled: Switch = "auto"
    threshold_pct: int = 5
    listing: Switch = "auto"
    listing_max_tokens: int = 4000
    search_default_limit: int = 5
    max_search_limit: int = 25
    # Hybrid ranking with local sentence embeddings, from the `semantic` extra: `auto` uses it where it is
    # installed (scripts/setup.sh installs it) and ranks lexically where it is not; `on` warns when it is missing.
    semantic: Switch = "auto"


class Introspection(_Frozen):
    """RFC 7662 token introspection: the endpoint, and toolbridge's credentials for it."""

    url: str
    client_id: str
    client_secret: str


class ResourceAuth(_Frozen):
    """`auth:` in `toolsets.yaml`: the HTTP endpoint as an OAuth protected resource (RFC 9728).

    Tokens from `issuer` for `audience` are checked either as JWTs against a JWKS (`jwks_url` or
    `jwks_file`) or by asking the issuer (`introspection`). `profiles` maps values of the
    `profile_claim` claim to profiles, first match wins, so a user's scope follows their identity.
    `resource` is the URL clients connect to (published in the metadata); it defaults to the audience.
    """

    issuer: str
    audience: str
    resource: str | None = None
    jwks_url: str | None = None
    jwks_file: str | None = None
    introspection: Introspection | None = None
    scopes_required: tuple[str, ...] = ()
    profile_claim: str | None = None
    profiles: dict[str, str] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _consistent(self) -> ResourceAuth:
        if sum(source is not None for source in (self.jwks_url, self.jwks_file, self.introspection)) != 1:
            raise ValueError("give one of 'jwks_url', 'jwks_file' or 'introspection'")
        if self.profiles and not self.profile_claim:
            raise ValueError("'profiles' maps values of 'profile_claim'; set it (e.g. profile_claim: groups)")
        if not re.match(r"https?://[^/\s]+", self.resource_url):
            raise ValueError("'resource' (default: the audience) must be the http(s) URL clients connect to")
        return self

    @property
    def resource_url(self) -> str:
        return self.resource or self.audience
class MetricsConfig(_Frozen):
    """`metrics:` — the first `top_tools` tools called get their own series; the rest count as `other`."""

    top_tools: int = Field(default=50, ge=0, le=10_000)


class AuditConfig(_Frozen):
    """`audit:` — one JSON line per tool call, rotated; arguments only as a hash unless `arguments: full`."""

    path: str = "logs/audit.jsonl"
    arguments: Literal["hash", "full", "none"] = "hash"
    max_bytes: int = Field(default=10 * 1024 * 1024, gt=0)
    backups: int = Field(default=5, ge=0)


class LargeResultsConfig(_Frozen):
    """`large_results:` — results above `max_chars` are cut by toolbridge; clients are told the limit."""

    max_chars: int = Field(default=100_000, ge=1_000, le=500_000)


LIMIT_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")


class LimitRule(_Frozen):
    """One entry of `limits:`: how many calls each principal (or profile) may make, to a server, a tool
    (`<server>__<tool>` or a glob, as in `core`) or to any tool, per minute and at once."""

    per: Literal["principal", "profile"]
    server: str | None = None
    tool: str | None = None
    calls_per_minute: int | None = Field(default=None, ge=1, le=1_000_000)
    concurrent: int | None = Field(default=None, ge=1, le=100_000)

    @model_validator(mode="after")
    def _limits_something(self) -> LimitRule:
        if self.calls_per_minute is None and self.concurrent is None:
            raise ValueError("give 'calls_per_minute', 'concurrent' or both")
        if self.server is not None and self.tool is not None:
            raise ValueError("give 'server' or 'tool', not both ('tool' is `<server>__<tool>`)")
        return self


class ToolsetsConfig(_Frozen):
    """`toolsets.yaml`."""

    core: tuple[str, ...] = ()
    toolsets: dict[str, ToolsetConfig] = Field(default_factory=dict)
    profiles: dict[str, ProfileConfig] = Field(default_factory=lambda: {"default": ProfileConfig()})
    # The longest a session's first request waits for the fleet (SPEC §6.7): clients give up on a slow list
    # and then lose every upstream, so completeness for one-shot clients comes from the cached catalog.
    startup_wait: float = Field(default=3.0, ge=0)
    # Fleet-wide defaults for `upstreams/*.yaml`, and how many stdio children may start at once.
    lazy: bool = False
    idle_timeout: float | None = Field(default=None, gt=0)
    spawn_concurrency: int | None = Field(default=None, ge=1)
    tool_search: ToolSearchSettings = ToolSearchSettings()
    auth: ResourceAuth | None = None
    metrics: MetricsConfig = MetricsConfig()
    large_results: LargeResultsConfig = LargeResultsConfig()
    audit: AuditConfig | None = None
    # Replicas behind a load balancer share large results and cached catalogs here; None: this process only.
    redis_url: str | None = Field(default=None, pattern=r"^(redis|rediss|unix)://")
    # Calls per minute and concurrent calls, per principal or profile, shared by replicas through `redis_url`.
    limits: dict[str, LimitRule] = Field(default_factory=dict)

    @field_validator("toolsets", "profiles", mode="before")
    @classmethod
    def _empty_entries_are_defaults(cls, value: Any) -> Any:
        # `profiles: {default: }` is an empty entry, not an error.
        if isinstance(value, Mapping):
            return {k: {} if v is None else v for k, v in value.items()}
        return value

    @field_validator("limits")
    @classmethod
    def _limit_names(cls, value: dict[str, LimitRule]) -> dict[str, LimitRule]:
        # A limit's name is a metric label, a Redis key part and what a refused caller is told.
        for name in value:
            if not LIMIT_NAME.fullmatch(name):
                raise ValueError(f"limit name {name!r} must match [A-Za-z0-9_-]{{1,64}}")
        return value

    @field_validator("profiles")
    @classmethod
    def _has_default_profile(cls, value: dict[str, ProfileConfig]) -> dict[str, ProfileConfig]:
        if "default" not in value:
            return {**value, "default": ProfileConfig()}
        return value

    @model_validator(mode="after")
    def _auth_profiles_exist(self) -> ToolsetsConfig:
        if self.auth is not None:
            unknown = sorted(set(self.auth.profiles.values()) - set(self.profiles))
            if unknown:
                raise ValueError(f"auth.profiles names unknown profiles: {', '.join(unknown)}")
        return self


@dataclass
class Config:
    """Everything loaded from a config dir, plus what could not be loaded."""

    directory: Path
    upstreams: dict[str, UpstreamConfig] = field(default_factory=dict)
    toolsets: ToolsetsConfig = field(default_factory=ToolsetsConfig)
    problems: list[ConfigError] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    secrets: set[str] = field(default_factory=set)  # interpolated values, and every header and env value
