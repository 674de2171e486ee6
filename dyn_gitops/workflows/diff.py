"""Diff: render two Git revisions and compare the objects they become, field by field.

Objects are matched by (group, kind, namespace, name). A worker whose spec changed gets a
new name (the worker hash), so a removed and an added worker of the same graph component
are paired as one *replaced* object and compared field by field as well: a reviewer sees
the env var that changed, not 300 lines removed and 300 added.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

from .. import context, keys
from ..context import Runner
from ..display import (
    EMBEDDED_MAX_NESTING,
    UNREADABLE,
    embedded_kind,
    is_sensitive,
    names_credential,
    read_embedded,
    redact_text,
    redact_tree,
)
from ..errors import ExitCode, Problem, RenderError
from ..finalize import sort_key

Obj = dict[str, Any]
ObjKey = tuple[str, str, str, str]  # group, kind, namespace, name
Status = Literal["added", "removed", "changed", "replaced"]


class _Absent:
    def __repr__(self) -> str:
        return "(absent)"


ABSENT: Any = _Absent()
_PLAIN_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*")


@dataclass(frozen=True)
class FieldChange:
    path: str
    before: Any  # ABSENT when the field was added
    after: Any  # ABSENT when the field was removed


@dataclass
class ObjectChange:
    status: Status
    before: Obj | None
    after: Obj | None
    fields: list[FieldChange] = field(default_factory=list)

    @property
    def obj(self) -> Obj:
        found = self.after if self.after is not None else self.before
        assert found is not None
        return found


@dataclass(frozen=True)
class Side:
    rev: str
    commit: str
    objects: int


@dataclass
class DiffResult:
    base: Side
    head: Side
    path: str
    changes: list[ObjectChange]
    unchanged: int

    @property
    def equal(self) -> bool:
        return not self.changes

    def count(self, status: Status) -> int:
        return sum(1 for c in self.changes if c.status == status)


class RevisionError(RenderError):
    """A revision does not render: its problems. ``diff`` ends with exit code 2 on it, as on
    every error (1 means that the revisions differ)."""

    exit_code = ExitCode.USAGE

    def __init__(self, rev: str, problems: Iterable[Problem]) -> None:
        self.rev = rev
        super().__init__(problems)

    def lines(self, what: str = "") -> list[str]:
        """Always closed by what diff did (``what`` of the caller does not apply)."""
        return super().lines(f"{self.rev} does not render; nothing compared")


# ---------------------------------------------------------------------------- rendering
def render_revision(
    repo_path: str, rev: str, subpath: str, *, runner: Runner
) -> tuple[str, list[Obj]]:
    """(commit, objects) of ``subpath`` at ``rev``; a path missing there renders to nothing.

    Each revision uses its own ``dyn-gitops.yaml``, under the same environment and flags.
    """
    try:
        ctx = context.open_path(subpath or ".", rev, runner=runner, repo=repo_path)
    except context.PathNotFound:
        commit, found = _lookup(repo_path, rev, subpath)
        if found:
            raise
        return commit, []  # an app that is new (or deleted) in this revision
    except RenderError as exc:  # its dyn-gitops.yaml is unusable
        raise RevisionError(rev, exc.problems) from None
    commit = ctx.source.commit or ""
    # no commit stamp: it would differ on every object; empty is a state like any other
    ctx = dataclasses.replace(ctx, source=dataclasses.replace(ctx.source, commit=None))
    try:
        return commit, context.render(ctx.with_settings(allow_empty=True)).objects
    except RenderError as exc:
        raise RevisionError(rev, exc.problems) from None


def _lookup(repo_path: str, rev: str, subpath: str) -> tuple[str, bool]:
    """(commit id of ``rev``, whether ``subpath`` exists in it)."""
    from . import gitstore

    repo = gitstore.open_repo(os.path.join(repo_path, subpath))
    found = gitstore.commit_of(repo, rev)
    rel = gitstore.repo_relative(repo, os.path.join(repo_path, subpath))
    return str(found.id), gitstore.exists(repo, found, rel)


# ---------------------------------------------------------------------------- comparing
def object_key(obj: Obj) -> ObjKey:
    meta = obj.get("metadata") or {}
    group = str(obj.get("apiVersion", "")).rpartition("/")[0]
    return (
        group,
        str(obj.get("kind", "")),
        str(meta.get("namespace") or ""),
        str(meta.get("name", "")),
    )


def _named(items: list[Any]) -> bool:
    names = [i.get("name") for i in items if isinstance(i, dict)]
    return (
        len(names) == len(items)
        and all(isinstance(n, str) for n in names)
        and len(set(names)) == len(names)
    )


def _seg(key: str) -> str:
    return f".{key}" if _PLAIN_KEY.fullmatch(key) else f"[{json.dumps(key)}]"


@dataclass(frozen=True)
class _At:
    """Where a compared value sits, for the redaction rule (:mod:`dyn_gitops.display`): the
    object's ``kind``, the structural path, the env var's name, and how many embedded texts
    deep."""

    kind: str | None
    loc: tuple[str | int, ...] = ()
    env_name: str | None = None
    nesting: int = 0

    def down(self, step: str | int, env_name: str | None = None) -> _At:
        return dataclasses.replace(self, loc=(*self.loc, step), env_name=env_name or self.env_name)

    def entry(self, before: Obj, after: Obj) -> _At:
        """At an env entry compared by position (its list repeats a name, or one has none):
        its name, a credential one if either side's is."""
        if len(self.loc) < 2 or not isinstance(self.loc[-1], int):
            return self
        if self.loc[-2] not in ("env", "envs"):
            return self
        names = [n for n in (before.get("name"), after.get("name")) if isinstance(n, str)]
        credential = [n for n in names if names_credential(n)]
        found = (credential or names)[:1]
        return dataclasses.replace(self, env_name=found[0]) if found else self

    def shown(self, v: Any) -> Any:
        if v is ABSENT:
            return v
        return redact_tree(
            v, self.loc, kind=self.kind, env_name=self.env_name, nesting=self.nesting
        )


