"""Bounded memos of pure functions of parsed data, keyed by the arguments' ``repr``.

The DGDs of one repository repeat their services (one template, many graphs differing in
name and model), and converting, validating and Go-encoding a service costs far more in
Python than the C-made ``repr`` of its data. The arguments are strings and parsed documents,
which the parse stage lets through only as JSON data (str keys; str, int, float, bool,
None, lists and dicts: ``parse.not_json``): their ``repr`` tells every type and value apart
(``1``, ``1.0``, ``True`` and ``'1'`` differ), so equal keys mean equal arguments and, the
function being pure, equal results. Only results no caller changes are kept: text, a frozen
model (which the render only reads), or JSON data kept as text and read afresh for every
caller, so no DGD sees what another one did. An exception is raised as it comes (the next
call raises it again), never kept. Everything from Git is hostile: a memo holds so many
entries of so many characters (cleared when full), of keys so long at most (a longer one is
computed, not kept); one that finds little stops making keys for a while (``WINDOW``).
"""

from __future__ import annotations

import functools
import json
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
#: a memo judges itself every so many look-ups: found fewer than a quarter of the time (a
#: repository whose services all differ), it stops making keys for the next SKIP calls,
#: so that such a repository pays next to nothing for it
WINDOW = 64
SKIP = 4096

#: every memo, for :func:`clear_all`
_MEMOS: list[dict[str, Any]] = []
_MISSING: Any = object()


class _State:
    __slots__ = ("held", "hits", "lookups", "skip")

    def __init__(self) -> None:
        self.held = 0  # the characters of the memo's keys
        self.lookups = self.hits = 0  # in the current window
        self.skip = 0  # calls left that make no key


def _memoize(fn: Callable[P, R], freeze: Callable[[R], Any], thaw: Callable[[Any], R]) -> Any:
    memo: dict[str, Any] = {}
    _MEMOS.append(memo)
    state = _State()

    @functools.wraps(fn)
    def memoized(*args: P.args, **kwargs: P.kwargs) -> R:
        if state.skip > 0:
            state.skip -= 1
            return fn(*args, **kwargs)
        key = repr(args)
        if kwargs or len(key) > KEY_CHARS:
            return fn(*args, **kwargs)
        state.lookups += 1
        kept = memo.get(key, _MISSING)
        if kept is not _MISSING:
            state.hits += 1
            out = thaw(kept)
        else:
            out = fn(*args, **kwargs)
            if len(memo) >= ENTRIES or state.held + len(key) > MEMO_CHARS:
                memo.clear()
                state.held = 0
            memo[key] = freeze(out)  # before the caller may change ``out``
            state.held += len(key)
        if state.lookups >= WINDOW:
            if state.hits * 4 < state.lookups:
                state.skip = SKIP
            state.lookups = state.hits = 0
        return out

    return memoized


def _same(value: Any) -> Any:
    return value


def by_repr(fn: Callable[P, R]) -> Callable[P, R]:
    """``fn`` memoized by the ``repr`` of its positional arguments (see the module); for a
    result that is immutable (text, a frozen model)."""
    memoized: Callable[P, R] = _memoize(fn, _same, _same)
    return memoized


def _to_json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def by_repr_json(fn: Callable[P, R]) -> Callable[P, R]:
    """``fn`` memoized as :func:`by_repr`, for a result that is JSON data: kept as JSON
    text, so every caller gets data of its own (the one that computed it, the very result;
    the others, a fresh copy, read by C)."""
    memoized: Callable[P, R] = _memoize(fn, _to_json, json.loads)
    return memoized


def clear_all() -> None:
    """Empty every memo (a test starts cold)."""
    for memo in _MEMOS:
        memo.clear()


__all__ = [
    "ENTRIES",
    "KEY_CHARS",
    "MEMO_CHARS",
    "SKIP",
    "WINDOW",
    "by_repr",
    "by_repr_json",
    "clear_all",
]
