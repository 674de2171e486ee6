"""Label and field selectors of list and watch requests, as the API server parses them."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from dyn_gitops_operator.errors import InvalidError

Labels = dict[str, str]

_KEY = r"[A-Za-z0-9][-A-Za-z0-9_./]*"
_VALUE = r"[-A-Za-z0-9_.]*"
_SET = re.compile(rf"({_KEY})\s+(in|notin)\s+\(([^()]*)\)")
_EQ = re.compile(rf"({_KEY})\s*(==|=|!=)\s*({_VALUE})")


def _bad(selector: str, why: str) -> InvalidError:
    return InvalidError(400, "BadRequest", f"unable to parse requirement: {why}: {selector!r}")


def _requirements(selector: str) -> list[str]:
    """Split on the commas outside ``( )``."""
    out, depth, start = [], 0, 0
    for i, ch in enumerate(selector):
        depth += {"(": 1, ")": -1}.get(ch, 0)
        if ch == "," and depth == 0:
            out.append(selector[start:i])
            start = i + 1
    out.append(selector[start:])
    return [r.strip() for r in out if r.strip()]


def _requirement(req: str, selector: str) -> Callable[[Labels], bool]:
    if m := _SET.fullmatch(req):
        key, op = m.group(1), m.group(2)
        values = {v.strip() for v in m.group(3).split(",")}
        if op == "in":
            return lambda labels: labels.get(key) in values
        return lambda labels: labels.get(key) not in values
    if m := _EQ.fullmatch(req):
        key, op, value = m.groups()
        if op == "!=":
            return lambda labels: labels.get(key) != value
        return lambda labels: labels.get(key) == value
    if req.startswith("!") and re.fullmatch(_KEY, req[1:].strip()):
        key = req[1:].strip()
        return lambda labels: key not in labels
    if re.fullmatch(_KEY, req):
        return lambda labels: req in labels
    raise _bad(selector, req)


def label_matcher(selector: str) -> Callable[[Labels], bool]:
    """Equality (``=``, ``==``, ``!=``), set (``in``, ``notin``) and existence (``k``,
    ``!k``) requirements, all of which must hold; InvalidError (400) when unparseable."""
    reqs = [_requirement(r, selector) for r in _requirements(selector)]
    return lambda labels: all(r(labels) for r in reqs)


_FIELDS = {"metadata.name": "name", "metadata.namespace": "namespace"}


def field_matcher(selector: str) -> Callable[[dict[str, Any]], bool]:
    """``metadata.name`` / ``metadata.namespace`` with ``=``, ``==`` or ``!=`` (the fields
    every resource supports)."""
    checks: list[Callable[[dict[str, Any]], bool]] = []
    for req in _requirements(selector):
        m = re.fullmatch(r"([a-zA-Z.]+)\s*(==|=|!=)\s*(\S*)", req)
        if m is None or m.group(1) not in _FIELDS:
            raise InvalidError(
                400, "BadRequest", f"field label not supported: {req!r} in {selector!r}"
            )
        meta_key, negate, value = _FIELDS[m.group(1)], m.group(2) == "!=", m.group(3)

        def check(
            obj: dict[str, Any], k: str = meta_key, v: str = value, neg: bool = negate
        ) -> bool:
            return ((obj.get("metadata") or {}).get(k) == v) != neg

        checks.append(check)
    return lambda obj: all(c(obj) for c in checks)


__all__ = ["field_matcher", "label_matcher"]
