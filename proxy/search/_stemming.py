"""Text to search terms: alphanumeric runs (accents folded, apostrophes read), camelCase splitting, stop words and
Porter stemming.

Pure and stdlib-only. The lexical index and the benchmarks tokenize queries and tools alike through
this module, so the two sides always meet on the same terms.
"""

from __future__ import annotations

import functools
import re
import unicodedata

_WORD = re.compile(r"[A-Za-z0-9]+")
# A word with an apostrophe (typed ' or typographic ’ ʼ): "Denver's", "I’m", "don't", "O'Reilly".
_APOSTROPHES = "'\u2019\u02bc"
_APOSTROPHE = re.compile(f"[{_APOSTROPHES}]")
_WORD_WITH_APOSTROPHES = re.compile(f"[A-Za-z0-9]+(?:[{_APOSTROPHES}][A-Za-z]+)*")
# What follows an apostrophe in a possessive or a contraction: the word before it is the word ("Denver's",
# "I'm", "you'll"), never a word of its own ("s", "m", "ll" matched tools with a unit "m" or an "s" suffix).
_CLITICS = frozenset({"s", "m", "d", "ll", "re", "ve"})
# Argument values a request names, by kind: a URL, or a file path or name ("~/notes/todo.md", "./src",
# "/var/log", "report.xlsx"). A file name's extension ("xlsx") says what kind of file it is.
_URL = re.compile(r"\b[a-z][a-z0-9+.-]*://\S+", re.IGNORECASE)
_PATH = re.compile(
    r"(?<![\w/])(?:~|\.{1,2})?/[\w.*~/-]*|\b[\w.*-]+(?:/[\w.*-]+)+/?|\b[\w*-]+(?:\.[\w*-]+)*\.[a-z][a-z0-9]{1,4}\b",
    re.IGNORECASE,
)
_EXTENSION = re.compile(r"\.([a-z][a-z0-9]{1,4})$", re.IGNORECASE)
_EMAIL = re.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+")  # before paths: "corp.com" is no file
_QUOTED = re.compile(r"""(?<!\w)(?:'[^'\n]+'|"[^"\n]+"|`[^`\n]+`)(?!\w)""")  # "type 'hello world'"
# Words that name a kind of file, as an extension or a folder ("/root/excel/", "~/pdf/"): the file-type
# groups of the search's synonym table, and pdf.
FILE_KIND_WORDS = frozenset({
    "docx", "word", "xlsx", "xls", "excel", "pptx", "ppt", "powerpoint", "presentation", "slide", "md", "markdown",
    "txt", "text", "csv", "png", "jpg", "jpeg", "image", "mp3", "wav", "audio", "mp4", "video", "html", "webpage",
    "pdf",
})
VALUE_KINDS = (("url", _URL), ("email", _EMAIL), ("quoted", _QUOTED), ("file", _PATH))
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")

# Generic English function words and request fillers: in sentence queries they carry no capability signal.
_STOP_TEXT = """a about above after again against all am an and any are as at be because been before being
below between both but by can could did do does doing don down during each few for from further had has have
having he her here hers herself him himself his how i if in into is it its itself just me more most my myself
no nor not now of off on once only or other our ours ourselves out over own same she should so some such than
that the their theirs them themselves then there these they this those through to too under until up very
was we were what when where which while who whom why will with would you your yours yourself yourselves
many much every whole also please want need like let lets give tell help us im"""
STOP_WORDS = frozenset(_STOP_TEXT.split())


_VOWELS = frozenset("aeiou")


def _cons(w: str, i: int) -> bool:
    if w[i] in _VOWELS:
        return False
    return w[i] != "y" or i == 0 or not _cons(w, i - 1)


def _measure(stem: str) -> int:
    """Porter's m: the number of vowel-consonant sequences in the stem."""
    flags = "".join("c" if _cons(stem, i) else "v" for i in range(len(stem)))
    return flags.lstrip("c").count("vc") if flags else 0


def _has_vowel(stem: str) -> bool:
    return any(not _cons(stem, i) for i in range(len(stem)))


def _cvc(w: str) -> bool:
    return (
        len(w) >= 3
        and _cons(w, len(w) - 3)
        and not _cons(w, len(w) - 2)
        and _cons(w, len(w) - 1)
        and w[-1] not in "wxy"
    )


# Porter's step 2-4 suffix rules, "suffix:replacement".
_RULES = (
    "ational:ate tional:tion enci:ence anci:ance izer:ize abli:able alli:al entli:ent eli:e ousli:ous ization:ize "
    "ation:ate ator:ate alism:al iveness:ive fulness:ful ousness:ous aliti:al iviti:ive biliti:ble",
    "icate:ic ative: alize:al iciti:ic ical:ic ful: ness:",
    "al ance ence er ic able ible ant ement ment ent ion ou ism ate iti ous ive ize",
)
_STEP2, _STEP3 = (tuple(tuple(rule.split(":")) for rule in text.split()) for text in _RULES[:2])
_STEP4 = tuple(_RULES[2].split())


