"""Text from upstreams as shown to a model or a terminal: cleaned of hidden characters (or escaped,
where an operator should see what was sent), and split into sentences by the one rule both the
listing and search use."""

from __future__ import annotations

import re
from collections.abc import Callable

__all__ = [
    "REMOVED",
    "clean",
    "clean_strings",
    "escape",
    "first_sentence",
    "map_strings",
    "split_clauses",
    "split_sentences",
]

REMOVED = "\ufffd"  # shown once where a run of hidden or control characters was taken out

# Invisible to a reader, or acted on by a terminal, yet read by a model (SPEC §8): C0 controls but
# tab and newline, DEL and C1, zero-width and joiners, bidi marks, embeddings, overrides and
# isolates, the word joiner and invisible operators, the BOM, and Unicode TAG characters.
_HIDDEN = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u180e\u200b-\u200f\u202a-\u202e\u2060-\u206f"
    "\ufeff\ufff9-\ufffb\U000e0000-\U000e007f]+"
)

# What `escape` spells out: the hidden characters and every line break too (U+2028 and U+2029 as well),
# so a line of upstream text stays one line (a "\n2026-12-01 … ERROR proxy:" inside it cannot start a
# forged log line).
_UNSAFE_IN_LINE = re.compile(
    "[\x00-\x08\x0a-\x1f\x7f-\x9f\u061c\u180e\u200b-\u200f\u2028-\u202e\u2060-\u206f"
    "\ufeff\ufff9-\ufffb\U000e0000-\U000e007f]"
)
_NAMED_ESCAPES = {"\n": "\\n", "\r": "\\r"}

# A sentence ends at `.`, `!` or `?` followed by whitespace or the end, except right after an
# abbreviation. Dotted names (`api.github.com`, `v1.2`) never match: their `.` is followed by text.
_SENTENCE_END = re.compile(r"(?<!\be\.g)(?<!\bi\.e)(?<!\betc)[.!?](?=\s|$)", re.IGNORECASE)


# A request's clauses: each ends at sentence punctuation, a comma or a semicolon, or before "and", "then",
# "also", "plus" ("find the sheet, read A1:F9 and chart it" names three steps).
_CLAUSE_END = re.compile(r",?\s+(?:and then|then|and|also|plus)\s+|(?<=[.!?;:,])\s+", re.IGNORECASE)


def clean(text: str) -> str:
    """`text` with each run of hidden or control characters replaced by one visible `REMOVED`."""
    return _HIDDEN.sub(REMOVED, text)


def clean_strings(value: object) -> object:
    """Every string value in a JSON-like structure cleaned; keys are names the upstream expects back."""
    if isinstance(value, str):
        return clean(value)
    if isinstance(value, dict):
        return {key: clean_strings(item) for key, item in value.items()}
    if isinstance(value, list):
        return [clean_strings(item) for item in value]
    return value


def _spelled(match: re.Match[str]) -> str:
    char = match.group()
    if char in _NAMED_ESCAPES:
        return _NAMED_ESCAPES[char]
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def escape(text: str) -> str:
    """`text` as one inert line: each hidden or control character, and each line break, spelled out
    (`\x1b`, `\r`, `\n`, `\u202e`). For logs, terminals and quoted errors, where the operator
    should see what an upstream sent, not have a terminal act on it."""
    return _UNSAFE_IN_LINE.sub(_spelled, text)


def map_strings(value: object, change: Callable[[str], str]) -> object:
    """A JSON-like structure with `change` applied to every string in it, keys too (a log viewer prints both)."""
    if isinstance(value, str):
        return change(value)
    if isinstance(value, dict):
        return {change(str(key)): map_strings(item, change) for key, item in value.items()}
    if isinstance(value, list):
        return [map_strings(item, change) for item in value]
    return value


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


def split_clauses(text: str) -> list[str]:
    """The clauses of a request, each stripped of the punctuation around it, whitespace collapsed; empty
    ones dropped. Collapsed first: split at each place in a long run of spaces, the pattern cost the square
    of the run's length (5 s for 20,000 spaces)."""
    return [clause for part in _CLAUSE_END.split(" ".join(text.split())) if (clause := part.strip(" ,;:"))]
