"""Array scoring for the lexical index (SPEC §6.6 at fleet scale): numpy in place of per-posting Python loops.

Documents get dense integer ids, reused after removal so a server's update stays incremental. Each server
keeps its postings per term as arrays (document ids and a per-field tf matrix); a term's arrays over all
servers are joined on first use after a change. A query adds up all its terms in one `np.bincount`, which
sums each document's contributions one after another in query-term order, like the dict loop it replaced.
Every product and sum keeps that scalar code's operation order, so scores, and therefore rankings and
their ties, are the same to the last bit.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Generic, NamedTuple, TypeVar

import numpy as np
import numpy.typing as npt

Ids = npt.NDArray[np.intp] | npt.NDArray[np.int32]
Floats = npt.NDArray[np.float64]
Counts = npt.NDArray[np.uint8] | npt.NDArray[np.uint16]
Chunk = tuple[Ids, Counts]  # postings: document ids and, per id, the term's frequency in each field
A = TypeVar("A", bound=tuple[npt.NDArray[Any], ...])

# Bytes of joined postings, and of impacts, kept per term, least recently used out first: at 50,000 tools
# a common term's take ~0.2 MB, the dev queries' ~12 MB in all, and every term's ~3 copies of the postings.
TERM_CACHE_BYTES = 8 << 20


class DocIds:
    """Dense document ids with a free list, and each id's token count per field (zero for a free id)."""

    def __init__(self, n_fields: int) -> None:
        self.names: list[str] = []  # "" marks a free id
        self._free: list[int] = []
        self.lengths = np.zeros((0, n_fields), dtype=np.int32)
        self.servers = np.zeros(0, dtype=np.int32)  # each id's server number (`SearchIndex` numbers servers)

    @property
    def capacity(self) -> int:
        """Ids handed out so far, free or not: the length of every per-document array."""
        return len(self.names)

    def add(self, name: str, lengths: Sequence[int], server: int) -> int:
        """An id for `name`, a freed one first so arrays do not grow with churn."""
        if self._free:
            doc_id = self._free.pop()
            self.names[doc_id] = name
        else:
            doc_id = len(self.names)
            self.names.append(name)
            if doc_id >= len(self.lengths):
                grown = np.zeros((max(64, 2 * len(self.lengths)), self.lengths.shape[1]), dtype=np.int32)
                grown[: len(self.lengths)] = self.lengths
                self.lengths = grown
                self.servers = np.concatenate([self.servers, np.zeros(len(grown) - len(self.servers), np.int32)])
        self.lengths[doc_id] = lengths
        self.servers[doc_id] = server
        return doc_id

    def remove(self, doc_id: int) -> None:
        self.names[doc_id] = ""
        self.lengths[doc_id] = 0
        self._free.append(doc_id)


def field_factors(
    lengths: npt.NDArray[np.int32], weights: Sequence[float], bs: Sequence[float], avgs: Sequence[float]
) -> Floats:
    """BM25F per-field multipliers w_f / (1 - b_f + b_f * len_f / avg_f), one row per document id."""
    out = np.empty(lengths.shape, dtype=np.float64)
    for f, (w, b, avg) in enumerate(zip(weights, bs, avgs, strict=True)):
        out[:, f] = w / (1 - b + b * lengths[:, f] / avg)
    return out


