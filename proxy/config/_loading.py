"""Loading a config dir: `toolsets.yaml` and `upstreams/<name>.yaml` (one server per file).

Loading never stops on the first bad file. Every problem comes back as a `ConfigError` value
naming the file, the line where known, and the reason; every good file still loads.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from proxy.config._models import SERVER_NAME, Config, ToolSearchSettings, ToolsetsConfig, UpstreamConfig
from proxy.config._nesting import serves_itself
from proxy.config._references import dangling_names
from proxy.config._yaml import line_of, read_yaml, validation_problem
from proxy.errors import ConfigError, DanglingName

logger = logging.getLogger(__name__)

_VARIABLE = re.compile(r"\$\{(?:env:)?([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")

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
        if key in ("enabled", "listing", "semantic"):
            values[key] = _switch(key, value, getattr(defaults, key), warnings)
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


def interpolate(
    value: Any, environ: Mapping[str, str], location: tuple[Any, ...] = (), used: set[str] | None = None
) -> Any:
    """Replace `${VAR}`, `${env:VAR}` and `${VAR:-default}` in every string of `value` (keys are left alone).

    Every value taken from `environ` is added to `used`: it may be a secret, and the proxy redacts
    those exact strings wherever it logs or reports (a default written in the file is not secret).

    Raises:
        KeyError: naming the first variable that is not set and has no default (with `location`).
    """
    if isinstance(value, str):

        def substitute(match: re.Match[str]) -> str:
            name, default = match.group(1), match.group(2)
            if name in environ:
                if used is not None:
                    used.add(environ[name])
                return environ[name]
            if default is None:
                raise _UnsetVariable(name, location)
            return default

        return _VARIABLE.sub(substitute, value)
    if isinstance(value, list | tuple):
        return [interpolate(v, environ, (*location, i), used) for i, v in enumerate(value)]
    if isinstance(value, Mapping):
        return {k: interpolate(v, environ, (*location, k), used) for k, v in value.items()}
    return value


# --- loading ----------------------------------------------------------------------------------


def _unset_message(exc: _UnsetVariable) -> str:
    """Where the variable is used comes last: `env.TOKEN: …` would read as a secret to the redactor."""
    where = ".".join(str(part) for part in exc.location)
    return f"environment variable {exc.args[0]} is not set (used in {where})"


def load_upstream(path: Path, environ: Mapping[str, str], used: set[str] | None = None) -> UpstreamConfig:
    """Load one `upstreams/<name>.yaml`; values taken from `environ`, and every header and environment
    value (`configured_secrets`), are added to `used`.

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
        data = interpolate(data, environ, (), used)
    except _UnsetVariable as exc:
        raise ConfigError(str(path), _unset_message(exc), line_of(node, exc.location)) from None
    try:
        upstream = UpstreamConfig.model_validate({**data, "name": name})
    except ValidationError as exc:
        raise validation_problem(path, node, exc) from None
    if serves_itself(upstream, path.parent.parent):
        raise ConfigError(str(path), "command: runs toolbridge on this same config dir, which would start itself "
                          "without end (a client connects to toolbridge; toolbridge is not its own upstream); "
                          "delete this file", line_of(node, ("command",)))
    if used is not None:
        used.update(configured_secrets(upstream))
    return upstream


def configured_secrets(upstream: UpstreamConfig) -> set[str]:
    """Every header and environment value, and the OAuth client secret, written literally or not:
    any may be a credential (`redact` decides which are long and odd enough to remove)."""
    values = {*upstream.headers.values(), *upstream.env.values()}
    if upstream.auth is not None and upstream.auth.client_secret:
        values.add(upstream.auth.client_secret)
    return values


def load_toolsets(path: Path, environ: Mapping[str, str] | None = None) -> tuple[ToolsetsConfig, list[str]]:
    """Load `toolsets.yaml`; a missing file means the defaults. `${VAR}` interpolates in `auth:`
    only (an introspection secret), from `environ` (default: the process environment).

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
    if "auth" in data:
        try:
            data["auth"] = interpolate(data["auth"], os.environ if environ is None else environ, ("auth",))
        except _UnsetVariable as exc:
            raise ConfigError(str(path), _unset_message(exc), line_of(node, exc.location)) from None
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

    Problems come back in `Config.problems`; nothing here raises for a bad file. Every value
    interpolated from the environment is collected in `Config.secrets` (it may be a token in `args`).
    """
    environ = os.environ if environ is None else environ
    config = Config(directory=Path(directory))
    toolsets_path = config.directory / "toolsets.yaml"
    try:
        config.toolsets, config.warnings = load_toolsets(toolsets_path, environ)
    except ConfigError as problem:
        config.problems.append(problem)
    except Exception as exc:  # a loader bug must not take the other files down
        logger.exception("unexpected error loading %s", toolsets_path)
        config.problems.append(ConfigError(str(toolsets_path), f"unexpected error: {exc}"))
    files = _upstream_files(config.directory / "upstreams")
    for path in files:
        try:
            upstream = load_upstream(path, environ, config.secrets)
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
    if not any(problem.path == str(toolsets_path) for problem in config.problems):
        raw_names = any(not upstream.prefix for upstream in config.upstreams.values())
        config.problems += dangling_names(toolsets_path, config.toolsets, {p.stem for p in files}, raw_names)
    return config


def upstream_problem(directory: Path, server: str, where: str | tuple[Any, ...], reason: str) -> ConfigError:
    """A problem with a loaded upstream found later (its command is not on PATH, an override names no tool of
    it), at the line of `where`: a top-level key, or a path into the file (`("overrides", "echo", "name")`)."""
    path = next((p for p in _upstream_files(directory / "upstreams") if p.stem == server),
                directory / "upstreams" / f"{server}.yaml")
    try:
        _, node = read_yaml(path)
    except ConfigError:
        node = None
    location = (where,) if isinstance(where, str) else where
    return ConfigError(str(path), f"{'.'.join(map(str, location))}: {reason}", line_of(node, location))


def keep_last_good(previous: Config, fresh: Config) -> Config:
    """`fresh`, except that a file that broke keeps the settings it had in `previous` (hot reload).

    A deleted file is gone; a file that fails to load is an edit in progress or a mistake, and the
    server it describes keeps running as it was. Its problem is still reported.
    """
    broken = {Path(problem.path) for problem in fresh.problems}
    upstreams = dict(fresh.upstreams)
    for name, upstream in previous.upstreams.items():
        if name not in upstreams and any(path.stem == name and path.parent.name == "upstreams" for path in broken):
            upstreams[name] = upstream
    toolsets_broken = fresh.directory / "toolsets.yaml" in broken
    return Config(
        directory=fresh.directory,
        upstreams=dict(sorted(upstreams.items())),
        toolsets=previous.toolsets if toolsets_broken else fresh.toolsets,
        problems=fresh.problems,
        warnings=fresh.warnings,
        secrets=previous.secrets | fresh.secrets,
    )


def _loaded(config: Config, path: Path) -> bool:
    """Whether `config` holds settings from this file (a dangling name does not stop a file loading)."""
    if path == config.directory / "toolsets.yaml":
        return not any(Path(p.path) == path and not isinstance(p, DanglingName) for p in config.problems)
    return path.stem in config.upstreams


def reload_note(previous: Config, problem: ConfigError) -> str:
    """What a problem found on reload means: the file's last good settings stay, or there are none."""
    if _loaded(previous, Path(problem.path)):
        return "the last good settings stay in force"
    return "this file is skipped; everything else runs"
