"""The fake API server's state and verbs (see the package docstring for what it imitates)."""

from __future__ import annotations

import bisect
import copy
import json
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

from dyn_gitops_operator.errors import ConflictError, GoneError, InvalidError, NotFoundError
from dyn_gitops_operator.fakekube.fields import (
    MISSING,
    Path,
    field_paths,
    merge_applied,
    merge_patch,
    prune_empty,
    remove_at,
    to_tree,
    value_at,
)
from dyn_gitops_operator.fakekube.rules import DEFAULT_RULES, KindRules
from dyn_gitops_operator.fakekube.selectors import field_matcher, label_matcher
from dyn_gitops_operator.resources import Obj, Resource, WatchEvent

Key = tuple[Resource, str, str]
EventType = Literal["ADDED", "MODIFIED", "DELETED"]
#: the metadata a client sets (the rest is the server's)
CLIENT_METADATA = ("labels", "annotations", "ownerReferences", "finalizers")


class TickingClock:
    """Timestamps for creationTimestamp and managedFields: from 2025-01-01T00:00:00Z, one
    second later at every reading, so creation order is total and runs are repeatable."""

    def __init__(self, start: datetime = datetime(2025, 1, 1, tzinfo=UTC)) -> None:
        self._now = start
        self._lock = threading.Lock()

    def __call__(self) -> datetime:
        with self._lock:
            self._now += timedelta(seconds=1)
            return self._now


def _stamp(t: datetime) -> str:
    return t.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class _Entry:
    """One managedFields entry, its fields as a set of paths."""

    manager: str
    operation: str
    subresource: str
    api_version: str
    fields: set[Path]
    time: str = ""

    @property
    def id(self) -> tuple[str, str, str]:
        return self.manager, self.operation, self.subresource

    def render(self) -> Obj:
        out: Obj = {
            "manager": self.manager,
            "operation": self.operation,
            "apiVersion": self.api_version,
            "time": self.time,
            "fieldsType": "FieldsV1",
            "fieldsV1": to_tree(self.fields),
        }
        if self.subresource:
            out["subresource"] = self.subresource
        return out


@dataclass
class _Event:
    rv: int
    type: str
    res: Resource
    old: Obj | None
    new: Obj


@dataclass
class WatchHandle:
    """What ``on_open`` receives: ``shutdown()`` ends the watch (as closing a response)."""

    server: FakeApiServer
    closed: bool = field(default=False)

    def shutdown(self) -> None:
        with self.server.cond:
            self.closed = True
            self.server.cond.notify_all()


def _conflict(res: Resource, name: str, why: str) -> ConflictError:
    return ConflictError(
        409,
        "Conflict",
        f'Operation cannot be fulfilled on {res.plural}.{res.group} "{name}": {why}',
    )


_MODIFIED = (
    "the object has been modified; please apply your changes to the latest version and try again"
)


def _dotted(path: Path) -> str:
    """``.spec.containers[name="main"].image``, as the real server names a field."""
    out = ""
    for step in path:
        if step.startswith("k:"):
            keys = json.loads(step[2:])
            out += "[" + ",".join(f"{k}={json.dumps(v)}" for k, v in keys.items()) + "]"
        else:
            out += "." + step[2:]
    return out


def _leaves(paths: set[Path]) -> set[Path]:
    prefixes = {p[:i] for p in paths for i in range(len(p))}
    return paths - prefixes


def _seen_as(kind: str, was: bool, now: bool) -> EventType | None:
    """How a watch with a selector sees a change: an object entering the selection is
    ADDED, one leaving it DELETED."""
    if kind == "DELETED" or not now:
        return "DELETED" if was else None
    return "MODIFIED" if was else "ADDED"


def _owned_under(path: Path, owned: Iterable[Path]) -> bool:
    return any(q[: len(path)] == path for q in owned)