class Block:
    """One server's postings in flat arrays, CSR-style: the term ids it has (sorted), where each term's
    rows start, then every row's document id and per-field term frequencies. A few bytes per posting,
    against a pair of array views (~200 bytes) per term and server.

    Stored smaller than scoring reads them, since a block is kept for good and read a term at a time:
    ids as uint16 above the block's lowest (a server's documents are mostly contiguous), and counts
    two to a byte, 15 standing for "see `big`", which holds the few larger ones (~0.2% of postings).
    `joined` gives back int32 ids and a uint8 (or uint16) count per field, exactly as built.
    """

    __slots__ = ("base", "big", "big_offsets", "dtype", "ids", "n_fields", "offsets", "term_ids", "tfs")

    def __init__(self, rows: Mapping[int, tuple[Sequence[int], Sequence[tuple[int, ...]]]], n_fields: int) -> None:
        order = sorted(rows)
        self.n_fields = n_fields
        self.term_ids = np.array(order, dtype=np.int32)
        sizes = [len(rows[t][0]) for t in order]
        self.offsets = np.zeros(len(order) + 1, dtype=np.int32)
        np.cumsum(sizes, out=self.offsets[1:])
        ids = np.fromiter(itertools.chain.from_iterable(rows[t][0] for t in order), dtype=np.int32)
        self.base = int(ids.min()) if len(ids) else 0
        narrow = int(ids.max(initial=self.base)) - self.base <= np.iinfo(np.uint16).max
        self.ids = (ids - self.base).astype(np.uint16 if narrow else np.int32)
        # Counts saturate at 65,535 (a field repeating one word that often); scoring widens them to float64.
        counts = np.array([tf for t in order for tf in rows[t][1]], dtype=np.int64).reshape(-1, n_fields)
        counts = np.minimum(counts, np.iinfo(np.uint16).max)
        self.dtype = np.dtype(np.uint8 if counts.max(initial=0) <= np.iinfo(np.uint8).max else np.uint16)
        big_rows, big_fields = np.nonzero(counts >= _NIBBLE)  # in row order, so each term's are together
        big_values = counts[big_rows, big_fields].astype(self.dtype)
        self.big = (big_rows.astype(np.int32), big_fields.astype(np.uint8), big_values)
        self.big_offsets = np.searchsorted(big_rows, self.offsets).astype(np.int32)  # each term's first in `big`
        nibbles = np.minimum(counts, _NIBBLE).astype(np.uint8)
        if n_fields % 2:
            nibbles = np.pad(nibbles, ((0, 0), (0, 1)))
        self.tfs = nibbles[:, 0::2] | (nibbles[:, 1::2] << 4)

    def get(self, term_id: int) -> Part | None:
        """The term's rows here, still packed (`joined` unpacks every server's at once)."""
        at = int(self.term_ids.searchsorted(term_id))
        if at == len(self.term_ids) or self.term_ids[at] != term_id:
            return None
        start, end = int(self.offsets[at]), int(self.offsets[at + 1])
        lo, hi = int(self.big_offsets[at]), int(self.big_offsets[at + 1])
        rows, fields, values = self.big
        big = (rows[lo:hi] - start, fields[lo:hi], values[lo:hi]) if hi > lo else None
        return Part(self.ids[start:end], self.base, self.tfs[start:end], self.n_fields, self.dtype, big)


class Part(NamedTuple):
    """One block's rows of one term, as stored (see `Block`)."""

    ids: npt.NDArray[np.uint16] | npt.NDArray[np.int32]
    base: int
    tfs: npt.NDArray[np.uint8]
    n_fields: int
    dtype: np.dtype[Any]  # of the counts as built: uint8, or uint16 where one passed 255
    big: Big | None


Big = tuple[npt.NDArray[np.int32], npt.NDArray[np.uint8], Counts]  # rows, fields and counts of 15 or more
_NIBBLE = 15  # the largest count stored in its half byte; a count of 15 or more is looked up in `Block.big`


def joined(parts: Sequence[Part]) -> Chunk:
    """A term's postings over all servers, unpacked: int32 document ids and a count per field (uint8,
    or uint16 if any server's needs it). Which document comes first does not matter to any sum."""
    sizes = [len(part.ids) for part in parts]
    ids = np.concatenate([part.ids for part in parts]).astype(np.int32)
    ids += np.repeat(np.array([part.base for part in parts], dtype=np.int32), sizes)
    packed = np.concatenate([part.tfs for part in parts])
    counts = np.empty((len(packed), 2 * packed.shape[1]), dtype=np.result_type(*(part.dtype for part in parts)))
    counts[:, 0::2], counts[:, 1::2] = packed & 0x0F, packed >> 4
    counts = counts[:, : parts[0].n_fields]
    for at, part in zip(itertools.accumulate(sizes, initial=0), parts, strict=False):
        if part.big is not None:
            rows, fields, values = part.big
            counts[at + rows, fields] = values
    return ids, counts


