"""Bounded memos of pure functions of parsed data, keyed by the arguments' ``repr``.

The DGDs of one repository repeat their services (one template, many graphs differing in
name and model), and converting, validating and Go-encoding a service costs far more in
Python than the C-made ``repr`` of its data. The arguments are strings and parsed documents,
which the parse stage lets through only as JSON data (str keys; str, int, float, bool,
None, lists and dicts: ``parse.not_json``): their ``repr`` tells every type and value apart
(``1``, ``1.0``, ``True`` and ``'1'`` differ), so equal keys mean equal arguments and, the
function being pure, equal results. Only results no caller changes are kept: text, or a
frozen model (which the render only reads), so no DGD sees what another one did. An
exception is raised as it comes (the next call raises it again), never kept. Everything from
Git is hostile: a memo holds so many entries of so many characters (cleared when full), of
keys so long at most (a longer one is computed, not kept).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, ParamSpec, TypeVar

P = ParamSpec("P")
R = TypeVar("R")

#: entries per memo: a render meets a handful of distinct services, many times
ENTRIES = 256
#: the longest key kept (characters of the arguments' repr): the services of the largest
#: upstream example DGD are under 4,000
KEY_CHARS = 1 << 14
#: the characters of all keys of one memo (its results are text of about that size, or
#: models): a few MiB per memo at most, whatever the input
MEMO_CHARS = 1 << 21


#: every memo, for :func:`clear_all`
_MEMOS: list[dict[str, Any]] = []


def by_repr(fn: Callable[P, R]) -> Callable[P, R]:
    """``fn`` memoized by the ``repr`` of its positional arguments (see the module)."""
    memo: dict[str, R] = {}
    _MEMOS.append(memo)
    held = [0]  # the characters of memo's keys

    @functools.wraps(fn)
    def memoized(*args: P.args, **kwargs: P.kwargs) -> R:
        key = repr(args)
        if kwargs or len(key) > KEY_CHARS:
            return fn(*args, **kwargs)
        try:
            return memo[key]
        except KeyError:
            pass
        out = fn(*args, **kwargs)
        if len(memo) >= ENTRIES or held[0] + len(key) > MEMO_CHARS:
            memo.clear()
            held[0] = 0
        memo[key] = out
        held[0] += len(key)
        return out

    return memoized


def clear_all() -> None:
    """Empty every memo (a test starts cold)."""
    for memo in _MEMOS:
        memo.clear()


__all__ = ["ENTRIES", "KEY_CHARS", "MEMO_CHARS", "by_repr", "clear_all"]