class FakeApiServer:
    """Objects, managed fields and the event log, behind one lock."""

    def __init__(
        self,
        rules: Mapping[Resource, KindRules] | None = None,
        served: Iterable[Resource] | None = None,
        clock: Callable[[], datetime] | None = None,
    ) -> None:
        self.rules = {**DEFAULT_RULES, **(rules or {})}
        self.served = set(self.rules) if served is None else set(served)
        self.clock = clock or TickingClock()
        self.cond = threading.Condition(threading.RLock())
        self.rv = 0
        self.compacted = 0
        self._uids = 0
        self._objects: dict[Key, Obj] = {}
        self._fields: dict[Key, list[_Entry]] = {}
        self._events: list[_Event] = []
        self._event_rvs: list[int] = []

    # ------------------------------------------------------------------ helpers
    def kind(self, res: Resource) -> KindRules:
        if res not in self.served:
            raise NotFoundError(
                404,
                "NotFound",
                f"the server could not find the requested resource ({res.plural}.{res.group})",
            )
        return self.rules.get(res, KindRules(status=False))

    def _live(self, res: Resource, namespace: str | None, name: str) -> tuple[Key, Obj]:
        key = (res, namespace or "", name)
        obj = self._objects.get(key)
        if obj is None:
            raise NotFoundError(404, "NotFound", f'{res.plural}.{res.group} "{name}" not found')
        return key, obj

    @staticmethod
    def _check_rv(res: Resource, live: Obj, rv: str | None) -> None:
        if rv and rv != live["metadata"]["resourceVersion"]:
            raise _conflict(res, live["metadata"]["name"], _MODIFIED)

    @staticmethod
    def scoped(obj: Obj, rules: KindRules, subresource: str) -> Obj:
        """The part of ``obj`` a write of this (sub)resource may set."""
        if subresource == "status":
            return {"status": copy.deepcopy(obj["status"])} if "status" in obj else {}
        out = {
            k: copy.deepcopy(v)
            for k, v in obj.items()
            if k not in ("apiVersion", "kind", "metadata") and not (rules.status and k == "status")
        }
        meta = {
            k: copy.deepcopy(v)
            for k, v in (obj.get("metadata") or {}).items()
            if k in CLIENT_METADATA
        }
        if meta:
            out["metadata"] = meta
        return out

    @staticmethod
    def _changed(old: Obj, new: Obj, rules: KindRules) -> set[Path]:
        """Paths an update set to a new value (and keyed items it added)."""
        return {
            p
            for p in field_paths(new, rules.lists)
            if (
                value_at(old, p) is MISSING
                if p[-1].startswith("k:")
                else value_at(old, p) != value_at(new, p)
            )
        }

    @staticmethod
    def _take(
        entries: list[_Entry], manager: str, subresource: str, api_version: str, changed: set[Path]
    ) -> None:
        """An update: its manager owns what it changed, nobody else does any more."""
        if not changed:
            return
        for e in entries:
            e.fields -= changed
        entry = next((e for e in entries if e.id == (manager, "Update", subresource)), None)
        if entry is None:
            entry = _Entry(manager, "Update", subresource, api_version, set())
            entries.append(entry)
        entry.fields |= changed

    def _entries(self, key: Key) -> list[_Entry]:
        return [copy.deepcopy(e) for e in self._fields.get(key, [])]

    def _commit(
        self, res: Resource, key: Key, old: Obj | None, new: Obj, entries: list[_Entry]
    ) -> Obj:
        """Store ``new`` unless nothing changed: defaults, ownership of what exists,
        generation, resourceVersion, the event."""
        rules = self.rules.get(res, KindRules(status=False))
        if rules.defaults is not None:
            rules.defaults(new)
        for e in entries:
            e.fields = {p for p in e.fields if value_at(new, p) is not MISSING}
        entries = [e for e in entries if e.fields]
        before = {e.id: e.fields for e in self._fields.get(key, [])}
        meta = new["metadata"]
        meta.pop("managedFields", None)
        if old is not None:
            old_meta = {k: v for k, v in old["metadata"].items() if k != "managedFields"}
            if {**old, "metadata": old_meta} == new and before == {e.id: e.fields for e in entries}:
                return copy.deepcopy(old)  # a no-op write keeps the resourceVersion
        now = _stamp(self.clock())
        for e in entries:
            if before.get(e.id) != e.fields or not e.time:
                e.time = now
        if old is None:
            meta["generation"] = 1
        elif self._spec(old, rules) != self._spec(new, rules):
            meta["generation"] = int(old["metadata"].get("generation") or 0) + 1
        self.rv += 1
        meta["resourceVersion"] = str(self.rv)
        if entries:
            meta["managedFields"] = [e.render() for e in entries]
        self._objects[key] = new
        self._fields[key] = entries
        self._log("ADDED" if old is None else "MODIFIED", res, old, new)
        return copy.deepcopy(new)

    @staticmethod
    def _spec(obj: Obj, rules: KindRules) -> Obj:
        """What bumps the generation: everything but metadata (and status, if a
        subresource)."""
        return {
            k: v for k, v in obj.items() if k != "metadata" and not (rules.status and k == "status")
        }

    def _log(self, kind: str, res: Resource, old: Obj | None, new: Obj) -> None:
        self._events.append(_Event(self.rv, kind, res, old, new))
        self._event_rvs.append(self.rv)
        self.cond.notify_all()

    def _new_meta(self, res: Resource, namespace: str, name: str) -> Obj:
        self._uids += 1
        meta: Obj = {
            "name": name,
            "uid": f"00000000-0000-4000-8000-{self._uids:012d}",
            "creationTimestamp": _stamp(self.clock()),
        }
        if namespace:
            meta["namespace"] = namespace
        return meta

    @staticmethod
    def _name(obj: Obj) -> tuple[str, str]:
        meta = obj.get("metadata") or {}
        if not meta.get("name"):
            raise InvalidError(
                422, "Invalid", "metadata.name: Required value: name or generateName is required"
            )
        return meta.get("namespace") or "", str(meta["name"])

    # ------------------------------------------------------------------ reads
    def get(
        self, res: Resource, namespace: str | None, name: str, subresource: str | None = None
    ) -> Obj:
        with self.cond:
            rules = self.kind(res)
            _, live = self._live(res, namespace, name)
            if subresource == "scale":
                return self._scale_of(res, rules, live)
            if subresource not in (None, "status") or (subresource and not rules.status):
                raise NotFoundError(404, "NotFound", f"no {subresource} subresource")
            return copy.deepcopy(live)

    def list(
        self, res: Resource, namespace: str | None, label_selector: str, field_selector: str
    ) -> tuple[list[Obj], str]:
        with self.cond:
            self.kind(res)
            labels, fields = label_matcher(label_selector), field_matcher(field_selector)
            found = [
                obj
                for (r, ns, _), obj in sorted(self._objects.items(), key=lambda kv: kv[0][1:])
                if r == res
                and (not namespace or ns == namespace)
                and labels(obj["metadata"].get("labels") or {})
                and fields(obj)
            ]
            return copy.deepcopy(found), str(self.rv)

    def watch(
        self,
        res: Resource,
        namespace: str | None,
        resource_version: str,
        label_selector: str,
        field_selector: str,
        timeout_seconds: int,
        on_open: Callable[[Any], None] | None,
    ) -> Iterator[WatchEvent]:
        """Events after ``resource_version`` until ``timeout_seconds`` or the handle's
        shutdown. ("" or "0" start at the current state without replaying it as ADDED
        events, as the real server would: informers always watch from their list.)"""
        self.kind(res)
        labels, fields = label_matcher(label_selector), field_matcher(field_selector)

        def matches(obj: Obj | None) -> bool:
            return (
                obj is not None
                and (not namespace or obj["metadata"].get("namespace") == namespace)
                and labels(obj["metadata"].get("labels") or {})
                and fields(obj)
            )

        handle = WatchHandle(self)
        if on_open is not None:
            on_open(handle)
        with self.cond:
            pos = int(resource_version) if resource_version not in ("", "0") else self.rv
            if pos < self.compacted:
                raise GoneError(
                    410, "Expired", f"too old resource version: {pos} ({self.compacted})"
                )
        deadline = time.monotonic() + timeout_seconds
        while True:
            with self.cond:
                start = bisect.bisect_right(self._event_rvs, pos)
                while not handle.closed and start == len(self._events):
                    left = deadline - time.monotonic()
                    if left <= 0:
                        return
                    self.cond.wait(left)
                    start = bisect.bisect_right(self._event_rvs, pos)
                if handle.closed:
                    return
                batch = self._events[start:]
            for ev in batch:
                pos = ev.rv
                if ev.res != res:
                    continue
                kind = _seen_as(ev.type, matches(ev.old), matches(ev.new))
                if kind is not None:
                    yield WatchEvent(type=kind, object=copy.deepcopy(ev.new))

    def compact(self) -> None:
        """Forget the event log up to now: a watch from an older version gets 410."""
        with self.cond:
            self.compacted = self.rv
            keep = bisect.bisect_right(self._event_rvs, self.rv)
            del self._events[:keep]
            del self._event_rvs[:keep]

    # ------------------------------------------------------------------ writes
    def create(self, res: Resource, obj: Obj, manager: str) -> Obj:
        with self.cond:
            rules = self.kind(res)
            ns, name = self._name(obj)
            key = (res, ns, name)
            if key in self._objects:
                raise ConflictError(
                    409, "AlreadyExists", f'{res.plural}.{res.group} "{name}" already exists'
                )
            body = self.scoped(obj, rules, "")
            new: Obj = {
                "apiVersion": res.api_version,
                "kind": res.kind,
                **body,
                "metadata": {**self._new_meta(res, ns, name), **body.get("metadata", {})},
            }
            if rules.defaults is not None:
                rules.defaults(new)
            entries = [
                _Entry(
                    manager,
                    "Update",
                    "",
                    res.api_version,
                    field_paths(self.scoped(new, rules, ""), rules.lists),
                )
            ]
            return self._commit(res, key, None, new, entries)

    def apply(
        self, res: Resource, obj: Obj, manager: str, subresource: str | None, force: bool
    ) -> Obj:
        with self.cond:
            rules = self.kind(res)
            if subresource == "scale":
                raise InvalidError(
                    415,
                    "UnsupportedMediaType",
                    "the body of the request was "
                    "in an unknown format: application/apply-patch+yaml",
                )
            if subresource not in (None, "status") or (subresource and not rules.status):
                raise NotFoundError(404, "NotFound", f"no {subresource} subresource")
            sub = subresource or ""
            ns, name = self._name(obj)
            key = (res, ns, name)
            config = self.scoped(obj, rules, sub)
            fields = field_paths(config, rules.lists)
            live = self._objects.get(key)
            if live is None:
                if sub:
                    raise NotFoundError(
                        404, "NotFound", f'{res.plural}.{res.group} "{name}" not found'
                    )
                # (a resourceVersion in the body is not checked here: the real server
                # creates the object all the same)
                base = {
                    "apiVersion": res.api_version,
                    "kind": res.kind,
                    "metadata": self._new_meta(res, ns, name),
                }
                new = merge_applied(base, config, rules.lists)
                return self._commit(
                    res, key, None, new, [_Entry(manager, "Apply", "", res.api_version, fields)]
                )
            self._check_rv(res, live, (obj.get("metadata") or {}).get("resourceVersion"))
            entries = self._entries(key)
            mine = next((e for e in entries if e.id == (manager, "Apply", sub)), None)
            others = [e for e in entries if e is not mine]
            conflicts = [
                (e, p)
                for e in others
                for p in sorted(_leaves(fields) & e.fields)
                if value_at(live, p) != value_at(config, p)
            ]
            if conflicts and not force:
                raise ConflictError(
                    409,
                    "Conflict",
                    f"Apply failed with {len(conflicts)} "
                    "conflict(s): "
                    + "; ".join(f'conflict with "{e.manager}": {_dotted(p)}' for e, p in conflicts),
                )
            for e, p in conflicts:
                e.fields.discard(p)
            new = copy.deepcopy(live)
            kept: set[Path] = set().union(*(e.fields for e in others))
            for p in sorted((mine.fields if mine else set()) - fields, key=len, reverse=True):
                if not _owned_under(p, kept):  # fields we stopped applying go, unless shared
                    remove_at(new, p)
                    prune_empty(new, p, kept | fields)
            new = merge_applied(new, config, rules.lists)
            if mine is None:
                mine = _Entry(manager, "Apply", sub, res.api_version, set())
                entries.append(mine)
            mine.fields = fields
            return self._commit(res, key, live, new, entries)

    def update(self, res: Resource, obj: Obj, manager: str, subresource: str | None) -> Obj:
        with self.cond:
            rules = self.kind(res)
            if subresource not in (None, "status") or (subresource and not rules.status):
                raise NotFoundError(404, "NotFound", f"no {subresource} subresource")
            ns, name = self._name(obj)
            key, live = self._live(res, ns, name)
            rv = (obj.get("metadata") or {}).get("resourceVersion")
            if not rv and not rules.unconditional_update:
                raise InvalidError(
                    422,
                    "Invalid",
                    f'{res.plural}.{res.group} "{name}" is '
                    "invalid: metadata.resourceVersion: Invalid value: 0: must "
                    "be specified for an update",
                )
            self._check_rv(res, live, rv)
            sub = subresource or ""
            new = copy.deepcopy(live)
            if sub:
                new.pop("status", None)
                new.update(self.scoped(obj, rules, sub))
            else:
                body = self.scoped(obj, rules, "")
                meta = {k: v for k, v in live["metadata"].items() if k not in CLIENT_METADATA}
                new = {
                    "apiVersion": res.api_version,
                    "kind": res.kind,
                    **body,
                    "metadata": {**meta, **body.get("metadata", {})},
                }
                if rules.status and "status" in live:
                    new["status"] = copy.deepcopy(live["status"])
            entries = self._entries(key)
            self._take(
                entries,
                manager,
                sub,
                res.api_version,
                self._changed(self.scoped(live, rules, sub), self.scoped(new, rules, sub), rules),
            )
            return self._commit(res, key, live, new, entries)

    def patch(
        self,
        res: Resource,
        namespace: str | None,
        name: str,
        body: Obj,
        manager: str,
        subresource: str | None,
    ) -> Obj:
        with self.cond:
            rules = self.kind(res)
            key, live = self._live(res, namespace, name)
            self._check_rv(res, live, (body.get("metadata") or {}).get("resourceVersion"))
            new = copy.deepcopy(live)
            sub = subresource or ""
            if sub == "scale" and rules.scale_selector is not None:
                replicas = (body.get("spec") or {}).get("replicas")
                if replicas is not None:
                    new.setdefault("spec", {})["replicas"] = replicas
            elif sub == "status" and rules.status:
                if "status" in body:
                    new["status"] = merge_patch(live.get("status"), body["status"])
            elif not sub:
                new = merge_patch(live, self.scoped(body, rules, ""))
            else:
                raise NotFoundError(404, "NotFound", f"no {subresource} subresource")
            entries = self._entries(key)
            scope = "" if sub == "scale" else sub
            self._take(
                entries,
                manager,
                sub,
                res.api_version,
                self._changed(
                    self.scoped(live, rules, scope), self.scoped(new, rules, scope), rules
                ),
            )
            out = self._commit(res, key, live, new, entries)
            return self._scale_of(res, rules, out) if sub == "scale" else out

    def delete(
        self,
        res: Resource,
        namespace: str | None,
        name: str,
        uid: str | None,
        resource_version: str | None,
    ) -> None:
        with self.cond:
            self.kind(res)
            key, live = self._live(res, namespace, name)
            meta = live["metadata"]
            if uid and uid != meta["uid"]:
                raise _conflict(
                    res,
                    name,
                    f"the UID in the precondition ({uid}) does not "
                    f"match the UID in record ({meta['uid']}). The object might "
                    "have been deleted and then recreated",
                )
            if resource_version and resource_version != meta["resourceVersion"]:
                raise _conflict(
                    res,
                    name,
                    f"the ResourceVersion in the precondition "
                    f"({resource_version}) does not match the ResourceVersion "
                    f"in record ({meta['resourceVersion']}). The object might "
                    "have been modified",
                )
            del self._objects[key]
            del self._fields[key]
            self.rv += 1
            gone = copy.deepcopy(live)
            gone["metadata"]["resourceVersion"] = str(self.rv)
            self._log("DELETED", res, live, gone)

    @staticmethod
    def _scale_of(res: Resource, rules: KindRules, obj: Obj) -> Obj:
        if rules.scale_selector is None:
            raise NotFoundError(404, "NotFound", f"{res.plural} have no scale subresource")
        meta = obj["metadata"]
        status: Obj = {"replicas": int((obj.get("status") or {}).get("replicas") or 0)}
        selector = value_at(obj, tuple(f"f:{s}" for s in rules.scale_selector.split(".")))
        if selector is not MISSING and selector:
            status["selector"] = selector
        return {
            "apiVersion": "autoscaling/v1",
            "kind": "Scale",
            "metadata": {
                k: meta.get(k)
                for k in ("name", "namespace", "uid", "resourceVersion", "creationTimestamp")
            },
            "spec": {"replicas": int((obj.get("spec") or {}).get("replicas") or 0)},
            "status": status,
        }


__all__ = ["FakeApiServer", "TickingClock", "WatchHandle"]
