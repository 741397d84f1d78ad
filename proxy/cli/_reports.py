"""What the one-shot commands print for people: `catalog` (the surface a profile gets, with its token
cost) and `status` (a running proxy's `/status`, as rich tables on a terminal, plain text in a pipe).

Upstream text in them is escaped: it reaches a terminal.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import httpx2

from proxy.errors import redact
from proxy.ops import PROFILE_COLUMNS, UPSTREAM_COLUMNS, plain_table, status_rows
from proxy.text import escape


def print_catalog(report: dict[str, Any], as_json: bool) -> None:
    if as_json:
        print(json.dumps(report, indent=2, ensure_ascii=False))
        return
    print(f"profile: {report['profile']}  context: {report['context_tokens'] or 'unknown'}  "
          f"tier: {report['tier']}  form: {report['form']}  budget: {report['budget']} tokens")
    print(f"core tools: {report['core_tools']}  deferred tools: {report['deferred_tools']}  "
          f"listing: ~{report['listing_tokens']} tokens")
    print(f"tools/list: ~{report['tokens']} tokens; the raw schemas would be ~{report['raw_schema_tokens']} "
          f"({report['reduction_pct']}% smaller)")
    for tool in report["tools"]:
        print(f"\n## {tool['name']}\n{tool.get('description', '')}")
        print(json.dumps(tool.get("inputSchema", {}), ensure_ascii=False))


def fetch_status(url: str, token: str | None) -> dict[str, Any]:
    """`GET <url>/status` of a running proxy."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    try:
        response = httpx2.get(url.rstrip("/") + "/status", headers=headers, timeout=10)
        if response.status_code == 401:
            given = "the token given was refused" if token else "no token was given"
            raise SystemExit(f"toolbridge: {url} needs a bearer token ({given}): pass --auth-token or set "
                             "TOOLBRIDGE_AUTH_TOKEN")
        response.raise_for_status()
        return response.json()
    except (httpx2.HTTPError, ValueError) as exc:
        raise SystemExit(f"toolbridge: cannot read {url}/status: {redact(str(exc))}") from None


def print_status(report: dict[str, Any]) -> None:
    upstreams, profiles = status_rows(report)
    tables = [(UPSTREAM_COLUMNS, upstreams), (PROFILE_COLUMNS, profiles)]
    if sys.stdout.isatty():
        from rich.console import Console  # rich costs `serve` start-up time it never needs
        from rich.table import Table
        from rich.text import Text

        console = Console()
        for columns, rows in tables:
            table = Table(*columns)
            for row in rows:
                table.add_row(*map(Text, row))  # Text: a cell's "[...]" is text, never rich markup
            console.print(table)
    else:
        print("\n\n".join(plain_table(columns, rows) for columns, rows in tables))
    for problem in report["config_problems"]:
        print(f"config problem: {escape(str(problem))}")
    for change in report.get("tool_changes", []):
        print(escape(f"tool {change['kind']}: {change['server']} {change['tool']} (seen {change['seen']}), "
                     f"{'withheld' if change['held'] else 'served'} until `toolbridge approve {change['server']}`"))
    for limit in report.get("limits", []):
        print(escape(_limit_line(limit)))
    for entry in report.get("shadowed_uris", []):
        print(escape(f"shadowed {entry['kind']}: {entry['uri']} is listed by {', '.join(entry['servers'])} "
                     f"(reachable as {', '.join(entry['reachable_as'])})"))


def _limit_line(limit: dict[str, Any]) -> str:
    """One `limits:` entry of a `/status` report: what it allows, its refusals, its busiest principal or profile."""
    target = f" on {limit['tool']}" if limit.get("tool") else ""
    target = target or (f" on server {limit['server']}" if limit.get("server") else "")
    allows = [f"{limit['calls_per_minute']} calls per minute"] if limit.get("calls_per_minute") else []
    allows += [f"{limit['concurrent']} at once"] if limit.get("concurrent") else []
    line = f"limit {limit['limit']}: {' and '.join(allows)}, per {limit['per']}{target}; {limit['refused']} refused"
    if limit["usage"]:
        busiest = limit["usage"][0]
        line += (f"; busiest of {limit['counted']}: {busiest['key']}, {busiest['calls_last_minute']} calls in the "
                 f"last minute, {busiest['concurrent']} running")
    return line
