"""Large results become a preview plus a `toolbridge://results/<id>` resource link, read in pages.

A 2 MB tool result pushed whole into a client's context costs more than the answer is worth, and
clients cut it each in their own way (Claude Code spills or truncates past its own limit). So
toolbridge cuts it, in one place: when a result's text passes `large_results.max_chars`, the
client gets the first part of it, a note saying how to read on, and a `resource_link`; the whole
text waits in the result store (bounded, expiring; shared by replicas through Redis) and is read
with `resources/read` on `toolbridge://results/<id>?page=N`, one `max_chars` page at a time.

A result is the answer to one principal in one profile, and may hold what nobody else is allowed
to see (a server outside their scope, another user's data). So it is stored with its owner, a
digest of that principal and profile, and read back only by the same owner; anyone else is told
the link is unknown, exactly as for a link that never existed, so a link proves nothing either.
"""

from __future__ import annotations

import hashlib
import hmac
from urllib.parse import parse_qs, urlsplit

from mcp import types

from proxy.downstream.session import in_profile
from proxy.replicated import ResultStore, StoredResult

__all__ = ["RESULTS_PREFIX", "LargeResults", "result_owner"]

RESULTS_PREFIX = "toolbridge://results/"
PREVIEW_CHARS = 2_000


def result_owner(principal: str, profile: str) -> str:
    """Who may read a stored result: the digest keeps subjects out of the shared store."""
    return hashlib.sha256(in_profile(principal, profile).encode()).hexdigest()


class LargeResults:
    """Cuts results whose text passes `max_chars`, and reads the stored whole back in pages."""

    def __init__(self, store: ResultStore, max_chars: int) -> None:
        self.store = store
        self.max_chars = max_chars

    async def cut(self, result: types.CallToolResult, owner: str) -> types.CallToolResult:
        """The result as is when small; else a preview, a note and a link to the text stored for `owner`.

        Only text is cut: images, audio and embedded resources pass through, and so does the
        structured content (a client validates it against the tool's output schema).
        """
        texts = [block.text for block in result.content if isinstance(block, types.TextContent)]
        if sum(map(len, texts)) + len(texts) - 1 <= self.max_chars:  # the joined length, without joining
            return result
        text = "\n".join(texts)
        result_id = await self.store.put(StoredResult(text, owner))
        pages = -(-len(text) // self.max_chars)
        uri = f"{RESULTS_PREFIX}{result_id}"
        note = (f"\n\n[toolbridge: the result is {len(text):,} characters; this is the first {PREVIEW_CHARS:,}. "
                f"Read it all with resources/read on {uri}?page=1 … ?page={pages} ({self.max_chars:,} each).]")
        link = types.ResourceLink(
            type="resource_link", uri=uri, name=f"result {result_id[:8]}", mime_type="text/plain",
            size=len(text.encode()), description=f"The whole result: {pages} page(s) of {self.max_chars:,} characters",
        )
        kept = [block for block in result.content if not isinstance(block, types.TextContent)]
        preview = types.TextContent(type="text", text=text[:PREVIEW_CHARS] + note)
        return result.model_copy(update={"content": [preview, *kept, link]})

    @staticmethod
    def owns(uri: str) -> bool:
        return uri.startswith(RESULTS_PREFIX)

    async def read(self, uri: str, owner: str) -> types.ReadResourceResult:
        """One page of a result stored for `owner` (`?page=N`, from 1; the first by default).

        Raises:
            ValueError: an unknown, expired or someone else's result, or a page out of range.
        """
        parts = urlsplit(uri)
        result_id = uri[len(RESULTS_PREFIX):].split("?", 1)[0]
        stored = await self.store.get(result_id)
        if stored is None or not hmac.compare_digest(stored.owner, owner):
            raise ValueError(f"no stored result {result_id!r} (unknown, or expired)")
        pages = max(1, -(-len(stored.text) // self.max_chars))
        try:
            page = int(parse_qs(parts.query).get("page", ["1"])[0])
        except ValueError:
            raise ValueError("page must be a whole number") from None
        if not 1 <= page <= pages:
            raise ValueError(f"page {page} is out of range: this result has {pages} page(s)")
        text = stored.text[(page - 1) * self.max_chars : page * self.max_chars]
        contents = types.TextResourceContents(uri=uri, mime_type=stored.mime_type, text=text,
                                              _meta={"toolbridge/page": page, "toolbridge/pages": pages})
        return types.ReadResourceResult(contents=[contents])