def field_changes(
    before: Any,
    after: Any,
    path: str = "",
    *,
    kind: str | None = None,
    loc: tuple[str | int, ...] = (),
    env_name: str | None = None,
) -> list[FieldChange]:
    """Every leaf that differs, with a readable path (``env[name=X].value``).

    Values that may not be shown (Secret data, credentials: :mod:`dyn_gitops.display`) are
    compared as they are but reported as ``(redacted)``; their keys stay visible.
    ``kind``, ``loc`` (the structural path) and ``env_name`` feed that rule. Two strings
    holding documents with credentials inside (the ``nvidia.com/dgd-spec`` annotation, a JSON
    env value) are compared field by field below ``path{json}``, so a reviewer sees what
    changed without the values.
    """
    return _changes(before, after, path, _At(kind, loc, env_name))


def _changes(before: Any, after: Any, path: str, at: _At) -> list[FieldChange]:
    if before == after:
        return []
    if isinstance(before, dict) and isinstance(after, dict):
        at = at.entry(before, after)
        out: list[FieldChange] = []
        for k in [*before, *(k for k in after if k not in before)]:
            sub = f"{path}{_seg(str(k))}"
            out += _changes(before.get(k, ABSENT), after.get(k, ABSENT), sub, at.down(str(k)))
        return out
    if isinstance(before, list) and isinstance(after, list):
        return _list_changes(before, after, path, at)
    inner = _embedded(before, after, at)
    if inner is not None:
        return _changes(inner[0], inner[1], f"{path}{EMBEDDED_MARK}", inner[2])
    return [FieldChange(path.lstrip("."), at.shown(before), at.shown(after))]


#: the path of a field inside a document embedded in a string value
EMBEDDED_MARK = "{json}"


def _embedded(before: Any, after: Any, at: _At) -> tuple[Any, Any, _At] | None:
    """Both documents when ``before`` and ``after`` are strings holding one each, with a
    credential inside one of them (else the strings read best whole)."""
    if not (isinstance(before, str) and isinstance(after, str)):
        return None
    if at.nesting >= EMBEDDED_MAX_NESTING or is_sensitive(
        at.loc, kind=at.kind, env_name=at.env_name
    ):
        return None
    a, b = read_embedded(before), read_embedded(after)
    if a is None or b is None or a is UNREADABLE or b is UNREADABLE:
        return None
    if (
        redact_text(before, nesting=at.nesting) == before
        and redact_text(after, nesting=at.nesting) == after
    ):
        return None
    return a, b, _At(embedded_kind(b) or embedded_kind(a), (), None, at.nesting + 1)