def impacts(ids: Ids, tfs: Counts, factors: Floats, k1: float) -> Floats:
    """Saturated BM25F tf per posting; fields are added left to right with plain float additions."""
    weighted = tfs * factors[ids]
    tf = weighted[:, 0].copy()
    for f in range(1, weighted.shape[1]):
        tf += weighted[:, f]
    return tf * (k1 + 1) / (tf + k1)


def accumulate(plan: Sequence[tuple[float, Ids, Floats]], size: int, best: int = 0) -> Floats:
    """Each document's sum of idf * impact over the plan's terms, added in plan order; with `best`, over only its
    `best` largest (a plan of no more terms sums them all, unsorted)."""
    if not plan:
        return np.zeros(size)
    ids = np.concatenate([term_ids for _, term_ids, _ in plan])
    weights = np.concatenate([idf * term_impacts for idf, _, term_impacts in plan])
    if best and len(plan) > best:
        crowded = np.bincount(ids, minlength=size)[ids] > best  # only these documents' terms need sorting
        if crowded.any():
            few = np.bincount(ids[~crowded], weights=weights[~crowded], minlength=size)
            ids, weights = ids[crowded], weights[crowded]
            order = np.lexsort((-weights, ids))  # by document, each document's terms largest first
            ids, weights = ids[order], weights[order]
            firsts = np.flatnonzero(np.r_[True, ids[1:] != ids[:-1]])
            ranks = np.arange(len(ids)) - np.repeat(firsts, np.diff(np.r_[firsts, len(ids)]))
            return few + np.bincount(ids[ranks < best], weights=weights[ranks < best], minlength=size)
    return np.bincount(ids, weights=weights, minlength=size)


def mask(size: int, ids: Sequence[int]) -> npt.NDArray[np.bool_]:
    """A boolean selector of `ids` over all document ids."""
    out = np.zeros(size, dtype=np.bool_)
    out[np.asarray(ids, dtype=np.intp)] = True
    return out


def top_boosted(scores: Floats, limit: int, max_boost: float, boost: Callable[[int, float], float]) -> dict[int, float]:
    """Boosted scores of every document that can still rank in the top `limit`, given that `boost` multiplies
    a score by at most `max_boost`. Documents are boosted best score first until none further down can
    reach the `limit`-th boosted score so far (with slack for rounding), so a query matching thousands of
    tools boosts a few dozen."""
    ids = np.flatnonzero(scores)
    kept = scores[ids]
    if len(ids) > limit:
        kth = float(np.partition(kept, len(ids) - limit)[len(ids) - limit])
        chosen = kept >= kth / max_boost * (1 - 1e-9)
        ids, kept = ids[chosen], kept[chosen]
    order = np.argsort(-kept, kind="stable")
    out: dict[int, float] = {}
    best: list[float] = []  # min-heap of the `limit` best boosted scores
    for doc_id, score in zip(ids[order].tolist(), kept[order].tolist(), strict=True):
        if len(best) == limit and score * max_boost < best[0] * (1 - 1e-9):
            break
        out[doc_id] = boosted = boost(doc_id, score)
        if len(best) < limit:
            heapq.heappush(best, boosted)
        elif boosted > best[0]:
            heapq.heapreplace(best, boosted)
    return out


class TermCache(Generic[A]):
    """Arrays per term, least recently used out first once they take over TERM_CACHE_BYTES."""

    def __init__(self) -> None:
        self._items: dict[str, A] = {}
        self._bytes = 0

    def __len__(self) -> int:
        return len(self._items)

    def get(self, term: str) -> A | None:
        value = self._items.pop(term, None)
        if value is not None:
            self._items[term] = value  # now the most recently used
        return value

    def put(self, term: str, value: A) -> None:
        self.discard(term)
        self._items[term] = value
        self._bytes += _nbytes(value)
        while self._bytes > TERM_CACHE_BYTES and len(self._items) > 1:
            self.discard(next(iter(self._items)))

    def discard(self, term: str) -> None:
        value = self._items.pop(term, None)
        if value is not None:
            self._bytes -= _nbytes(value)

    def clear(self) -> None:
        self._items.clear()
        self._bytes = 0


def _nbytes(arrays: tuple[npt.NDArray[Any], ...]) -> int:
    return sum(array.nbytes for array in arrays)
