"""Telling each session that a list it was given changed: tools, prompts, resources.

A session is told `notifications/<kind>/list_changed` when, and only when, the list it would get
now differs from the last one it got or was told of: handshake-era clients on their connection,
2026-era clients on their `subscriptions/listen` stream. Both are subscribers here, so one pass
after each (coalesced) registry change covers everyone.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Hashable, Iterable
from dataclasses import dataclass
from typing import Literal

import anyio
import anyio.abc
from mcp import types

from proxy.downstream.lists._promotion import Promoter
from proxy.views import SessionView, Views

logger = logging.getLogger(__name__)

Kind = Literal["tools", "prompts", "resources"]
KINDS: tuple[Kind, ...] = ("tools", "prompts", "resources")
Notify = Callable[[Kind], Awaitable[None]]
LIST_CHANGED: dict[Kind, type[types.ServerNotification]] = {
    "tools": types.ToolListChangedNotification,
    "prompts": types.PromptListChangedNotification,
    "resources": types.ResourceListChangedNotification,
}

_COALESCE_SECONDS = 0.05
_MAX_TRACKED_SESSIONS = 4096
_NOTIFY_TIMEOUT = 5.0


@dataclass
class _Subscriber:
    """A session, the kinds it wants to hear of, and the fingerprint of each list it last got."""

    profile: str
    fingerprints: dict[Kind, str]
    notify: Notify
    session: Hashable  # the session it belongs to (a listen stream is not a session of its own)


class ChangeNotifier:
    """Announces list changes to each session: once per change, never when its lists did not change."""

    def __init__(self, views: Views, promoter: Promoter | None = None) -> None:
        """`promoter` decides what each session gets listed beyond its profile (a fresh one: nobody shares it)."""
        self.views = views
        self.promoter = promoter if promoter is not None else Promoter(views)
        self.announced = views.registry.generation
        self._promotions_compared = self.promoter.generation
        self.sent = 0  # list_changed notifications delivered, for the operator's metrics
        self._subscribers: OrderedDict[Hashable, _Subscriber] = OrderedDict()
        self._pass_done = anyio.Event()

    def remember(
        self, key: Hashable, view: SessionView, notify: Notify, kinds: Iterable[Kind] = KINDS,
        session: Hashable | None = None,
    ) -> None:
        """The session got (or was told of) `kinds` of lists as in `view`; it wants to hear of changes.

        `key` names the subscription (a connection, or a listen stream of `session`).
        """
        session = key if session is None else session
        current = self._fingerprints(session, view)
        subscriber = self._subscribers.get(key)
        if subscriber is None or subscriber.profile != view.profile:
            subscriber = self._subscribers[key] = _Subscriber(view.profile, {}, notify, session)
        subscriber.notify = notify
        for kind in kinds:
            subscriber.fingerprints[kind] = current[kind]
        self._subscribers.move_to_end(key)
        while len(self._subscribers) > _MAX_TRACKED_SESSIONS:
            self._subscribers.popitem(last=False)

    def forget(self, key: Hashable) -> None:
        self._subscribers.pop(key, None)

    @property
    def sessions(self) -> int:
        """Sessions that would be told of a change: handshake-era ones that listed, and listen streams."""
        return len(self._subscribers)

    async def wait_announced(self, generation: int) -> None:
        """Return once every change up to `generation` has been announced to whom it concerns."""
        while self.announced < generation:
            await self._pass_done.wait()

    async def wait_rechecked(self) -> None:
        """Return once the lists have been compared since the promoter's latest change."""
        asked = self.promoter.generation
        while self._promotions_compared < asked:
            await self._pass_done.wait()

    def _fingerprints(self, key: Hashable, view: SessionView) -> dict[Kind, str]:
        return {"tools": self.promoter.tools_fingerprint(key, view), "prompts": view.catalog.prompts_fingerprint,
                "resources": view.catalog.resources_fingerprint}

    async def _next_change(self) -> None:
        """Return at the next registry change, change of promotions, or when the fleet settles."""
        async with anyio.create_task_group() as tg:

            async def wait_then_stop(wait: Callable[[], Awaitable[object]]) -> None:
                await wait()
                tg.cancel_scope.cancel()

            tg.start_soon(wait_then_stop, lambda: self.views.registry.wait_for_change(self.announced))
            tg.start_soon(wait_then_stop, lambda: self.promoter.wait_changed(self._promotions_compared))
            if self.views.settled is not None and not self.views.settled.is_set():  # see `Views.settled`
                tg.start_soon(wait_then_stop, self.views.settled.wait)

    async def run(self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Notify the sessions whose lists changed, after every change, until cancelled."""
        registry = self.views.registry
        task_status.started()
        while True:
            await self._next_change()
            await anyio.sleep(_COALESCE_SECONDS)  # a burst of changes becomes one announcement
            generation, promotions = registry.generation, self.promoter.generation
            for key, subscriber in list(self._subscribers.items()):
                current = self._fingerprints(subscriber.session, self.views.for_profile(subscriber.profile))
                for kind, fingerprint in list(subscriber.fingerprints.items()):
                    if current[kind] == fingerprint:
                        continue
                    subscriber.fingerprints[kind] = current[kind]
                    if not await self._notify(subscriber, kind):
                        self.forget(key)
                        break
                    self.sent += 1
            self.announced = generation
            self._promotions_compared = promotions
            self._pass_done.set()
            self._pass_done = anyio.Event()

    @staticmethod
    async def _notify(subscriber: _Subscriber, kind: Kind) -> bool:
        """Send one list_changed; a connection that fails or stalls is forgotten, never waited on."""
        with anyio.move_on_after(_NOTIFY_TIMEOUT):
            try:
                await subscriber.notify(kind)
            except Exception as exc:  # a dead connection must not stop the others' notifications
                logger.debug("dropping a session whose connection failed: %s", exc)
                return False
            return True
        return False
