"""Where an OAuth upstream's tokens and client registration live between runs.

One record per server, kept in the OS keyring when one is usable, else in
`<config-dir>/.secrets/<server>.json` (directory 0700, file 0600, written atomically). The record
is the SDK's `TokenStorage`, plus the absolute expiry of the access token, so a restarted
toolbridge knows a stored token is stale and refreshes it instead of sending it.

Credentials belong to the authorization server that issued them (the 2026-07-28 spec keeps them
per issuer). The record's top-level entry is that of `issuer`, the one last used; when the
upstream turns out to use another issuer, that entry moves under `other_issuers` and the new
issuer's own entry (or none) takes its place: one issuer's tokens are never handed out for another.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any, Protocol

import anyio.to_thread
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken

from proxy.config import UpstreamConfig

KEYRING_SERVICE = "toolbridge"
ENTRY_KEYS = ("tokens", "expires_at", "client")  # what one issuer's entry holds


class _Backend(Protocol):
    def read(self) -> str | None: ...

    def write(self, text: str) -> None: ...



class _FileBackend:
    def __init__(self, path: Path) -> None:
        self.path = path

    def read(self) -> str | None:
        try:
            return self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return None

    def write(self, text: str) -> None:
        self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        os.chmod(self.path.parent, 0o700)
        partial = self.path.with_name(f".{self.path.name}.partial")
        descriptor = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.replace(partial, self.path)


class _KeyringBackend:
    def __init__(self, account: str) -> None:
        self.account = account

    def read(self) -> str | None:
        return _keyring().get_password(KEYRING_SERVICE, self.account)

    def write(self, text: str) -> None:
        _keyring().set_password(KEYRING_SERVICE, self.account, text)


def _keyring() -> ModuleType:
    """`keyring`, imported when an OAuth upstream first needs it: no other process pays for its import."""
    import keyring

    return keyring


def keyring_usable() -> bool:
    """True when `keyring` found a real backend (on a headless machine it has only its failing one)."""
    return bool(_keyring().get_keyring().priority > 0)


class TokenStore:
    """The SDK's `TokenStorage` for one upstream, over the keyring or a private file.

    A configured `client_id` (and secret) is the client registration; only a dynamically
    registered client (or a metadata document's) is stored. `issuer_of` says which issuer the flow
    is dealing with, once it knows (None before discovery, e.g. when loading at start).
    """

    def __init__(self, config: UpstreamConfig, config_dir: Path, redirect_uri: str) -> None:
        assert config.auth is not None
        self.config = config
        self.redirect_uri = redirect_uri
        self.issuer_of: Callable[[], str | None] = lambda: None
        if keyring_usable():
            self.backend: _Backend = _KeyringBackend(f"{config.name} {config.url}")
            self.location = f"the OS keyring ({KEYRING_SERVICE}: {config.name})"
        else:
            path = config_dir / ".secrets" / f"{config.name}.json"
            self.backend = _FileBackend(path)
            self.location = str(path)

    async def _record(self) -> dict[str, Any]:
        text = await anyio.to_thread.run_sync(self.backend.read)
        if not text:
            return {}
        try:
            record = json.loads(text)
        except ValueError:
            return {}  # a damaged record means: log in again
        return record if isinstance(record, dict) else {}

    async def _entry(self) -> dict[str, Any]:
        """The stored entry of the issuer in use (the last one used while it is not known yet)."""
        record = await self._record()
        issuer = self.issuer_of()
        if issuer is None or record.get("issuer") in (None, issuer):
            return record
        others = record.get("other_issuers")
        entry = others.get(issuer) if isinstance(others, dict) else None
        return entry if isinstance(entry, dict) else {}

    async def _update(self, **changes: Any) -> None:
        record = await self._record()
        issuer = self.issuer_of()
        if issuer is not None and record.get("issuer") not in (None, issuer):
            record = _switched(record, issuer)
        if issuer is not None:
            record["issuer"] = issuer
        await anyio.to_thread.run_sync(self.backend.write, json.dumps({**record, **changes}))

    async def get_tokens(self) -> OAuthToken | None:
        """The stored tokens, `expires_in` counted from now (0 once past the recorded expiry)."""
        record = await self._entry()
        if "tokens" not in record:
            return None
        tokens = OAuthToken.model_validate(record["tokens"])
        expires_at = record.get("expires_at")
        if isinstance(expires_at, int | float):
            tokens.expires_in = max(0, int(expires_at - time.time()))
        return tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        expires_at = time.time() + tokens.expires_in if tokens.expires_in is not None else None
        await self._update(tokens=tokens.model_dump(mode="json", exclude_none=True), expires_at=expires_at)

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        settings = self.config.auth
        assert settings is not None
        if settings.client_id is not None:
            return OAuthClientInformationFull(
                client_id=settings.client_id,
                client_secret=settings.client_secret,
                redirect_uris=[self.redirect_uri],  # type: ignore[list-item]
                # with a secret, the method is the authorization server's choice, known once its metadata is
                token_endpoint_auth_method=None if settings.client_secret else "none",
            )
        record = await self._entry()
        if "client" not in record:
            return None
        return OAuthClientInformationFull.model_validate(record["client"])

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        if self.config.auth is not None and self.config.auth.client_id is None:
            await self._update(client=client_info.model_dump(mode="json", exclude_none=True))

    async def stamp(self) -> str:
        """A fingerprint of the stored tokens, to notice a `toolbridge login` (from any process)."""
        tokens = (await self._entry()).get("tokens")
        return hashlib.sha256(json.dumps(tokens, sort_keys=True).encode()).hexdigest()


def _switched(record: dict[str, Any], issuer: str) -> dict[str, Any]:
    """`record` with `issuer`'s entry on top and the previous issuer's filed under `other_issuers`."""
    others = record.get("other_issuers")
    others = dict(others) if isinstance(others, dict) else {}
    others[record["issuer"]] = {key: record[key] for key in ENTRY_KEYS if key in record}
    entry = others.pop(issuer, None)
    switched = dict(entry) if isinstance(entry, dict) else {}
    if others:
        switched["other_issuers"] = others
    return switched
