"""`limits:`: the window arithmetic and rule matching (pure), the in-process and Redis stores (a real
redis-server), `Limits.hold` releasing its slots however a call ends, and the config's file:line problems.
The end-to-end runs are in tests/e2e/test_limits.py."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import anyio
import pytest
from inprocess import Upstream, gateway, tool
from mcp import Client, types
from redis.asyncio import Redis

from proxy.cli._reports import print_status
from proxy.config import LimitRule, ToolsetsConfig, load_config
from proxy.errors import LimitReached
from proxy.replicated import (
    WINDOW,
    Bucket,
    Kind,
    Limits,
    MemoryLimitStore,
    RedisLimitStore,
    Usage,
    buckets,
    principal_label,
    window_wait,
)

ALICE = 'oauth:["https://id.example", "alice"]'
BOB = 'oauth:["https://id.example", "bob"]'


def rule(**fields: Any) -> LimitRule:
    return LimitRule.model_validate({"per": "principal", **fields})


def bucket(kind: Kind = Kind.CALLS, key: str = ALICE, limit: str = "l", **fields: Any) -> Bucket:
    fields = fields or ({"calls_per_minute": 2} if kind is Kind.CALLS else {"concurrent": 2})
    return Bucket(limit, rule(**fields), key, kind)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


# --- window arithmetic ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("stamps", "allowed", "wait"),
    [
        ([], 1, 0.0),
        ([990.0], 2, 0.0),  # one of two spent
        ([990.0, 995.0], 2, 50.0),  # full: the older call ages out at 1050
        ([930.0, 995.0], 2, 0.0),  # a call exactly a minute old no longer counts
        ([941.0, 995.0], 2, 1.0),  # 59 s old: it still counts for one more second
        ([941.0, 995.0, 999.0], 1, 59.0),  # limit 1: the newest call is in the way
    ],
)
def test_window_wait(stamps: list[float], allowed: int, wait: float) -> None:
    assert window_wait(stamps, 1000.0, allowed) == pytest.approx(wait)


def test_a_lowered_limit_waits_for_enough_calls_to_age_out() -> None:
    """Five calls spent, the limit lowered to two by a reload: all but the newest must age out first."""
    stamps = [950.0, 960.0, 970.0, 980.0, 990.0]
    assert window_wait(stamps, 1000.0, 2) == pytest.approx(980.0 + WINDOW - 1000.0)
    assert window_wait(stamps, 1039.0, 2) == pytest.approx(1.0)
    assert window_wait(stamps, 1040.0, 2) == 0.0


# --- which buckets a call counts against ------------------------------------------------------------


def test_a_rule_without_a_selector_counts_every_call_of_its_principal() -> None:
    found = buckets(
        {"all": rule(calls_per_minute=5)}, principal=ALICE, profile="default", server="git", tool="git__status"
    )
    assert found == (Bucket("all", rule(calls_per_minute=5), ALICE, Kind.CALLS),)


@pytest.mark.parametrize(
    ("fields", "server", "tool", "counted"),
    [
        ({"server": "git"}, "git", "git__status", True),
        ({"server": "git"}, "gitlab", "gitlab__status", False),
        ({"tool": "git__status"}, "git", "git__status", True),
        ({"tool": "git__status"}, "git", "git__log", False),
        ({"tool": "git__*"}, "git", "git__log", True),
        ({"tool": "git__*"}, "github", "github__log", False),
    ],
)
def test_server_and_tool_select_the_calls_a_rule_counts(
    fields: dict[str, str], server: str, tool: str, counted: bool
) -> None:
    found = buckets({"x": rule(calls_per_minute=1, **fields)}, principal=ALICE, profile="p", server=server, tool=tool)
    assert bool(found) is counted


def test_per_profile_buckets_are_shared_by_every_principal_of_the_profile() -> None:
    limits = {"team": LimitRule(per="profile", calls_per_minute=5, concurrent=2)}
    for principal in (ALICE, BOB):
        found = buckets(limits, principal=principal, profile="ops", server="s", tool="s__t")
        assert [(b.key, b.kind) for b in found] == [("ops", Kind.CALLS), ("ops", Kind.HELD)]


@pytest.mark.parametrize(
    ("fields", "kind", "words"),
    [
        ({"calls_per_minute": 12, "tool": "data__echo"}, Kind.CALLS, "12 calls per minute per principal on data__echo"),
        ({"concurrent": 3, "server": "git"}, Kind.HELD, "3 concurrent calls per principal on server git"),
        ({"concurrent": 1}, Kind.HELD, "1 concurrent calls per principal"),
    ],
)
def test_a_bucket_says_what_its_limit_allows(fields: dict[str, Any], kind: Kind, words: str) -> None:
    assert Bucket("x", rule(**fields), ALICE, kind).allows() == words


@pytest.mark.parametrize(
    ("retry_after", "said"),
    [
        (37.2, "limit 'echoes' reached (12 calls per minute); retry in 38 s"),
        (0.01, "limit 'echoes' reached (12 calls per minute); retry in 1 s"),
        (None, "limit 'echoes' reached (12 calls per minute); retry once one of them has finished"),
    ],
)
def test_a_refusal_names_the_limit_and_when_to_retry(retry_after: float | None, said: str) -> None:
    assert str(LimitReached("echoes", "12 calls per minute", retry_after)) == said


def test_status_shows_a_user_as_a_digest_and_the_shared_principals_as_themselves() -> None:
    assert principal_label(ALICE).startswith("user:") and "alice" not in principal_label(ALICE)
    assert principal_label(ALICE) != principal_label(BOB)
    assert principal_label("anonymous") == "anonymous" and principal_label("local") == "local"


# --- the in-process store -----------------------------------------------------------------------------


@pytest.mark.anyio
async def test_memory_store_counts_a_sliding_minute_and_forgets_idle_buckets() -> None:
    clock = Clock()
    store = MemoryLimitStore(clock)
    calls = bucket(Kind.CALLS)
    assert await store.acquire([calls], "a") is None
    clock.now += 10
    assert await store.acquire([calls], "b") is None
    refusal = await store.acquire([calls], "c")
    assert refusal is not None and refusal.bucket == calls and refusal.retry_after == pytest.approx(50.0)
    assert store.usage() == {("l", ALICE): Usage(2, 0)}
    clock.now += 50
    assert await store.acquire([calls], "d") is None  # the first call aged out
    clock.now += 61
    assert store.usage() == {}


@pytest.mark.anyio
async def test_memory_store_takes_every_bucket_or_none() -> None:
    store = MemoryLimitStore(Clock())
    calls, held = bucket(Kind.CALLS, limit="rate"), bucket(Kind.HELD, limit="slots", concurrent=1)
    assert await store.acquire([calls, held], "a") is None
    refusal = await store.acquire([calls, held], "b")
    assert refusal is not None and refusal.bucket == held and refusal.retry_after is None
    assert store.usage()[("rate", ALICE)] == Usage(1, 0)  # the refused call spent no minute
    await store.release([held], "a")
    assert await store.acquire([calls, held], "c") is None
    assert store.usage() == {("rate", ALICE): Usage(2, 0), ("slots", ALICE): Usage(0, 1)}


# --- Limits.hold ----------------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_hold_gives_its_slot_back_after_a_result_an_error_and_a_cancellation() -> None:
    limits = Limits({"one": rule(concurrent=1)})
    who = {"principal": ALICE, "profile": "default", "server": "s", "tool": "s__t"}
    async with limits.hold(**who):
        with pytest.raises(LimitReached, match="limit 'one' reached"):
            async with limits.hold(**who):
                pass
    with pytest.raises(RuntimeError):
        async with limits.hold(**who):
            raise RuntimeError("the upstream failed")
    with anyio.move_on_after(0.05):
        async with limits.hold(**who):
            await anyio.sleep_forever()
    async with limits.hold(**{**who, "principal": BOB}), limits.hold(**who):
        report = limits.report()
    assert [u["concurrent"] for u in report[0]["usage"]] == [1, 1]
    assert limits.refused == {"one": 1} and report[0]["refused"] == 1
    assert limits.report()[0]["usage"] == []


@pytest.mark.anyio
async def test_a_call_no_limit_names_takes_nothing() -> None:
    limits = Limits({"git": rule(server="git", calls_per_minute=1)})
    for _ in range(3):
        async with limits.hold(principal=ALICE, profile="default", server="time", tool="time__now"):
            pass
    assert limits.store.usage() == {}


@pytest.mark.anyio
async def test_the_report_shows_the_busiest_principals_first_and_at_most_a_hundred() -> None:
    limits = Limits({"busy": rule(calls_per_minute=1000)})
    for index in range(150):
        for _ in range(1 + (index == 77) * 4):
            async with limits.hold(principal=f"oauth:{index}", profile="default", server="s", tool="s__t"):
                pass
    (report,) = limits.report()
    assert report["counted"] == 150 and len(report["usage"]) == 100
    assert report["usage"][0] == {"key": principal_label("oauth:77"), "calls_last_minute": 5, "concurrent": 0}


def test_toolbridge_status_prints_each_limit_with_its_busiest_principal(capsys: pytest.CaptureFixture[str]) -> None:
    limit = {
        "limit": "echoes",
        "per": "principal",
        "server": None,
        "tool": "data__echo",
        "calls_per_minute": 12,
        "concurrent": 2,
        "refused": 28,
        "counted": 2,
        "usage": [{"key": "user:0123456789ab", "calls_last_minute": 12, "concurrent": 1}],
    }
    print_status({"upstreams": [], "profiles": {}, "config_problems": [], "limits": [limit]})
    assert capsys.readouterr().out.splitlines()[-1] == (
        "limit echoes: 12 calls per minute and 2 at once, per principal on data__echo; 28 refused; busiest of 2: "
        "user:0123456789ab, 12 calls in the last minute, 1 running"
    )


# --- over a local connection (the real SDK client and server in memory, both eras) ----------------------


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_the_local_client_is_one_principal_and_a_refused_call_never_reaches_the_upstream(mode: str) -> None:
    upstream = Upstream("git", [tool("status"), tool("log")])
    toolsets = ToolsetsConfig.model_validate(
        {"core": ["git__status"], "limits": {"git": {"per": "principal", "server": "git", "calls_per_minute": 3}}}
    )
    async with gateway([upstream], toolsets) as harness:
        for _ in range(2):  # two connections of the one local client share its count
            async with Client(harness.server, mode=mode) as client:
                assert not (await client.call_tool("git__status", {})).is_error
        async with Client(harness.server, mode=mode) as client:
            assert not (await client.call_tool("tool_call", {"name": "git__log", "arguments": {}})).is_error
            refused = [
                await client.call_tool("git__status", {}),
                await client.call_tool("tool_call", {"name": "git__log", "arguments": {}}),
            ]
    for result in refused:
        said = "".join(block.text for block in result.content if isinstance(block, types.TextContent))
        assert result.is_error and said.startswith("limit 'git' reached (3 calls per minute per principal on server")
    assert len(upstream.calls) == 3
    assert harness.handlers.calls.limits.refused == {"git": 2}


# --- the Redis store ------------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_redis_store_counts_one_minute_for_every_replica_all_or_nothing(redis_url: str) -> None:
    async with Redis.from_url(redis_url) as redis:
        first, second = RedisLimitStore(redis), RedisLimitStore(redis)  # two replicas
        calls, held = bucket(Kind.CALLS, limit="rate"), bucket(Kind.HELD, limit="slots", concurrent=1)
        assert await first.acquire([calls, held], "a") is None
        refusal = await second.acquire([calls, held], "b")
        assert refusal is not None and refusal.bucket == held and refusal.retry_after is None
        assert await second.acquire([calls], "c") is None  # the refused call spent no minute
        refusal = await first.acquire([calls], "d")
        assert refusal is not None and refusal.bucket == calls and 59 < refusal.retry_after <= WINDOW
        assert await first.acquire([bucket(Kind.CALLS, key=BOB, limit="rate")], "e") is None
        await first.release([held], "a")
        assert await second.acquire([held], "f") is None
        assert second.usage() == {("rate", ALICE): Usage(2, 0), ("slots", ALICE): Usage(0, 1)}


@pytest.mark.anyio
async def test_a_dead_replicas_slots_expire_and_a_running_calls_are_renewed(redis_url: str) -> None:
    async with Redis.from_url(redis_url) as redis:
        dead, alive = RedisLimitStore(redis, lease_seconds=0.5), RedisLimitStore(redis, lease_seconds=0.5)
        held = bucket(Kind.HELD, concurrent=1)
        assert await dead.acquire([held], "lost") is None  # and never released or renewed
        assert await alive.acquire([held], "a") is not None
        with anyio.fail_after(5):
            while await alive.acquire([held], "a") is not None:
                await anyio.sleep(0.1)
        for _ in range(6):  # renewed for three lease times: nobody else gets the slot
            await anyio.sleep(0.25)
            await alive.renew([held], "a")
            assert await dead.acquire([held], "b") is not None


@pytest.mark.anyio
async def test_limits_renew_the_leases_of_running_calls_until_they_end(redis_url: str) -> None:
    async with Redis.from_url(redis_url) as redis:
        limits = Limits({"one": rule(concurrent=1)}, RedisLimitStore(redis, lease_seconds=0.3))
        other = RedisLimitStore(redis)  # another replica
        held = Bucket("one", rule(concurrent=1), ALICE, Kind.HELD)
        async with anyio.create_task_group() as tg:
            await tg.start(limits.run)
            async with limits.hold(principal=ALICE, profile="default", server="s", tool="s__t"):
                for _ in range(6):  # four lease times
                    await anyio.sleep(0.2)
                    assert await other.acquire([held], "b") is not None
            assert await other.acquire([held], "b") is None  # released at once, not expired
            tg.cancel_scope.cancel()


@pytest.mark.anyio
async def test_redis_down_admits_the_call() -> None:
    async with Redis.from_url("redis://127.0.0.1:1/0", socket_connect_timeout=1) as redis:
        store = RedisLimitStore(redis)
        assert await store.acquire([bucket(Kind.CALLS, calls_per_minute=1)], "a") is None
        await store.release([bucket(Kind.HELD)], "a")


# --- the config -----------------------------------------------------------------------------------------


def problems(tmp_path: Path, toolsets_yaml: str) -> list[str]:
    (tmp_path / "upstreams").mkdir()
    (tmp_path / "upstreams" / "git.yaml").write_text("command: mcp-server-git\n")
    (tmp_path / "toolsets.yaml").write_text(textwrap.dedent(toolsets_yaml).lstrip("\n"))
    return [str(p).removeprefix(f"{tmp_path / 'toolsets.yaml'}:") for p in load_config(tmp_path, environ={}).problems]


def test_limits_load_as_rules(tmp_path: Path) -> None:
    assert (
        problems(
            tmp_path,
            """
        limits:
          per-user: {per: principal, calls_per_minute: 60, concurrent: 4}
          git-writes: {per: profile, tool: "git__commit*", calls_per_minute: 5}
          git: {per: principal, server: git, concurrent: 1}
    """,
        )
        == []
    )


@pytest.mark.parametrize(
    ("entry", "line", "reason"),
    [
        ("x: {per: principal}", 3, "give 'calls_per_minute', 'concurrent' or both"),
        ("x: {per: principal, server: git, tool: git__log, concurrent: 1}", 3, "give 'server' or 'tool', not both"),
        ("x: {per: user, concurrent: 1}", 3, "limits.x.per"),
        ("x: {calls_per_minute: 5}", 3, "limits.x.per"),
        ("x: {per: principal, calls_per_minute: 0}", 3, "limits.x.calls_per_minute"),
        ("x: {per: principal, calls_per_minute: 5, burst: 2}", 3, "limits.x.burst: unknown field"),
        ("x: {per: principal, server: gti, concurrent: 1}", 3, "limits.x.server: unknown server 'gti'; known: git"),
        (
            "x: {per: principal, tool: gti__log, concurrent: 1}",
            3,
            "limits.x.tool: 'gti__log' names no configured server",
        ),
        ("'bad name': {per: principal, concurrent: 1}", 2, "limit name 'bad name' must match"),
    ],
)
def test_a_bad_limit_is_a_problem_at_its_line(tmp_path: Path, entry: str, line: int, reason: str) -> None:
    found = problems(tmp_path, f"core: []\nlimits:\n  {entry}\n")
    assert len(found) == 1 and found[0].startswith(f"{line}:") and reason in found[0], found
