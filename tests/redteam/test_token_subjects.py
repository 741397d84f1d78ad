"""Tokens that name a user without being that user's: a token with no subject, issued to a client whose id
(`client_id`, `azp`) spells a user's subject, and subjects that differ from a user's only in case, spacing or
JSON type. 'Principal: the token's subject at its issuer (or the client it was issued to, if it has no
subject)' (docs/security.md): a client is not the user its id spells, so none of these may reach what the
user made (a task, a pin, a result link). Last, another user's own token on `tasks/update`, the one task
method the other red-team tests leave out. The gateway is `test_profile_crossing`'s."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import httpx2
import pytest
from mcp import MCPError, types
from rt import client, post, text
from servers.tasks_server import TaskClient, poll
from test_profile_crossing import TASK_CAPS, Site, crossing_site, start_task

pytestmark = pytest.mark.anyio

USER = "alice-subject"
LOOKALIKES: dict[str, dict[str, Any]] = {
    "no sub, client_id": {"sub": None, "client_id": USER},
    "no sub, azp": {"sub": None, "azp": USER},
    "empty sub, client_id": {"sub": "", "client_id": USER},
    "sub in capitals": {"sub": USER.upper()},
    "sub with a trailing space": {"sub": f"{USER} "},
    "sub as a list": {"sub": [USER]},
    "sub with a NUL": {"sub": f"{USER}\x00"},
}


@pytest.fixture(scope="module")
async def gateway(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Site]:
    async with crossing_site(tmp_path_factory.mktemp("subjects")) as built:
        yield built


def lookalike(gateway: Site, why: str) -> str:
    return gateway.issuer.token(groups=["admins"], **LOOKALIKES[why])


@pytest.mark.parametrize("why", list(LOOKALIKES))
async def test_a_token_that_spells_a_users_subject_does_not_act_for_that_user(gateway: Site, why: str) -> None:
    """Attacks the principal: each look-alike token (accepted or refused at the door) gets alice's task as an
    unknown task, does not see her pin, and cannot read her result link."""
    alice = gateway.token(USER, ("admins",))
    task_id = await start_task(gateway.url, alice, "jobs__forever", {})
    async with client(gateway.url, token=alice) as mine:
        assert "data__echo" in json.loads(text(await mine.call_tool(
            "tool_describe", {"names": ["data__echo"], "pin": True})))["pinned"]
        link = (await mine.call_tool("data__big", {"size": 2_500})).content[-1]
    assert isinstance(link, types.ResourceLink)
    token = lookalike(gateway, why)
    async with httpx2.AsyncClient(timeout=30) as http:
        status, _ = await post(http, gateway.url, "tools/list", {}, headers={"Authorization": f"Bearer {token}"})
        if status != 200:  # refused at the door: it acts for nobody
            assert status in (401, 403), status
            return
        got = [await post(http, gateway.url, method, {"taskId": task_id}, capabilities=TASK_CAPS,
                          headers={"Authorization": f"Bearer {token}"}) for method in ("tasks/get", "tasks/cancel")]
    async with client(gateway.url, token=token) as other:
        names = {t.name for t in (await other.list_tools()).tools}
        try:
            read = json.dumps([c.model_dump(mode="json")
                               for c in (await other.read_resource(f"{link.uri}?page=2")).contents])
        except MCPError as error:
            read = error.message
    async with client(gateway.url, token=alice, extensions=[TaskClient()]) as mine:
        still = (await poll(mine.session, task_id)).status
    observed = {"task refused": all("result" not in body for _, body in got), "task still working": still == "working",
                "pin unseen": "data__echo" not in names, "link refused": "x" * 100 not in read}
    assert all(observed.values()), observed


async def test_another_user_cannot_answer_a_tasks_input_request(gateway: Site) -> None:
    """Attacks 'a client can poll, update or cancel only tasks made by its own principal' on `tasks/update`:
    bob answers the elicitation alice's task waits on (in each era's headers, with forged session and `_meta`
    owners); the task keeps waiting for alice, whose own answer (the control) completes it."""
    alice = gateway.token("alice-update")
    task_id = await start_task(gateway.url, alice, "jobs__ask", {})
    bob = gateway.token("bob-update")
    injected = {"name": {"action": "accept", "content": {"name": "bob-injected"}}}
    seen = []
    async with httpx2.AsyncClient(timeout=30) as http:
        for headers, extra in (({}, {}), ({"Mcp-Session-Id": json.dumps(["alice-update", "ide"])}, {}),
                               ({}, {"_meta": {"sub": "alice-update", "io.modelcontextprotocol/related-task":
                                               {"taskId": task_id}}})):
            seen.append(await post(http, gateway.url, "tasks/update",
                                   {"taskId": task_id, "inputResponses": injected, **extra}, capabilities=TASK_CAPS,
                                   headers={"Authorization": f"Bearer {bob}", **headers}))
        async with client(gateway.url, token=alice, extensions=[TaskClient()]) as mine:
            waiting = (await poll(mine.session, task_id)).status
            status, _ = await post(http, gateway.url, "tasks/update", {
                "taskId": task_id, "inputResponses": {"name": {"action": "accept", "content": {"name": "alice"}}}},
                capabilities=TASK_CAPS, headers={"Authorization": f"Bearer {alice}"})
            done = (await poll(mine.session, task_id)).model_dump(mode="json")
    assert all("result" not in body for _, body in seen), seen
    assert waiting == "input_required" and status == 200 and "hello alice" in json.dumps(done), (waiting, done)
