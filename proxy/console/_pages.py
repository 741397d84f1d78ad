"""The console's pages, data to HTML: fleet, one server, profiles, search, audit, sign-in.

Each takes what the handler read (the `/status` report, the catalog report, the ranker's answer, audit
records) and returns a page; nothing here reads state or does I/O.
"""

from __future__ import annotations

import datetime
import json
from collections.abc import Mapping, Sequence
from typing import Any

from proxy.console._html import Markup, link, page, shown, table
from proxy.names import BRIDGE_NAMES
from proxy.ops import ServerTraffic

__all__ = ["FLEET_COLUMNS", "audit_page", "fleet_page", "fleet_rows", "profiles_page", "search_page",
           "server_page", "sign_in_page"]

FLEET_COLUMNS = ("server", "state", "transport", "protocol", "tools", "restarts", "calls", "errors", "p50 ms",
                 "p99 ms", "last error")
AUDIT_FILTERS = ("server", "tool", "principal")


def _ms(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds * 1000:.1f}"


def _time(timestamp: object) -> str:
    if not isinstance(timestamp, int | float):
        return "-"
    return datetime.datetime.fromtimestamp(timestamp, datetime.UTC).isoformat(timespec="seconds")


def fleet_rows(report: Mapping[str, Any], traffic: Mapping[str, ServerTraffic]) -> list[list[str]]:
    """One row of text per upstream, in `FLEET_COLUMNS` order: the page and its live updates show the same."""
    rows = []
    for u in report["upstreams"]:
        t = traffic.get(u["server"], ServerTraffic(0, 0, None, None))
        rows.append([u["server"], u["state"], u["transport"], u["protocol_version"] or "-", str(u["tools"]),
                     str(u["restarts"]), str(t.calls), str(t.errors), _ms(t.p50), _ms(t.p99), u["last_error"] or ""])
    return rows


def fleet_page(report: Mapping[str, Any], traffic: Mapping[str, ServerTraffic]) -> bytes:
    rows = [[link(f"/ui/servers/{row[0]}", row[0]), *row[1:]] for row in fleet_rows(report, traffic)]
    changes = report.get("tool_changes") or []
    pending = (f'<p class="warning">{len(changes)} tool definition(s) await approval: see each server.</p>'
               if changes else "")
    problems = "".join(f'<p class="warning">config: {shown(p)}</p>' for p in report.get("config_problems", []))
    body = (f'{problems}{pending}<p class="live">Updates live: <span id="updated">now</span></p>'
            f'{table(FLEET_COLUMNS, rows, body_id="fleet")}')
    return page("Fleet", body, current="/ui")


def _annotations(tool: Mapping[str, Any]) -> str:
    notes = tool.get("annotations") or {}
    return ", ".join(f"{key}: {value}" for key, value in sorted(notes.items())) or "-"


def server_page(name: str, upstream: Mapping[str, Any] | None, tools: Sequence[Mapping[str, Any]],
                approved: Mapping[str, str], changes: Sequence[Mapping[str, Any]], csrf: str) -> bytes:
    """A server's state, its tools (annotations, approved fingerprint, schema) and the changes awaiting approval."""
    if upstream is None:
        return page(f"Server {name}", "<p>No such server in the config.</p>", current="")
    state = table(("state", "transport", "protocol", "tools", "restarts", "connected since", "last error"), [[
        upstream["state"], upstream["transport"], upstream["protocol_version"] or "-", upstream["tools"],
        upstream["restarts"], upstream["connected_since"] or "-", upstream["last_error"] or ""]])
    rows = [[t["name"], t.get("description", ""), _annotations(t), approved.get(t["raw_name"], "-"),
             Markup(f"<details><summary>schema</summary><pre>{shown(json.dumps(t['inputSchema'], indent=1))}"
                    "</pre></details>")]
            for t in tools]
    listing = table(("tool", "description", "annotations", "approved fingerprint", "input"), rows, body_id="tools")
    approve = f"/ui/servers/{name}/approve"
    held = [[c["tool"], c["kind"], c["seen"], c["fingerprint"], "withheld" if c["held"] else "served",
             _form(approve, csrf, f"Approve {c['tool']}", tool=c["tool"])] for c in changes]
    pending = (table(("tool", "change", "seen", "fingerprint", "until approved", ""), held)
               + _form(approve, csrf, "Approve all") if changes else Markup("<p>None.</p>"))
    body = (f'{state}<h2>Changed or new definitions awaiting approval</h2><div id="pending">{pending}</div>'
            f"<h2>Tools ({len(tools)})</h2>{listing}")
    return page(f"Server {name}", body, current="")


