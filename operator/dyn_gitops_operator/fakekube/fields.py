"""Managed fields as the API server keeps them: field paths, the ``fieldsV1`` tree, and the
two merges (a server-side apply, a JSON merge patch).

A path is a tuple of ``f:<field>`` and ``k:<json key>`` steps (a list item picked by its
key fields), as in ``fieldsV1``. A set of paths holds the leaves a manager set, plus every
keyed list item itself (the ``.`` entry of its node).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

Path = tuple[str, ...]
Obj = dict[str, Any]


class _Missing:
    def __repr__(self) -> str:
        return "MISSING"


#: what ``value_at`` returns for a path that leads nowhere
MISSING: Any = _Missing()


@dataclass(frozen=True)
class ListTypes:
    """Which lists merge item by item and by which key fields (``x-kubernetes-list-type:
    map``), keyed by their schema path (``spec.template.spec.containers[].env``: ``[]``
    steps into the items). Items of ``atomic_items`` lists are replaced whole (as
    ownerReferences). Every other list is atomic: one value, replaced whole."""

    keys: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    atomic_items: frozenset[str] = frozenset()


def _child(schema: str, name: str) -> str:
    return f"{schema}.{name}" if schema else name


def item_step(item: Any, keys: tuple[str, ...]) -> str | None:
    """``k:{"name":"main"}`` for a list item (None: not a dict holding every key field)."""
    if not isinstance(item, dict) or any(k not in item for k in keys):
        return None
    return "k:" + json.dumps({k: item[k] for k in keys}, separators=(",", ":"))


def _keyed_steps(items: list[Any], schema: str, types: ListTypes) -> list[str] | None:
    keys = types.keys.get(schema)
    if keys is None:
        return None
    steps = [item_step(i, keys) for i in items]
    if any(s is None for s in steps) or len(set(steps)) != len(steps):
        return None  # not a well-formed map list: handled as one atomic value
    return [s for s in steps if s is not None]


def field_paths(value: Any, types: ListTypes, schema: str = "", prefix: Path = ()) -> set[Path]:
    """The paths a (partial) object sets: its leaves, keyed items, and empty maps."""
    if isinstance(value, dict) and value:
        out: set[Path] = set()
        for k, v in value.items():
            out |= field_paths(v, types, _child(schema, k), (*prefix, f"f:{k}"))
        return out
    if isinstance(value, list):
        steps = _keyed_steps(value, schema, types)
        if steps is not None:
            out = set()
            for item, step in zip(value, steps, strict=True):
                out.add((*prefix, step))
                if schema not in types.atomic_items:
                    out |= field_paths(item, types, schema + "[]", (*prefix, step))
            return out
    return {prefix} if prefix else set()


def to_tree(paths: Iterable[Path]) -> Obj:
    """``fieldsV1``: nested steps; a member that also has children gets a ``.`` entry."""
    tree: Obj = {}
    members = set(paths)
    for path in sorted(members, key=len):
        node = tree
        for step in path:
            node = node.setdefault(step, {})
    for path in members:
        node = tree
        for step in path:
            node = node[step]
        if node and "." not in node:
            node["."] = {}
    return tree


def from_tree(tree: Mapping[str, Any], prefix: Path = ()) -> set[Path]:
    out: set[Path] = set()
    for step, sub in tree.items():
        if step == ".":
            out.add(prefix)
        elif not sub:
            out.add((*prefix, step))
        else:
            out |= from_tree(sub, (*prefix, step))
    return out


def _step_into(node: Any, step: str) -> Any:
    if step.startswith("f:"):
        return node.get(step[2:], MISSING) if isinstance(node, dict) else MISSING
    if step.startswith("k:") and isinstance(node, list):
        want = json.loads(step[2:])
        for item in node:
            if isinstance(item, dict) and all(item.get(k, MISSING) == v for k, v in want.items()):
                return item
    return MISSING


def value_at(obj: Any, path: Path) -> Any:
    node = obj
    for step in path:
        node = _step_into(node, step)
        if node is MISSING:
            break
    return node


def remove_at(obj: Any, path: Path) -> None:
    parent = value_at(obj, path[:-1])
    target = value_at(obj, path)
    if target is MISSING:
        return
    if isinstance(parent, dict):
        parent.pop(path[-1][2:], None)
    elif isinstance(parent, list):
        parent[:] = [i for i in parent if i is not target]


def prune_empty(obj: Any, path: Path, kept: set[Path]) -> None:
    """Drop the maps and lists along ``path`` that its removal left empty (not at the top
    level, nor one some manager set as a value of its own)."""
    for depth in range(len(path) - 1, 1, -1):
        parent = path[:depth]
        node = value_at(obj, parent)
        if node not in ({}, []) or parent in kept:
            return
        remove_at(obj, parent)


def merge_applied(live: Any, config: Any, types: ListTypes, schema: str = "") -> Any:
    """``config`` over ``live``: maps merge key by key, map lists item by item (new items
    appended), everything else is replaced."""
    if isinstance(config, dict) and isinstance(live, dict):
        out = dict(live)
        for k, v in config.items():
            out[k] = (
                merge_applied(live[k], v, types, _child(schema, k))
                if k in live
                else copy.deepcopy(v)
            )
        return out
    if isinstance(config, list) and isinstance(live, list):
        new_steps = _keyed_steps(config, schema, types)
        old_steps = _keyed_steps(live, schema, types)
        if new_steps is not None and old_steps is not None:
            out_list = list(live)
            where = {s: i for i, s in enumerate(old_steps)}
            for item, step in zip(config, new_steps, strict=True):
                if step in where and schema not in types.atomic_items:
                    i = where[step]
                    out_list[i] = merge_applied(out_list[i], item, types, schema + "[]")
                elif step in where:
                    out_list[where[step]] = copy.deepcopy(item)
                else:
                    out_list.append(copy.deepcopy(item))
            return out_list
    return copy.deepcopy(config)


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386: maps merge, ``null`` deletes, anything else (lists too) is replaced."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = dict(target) if isinstance(target, dict) else {}
    for k, v in patch.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = merge_patch(out.get(k), v)
    return out


__all__ = [
    "MISSING",
    "ListTypes",
    "Path",
    "field_paths",
    "from_tree",
    "item_step",
    "merge_applied",
    "merge_patch",
    "prune_empty",
    "remove_at",
    "to_tree",
    "value_at",
]
