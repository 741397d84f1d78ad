"""One OAuth upstream's need for the user's consent, as the fleet sees it while serving.

Each connection authenticates with a serving `oauth_auth`, which never waits for a person: a flow
that needs one marks `needed` and stops with `UpstreamNeedsAuth` — when connecting, or in the
middle of a call whose token was revoked (that request was refused with a 401, so it never ran)
or lacks a scope the call needs (a 403 `insufficient_scope`: `scope` is then the wider one to ask
for, the stored token being valid for the rest). The supervisor then waits for new stored
credentials (`wait_for_login`); a caller asks its client to get them (`ask`, a URL elicitation),
one at a time since they share the redirect port.
"""

from __future__ import annotations

from pathlib import Path

import anyio
import httpx2

from proxy.config import UpstreamConfig
from proxy.errors import UpstreamNeedsAuth
from proxy.protocol import BackChannel
from proxy.upstream.oauth._login import login_by_elicitation
from proxy.upstream.oauth._provider import oauth_auth, token_store

LOGIN_POLL = 2.0  # how often a server waiting for consent checks whether a login stored tokens


class Consent:
    def __init__(self, config: UpstreamConfig, config_dir: Path, poll: float) -> None:
        self.config = config
        self.config_dir = config_dir
        self.poll = poll
        self.needed = False
        self.scope: str | None = None
        self._stamp = ""
        self._asking = anyio.Lock()

    async def serving_auth(self) -> httpx2.Auth:
        """The auth for the next connection; notes the stored credentials it starts from."""
        self._stamp = await token_store(self.config, self.config_dir).stamp()
        self.needed = False

        def stopped(scope: str | None) -> None:
            self.needed = True
            self.scope = scope

        return oauth_auth(self.config, self.config_dir, on_needs_consent=stopped)

    async def wait_for_login(self, timeout: float) -> None:
        """Return once the stored credentials differ from those the last connection started from
        (a login, here or in another process), or after `timeout`."""
        store = token_store(self.config, self.config_dir)
        with anyio.move_on_after(timeout):
            while await store.stamp() == self._stamp:
                await anyio.sleep(self.poll)

    async def ask(self, channel: BackChannel | None) -> None:
        """Get consent through the caller's client, unless another caller already did.

        Raises:
            UpstreamNeedsAuth: no caller to ask, its client cannot open a URL, or the user declined.
        """
        if channel is None:
            raise UpstreamNeedsAuth(self.config.name)
        async with self._asking:
            if self.needed:
                await login_by_elicitation(self.config, self.config_dir, channel, scope=self.scope)
                self.needed = False
