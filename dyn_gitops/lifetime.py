"""What a one-shot process keeps to its end instead of freeing it.

A one-shot ``dyn-gitops`` process ends without freeing its objects one by one
(``oneshot.py``); but the rendered objects, the parsed documents and the models are locals
of the functions that made them, and returning from those frees them all, object by object
(about a million for 1,000 DGDs: a few per cent of the render). Kept here, they go with the
process. Only in a one-shot process (:func:`one_shot`): in-process callers (tests, the warm
render server) keep nothing.
"""

from __future__ import annotations

_KEPT: list[object] | None = None


def one_shot() -> None:
    """The process ends right after its command (``oneshot.main``): keep what is asked."""
    global _KEPT
    if _KEPT is None:
        _KEPT = []


def keep(*values: object) -> None:
    """Keep ``values`` to the end of a one-shot process (else: nothing)."""
    if _KEPT is not None:
        _KEPT.extend(values)


__all__ = ["keep", "one_shot"]
