"""The `requestState` toolbridge hands a 2026-era client: sealed, and good only for the owner it was given to.

A client echoes the state back with its answers, and a client is not trusted with it: another user
who learned a token could otherwise answer a sampling request in the caller's name. So the state is
sealed with AES-256-GCM (the SDK's codec) under a key every replica holds (`SharedState.signing_key`), and names
the call, its owner (the principal that started it, in the profile it was started in) and the replica that runs
it. A state that was altered, that another principal or the same one in another profile sends, or that names
another replica's call is refused before any answer is taken from it.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass

from mcp import MCPError, types
from mcp.server.request_state import AESGCMRequestStateCodec, InvalidRequestState

__all__ = ["RequestStates"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class _Claims:
    call: str
    owner: str
    replica: str | None


class RequestStates:
    """Seals and opens the states of the calls in flight on this replica (`replica`: its id, if several)."""

    def __init__(self, key: bytes, replica: str | None = None) -> None:
        self._codec = AESGCMRequestStateCodec([key])
        self._replica = replica

    def seal(self, call: str, owner: str) -> str:
        payload = {"call": call, "owner": owner, "replica": self._replica}
        return self._codec.seal(json.dumps(payload, separators=(",", ":")).encode())

    def open(self, state: str, owner: str) -> str:
        """The call a state names, when `owner` may answer it here.

        Raises:
            MCPError: the state was not sealed by toolbridge as is, is another owner's, or names
                a call on another replica.
        """
        claims = self._claims(state)
        if claims is None or claims.owner != owner:
            logger.warning("refused a requestState that %s",
                           "is not one toolbridge sealed" if claims is None else "another owner was given")
            raise MCPError(types.INVALID_PARAMS, "toolbridge: unknown or expired requestState")
        if claims.replica != self._replica:
            raise MCPError(types.INVALID_PARAMS, f"toolbridge: this requestState belongs to a call on replica "
                                                 f"{claims.replica}, not on this one ({self._replica})")
        return claims.call

    def _claims(self, state: str) -> _Claims | None:
        try:
            payload = json.loads(self._codec.unseal(state))
            return _Claims(str(payload["call"]), str(payload["owner"]), payload["replica"])
        except (InvalidRequestState, ValueError, KeyError, TypeError):
            return None
