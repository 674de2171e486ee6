"""Models back to plain data: the one rule every layer uses to turn a parsed model into
the JSON-shaped dicts the expansion and the companion controller work on."""

from __future__ import annotations

from typing import Any


def dump(model: Any) -> Any:
    """A model (or list of models) as plain JSON-shaped data, unset fields left out."""
    if model is None:
        return None
    if isinstance(model, list):
        return [dump(m) for m in model]
    return model.model_dump(exclude_none=True)
