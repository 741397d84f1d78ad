"""Text from upstreams as shown to a model: sentences, the one rule both the listing and search use."""

from __future__ import annotations

import re

__all__ = ["first_sentence", "split_sentences"]

# A sentence ends at `.`, `!` or `?` followed by whitespace or the end, except right after an
# abbreviation. Dotted names (`api.github.com`, `v1.2`) never match: their `.` is followed by text.
_SENTENCE_END = re.compile(r"(?<!\be\.g)(?<!\bi\.e)(?<!\betc)[.!?](?=\s|$)", re.IGNORECASE)


def split_sentences(text: str) -> list[str]:
    """The sentences of `text`, whitespace collapsed; a line break also ends a sentence."""
    sentences: list[str] = []
    for line in text.splitlines():
        line = " ".join(line.split())
        start = 0
        for end in _SENTENCE_END.finditer(line):
            sentences.append(line[start : end.end()].strip())
            start = end.end()
        sentences.append(line[start:].strip())
    return [s for s in sentences if s]


def first_sentence(text: str) -> str:
    """The first sentence of `text` with whitespace collapsed (line breaks do not end it)."""
    text = " ".join(text.split())
    end = _SENTENCE_END.search(text)
    return text if end is None else text[: end.end()]