def _list_changes(before: list[Any], after: list[Any], path: str, at: _At) -> list[FieldChange]:
    if before and after and _named(before) and _named(after):
        a = {i["name"]: i for i in before}
        b = {i["name"]: i for i in after}
        env_list = bool(at.loc) and at.loc[-1] in ("env", "envs")
        out: list[FieldChange] = []
        for n, name in enumerate([*a, *(n for n in b if n not in a)]):
            out += _changes(
                a.get(name, ABSENT),
                b.get(name, ABSENT),
                f"{path}[name={name}]",
                at.down(n, name if env_list else None),
            )
        common_a = [n for n in a if n in b]
        common_b = [n for n in b if n in a]
        if common_a != common_b:  # order matters (env expansion, container order)
            out.append(FieldChange(f"{path.lstrip('.')} (order)", common_a, common_b))
        return out
    if any(isinstance(i, dict | list) for i in [*before, *after]):
        out = []
        for i in range(max(len(before), len(after))):
            out += _changes(
                before[i] if i < len(before) else ABSENT,
                after[i] if i < len(after) else ABSENT,
                f"{path}[{i}]",
                at.down(i),
            )
        return out
    # scalars: args read best whole
    return [FieldChange(path.lstrip("."), at.shown(before), at.shown(after))]


def _generation(obj: Obj) -> tuple[ObjKey, str, str] | None:
    """(kind key without name, graph, component) of a worker carrying a worker hash."""
    labels = (obj.get("metadata") or {}).get("labels") or {}
    if keys.LABEL_WORKER_HASH not in labels:
        return None
    group, kind, ns, _ = object_key(obj)
    return (
        (group, kind, ns, ""),
        str(labels.get(keys.LABEL_GRAPH_NAME, "")),
        str(labels.get(keys.LABEL_COMPONENT, "")),
    )


def compare(base: list[Obj], head: list[Obj]) -> tuple[list[ObjectChange], int]:
    """(changes in output order, number of unchanged objects)."""
    a = {object_key(o): o for o in base}
    b = {object_key(o): o for o in head}
    changes: list[ObjectChange] = []
    unchanged = 0
    for k in a.keys() & b.keys():
        fields = field_changes(a[k], b[k], kind=k[1])
        if fields:
            changes.append(ObjectChange("changed", a[k], b[k], fields))
        else:
            unchanged += 1
    removed = [a[k] for k in a.keys() - b.keys()]
    added = {object_key(o): o for o in (b[k] for k in b.keys() - a.keys())}
    by_generation = {g: k for k, o in added.items() if (g := _generation(o)) is not None}
    for old in removed:
        g = _generation(old)
        new_key = by_generation.pop(g, None) if g is not None else None
        if new_key is not None:
            new = added.pop(new_key)
            changes.append(
                ObjectChange("replaced", old, new, field_changes(old, new, kind=object_key(old)[1]))
            )
        else:
            changes.append(ObjectChange("removed", old, None))
    changes += [ObjectChange("added", None, o) for o in added.values()]
    changes.sort(key=lambda c: sort_key(c.obj))
    return changes, unchanged


def diff(repo_path: str, base: str, head: str, subpath: str, *, runner: Runner) -> DiffResult:
    if subpath and not any(_lookup(repo_path, rev, subpath)[1] for rev in (base, head)):
        raise context.PathNotFound(
            f"{subpath}: in neither {base} nor {head}; nothing to compare "
            "(a path added or removed is fine, but it must exist in one)"
        )
    base_commit, before = render_revision(repo_path, base, subpath, runner=runner)
    head_commit, after = render_revision(repo_path, head, subpath, runner=runner)
    changes, unchanged = compare(before, after)
    return DiffResult(
        Side(base, base_commit, len(before)),
        Side(head, head_commit, len(after)),
        subpath or ".",
        changes,
        unchanged,
    )
