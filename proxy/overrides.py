"""Tool overrides: what clients see of an upstream tool, as its upstream file's `overrides:` says.

An override renames a tool, replaces its description, hides parameters and fills values in. It changes
only what clients are shown and search: the registry applies it to the upstream's definition once, as
the tool is registered (`proxy/registry/_entries.py`); a call still reaches the upstream's own tool, and the
rug-pull fingerprint stays on the upstream's definition (`upstream/integrity`).

A rename that would make two tools of a server one name (exactly, or once qualified) is not applied:
each tool keeps a name of its own whatever the files say, and `toolbridge check` reports the clash
(`override_findings`). Pure: data to data.
"""

from __future__ import annotations

import copy
import difflib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from proxy.config import ToolOverride
from proxy.errors import InvalidArguments
from proxy.names import SEPARATOR, sanitize

__all__ = ["Clash", "Preset", "listed_as", "overridden_schema", "override_findings", "preset_of", "shown_names"]

Finding = tuple[tuple[Any, ...], str]  # where in the upstream file (`overrides.<tool>.name`), and why


@dataclass(frozen=True)
class Clash:
    """A rename of `raw` to `name`, not applied: tool `other` is shown as `other_name` (its own name, or its
    override's), which qualifies alike."""

    raw: str
    name: str
    other: str
    other_name: str


def listed_as(server: str, name: str, prefix: bool) -> str:
    """The name a tool is listed under, but for the hash a long or shared name gets (`names.qualify_names`)."""
    return f"{sanitize(server)}{SEPARATOR}{sanitize(name)}" if prefix else sanitize(name)


def shown_names(raw_names: Iterable[str], overrides: Mapping[str, ToolOverride]) -> tuple[dict[str, str], list[Clash]]:
    """Each raw name → the name the tool is shown by (the override's, where one applies), and the renames
    not applied.

    Names clash when they qualify alike. A rename that clashes with another tool's name is dropped, as
    are both renames of a pair that clash; a tool whose rename is dropped takes its raw name back, which
    may clash in turn, until no rename clashes. The raw names' own clashes are the qualifier's
    (`names.qualify_names` hashes them). The answer does not depend on the order of `raw_names`.
    """
    raws = sorted(set(raw_names))
    shown = {raw: override.name if (override := overrides.get(raw)) and override.name else raw for raw in raws}
    clashes: list[Clash] = []
    while True:
        by_key: dict[str, list[str]] = {}
        for raw in raws:
            by_key.setdefault(sanitize(shown[raw]), []).append(raw)
        dropped = []
        for same in by_key.values():
            for raw in same if len(same) > 1 else ():
                if shown[raw] != raw:  # renamed, and the rename not dropped yet
                    other = next(o for o in same if o != raw)
                    dropped.append(Clash(raw, shown[raw], other, shown[other]))
        if not dropped:
            return shown, clashes
        clashes += dropped
        for clash in dropped:
            shown[clash.raw] = clash.raw


def overridden_schema(schema: Mapping[str, Any], override: ToolOverride) -> dict[str, Any]:
    """The input schema clients see: hidden parameters gone (from `properties` and `required`), and a
    parameter with a default shown with it (`default`) and no longer required."""
    shown = copy.deepcopy(dict(schema))
    properties = shown.get("properties")
    if isinstance(properties, dict):
        for name in override.hide:
            properties.pop(name, None)
        for name, value in override.defaults.items():
            if name not in override.hide and isinstance(properties.get(name), dict):
                properties[name] = {**properties[name], "default": copy.deepcopy(value)}
    required = shown.get("required")
    if isinstance(required, list):
        gone = {*override.hide, *override.defaults}
        shown["required"] = [name for name in required if name not in gone]
    return shown


