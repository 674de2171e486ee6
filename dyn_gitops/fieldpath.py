"""A field path: where in a document (or in a text inside one of its fields) a problem is.
At the bottom of the layers, so every reader of input names places the same way."""

from __future__ import annotations

from collections.abc import Sequence

#: where a field is: ``("spec", "services", "Frontend", "envs", 0)``
FieldPath = tuple[str | int, ...]


def field_path(loc: Sequence[str | int]) -> str:
    """``("spec", "services", "Frontend", "envs", 0)`` -> ``spec.services.Frontend.envs[0]``."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + str(part)
    return out