def _replace(w: str, rules: tuple[tuple[str, str], ...], min_m: int) -> str:
    for suffix, rep in rules:
        if w.endswith(suffix):
            base = w[: -len(suffix)]
            return base + rep if _measure(base) > min_m else w
    return w


# Words Porter2 (Snowball English, Porter's successor) leaves as they are: Porter's rules make "news" "new", which
# every "Create a new ..." description has, so a request for news found tools that create things (issue 30).
INVARIANT = frozenset({"sky", "news", "howe", "atlas", "cosmos", "bias", "andes"})


@functools.lru_cache(maxsize=65536)
def stem(w: str) -> str:
    """Porter (1980) stemming, so "creating", "created", "creates" and "create" meet; Porter2's invariant words
    stay as they are."""
    if len(w) <= 2 or w in INVARIANT:
        return w
    if w.endswith("sses") or w.endswith("ies"):
        w = w[:-2]
    elif w.endswith("s") and not w.endswith("ss"):
        w = w[:-1]
    if w.endswith("eed"):
        if _measure(w[:-3]) > 0:
            w = w[:-1]
    else:
        for suffix in ("ed", "ing"):
            if w.endswith(suffix) and _has_vowel(w[: -len(suffix)]):
                w = w[: -len(suffix)]
                if w.endswith(("at", "bl", "iz")):
                    w += "e"
                elif len(w) > 1 and w[-1] == w[-2] and _cons(w, len(w) - 1) and w[-1] not in "lsz":
                    w = w[:-1]
                elif _measure(w) == 1 and _cvc(w):
                    w += "e"
                break
    if w.endswith("y") and _has_vowel(w[:-1]):
        w = w[:-1] + "i"
    w = _replace(w, _STEP2, 0)
    w = _replace(w, _STEP3, 0)
    for suffix in _STEP4:
        if w.endswith(suffix):
            base = w[: -len(suffix)]
            if _measure(base) > 1 and (suffix != "ion" or base.endswith(("s", "t"))):
                w = base
            break
    if w.endswith("e"):
        base = w[:-1]
        m = _measure(base)
        if m > 1 or (m == 1 and not _cvc(base)):
            w = base
    if w.endswith("ll") and _measure(w) > 1:
        w = w[:-1]
    return w


def _runs(text: str) -> list[str]:
    """The alphanumeric runs of `text`, accents folded ("café" is "cafe", not "caf"), and words with an apostrophe
    read as a person writes them: a possessive or contraction is its first word, a negation ("don't", "can't") no
    word at all (it names nothing), and any other ("O'Reilly") its parts."""
    if not text.isascii():
        text = "".join(c for c in unicodedata.normalize("NFKD", text) if not unicodedata.combining(c))
    if not _APOSTROPHE.search(text):
        return _WORD.findall(text)
    runs = []
    for chunk in _WORD_WITH_APOSTROPHES.findall(text):
        first, *rest = _APOSTROPHE.split(chunk)
        if len(rest) == 1 and rest[0].lower() in _CLITICS:
            runs.append(first)
        elif not (len(rest) == 1 and rest[0].lower() == "t" and first[-1:].lower() == "n"):
            runs += [first, *rest]
    return runs


def split_words(text: str, *, whole: bool = False) -> list[str]:
    """Lower-cased alphanumeric runs (`_runs`), camelCase split; with `whole`, a split run also counts as itself, so
    "GitHub" answers to "github" as well as to "git hub"."""
    out = []
    for chunk in _runs(text):
        parts = [part.lower() for part in _CAMEL.split(chunk) if part]
        out += [*parts, chunk.lower()] if whole and len(parts) > 1 else parts
    return out


def tokenize(text: str, *, drop_stop_words: bool = False, whole: bool = False) -> list[str]:
    """Split on non-alphanumerics and camelCase, lower-case, stem."""
    return [stem(w) for w in split_words(text, whole=whole) if not (drop_stop_words and w in STOP_WORDS)]


def split_values(text: str) -> tuple[str, list[tuple[str, str, str]]]:
    """`text` with the values it names taken out (URLs, e-mail addresses, quoted text, paths), each as (kind, value,
    the words that say what kind of file it is). Their other words are literals ("nginx", "build" in a path;
    "hello world" to be typed) that say little about the tool wanted; a file's extension ("xlsx") and a folder
    named for a kind of file ("/data/excel/") say which tools handle it."""
    values: list[tuple[str, str, str]] = []
    for kind, pattern in VALUE_KINDS:
        for match in pattern.finditer(text):
            value = match.group().rstrip(".,;:!?)") if kind in ("url", "file") else match.group()
            values.append((kind, value, _file_kinds(value) if kind in ("url", "file") else ""))
        text = pattern.sub(" ", text)
    return text, values


def _file_kinds(value: str) -> str:
    extension = _EXTENSION.search(value)
    folders = [w for w in _WORD.findall(value.lower()) if w in FILE_KIND_WORDS]
    return " ".join(([extension.group(1)] if extension else []) + folders[:-1 if extension else None])


def content_words(text: str) -> int:
    """How many of the text's words are not stop words."""
    return sum(word not in STOP_WORDS for word in split_words(text))
