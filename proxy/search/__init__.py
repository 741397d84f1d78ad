"""Ranking deferred tools for `tool_search`: lexical BM25F, and an optional semantic leg.

Pure ranking over documents built from tool definitions; the optional semantic leg reads model
weights and its embedding cache from disk.
"""

from proxy.search import _semantic as semantic
from proxy.search._documents import FIELDS, SearchDoc, doc_from_tool
from proxy.search._index import RANKING, Ranking, SearchIndex
from proxy.search._semantic import SemanticIndex, fuse, fused_shares
from proxy.search._stemming import tokenize

__all__ = [
    "FIELDS",
    "RANKING",
    "Ranking",
    "SearchDoc", "SearchIndex", "SemanticIndex", "doc_from_tool", "fuse", "fused_shares", "semantic", "tokenize"]
