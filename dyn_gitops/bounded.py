"""Bounded readers of text from Git that is no YAML document: JSON carried in a string (an
annotation's payload, an environment variable, a parameter, a cache file) and integers
written as digits (version numbers, image tags, flag values).

A document is bounded by the parse stage (:mod:`dyn_gitops.parse`); the text inside one of
its strings gets the same bounds here, one error type for every reader: characters,
nesting (checked before anything is built: the decoder recurses once per level), nodes,
digits of an integer, and no lone surrogate (no UTF-8 can carry it). The error names the
path inside the text and never repeats a value of it (it may be a secret). Low in the
layers, so the models, the worker hash and the companion controller read through it too.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from .fieldpath import FieldPath, field_path

#: Python's own bound on ``int()`` of text (``sys.get_int_max_str_digits``), which the
#: parse stage applies to a YAML document's integers: more is refused, not converted
MAX_INT_DIGITS = 4300
#: nesting no bound may raise: the decoder and the code reading the data recurse per level
DEPTH_CEILING = 250
INT64_MAX = 2**63 - 1
UINT64_MAX = 2**64 - 1


class EmbeddedError(ValueError):
    """Embedded text that breaks a bound or is no JSON: where inside it (``path``, ``()``
    for the whole text) and why (``reason``, which never repeats a value of the text)."""

    def __init__(self, path: FieldPath, reason: str) -> None:
        self.path = path
        self.reason = reason
        super().__init__(f"{field_path(path)}: {reason}" if path else reason)


@dataclass(frozen=True)
class Bounds:
    """The bounds of one embedded text (a document's are settings: max-file-bytes,
    max-depth, max-yaml-nodes)."""

    max_chars: int
    max_depth: int
    max_nodes: int
    max_digits: int = MAX_INT_DIGITS


#: what an embedded text inside a DGD may be: a document's bounds at their defaults
#: (settings max-file-bytes, max-depth, max-yaml-nodes; one fixed bound, so every reader
#: of the same text, the companion controller's too, agrees on it)
DOCUMENT_BOUNDS = Bounds(max_chars=8 * 1024 * 1024, max_depth=100, max_nodes=200_000)

_JSON_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.DOTALL)
_JSON_BRACKET = re.compile(r"[\[\]{}]")
#: a ``\uD800``-``\uDFFF`` escape, or such a code point: a lone surrogate may follow
_SURROGATE_HINT = re.compile(r"\\u[dD][89a-fA-F]|[\ud800-\udfff]")
_SURROGATE = re.compile(r"[\ud800-\udfff]")


class _Refused:
    """A number the decoder met that the bounds refuse (found with its path afterwards)."""

    __slots__ = ("reason",)

    def __init__(self, reason: str) -> None:
        self.reason = reason


_NOT_FINITE = _Refused("NaN and infinity are not JSON numbers")
_FLOAT_RANGE = _Refused("a number beyond the range of a 64-bit float")


def loads_json(text: str | bytes, bounds: Bounds) -> Any:
    """The JSON data of ``text`` within ``bounds``; :class:`EmbeddedError` otherwise."""
    if isinstance(text, bytes):
        text = text.decode("utf-8", errors="replace")
    if len(text) > bounds.max_chars:
        raise EmbeddedError((), f"longer than {bounds.max_chars} characters")
    _check_depth(text, min(bounds.max_depth, DEPTH_CEILING))
    refused: list[_Refused] = []
    try:
        data = json.loads(
            text,
            parse_int=_int_reader(min(bounds.max_digits, MAX_INT_DIGITS), refused),
            parse_float=_float_reader(refused),
            parse_constant=_constant_reader(refused),
        )
    except json.JSONDecodeError as exc:  # its message names a place, never the text
        where = f"line {exc.lineno}, column {exc.colno}"
        raise EmbeddedError((), f"not JSON: {exc.msg} ({where})") from None
    # every node takes a character at least: a short text needs no count
    counted = len(text) > bounds.max_nodes
    if refused or counted or _SURROGATE_HINT.search(text):
        _check_nodes(data, bounds.max_nodes if counted else None)
    return data


def _check_depth(text: str, limit: int) -> None:
    depth = 0
    for bracket in _JSON_BRACKET.findall(_JSON_STRING.sub("", text)):
        depth += 1 if bracket in "[{" else -1
        if depth > limit:
            raise EmbeddedError((), f"nested more than {limit} levels deep")


def _int_reader(max_digits: int, refused: list[_Refused]) -> Any:
    too_long = _Refused(f"an integer of more than {max_digits} digits")

    def read(digits: str) -> Any:
        if len(digits) - digits.startswith("-") > max_digits:
            refused.append(too_long)
            return too_long
        return int(digits)

    return read


def _float_reader(refused: list[_Refused]) -> Any:
    def read(digits: str) -> Any:
        value = float(digits)
        if value in (float("inf"), float("-inf")):
            refused.append(_FLOAT_RANGE)
            return _FLOAT_RANGE
        return value

    return read


def _constant_reader(refused: list[_Refused]) -> Any:
    def read(_name: str) -> Any:
        refused.append(_NOT_FINITE)
        return _NOT_FINITE

    return read


def _check_nodes(data: Any, max_nodes: int | None) -> None:
    """The first refused number or lone surrogate, by its path; more than ``max_nodes``."""
    for nodes, (path, value) in enumerate(_walk(data), 1):
        if max_nodes is not None and nodes > max_nodes:
            raise EmbeddedError((), f"more than {max_nodes} values")
        if type(value) is _Refused:
            raise EmbeddedError(path, value.reason)
        if type(value) is str and _SURROGATE.search(value):
            raise EmbeddedError(path, "a lone surrogate (\\ud800-\\udfff) is no Unicode text")


def _walk(data: Any) -> Iterator[tuple[FieldPath, Any]]:
    """Every value of ``data`` with its path, keys as string values of their own path;
    without recursion."""
    stack: list[tuple[FieldPath, Any]] = [((), data)]
    while stack:
        path, value = stack.pop()
        yield path, value
        if type(value) is dict:
            for key, child in reversed(value.items()):
                yield (*path, key), key
                stack.append(((*path, key), child))
        elif type(value) is list:
            stack.extend(((*path, i), child) for i, child in reversed(list(enumerate(value))))


def parse_int(text: str, *, low: int = -INT64_MAX - 1, high: int = INT64_MAX) -> int | None:
    """The integer of ``text`` (ASCII decimal digits after an optional sign), None when it
    is no such text or outside ``[low, high]``: told without converting more digits than
    ``high`` has (Python refuses more than :data:`MAX_INT_DIGITS`; Go's ``strconv``
    refuses what is out of range)."""
    body = text[1:] if text[:1] in ("+", "-") else text
    if not body or not body.isascii() or not body.isdigit():
        return None
    significant = body.lstrip("0") or "0"  # leading zeros count for Python's bound
    if len(significant) > len(str(max(-low, high))):
        return None
    value = -int(significant) if text[0] == "-" else int(significant)
    return value if low <= value <= high else None


__all__ = [
    "DOCUMENT_BOUNDS",
    "INT64_MAX",
    "MAX_INT_DIGITS",
    "UINT64_MAX",
    "Bounds",
    "EmbeddedError",
    "loads_json",
    "parse_int",
]


def json_loads_bounded(text: str | bytes, *, max_depth: int) -> Any:
    """JSON text bounded in nesting (and by the other bounds of :func:`loads_json`,
    characters and nodes left unbounded as before); :class:`EmbeddedError` (a ValueError)
    for anything else. Kept for its callers: new ones use :func:`loads_json`."""
    return loads_json(text, Bounds(max_chars=2**62, max_depth=max_depth, max_nodes=2**62))


def loads_yaml(text: str, *, max_depth: int, max_nodes: int) -> Any:
    """The YAML document ``text`` holds, read only within ``max_depth`` and ``max_nodes``
    and without anchors or aliases (they multiply a document), counted on the parser's
    events before anything is built; None when ``text`` is no YAML. :class:`EmbeddedError`
    when it is beyond those bounds or cannot be built (a bad tag, too many digits, several
    documents)."""
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    depth = nodes = 0
    try:
        for event in yaml.parse(text, Loader=loader):
            if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None):
                raise EmbeddedError((), "an anchor or alias")
            if isinstance(event, yaml.CollectionStartEvent):
                depth += 1
            elif isinstance(event, yaml.CollectionEndEvent):
                depth -= 1
            nodes += 1
            if depth > min(max_depth, DEPTH_CEILING) or nodes > max_nodes:
                raise EmbeddedError((), "beyond its bounds of nesting or nodes")
    except (yaml.YAMLError, ValueError, RecursionError) as exc:
        if isinstance(exc, EmbeddedError):
            raise
        return None
    try:
        return yaml.load(text, Loader=loader)  # a safe loader, within the bounds checked
    except (yaml.YAMLError, ValueError, RecursionError, TypeError):
        raise EmbeddedError((), "YAML that cannot be built") from None
