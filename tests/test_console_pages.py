"""The console's parts that need no browser: latency quantiles from the histogram, the search playground's
ranking against `tool_search`'s, the audit log's tail, text into HTML, and the sign-in cookie as a header.
tests/e2e/test_console.py drives the whole console in Chromium."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from inprocess import tool
from starlette.datastructures import Headers

from proxy.config import ToolSearchSettings, ToolsetsConfig
from proxy.console._html import shown
from proxy.downstream import CONSOLE_COOKIE, bridge
from proxy.downstream.http._app import cookie_as_bearer
from proxy.ops import latest_records, quantile
from proxy.registry import Registry
from proxy.search import fuse, fused_shares
from proxy.views import Views

INF = math.inf


@pytest.mark.parametrize(("q", "buckets", "expected"), [
    (0.5, [(0.1, 5.0), (1.0, 10.0), (INF, 10.0)], 0.1),
    (0.99, [(0.1, 5.0), (1.0, 10.0), (INF, 10.0)], 0.1 + 0.9 * 4.9 / 5),
    (0.5, [(0.1, 0.0), (1.0, 4.0), (INF, 4.0)], 0.1 + 0.9 * 0.5),
    (0.99, [(0.1, 1.0), (1.0, 1.0), (INF, 10.0)], 1.0),  # in +Inf: the highest finite bound, as Prometheus says
    (0.5, [(0.1, 0.0), (INF, 0.0)], None),
    (0.5, [], None),
])
def test_quantile_interpolates_as_histogram_quantile(q: float, buckets: list, expected: float | None) -> None:
    found = quantile(q, buckets)
    assert found == expected if expected is None else found == pytest.approx(expected)


def test_the_fused_shares_rank_as_fuse_does() -> None:
    lexical = [("a", 9.0), ("b", 3.0), ("c", 3.0)]
    similarity = {"b": 0.9, "d": 0.7, "a": 0.1, "c": 0.2}
    shares = fused_shares(lexical, similarity)
    assert fuse(lexical, similarity, 10) == sorted(shares, key=lambda n: (-sum(shares[n]), n))
    assert shares["d"] == (0.0, pytest.approx(0.8 * 0.7)) and shares["a"] == (pytest.approx(0.2), pytest.approx(0.08))


def test_the_playground_ranks_as_tool_search_and_says_why() -> None:
    registry = Registry()
    registry.set_server_tools("fs", [tool("read_file", "Read the contents of a file"),
                                     tool("write_file", "Write text to a file"),
                                     tool("list_directory", "List the files of a directory")])
    registry.set_server_tools("mail", [tool("send_message", "Send an email message")])
    views = Views(registry, ToolsetsConfig(tool_search=ToolSearchSettings(semantic="off")), lambda server: True)
    view = views.for_profile("default")
    for query in ("read a file", "fs__write_file", "email", "nothing like it"):
        answer = bridge.explain(views, view, query, 5)
        searched = bridge.search(views, view, {"queries": [query], "limit": 5})["results"][0]["matches"]
        assert [m["tool"] for m in answer["matches"]] == searched
        assert answer["mode"] == "lexical" and answer["total_available"] == 4
    (exact,) = bridge.explain(views, view, "fs__write_file", 1)["matches"]
    assert exact["exact"] and exact["lexical"] is None
    scores = [m["lexical"] for m in bridge.explain(views, view, "read a file", 5)["matches"]]
    assert scores == sorted(scores, reverse=True) and scores[0] > 0


def test_the_audit_tail_is_newest_first_filtered_and_bounded(tmp_path: Path) -> None:
    log = tmp_path / "audit.jsonl"
    lines = [json.dumps({"time": i, "server": "a" if i % 2 else "b", "tool": f"t{i % 3}", "principal": "anonymous"})
             for i in range(10)]
    log.write_text("\n".join([lines[0][5:], *lines[1:], '{"cut": ']) + "\n")  # a cut first line, a partial last
    assert [r["time"] for r in latest_records(log, 3)] == [9, 8, 7]
    assert [r["time"] for r in latest_records(log, 50, server="a", tool="t0")] == [9, 3]
    assert [r["time"] for r in latest_records(log, 50, server="", principal="anonymous")] == list(range(9, 0, -1))
    assert latest_records(log, 50, principal="oauth:x") == []
    assert latest_records(tmp_path / "missing.jsonl", 5) == []


def test_text_goes_into_html_escaped_cleaned_and_redacted() -> None:
    page = shown('<script>alert(1)</script><img src=x onerror="y"> token=hunter2secret \u202e\x1b[31m')
    assert "<" not in page and ">" not in page and '"' not in page
    assert "hunter2secret" not in page and "\u202e" not in page and "\x1b" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page


def _scope(*headers: tuple[str, str]) -> dict:
    return {"type": "http", "path": "/ui", "headers": [(k.encode(), v.encode()) for k, v in headers]}


def test_the_sign_in_cookie_becomes_the_header_only_where_there_is_none() -> None:
    lifted = Headers(scope=cookie_as_bearer(_scope(("cookie", f"{CONSOLE_COOKIE}=tok%2Fen; other=1"))))
    assert lifted["authorization"] == "Bearer tok/en"
    kept = Headers(scope=cookie_as_bearer(_scope(("authorization", "Bearer real"), ("cookie", f"{CONSOLE_COOKIE}=x"))))
    assert kept.getlist("authorization") == ["Bearer real"]
    for cookie in (f"{CONSOLE_COOKIE}=", f"{CONSOLE_COOKIE}=a%0Ab", "other=tok"):
        assert "authorization" not in Headers(scope=cookie_as_bearer(_scope(("cookie", cookie))))
