"""HTML from data, every text escaped on the way in: a name, description, schema or error an upstream sent
is shown as text (`<script>` included), never read as markup, and never with a secret in it."""

from __future__ import annotations

import html
from collections.abc import Iterable, Sequence
from urllib.parse import quote

from proxy.errors import redact
from proxy.text import clean

__all__ = ["Markup", "link", "page", "shown", "table"]

NAV = (("/ui", "Fleet"), ("/ui/profiles", "Profiles"), ("/ui/search", "Search"), ("/ui/audit", "Audit"))


class Markup(str):
    """HTML built here from escaped parts: `table` and `page` put it in as is, and escape any other text."""


def shown(value: object) -> Markup:
    """`value` as inert HTML text: hidden characters made visible, credentials redacted, markup escaped."""
    if isinstance(value, Markup):
        return value
    return Markup(html.escape(redact(clean("" if value is None else str(value))), quote=True))


def link(path: str, text: object, **query: str) -> Markup:
    """An anchor to a console path; each path segment and query value is percent-encoded, then escaped."""
    href = "/".join(quote(part, safe="") for part in path.split("/"))
    if query:
        href += "?" + "&".join(f"{quote(k)}={quote(v, safe='')}" for k, v in query.items())
    return Markup(f'<a href="{html.escape(href, quote=True)}">{shown(text)}</a>')


def table(columns: Sequence[str], rows: Iterable[Sequence[object]], *, body_id: str | None = None) -> Markup:
    head = "".join(f"<th>{shown(c)}</th>" for c in columns)
    body = "".join("<tr>" + "".join(f"<td>{shown(cell)}</td>" for cell in row) + "</tr>" for row in rows)
    tbody = f'<tbody id="{body_id}">' if body_id else "<tbody>"
    return Markup(f"<table><thead><tr>{head}</tr></thead>{tbody}{body}</tbody></table>")


def page(title: str, body: str, *, current: str) -> bytes:
    """A whole page: the one stylesheet and script, served from this origin (the CSP allows nothing else)."""
    nav = "".join(f'<a href="{href}"{" class=current" if href == current else ""}>{name}</a>' for href, name in NAV)
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        f"<title>{shown(title)} · toolbridge</title>"
        '<link rel="stylesheet" href="/ui/static/console.css">'
        '<script src="/ui/static/console.js" defer></script></head>'
        f'<body><header><strong>toolbridge</strong><nav>{nav}</nav></header><main><h1>{shown(title)}</h1>'
        f"{body}</main></body></html>"
    ).encode()
