"""No schema from an upstream and no argument from a client can fetch anything, or make anyone wait.

Each hostile call runs beside a healthy call from another session, which must answer at once.
"""

from __future__ import annotations

import json
import random
import string
import time
from typing import Any

import anyio
import pytest
from inprocess import Upstream, gateway, tool
from mcp import Client, types
from mcp.server.lowlevel import Server

from proxy.downstream import bridge, check_arguments
from proxy.downstream.calls._validation import PreparedSchema
from proxy.errors import InvalidArguments
from proxy.search import semantic
from proxy.text import split_clauses

pytestmark = pytest.mark.anyio

REDOS_PATTERN = "^(a+)+$"
REDOS_INPUT = "a" * 29 + "!"
# Seconds a healthy call may take while hostile ones are running, and linear-time work may take: what it
# bounds takes milliseconds (the quadratic and exponential cases take minutes), so it needs no turn `alone`.
HEALTHY_BOUND = 2.0


class Listener:
    """A TCP listener that accepts and never answers, counting who connected."""

    def __init__(self) -> None:
        self.connections = 0

    async def serve(self, *, task_status: anyio.abc.TaskStatus[int]) -> None:
        listener = await anyio.create_tcp_listener(local_host="127.0.0.1")
        task_status.started(listener.extra(anyio.abc.SocketAttribute.local_port))

        async def hold(stream: anyio.abc.SocketStream) -> None:
            self.connections += 1
            async with stream:
                await anyio.sleep_forever()

        async with listener:
            await listener.serve(hold)


def hostile_tools(port: int) -> list[types.Tool]:
    ref = f"http://127.0.0.1:{port}/internal?token=x"
    return [
        tool("fetches", "Its schema points at an internal URL.", {"x": {"$ref": ref}}),
        tool("root_ref", "Its whole schema is a remote reference.", {}),
        tool("backtracks", "Its pattern backtracks catastrophically.",
             {"text": {"type": "string", "pattern": REDOS_PATTERN}}),
        tool("keyed", "Its property-name pattern backtracks catastrophically.", {}),
        tool("slow", "Unique items compared pairwise.",
             {"items": {"type": "array", "uniqueItems": True}}),
    ]


def with_schema(entry: types.Tool, schema: dict[str, Any]) -> types.Tool:
    return entry.model_copy(update={"input_schema": schema})


def hostile_upstream(port: int) -> Upstream:
    tools = hostile_tools(port)
    tools[1] = with_schema(tools[1], {"type": "object", "$ref": f"http://127.0.0.1:{port}/schema.json"})
    tools[3] = with_schema(tools[3], {"type": "object", "patternProperties": {REDOS_PATTERN: {"type": "string"}},
                                      "additionalProperties": False})
    return Upstream("hostile", tools)


class BusyUpstream(Upstream):
    """An upstream whose one tool blocks until `release` is set."""

    def __init__(self) -> None:
        super().__init__("busy", [tool("wait", "Block until released.")])
        self.release, self.entered = anyio.Event(), anyio.Event()

    def server(self) -> Server[Any]:
        async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
            return types.ListToolsResult(tools=self.tools)

        async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
            self.entered.set()
            await self.release.wait()
            return types.CallToolResult(content=[types.TextContent(type="text", text="released")])

        return Server("busy", on_list_tools=list_tools, on_call_tool=call_tool)


