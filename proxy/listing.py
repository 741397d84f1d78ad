"""The listing of deferred tools that closes the `tool_search` description (SPEC §6.3, §6.4).

The listing keeps the model aware of which tools exist without paying for their schemas. It is
part of every `tools/list` answer, and sessions are notified whenever that answer changes by a
byte, so rendering is a pure function of the catalog and the budget: every collection is sorted,
and the order in which servers connected or tools were listed never shows through.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from proxy.config import ToolSearchSettings
from proxy.text import first_sentence

__all__ = [
    "ELLIPSIS",
    "HEADING",
    "DeferredByServer",
    "Form",
    "Listing",
    "estimate_tokens",
    "listing_budget",
    "listing_tokens",
    "render_listing",
    "short_description",
]

HEADING = "Deferred tool catalog (call schemas via `tool_describe`, invoke via `tool_call`):"
ELLIPSIS = "\u2026"
SHORT_DESCRIPTION_CHARS = 60
UNKNOWN_CONTEXT_PCT_LEG = 10000
"""The percentage leg of the budget when the client's context size is unknown (§6.3)."""

Form = Literal["full", "names", "mixed", "groups", "none"]
DeferredByServer = Mapping[str, Sequence[tuple[str, str]]]
"""Server label -> [(qualified tool name, description)]."""


@dataclass(frozen=True)
class Listing:
    """A rendered listing: `text` is None when nothing fits (or nothing is deferred).

    `collapsed` names the servers rendered as a summary line, in the order they were collapsed.
    """

    text: str | None
    form: Form
    tokens: int
    collapsed: tuple[str, ...] = ()


NO_LISTING = Listing(text=None, form="none", tokens=0)


def estimate_tokens(text: str) -> int:
    """Tokens as the spec counts them: one per four characters, rounded up."""
    return _tokens(len(text))


def _tokens(chars: int) -> int:
    return -(-chars // 4)


_PIECE = re.compile(r"[A-Za-z]+|[0-9]+|[^\sA-Za-z0-9]")


def _pieces(text: str) -> int:
    """A count of the text's tokens that a BPE vocabulary does not beat: one per six letters of a
    word, per three digits, per other visible character."""
    count = 0
    for match in _PIECE.finditer(text):
        piece = match.group()
        count += -(-len(piece) // 6) if piece[0].isalpha() else -(-len(piece) // 3) if piece[0].isdigit() else 1
    return count


def listing_tokens(text: str) -> int:
    """The listing's tokens: the spec's estimate, or more where the text is made of names.

    One per four characters is right for prose and JSON but under-counts a listing of qualified
    names by up to a third (`mcp-github__create_pull_request` is many short tokens), so a listing
    that fit by characters overshot its budget in a real tokenizer. Counting word pieces bounds
    that (measured against a real BPE on the bundled catalogs: never under, ~11% over on average);
    the larger of the two is used, so a listing still fits the spec's estimate too.
    """
    return max(estimate_tokens(text), _pieces(text))


def listing_budget(context_tokens: int | None, settings: ToolSearchSettings) -> int:
    """The listing's token budget for a client; unknown context sizes get a generous fixed leg.

    Integer arithmetic stands in for the spec's `int(context * pct / 100)`: identical for the
    non-negative values that reach it, and exact for any context size.
    """
    if context_tokens is None:
        return min(settings.listing_max_tokens, UNKNOWN_CONTEXT_PCT_LEG)
    pct_leg = context_tokens * settings.threshold_pct // 100
    return max(0, min(settings.listing_max_tokens, pct_leg))


def short_description(text: str) -> str:
    """The first sentence of `text`, cut to about 60 characters on a word boundary.

    One line per tool must stay cheap, and the first sentence of a tool description is almost
    always the one that says what it does.
    """
    text = first_sentence(text)
    if len(text) <= SHORT_DESCRIPTION_CHARS:
        return text
    cut = text[:SHORT_DESCRIPTION_CHARS]
    if text[SHORT_DESCRIPTION_CHARS] != " " and " " in cut:
        cut = cut[: cut.rindex(" ")]
    return cut.rstrip(",;: ") + ELLIPSIS


@dataclass(frozen=True)
class _Blocks:
    """One server rendered three ways, so degradation only swaps precomputed strings."""

    label: str
    full: str
    names: str
    summary: str


def _render_server(label: str, tools: Sequence[tuple[str, str]]) -> _Blocks:
    entries = sorted(tools)
    heading = f"{label} tools ({len(entries)}):"
    lines = [heading]
    for name, description in entries:
        short = short_description(description)
        lines.append(f"- {name}: {short}" if short else f"- {name}")
    return _Blocks(
        label=label,
        full="\n".join(lines),
        names=f"{heading}\n" + ", ".join(name for name, _ in entries),
        summary=f"{label} ({len(entries)} tools \u2014 names not listed; discover via `tool_search`)",
    )


def _join(blocks: Sequence[str]) -> str:
    return "\n".join([HEADING, *blocks])


def render_listing(catalog: DeferredByServer, budget: int) -> Listing:
    """Render the richest listing form that fits `budget` tokens (§6.4 degradation order).

    Servers with no tools are left out: a block announcing zero tools would only cost tokens.
    """
    servers = [_render_server(label, tools) for label, tools in sorted(catalog.items()) if tools]
    if budget <= 0 or not servers:
        return NO_LISTING
    forms: tuple[tuple[Form, list[str]], ...] = (
        ("full", [server.full for server in servers]),
        ("names", [server.names for server in servers]),
    )
    for form, blocks in forms:
        text = _join(blocks)
        if estimate_tokens(text) <= budget and (tokens := listing_tokens(text)) <= budget:
            return Listing(text=text, form=form, tokens=tokens)
    return _collapse(servers, budget)


def _collapse(servers: Sequence[_Blocks], budget: int) -> Listing:
    """Collapse servers to summaries, largest names block first, until the listing fits.

    Characters are tracked incrementally, and word pieces (which add up over blocks: a newline
    ends every piece) are only counted once the characters fit, each block once: a fleet of
    hundreds of servers costs one sort and one final join, not a re-render per step.
    """
    blocks = [server.names for server in servers]
    chars = len(_join(blocks))
    counted: dict[str, int] = {HEADING: _pieces(HEADING)}
    order = sorted(range(len(servers)), key=lambda i: (-len(servers[i].names), servers[i].label))
    collapsed: list[str] = []
    for index in order:
        chars += len(servers[index].summary) - len(blocks[index])
        blocks[index] = servers[index].summary
        collapsed.append(servers[index].label)
        if _tokens(chars) > budget:
            continue
        for block in blocks:
            if block not in counted:
                counted[block] = _pieces(block)
        pieces = counted[HEADING] + sum(counted[block] for block in blocks)
        if pieces <= budget:
            form: Form = "groups" if len(collapsed) == len(servers) else "mixed"
            return Listing(text=_join(blocks), form=form, tokens=max(_tokens(chars), pieces),
                           collapsed=tuple(collapsed))
    return NO_LISTING
