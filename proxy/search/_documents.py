"""What a tool is to lexical search: a document of fields, and each field's terms.

A tool's name, server, first sentence, the rest of its description, parameter names and parameter
texts (descriptions and short enum values) are counted as separate fields (`FIELDS`), so each can
be weighted on its own. What most of a server's tools share (boilerplate) is left out, and word
pairs its tool names share answer to their initials.
"""

from __future__ import annotations

import itertools
import sys
from collections import Counter, defaultdict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from proxy.search._stemming import split_words, tokenize
from proxy.text import split_sentences

FIELDS = ("name", "server", "summary", "desc", "params", "param_text")
ENUM_MAX_CHARS = 24
ENUM_MAX_VALUES = 12
BOILERPLATE_MIN_TOOLS = 10
BOILERPLATE_SHARE = 0.3
ACRONYM_MIN_TOOLS = 2


@dataclass(frozen=True)
class SearchDoc:
    """One searchable tool; `name` is the qualified `<server>__<tool>` name."""

    name: str
    server: str
    raw_name: str
    description: str
    params: tuple[str, ...]
    param_text: tuple[str, ...] = ()  # per parameter: its description and short enum values


def doc_from_tool(name: str, server: str, raw_name: str, description: str | None, input_schema: Any) -> SearchDoc:
    """Build a SearchDoc from a tools/list entry, tolerating schemas that are not dicts."""
    props = input_schema.get("properties") if isinstance(input_schema, Mapping) else None
    props = props if isinstance(props, Mapping) else {}
    texts = tuple(text for spec in props.values() if (text := _param_text(spec)))
    description = description if isinstance(description, str) else ""
    params = tuple(sys.intern(str(k)) for k in props)  # shared across tools: path, repo...
    return SearchDoc(name, server, raw_name, description, params, texts)


def _param_text(spec: Any) -> str:
    """A parameter's description and its short enum values ("png", "jpeg"): what argument-bearing requests
    mention. Long enum values are identifiers nobody types."""
    if not isinstance(spec, Mapping):
        return ""
    description = spec.get("description")
    enum = spec.get("enum")
    values = [v for v in enum if isinstance(v, str) and len(v) <= ENUM_MAX_CHARS] if isinstance(enum, list) else []
    return " ".join([description if isinstance(description, str) else "", *values[:ENUM_MAX_VALUES]]).strip()


def server_boilerplate(docs: list[SearchDoc]) -> frozenset[str]:
    """Parameters and sentences most of a server's tools share (tenant, retry-*, usage notes) say nothing
    about any one tool."""
    if len(docs) < BOILERPLATE_MIN_TOOLS:
        return frozenset()
    counts = Counter(p for d in docs for p in {*d.params, *d.param_text, *split_sentences(d.description)})
    return frozenset(p for p, n in counts.items() if n > BOILERPLATE_SHARE * len(docs))


def _name_pairs(raw_name: str) -> list[tuple[str, str]]:
    words = [w for w in split_words(raw_name) if w.isalpha()]
    return list(itertools.pairwise(words))


def name_acronyms(docs: list[SearchDoc]) -> dict[tuple[str, str], str]:
    """Word pairs several of a server's tool names share ("pull_request", "merge_request") answer to
    their initials ("PR", "MR") in queries."""
    counts = Counter(pair for d in docs for pair in set(_name_pairs(d.raw_name)))
    return {pair: pair[0][0] + pair[1][0] for pair, n in counts.items() if n >= ACRONYM_MIN_TOOLS}


def field_counts(
    doc: SearchDoc, boilerplate: frozenset[str], acronyms: dict[tuple[str, str], str]
) -> tuple[dict[str, tuple[int, ...]], tuple[int, ...]]:
    """Per-term per-field counts and per-field lengths of one document."""
    sentences = [s for s in split_sentences(doc.description) if s not in boilerplate]
    extra = [acronyms[p] for p in _name_pairs(doc.raw_name) if p in acronyms]
    fields = (
        tokenize(doc.raw_name) + extra,
        tokenize(doc.server),
        tokenize(" ".join(sentences[:1]), drop_stop_words=True, whole=True),
        tokenize(" ".join(sentences[1:]), drop_stop_words=True, whole=True),
        [t for p in doc.params if p not in boilerplate for t in tokenize(p)],
        [t for p in doc.param_text if p not in boilerplate for t in tokenize(p, drop_stop_words=True, whole=True)],
    )
    counts: dict[str, list[int]] = defaultdict(lambda: [0] * len(fields))
    for i, tokens in enumerate(fields):
        for token in tokens:
            counts[token][i] += 1
    return {t: tuple(c) for t, c in counts.items()}, tuple(len(f) for f in fields)
