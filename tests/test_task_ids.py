"""Task ids handed downstream (issue 22): opaque, signed, bound to an owner in a profile, led by their replica."""

from __future__ import annotations

import re

from proxy.downstream import REPLICA_ID_PATTERN, TaskIds, new_replica_id
from proxy.downstream.session import in_profile

KEY = b"k" * 32


def test_an_id_opens_to_its_server_upstream_id_and_owner_in_a_profile_under_the_same_key() -> None:
    ids = TaskIds(KEY, "toolbridge-0")
    task_id = ids.mint("jobs", "task-1", in_profile("alice", "default"))
    assert task_id.startswith("toolbridge-0.") and "task-1" not in task_id and "alice" not in task_id
    ref = TaskIds(KEY, "toolbridge-1").open(task_id)  # another replica sharing the key
    assert ref is not None and (ref.replica, ref.server, ref.upstream_id) == ("toolbridge-0", "jobs", "task-1")
    assert ref.owner == ids.digest(in_profile("alice", "default"))
    assert ref.owner not in (ids.digest(in_profile("bob", "default")), ids.digest(in_profile("alice", "ops")))
    assert in_profile("a", "b,c") != in_profile("a,b", "c")  # no two bindings spell alike


def test_an_altered_or_foreign_id_opens_to_nothing() -> None:
    ids = TaskIds(KEY, "toolbridge-0")
    task_id = ids.mint("jobs", "task-1", in_profile("alice", "default"))
    replica, payload, signature = task_id.split(".")
    assert TaskIds(b"x" * 32, "toolbridge-0").open(task_id) is None  # another key
    assert ids.open(f"toolbridge-1.{payload}.{signature}") is None  # the replica changed
    altered = payload[:-1] + ("A" if payload[-1] != "A" else "B")
    assert ids.open(f"{replica}.{altered}.{signature}") is None
    assert ids.open("task-1") is None and ids.open("") is None and ids.open("a.b.c") is None


def test_a_replica_id_made_up_is_a_dns_label() -> None:
    assert re.fullmatch(REPLICA_ID_PATTERN, new_replica_id()) and new_replica_id() != new_replica_id()
