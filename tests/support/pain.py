"""The one exception a baseline may fail with.

A baseline (the operator's behaviour replayed, or ours before a fix) is a strict xfail with
``raises=Pain``: only the check that observes the pain raises it, so a timeout, a construction
error or any other assertion fails the baseline instead of satisfying it, and a baseline that
stops showing its pain passes and fails the suite (``xfail_strict``).
"""

from __future__ import annotations

import pytest


class Pain(AssertionError):
    """The pain a test names was observed (e.g. fewer ready workers than the floor)."""


def check(ok: bool, message: str) -> None:
    """Raise :class:`Pain` with ``message`` unless ``ok``."""
    if not ok:
        raise Pain(message)


def baseline(reason: str) -> pytest.MarkDecorator:
    """The mark of a baseline: fails only through :class:`Pain`."""
    return pytest.mark.xfail(strict=True, raises=Pain, reason=reason)


__all__ = ["Pain", "baseline", "check"]
