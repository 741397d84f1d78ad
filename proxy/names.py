"""Qualified tool names: `<server>__<tool>`, valid for every client (`^[A-Za-z0-9_-]{1,64}$`)."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

MAX_LENGTH = 64
SEPARATOR = "__"
BRIDGE_NAMES = ("tool_search", "tool_describe", "tool_call")  # reserved: no upstream tool may take them
TOOLSET_PREFIX = "mcp-"
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")
_HASH_LENGTH = 10


def server_toolset(server: str) -> str:
    """The dynamic toolset holding a server's tools; the bare server name is an alias of it."""
    return TOOLSET_PREFIX + server


def sanitize(text: str) -> str:
    """Replace every character outside `[A-Za-z0-9_-]` with `_`."""
    return _UNSAFE.sub("_", text)


def _digest(server: str, raw_name: str, salt: int) -> str:
    # surrogatepass: a tool name decoded from JSON may hold a lone surrogate.
    text = f"{server}\x00{raw_name}" + (f"\x00{salt}" if salt else "")
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:_HASH_LENGTH]


def _with_digest(base: str, server: str, raw_name: str, salt: int = 0) -> str:
    keep = MAX_LENGTH - _HASH_LENGTH - 1
    return f"{base[:keep]}_{_digest(server, raw_name, salt)}"


def qualify_names(server: str, raw_names: Iterable[str]) -> dict[str, str]:
    """Map each raw tool name of one server to a unique, valid qualified name.

    A name keeps its plain sanitised form when it fits in 64 characters and no other tool of the
    server sanitises to the same text (a raw name that needed no sanitising keeps it even then);
    otherwise it gets a prefix plus a short hash of the raw name. Should a hashed name meet a name
    already given out (a raw name can spell out another tool's hashed form), it is salted until it
    is free. Raw names are processed in sorted order, so the result does not depend on input order.
    """
    prefix = sanitize(server) + SEPARATOR
    unique = sorted(set(raw_names))
    plain = {raw: prefix + sanitize(raw) for raw in unique}
    counts: dict[str, int] = {}
    for name in plain.values():
        counts[name] = counts.get(name, 0) + 1
    qualified: dict[str, str] = {}
    hashed: list[str] = []
    for raw in unique:
        name = plain[raw]
        lossless = name == prefix + raw
        if len(name) > MAX_LENGTH or (counts[name] > 1 and not lossless):
            hashed.append(raw)
        else:
            qualified[raw] = name
    taken = set(qualified.values())
    for raw in hashed:
        salt = 0
        name = _with_digest(plain[raw], server, raw)
        while name in taken:
            salt += 1
            name = _with_digest(plain[raw], server, raw, salt)
        taken.add(name)
        qualified[raw] = name
    return {raw: qualified[raw] for raw in unique}


_VALID = re.compile(r"[A-Za-z0-9_-]{1,64}")


def _without_shared(names: dict[str, dict[str, str]]) -> dict[str, dict[str, str]]:
    """Give every qualified name that more than one server spells its per-server hashed form,
    salted past every name given out (a raw name can spell out another tool's hashed form)."""
    claims: dict[str, int] = {}
    for mapping in names.values():
        for name in mapping.values():
            claims[name] = claims.get(name, 0) + 1
    taken = set(claims)
    for server in sorted(names):
        for raw, name in sorted(names[server].items()):
            if claims[name] > 1:
                salt = 0
                while (hashed := _with_digest(name, server, raw, salt)) in taken:
                    salt += 1
                taken.add(hashed)
                names[server][raw] = hashed
    return names


@dataclass(frozen=True)
class NameSource:
    """One server's raw names and whether it keeps them (`prefix: false`)."""

    raw_names: frozenset[str]
    prefix: bool = True


def assign_names(
    sources: Mapping[str, NameSource], reserved: Iterable[str] = ()
) -> tuple[dict[str, dict[str, str]], list[str]]:
    """Every server's raw name → exposed name, and a warning per raw name that had to stay qualified.

    Prefixed servers get `qualify_names`; a qualified name two servers spell alike (server `a`,
    tool `b__c` and server `a__b`, tool `c`) goes to neither: each gets its hashed form. A
    `prefix: false` server keeps a raw name when it is a valid client name, not `reserved`, not
    another server's qualified name, and not kept by a server earlier in name order; otherwise that
    name stays qualified. The answer depends only on the sources, never on the order servers
    registered in.
    """
    names = _without_shared({server: qualify_names(server, source.raw_names) for server, source in sources.items()})
    qualified_by = {name: s for s, mapping in names.items() for name in mapping.values()}
    taken = set(reserved)
    warnings: list[str] = []
    for server in sorted(s for s, source in sources.items() if not source.prefix):
        for raw in sorted(sources[server].raw_names):
            if _VALID.fullmatch(raw) and raw not in taken and qualified_by.get(raw, server) == server:
                names[server][raw] = raw
                taken.add(raw)
            else:
                warnings.append(f"server {server}: name {raw!r} is taken, reserved or invalid; "
                                f"kept as {names[server][raw]}")
    return names, warnings