class Preset:
    """What a call's arguments get from an override: parameters the caller may not give (`hidden`, filled
    from the defaults on every call), and defaults for the ones it leaves out."""

    __slots__ = ("_key", "defaults", "hidden")

    def __init__(self, hidden: Iterable[str], defaults: Mapping[str, Any]) -> None:
        self.hidden = frozenset(hidden)
        self.defaults = dict(defaults)
        self._key = (tuple(sorted(self.hidden)), json.dumps(self.defaults, sort_keys=True, default=str))

    def refuse_hidden(self, given: Mapping[str, Any], schema: Mapping[str, Any]) -> None:
        """Refuse arguments that set a hidden parameter: never overwritten in silence, or the caller would
        believe its value was used.

        Raises:
            InvalidArguments: naming the hidden parameters given, with the schema the caller sees.
        """
        if refused := sorted(self.hidden.intersection(given)):
            names = ", ".join(refused)
            raise InvalidArguments(
                f"{names} {'is' if len(refused) == 1 else 'are'} set by toolbridge's configuration and cannot be "
                "given: call the tool without it",
                f"arguments.{refused[0]}",
                "hidden",
                dict(schema),
            )

    def fill(self, arguments: Mapping[str, Any]) -> dict[str, Any]:
        """The arguments sent upstream: `arguments` with every default they leave out (every hidden value)."""
        return {**{k: copy.deepcopy(v) for k, v in self.defaults.items() if k not in arguments}, **arguments}

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Preset) and self._key == other._key

    def __hash__(self) -> int:
        return hash(self._key)

    def __repr__(self) -> str:
        return f"Preset(hidden={sorted(self.hidden)!r}, defaults={sorted(self.defaults)!r})"


def preset_of(override: ToolOverride) -> Preset | None:
    """The override's part in each call, or None when it has none."""
    return Preset(override.hide, override.defaults) if override.hide or override.defaults else None


def override_findings(
    server: str, prefix: bool, overrides: Mapping[str, ToolOverride], tools: Mapping[str, Mapping[str, Any]] | None
) -> list[Finding]:
    """Why overrides would not apply as written, in file order: renames that clash, and, where the server's
    tools are known (`tools`: raw name → input schema, from its catalog), overrides of tools it lacks,
    parameters it lacks, and a required parameter hidden without a default (no call could succeed)."""
    _, clashes = shown_names(overrides if tools is None else tools, overrides)  # as the registry applies them
    reasons: dict[str, list[Finding]] = {}
    for clash in clashes:
        renamed = f" (renamed {clash.other_name!r})" if clash.other_name != clash.other else ""
        reason = (
            f"{clash.name!r} collides with tool {clash.other} of server {server}{renamed}: both would be "
            f"listed as {listed_as(server, clash.name, prefix)}"
        )
        reasons.setdefault(clash.raw, []).append((("overrides", clash.raw, "name"), reason))
    found: list[Finding] = []
    for raw, override in overrides.items():
        if tools is not None and raw not in tools:
            close = difflib.get_close_matches(raw, list(tools), n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            found.append((("overrides", raw), f"names no tool of server {server} ({len(tools)} tools){hint}"))
            continue
        found += reasons.get(raw, [])
        if tools is not None:
            found += _parameter_findings(server, raw, override, tools[raw])
    return found


def _parameter_findings(server: str, raw: str, override: ToolOverride, schema: Mapping[str, Any]) -> list[Finding]:
    properties = schema.get("properties")
    known = properties if isinstance(properties, Mapping) else None
    required = schema.get("required") if isinstance(schema.get("required"), list) else []
    found: list[Finding] = []
    for index, name in enumerate(override.hide):
        if known is not None and name not in known:
            found.append(
                (("overrides", raw, "hide", index), f"tool {raw} of server {server} has no parameter {name!r}")
            )
        elif name in required and name not in override.defaults:
            found.append(
                (
                    ("overrides", raw, "hide", index),
                    f"{name!r} is required by tool {raw} of server {server} and has no default",
                )
            )
    for name in override.defaults:
        if known is not None and name not in known:
            found.append(
                (("overrides", raw, "defaults", name), f"tool {raw} of server {server} has no parameter {name!r}")
            )
    return found