def _form(action: str, csrf: str, label: str, **fields: str) -> Markup:
    """A POST form carrying the CSRF token (the Approve action: what `toolbridge approve` does)."""
    hidden = "".join(f'<input type="hidden" name="{shown(k)}" value="{shown(v)}">' for k, v in fields.items())
    return Markup(f'<form method="post" action="{shown(action)}" class="approve">'
                  f'<input type="hidden" name="csrf" value="{shown(csrf)}">{hidden}'
                  f'<button type="submit">{shown(label)}</button></form>')


def _profile(report: Mapping[str, Any]) -> str:
    tools = report["tools"]
    listing = next((t.get("description", "") for t in tools if t["name"] == "tool_search"), None)
    direct = [t["name"] for t in tools if t["name"] not in BRIDGE_NAMES]
    fields = (("tier", report["tier"]), ("form", report["form"]), ("budget", report["budget"]),
              ("listing_tokens", report["listing_tokens"]), ("tokens", report["tokens"]),
              ("raw_schema_tokens", report["raw_schema_tokens"]), ("core_tools", report["core_tools"]),
              ("deferred_tools", report["deferred_tools"]))
    numbers = "".join(f'<dt>{shown(k.replace("_", " "))}</dt><dd data-field="{k}">{shown(v)}</dd>' for k, v in fields)
    shown_listing = (f"<h3>tool_search listing</h3><pre>{shown(listing)}</pre>" if listing is not None
                     else "<p>No tool_search: every tool in scope is listed directly.</p>")
    return (f'<section class="profile" data-profile="{shown(report["profile"])}">'
            f'<h2>{shown(report["profile"])}</h2><dl>{numbers}</dl>'
            f"<h3>Direct tools ({len(direct)})</h3><p>{shown(', '.join(direct) or '-')}</p>{shown_listing}</section>")


def profiles_page(reports: Sequence[Mapping[str, Any]]) -> bytes:
    """Each profile as `toolbridge catalog` reports it: tier, tokens against the budget, direct and deferred tools."""
    return page("Profiles", "".join(_profile(r) for r in reports), current="/ui/profiles")


def search_page(profiles: Sequence[str], profile: str, query: str, answer: Mapping[str, Any] | None) -> bytes:
    options = "".join(f'<option{" selected" if p == profile else ""}>{shown(p)}</option>' for p in profiles)
    form = (f'<form method="get" action="/ui/search" class="filters"><label>profile <select name="profile">{options}'
            f'</select></label><label>request <input name="q" size="60" value="{shown(query)}"></label>'
            '<button type="submit">Search</button></form>')
    if answer is None:
        return page("Search playground", form, current="/ui/search")
    fused = answer["mode"] == "fused"
    columns = ("#", "tool", "server", "lexical share" if fused else "lexical (BM25F)", "semantic share", "description")

    def score(value: float | None) -> str:
        return "-" if value is None else f"{value:.3f}"

    rows = [[i, m["tool"], m["server"], "exact name" if m["exact"] else score(m["lexical"]), score(m["semantic"]),
             m["description"]] for i, m in enumerate(answer["matches"], 1)]
    summary = (f'<p>{len(rows)} of {answer["total_available"]} deferred tools, ranked '
               f'{"by fused lexical and semantic scores" if fused else "lexically"}.</p>')
    return page("Search playground", form + summary + table(columns, rows, body_id="matches"), current="/ui/search")


def audit_page(records: Sequence[Mapping[str, Any]], filters: Mapping[str, str], *, enabled: bool) -> bytes:
    inputs = "".join(f'<label>{f} <input name="{f}" value="{shown(filters.get(f, ""))}"></label>'
                     for f in AUDIT_FILTERS)
    form = f'<form method="get" action="/ui/audit" class="filters">{inputs}<button type="submit">Filter</button></form>'
    if not enabled:
        return page("Audit", "<p>The audit log is off: set <code>audit:</code> in toolsets.yaml.</p>",
                    current="/ui/audit")
    columns = ("time", "event", "principal", "server", "tool", "outcome", "error", "ms", "profile", "client")
    rows = [[_time(r.get("time")), r.get("event", "call"), r.get("principal", "-"), r.get("server"), r.get("tool"),
             r.get("outcome") or r.get("kind", ""), r.get("error") or "", r.get("duration_ms", ""),
             r.get("profile", ""), r.get("client") or ""] for r in records]
    return page("Audit", form + f"<p>The latest {len(rows)} matching records, newest first.</p>"
                + table(columns, rows, body_id="audit"), current="/ui/audit")


def sign_in_page() -> bytes:
    body = ('<form method="post" action="/ui/login" class="filters"><label>bearer token '
            '<input type="password" name="token" autocomplete="current-password" size="40"></label>'
            '<button type="submit">Sign in</button></form>'
            "<p>The endpoint's token (or an OAuth access token) is kept in an HttpOnly cookie for /ui only.</p>")
    return page("Sign in", body, current="")
