"""Configuration: `upstreams/<name>.yaml` (one server per file) and `toolsets.yaml`.

Loading never stops on the first bad file. Every problem comes back as a `ConfigError` value
naming the file, the line where known, and the reason; every good file still loads.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from proxy.errors import ConfigError
from proxy.yaml_lines import line_of, read_yaml, validation_problem

logger = logging.getLogger(__name__)

SERVER_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")  # use with fullmatch: `$` accepts a trailing newline
_VARIABLE = re.compile(r"\$\{(?:env:)?([A-Za-z_][A-Za-z0-9_]*)\}")


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class ToolFilter(_Frozen):
    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()


class UpstreamConfig(_Frozen):
    """One upstream server: a stdio command or a remote URL."""

    name: str
    command: str | None = None
    args: tuple[str, ...] = ()
    env: dict[str, str] = Field(default_factory=dict)
    cwd: str | None = None
    url: str | None = None
    transport: Literal["streamable-http", "sse"] | None = None
    headers: dict[str, str] = Field(default_factory=dict)
    enabled: bool = True
    timeout: float = Field(default=300, gt=0)
    connect_timeout: float = Field(default=60, gt=0)
    tools: ToolFilter = ToolFilter()

    @field_validator("args", mode="before")
    @classmethod
    def _args_as_strings(cls, value: Any) -> Any:
        if isinstance(value, list | tuple):
            return tuple(str(v) for v in value)
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
        return self

    @property
    def is_stdio(self) -> bool:
        return self.command is not None


class ToolsetConfig(_Frozen):
    description: str = ""
    tools: tuple[str, ...] = ()
    includes: tuple[str, ...] = ()


class ProfileConfig(_Frozen):
    match: str | None = None
    toolsets: tuple[str, ...] = ("all",)
    disabled: tuple[str, ...] = ()
    context_tokens: int | None = Field(default=None, gt=0)


Switch = Literal["auto", "on", "off"]


class ToolSearchSettings(_Frozen):
    """The `tool_search` block, already clamped (see `parse_tool_search`)."""

    enabled: Switch = "auto"
    threshold_pct: int = 5
    listing: Switch = "auto"
    listing_max_tokens: int = 4000
    search_default_limit: int = 5
    max_search_limit: int = 25
    # Hybrid ranking with local sentence embeddings; needs the optional `semantic` extra (proxy/semantic.py).
    semantic: Literal["on", "off"] = "off"


class ToolsetsConfig(_Frozen):
    """`toolsets.yaml`."""

    core: tuple[str, ...] = ()
    toolsets: dict[str, ToolsetConfig] = Field(default_factory=dict)
    profiles: dict[str, ProfileConfig] = Field(default_factory=lambda: {"default": ProfileConfig()})
    startup_wait: float = Field(default=3.0, ge=0)
    tool_search: ToolSearchSettings = ToolSearchSettings()

    @field_validator("toolsets", "profiles", mode="before")
    @classmethod
    def _empty_entries_are_defaults(cls, value: Any) -> Any:
        # `profiles: {default: }` is an empty entry, not an error.
        if isinstance(value, Mapping):
            return {k: {} if v is None else v for k, v in value.items()}
        return value

    @field_validator("profiles")
    @classmethod
    def _has_default_profile(cls, value: dict[str, ProfileConfig]) -> dict[str, ProfileConfig]:
        if "default" not in value:
            return {**value, "default": ProfileConfig()}
        return value


@dataclass
class Config:
    """Everything loaded from a config dir, plus what could not be loaded."""

    directory: Path
    upstreams: dict[str, UpstreamConfig] = field(default_factory=dict)
    toolsets: ToolsetsConfig = field(default_factory=ToolsetsConfig)
    problems: list[ConfigError] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


# --- tool_search: lenient parsing -------------------------------------------------------------

_ON = {"on", "true", "yes", "1"}
_OFF = {"off", "false", "no", "0"}
_RANGES = {
    "threshold_pct": (0, 100),
    "listing_max_tokens": (200, 60000),
    "max_search_limit": (1, 50),
}


def _switch(key: str, value: Any, default: str, warnings: list[str]) -> str:
    text = str(value).strip().lower() if not isinstance(value, bool) else str(value).lower()
    if text == "auto":
        return "auto"
    if text in _ON:
        return "on"
    if text in _OFF:
        return "off"
    warnings.append(f"tool_search.{key}: {value!r} is not auto/on/off; using {default!r}")
    return default


def _integer(key: str, value: Any, default: int, warnings: list[str]) -> int:
    if isinstance(value, bool):
        warnings.append(f"tool_search.{key}: {value!r} is not a number; using {default}")
        return default
    try:
        return int(float(value))
    except (TypeError, ValueError, OverflowError):
        warnings.append(f"tool_search.{key}: {value!r} is not a number; using {default}")
        return default


def _clamp(key: str, number: int, low: int, high: int, warnings: list[str]) -> int:
    clamped = min(max(number, low), high)
    if clamped != number:
        warnings.append(f"tool_search.{key}: {number} is outside [{low}, {high}]; using {clamped}")
    return clamped


def parse_tool_search(raw: Any) -> tuple[ToolSearchSettings, list[str]]:
    """Parse the `tool_search` block leniently: every bad value falls back with a warning.

    The legacy form `tool_search: true|false` is accepted; only a literal `false` turns it off.
    """
    defaults = ToolSearchSettings()
    warnings: list[str] = []
    if raw is None:
        return defaults, warnings
    if not isinstance(raw, Mapping):
        enabled = "off" if raw is False else "auto"
        if not isinstance(raw, bool):
            warnings.append(f"tool_search: {raw!r} is not a mapping or boolean; using defaults")
        return defaults.model_copy(update={"enabled": enabled}), warnings

    values: dict[str, Any] = {}
    for key, value in raw.items():
        if key in ("enabled", "listing"):
            values[key] = _switch(key, value, getattr(defaults, key), warnings)
        elif key == "semantic":  # opt-in: `auto` means off
            values[key] = "on" if _switch(key, value, defaults.semantic, warnings) == "on" else "off"
        elif key in ToolSearchSettings.model_fields:
            values[key] = _integer(key, value, getattr(defaults, key), warnings)
        else:
            warnings.append(f"tool_search.{key}: unknown setting, ignored")
    for key, (low, high) in _RANGES.items():
        if key in values:
            values[key] = _clamp(key, values[key], low, high, warnings)
    maximum = values.get("max_search_limit", defaults.max_search_limit)
    default_limit = values.get("search_default_limit", min(defaults.search_default_limit, maximum))
    values["search_default_limit"] = _clamp("search_default_limit", default_limit, 1, maximum, warnings)
    return ToolSearchSettings(**values), warnings


# --- interpolation -----------------------------------------------------------------------------


class _UnsetVariable(KeyError):
    """An unset `${VAR}`, with where in the document it was used."""

    def __init__(self, name: str, location: tuple[Any, ...]) -> None:
        super().__init__(name)
        self.location = location


def interpolate(value: Any, environ: Mapping[str, str], location: tuple[Any, ...] = ()) -> Any:
    """Replace `${VAR}` and `${env:VAR}` in every string of `value` (mapping keys are left alone).

    Raises:
        KeyError: naming the first variable that is not set (with `location`, where it was used).
    """
    if isinstance(value, str):

        def substitute(match: re.Match[str]) -> str:
            name = match.group(1)
            if name not in environ:
                raise _UnsetVariable(name, location)
            return environ[name]

        return _VARIABLE.sub(substitute, value)
    if isinstance(value, list | tuple):
        return [interpolate(v, environ, (*location, i)) for i, v in enumerate(value)]
    if isinstance(value, Mapping):
        return {k: interpolate(v, environ, (*location, k)) for k, v in value.items()}
    return value


# --- loading ----------------------------------------------------------------------------------


def load_upstream(path: Path, environ: Mapping[str, str]) -> UpstreamConfig:
    """Load one `upstreams/<name>.yaml`.

    Raises:
        ConfigError: with the file, line where known, and reason.
    """
    name = path.stem
    if not SERVER_NAME.fullmatch(name):
        raise ConfigError(str(path), f"server name {name!r} must match [A-Za-z0-9_-]{{1,64}}")
    data, node = read_yaml(path)
    if not isinstance(data, dict):
        raise ConfigError(str(path), "expected a mapping of settings", line_of(node, ()))
    if "name" in data:
        raise ConfigError(str(path), "name: unknown field (the file name is the server name)",
                          line_of(node, ("name",)))
    try:
        data = interpolate(data, environ, ())
    except _UnsetVariable as exc:
        where = ".".join(str(part) for part in exc.location)
        raise ConfigError(
            str(path), f"{where}: environment variable {exc.args[0]} is not set", line_of(node, exc.location)
        ) from None
    try:
        return UpstreamConfig.model_validate({**data, "name": name})
    except ValidationError as exc:
        raise validation_problem(path, node, exc) from None


def load_toolsets(path: Path) -> tuple[ToolsetsConfig, list[str]]:
    """Load `toolsets.yaml`; a missing file means the defaults.

    Raises:
        ConfigError: the file is not valid YAML or has invalid fields (`tool_search` never raises).
    """
    if not path.exists():
        return ToolsetsConfig(), []
    data, node = read_yaml(path)
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(str(path), "expected a mapping of settings", line_of(node, ()))
    data = dict(data)
    settings, warnings = parse_tool_search(data.pop("tool_search", None))
    for key in ("core", "toolsets", "profiles"):
        if key in data and data[key] is None:
            del data[key]
    try:
        return ToolsetsConfig.model_validate({**data, "tool_search": settings}), warnings
    except ValidationError as exc:
        raise validation_problem(path, node, exc) from None


def _upstream_files(directory: Path) -> list[Path]:
    """`*.yaml` and `*.yml` files, hidden ones (editor backups, lock files) skipped."""
    if not directory.is_dir():
        return []
    files = [*directory.glob("*.yaml"), *directory.glob("*.yml")]
    return sorted(path for path in files if not path.name.startswith(".") and path.is_file())


def load_config(directory: str | os.PathLike[str], environ: Mapping[str, str] | None = None) -> Config:
    """Load a config dir: `toolsets.yaml` and every `upstreams/*.yaml` (or `*.yml`).

    Problems come back in `Config.problems`; nothing here raises for a bad file.
    """
    environ = os.environ if environ is None else environ
    config = Config(directory=Path(directory))
    toolsets_path = config.directory / "toolsets.yaml"
    try:
        config.toolsets, config.warnings = load_toolsets(toolsets_path)
    except ConfigError as problem:
        config.problems.append(problem)
    except Exception as exc:  # a loader bug must not take the other files down
        logger.exception("unexpected error loading %s", toolsets_path)
        config.problems.append(ConfigError(str(toolsets_path), f"unexpected error: {exc}"))
    for path in _upstream_files(config.directory / "upstreams"):
        try:
            upstream = load_upstream(path, environ)
        except ConfigError as problem:
            config.problems.append(problem)
            continue
        except Exception as exc:
            logger.exception("unexpected error loading %s", path)
            config.problems.append(ConfigError(str(path), f"unexpected error: {exc}"))
            continue
        if upstream.name in config.upstreams:
            config.problems.append(ConfigError(str(path), f"server {upstream.name!r} is defined twice"))
            continue
        config.upstreams[upstream.name] = upstream
    return config
