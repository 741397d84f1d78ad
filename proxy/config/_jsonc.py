"""JSON with comments (JSONC), as VS Code reads its `mcp.json`: `//` and `/* */` comments, trailing commas.

Comments and trailing commas become spaces (a comment's newlines stay), so a JSON error in what is left
points at the same line and column of the file. Text inside strings is never touched: a URL's `//` stays.
"""

from __future__ import annotations

import json
import re
from typing import Any

__all__ = ["loads_jsonc"]

# A string, a comment, or a comma with only blanks and comments before a closing bracket.
_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|//[^\n]*|/\*.*?(?:\*/|\Z)|,(?=(?:\s|//[^\n]*|/\*.*?\*/)*[}\]])', re.DOTALL)


def _blank(match: re.Match[str]) -> str:
    text = match.group(0)
    return text if text.startswith('"') else re.sub(r"[^\n]", " ", text)


def loads_jsonc(text: str) -> Any:
    """Parse JSON that may hold comments and trailing commas.

    Raises:
        ValueError: the text is not JSON even so (`json.JSONDecodeError`).
    """
    return json.loads(_TOKEN.sub(_blank, text))