def call(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {"name": name, "arguments": arguments}


async def test_a_remote_ref_is_never_fetched_and_fails_open() -> None:
    listener = Listener()
    async with anyio.create_task_group() as tg:
        port = await tg.start(listener.serve)
        upstream = hostile_upstream(port)
        async with gateway([upstream, Upstream("ok", [tool("ping")])]) as harness, Client(harness.server) as client:
            with anyio.fail_after(10):
                first = await client.call_tool("tool_call", call("hostile__fetches", {"x": 1}))
                second = await client.call_tool("tool_call", call("hostile__root_ref", {"y": 2}))
        tg.cancel_scope.cancel()
    assert (first.is_error, second.is_error) == (False, False)
    assert [name for name, _ in upstream.calls] == ["fetches", "root_ref"]
    assert listener.connections == 0


async def test_a_backtracking_pattern_is_checked_in_linear_time() -> None:
    started = time.monotonic()
    with pytest.raises(InvalidArguments) as caught:
        await check_arguments({"text": REDOS_INPUT}, hostile_tools(1)[2].input_schema)
    assert caught.value.constraint == "pattern"
    assert await check_arguments({"text": "aaaa"}, hostile_tools(1)[2].input_schema) == {"text": "aaaa"}
    schema = hostile_upstream(1).tools[3].input_schema
    with pytest.raises(InvalidArguments):
        await check_arguments({REDOS_INPUT: "x"}, schema)
    assert await check_arguments({"aaa": "x"}, schema) == {"aaa": "x"}
    assert time.monotonic() - started < HEALTHY_BOUND


@pytest.mark.parametrize("pattern", [r"^(a)\1$", r"^(?=a)a$"])
async def test_a_pattern_re2_cannot_run_is_skipped(pattern: str) -> None:
    schema = {"type": "object", "properties": {"t": {"type": "string", "pattern": pattern}}}
    assert await check_arguments({"t": "zzz"}, schema) == {"t": "zzz"}


async def test_validation_past_its_deadline_lets_the_call_through() -> None:
    from proxy.downstream.calls._validation import find_error

    many = [{"n": i} for i in range(6000)]
    schema = hostile_tools(1)[4].input_schema
    with anyio.fail_after(10):
        assert await find_error({"items": many}, PreparedSchema(schema), deadline=0.05) is None


async def test_a_small_call_against_a_schema_of_references_still_gets_the_deadline() -> None:
    """Small calls are validated on the loop, but references make a tiny schema cost 2^depth."""
    from proxy.downstream.calls._validation import find_error

    depth = 13  # ~0.4 s of CPU in the worker thread that keeps running past the deadline
    defs: dict[str, Any] = {f"l{i}": {"anyOf": [{"$ref": f"#/$defs/l{i + 1}"}] * 2} for i in range(depth)}
    schema = {"type": "object", "properties": {"x": {"$ref": "#/$defs/l0"}},
              "$defs": {**defs, f"l{depth}": {"type": "string"}}}
    with anyio.fail_after(10):
        assert await find_error({"x": 1}, PreparedSchema(schema), deadline=0.01) is None


async def test_no_hostile_call_makes_another_session_wait() -> None:
    listener = Listener()
    busy = BusyUpstream()
    outcomes: dict[str, types.CallToolResult] = {}
    many = [{"n": i} for i in range(6000)]
    async with anyio.create_task_group() as outer:
        port = await outer.start(listener.serve)
        upstreams = [hostile_upstream(port), busy, Upstream("ok", [tool("ping", "Answer at once.")])]
        async with (
            gateway(upstreams) as harness,
            Client(harness.server) as hostile,
            Client(harness.server) as healthy,
            anyio.create_task_group() as tg,
        ):
            for label, arguments in {
                "fetches": call("hostile__fetches", {"x": 1}),
                "backtracks": call("hostile__backtracks", {"text": REDOS_INPUT}),
                "keyed": call("hostile__keyed", {REDOS_INPUT: "x"}),
                "slow": call("hostile__slow", {"items": many}),
                "busy": call("busy__wait", {}),
            }.items():
                tg.start_soon(run, hostile, label, arguments, outcomes)
            with anyio.fail_after(10):
                await busy.entered.wait()
            started = time.monotonic()
            with anyio.fail_after(HEALTHY_BOUND):
                answer = await healthy.call_tool("tool_call", call("ok__ping", {}))
            elapsed = time.monotonic() - started
            busy.release.set()
        outer.cancel_scope.cancel()
    assert answer.is_error is False and elapsed < HEALTHY_BOUND
    assert outcomes["busy"].is_error is False
    assert json.loads(text(outcomes["backtracks"]))["constraint"] == "pattern"
    assert listener.connections == 0


def text(result: types.CallToolResult) -> str:
    assert isinstance(result.content[0], types.TextContent)
    return result.content[0].text


async def run(client: Client, label: str, arguments: dict[str, Any], into: dict[str, types.CallToolResult]) -> None:
    with anyio.fail_after(20):
        into[label] = await client.call_tool("tool_call", arguments)


HIDDEN = {
    "tag": "\U000e0049\U000e0067\U000e006e\U000e006f\U000e0072\U000e0065",
    "bidi": "\u202etxt.exe\u202c",
    "zero-width": "a\u200bb\u200dc\ufeff",
    "escape": "\x1b[2J\x1b]0;pwned\x07",
    "nul": "\x00\x01\x7f\x85",
}


def shown(text: str) -> bool:
    return not any(ch in text for value in HIDDEN.values() for ch in value if not ch.isalnum() and ch not in ".;[]")


async def test_hidden_characters_never_reach_a_listing_a_search_or_a_describe() -> None:
    description = "Read a file. " + " ".join(f"{k}:{v}" for k, v in HIDDEN.items())
    schema_text = {"path": {"type": "string", "description": "Path " + HIDDEN["tag"]}}
    upstreams = [Upstream("files", [tool("read", description, schema_text)])]
    async with gateway(upstreams) as harness, Client(harness.server) as client:
        listed = (await client.list_tools()).tools
        found = await client.call_tool("tool_search", {"queries": ["read file"]})
        described = await client.call_tool("tool_describe", {"names": ["files__read"]})
    texts = [t.description or "" for t in listed] + [text(found), text(described)]
    for each in texts:
        assert shown(each), repr(each)
    assert "\ufffd" in text(described)  # a visible marker where something was taken out
    assert "Read a file." in text(described)


def words(count: int, seed: int) -> list[str]:
    """Distinct made-up words, the same for a seed."""
    rng = random.Random(seed)
    return ["".join(rng.choices(string.ascii_lowercase, k=9)) for _ in range(count)]


async def test_a_long_run_of_address_characters_is_read_in_linear_time() -> None:
    run = "a." * 50_000 + "@"  # tried from every word boundary, the e-mail pattern took the square of its length
    started = time.monotonic()
    assert semantic.embedded_text(run) == run
    assert split_clauses("open the file and " + " " * 50_000 + "then mail it") == ["open the file", "mail it"]
    assert time.monotonic() - started < HEALTHY_BOUND


async def test_a_long_search_of_unknown_words_is_answered_at_once_and_a_longer_one_refused() -> None:
    vocabulary = words(20_000, seed=1)  # a large fleet's worth of terms: each unknown query word looks them up
    tools = [tool(f"t{i}", " ".join(vocabulary[i * 10 : i * 10 + 10])) for i in range(2000)]
    query = " ".join(words(3000, seed=2))[:bridge.MAX_QUERY_CHARS]  # none of them indexed
    async with gateway([Upstream("big", tools)]) as harness, Client(harness.server) as client:
        await client.call_tool("tool_search", {"queries": [vocabulary[0]]})  # the index is built
        started = time.monotonic()
        answer = await client.call_tool("tool_search", {"queries": [query]})
        elapsed = time.monotonic() - started
        refused = await client.call_tool("tool_search", {"queries": [query + " more"]})
    assert not answer.is_error and json.loads(text(answer))["results"][0]["matches"] == []
    assert elapsed < HEALTHY_BOUND
    assert refused.is_error and f"at most {bridge.MAX_QUERY_CHARS} characters" in text(refused)


def test_a_schema_whose_patterns_are_costly_to_run_is_checked_off_the_loop() -> None:
    def schema(*patterns: str) -> dict[str, Any]:
        return {"type": "object", "properties": {"t": {"allOf": [{"pattern": p} for p in patterns]}}}

    uuid = "^[0-9a-f]{8}(-[0-9a-f]{4}){3}-[0-9a-f]{12}$"
    everyday = schema(r"^\d{4}-\d{2}-\d{2}$", r"^[\w.+-]+@[\w-]+\.[\w.]+$", uuid)
    assert PreparedSchema(everyday).on_loop
    assert not PreparedSchema(schema("[ab]*a[ab]{1000}c")).on_loop  # ~1,000 RE2 instructions
    keyed = {"type": "object", "patternProperties": {"^k[ab]{600}$": {}, "^j[ab]{600}$": {}}}
    assert not PreparedSchema(keyed).on_loop
