"""JSON read within a nesting bound: the one reader for JSON carried inside a value (an
annotation, an env var, a plugin parameter, a cache file).

It sits at the bottom of the import layers so that both the parser (``parse.py``, which
re-exports it) and what may be shown (``display.py``, which reads embedded JSON to redact it
by structure) use the same reader.
"""

from __future__ import annotations

import re
from typing import Any

#: nesting accepted whatever the settings say: deeper data would exhaust the recursion of
#: the code that builds, validates and writes it
DEPTH_CEILING = 250

_JSON_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.DOTALL)
_JSON_BRACKET = re.compile(r"[\[\]{}]")


def json_loads_bounded(text: str | bytes, *, max_depth: int) -> Any:
    """``json.loads`` with the nesting checked first (the decoder recurses once per level);
    raises ValueError for anything that is not JSON within the bound."""
    import json

    if isinstance(text, bytes):
        text = text.decode("utf-8", errors="replace")
    depth = 0
    limit = min(max_depth, DEPTH_CEILING)
    for bracket in _JSON_BRACKET.findall(_JSON_STRING.sub("", text)):
        depth += 1 if bracket in "[{" else -1
        if depth > limit:
            raise ValueError(f"nested more than {limit} levels deep")
    return json.loads(text)
