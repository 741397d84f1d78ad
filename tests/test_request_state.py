"""Sealed `requestState`: one key for every replica sharing a Redis, refused when altered or not the sender's."""

from __future__ import annotations

import pytest
from mcp import MCPError, types

from proxy.downstream import RequestStates
from proxy.replicated import open_shared_state

pytestmark = pytest.mark.anyio


def _refusal(states: RequestStates, state: str, principal: str) -> str:
    with pytest.raises(MCPError) as refused:
        states.open(state, principal)
    assert refused.value.code == types.INVALID_PARAMS
    return refused.value.message


async def test_replicas_sharing_redis_seal_with_one_key_and_name_the_replica_of_a_call(redis_url: str) -> None:
    async with open_shared_state(redis_url) as first, open_shared_state(redis_url) as second:
        key = await first.signing_key()
        assert await second.signing_key() == key
    a, b = RequestStates(key, "replica-a"), RequestStates(key, "replica-b")
    state = a.seal("call-1", "alice")
    assert a.open(state, "alice") == "call-1"
    assert "replica-a" in _refusal(b, state, "alice")  # verified, and told where the call lives
    stranger = RequestStates(bytes(32), "replica-a")
    assert "unknown or expired" in _refusal(stranger, state, "alice")


async def test_without_redis_each_process_has_its_own_key() -> None:
    async with open_shared_state(None) as first, open_shared_state(None) as second:
        assert await first.signing_key() != await second.signing_key()


def test_an_altered_state_or_another_principals_is_refused() -> None:
    states = RequestStates(bytes(range(32)))
    state = states.seal("call-1", "alice")
    assert "unknown or expired" in _refusal(states, state, "bob")
    for altered in (state[:-1] + ("A" if state[-1] != "A" else "B"), state + "x", "v1.garbage", ""):
        assert "unknown or expired" in _refusal(states, altered, "alice")
