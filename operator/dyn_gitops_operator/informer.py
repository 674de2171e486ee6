"""List-then-watch into a local store, with resourceVersion resumption and re-list on 410.

One thread per informer. Handlers receive (old, new) pairs (None for add / delete) after
the store is updated; they must be quick (they only enqueue keys).
"""

from __future__ import annotations

import contextlib
import logging
import random
import threading
from collections.abc import Callable, Iterable
from typing import Any

from dyn_gitops_operator.errors import ApiError, ForbiddenError, GoneError
from dyn_gitops_operator.kubeapi import KubeApi
from dyn_gitops_operator.metrics import Metrics
from dyn_gitops_operator.resources import Obj, Resource

log = logging.getLogger(__name__)

Key = tuple[str, str]
Handler = Callable[[Obj | None, Obj | None], None]
Trim = Callable[[Obj], Obj]


def obj_key(obj: Obj) -> Key:
    meta = obj["metadata"]
    return meta.get("namespace") or "", meta["name"]


class Store:
    """Thread-safe map key -> object with secondary indexes (index name -> value -> keys)."""

    def __init__(self, indexers: dict[str, Callable[[Obj], Iterable[str]]] | None = None) -> None:
        self._lock = threading.RLock()
        self._items: dict[Key, Obj] = {}
        self._indexers = indexers or {}
        self._index: dict[str, dict[str, set[Key]]] = {n: {} for n in self._indexers}

    def get(self, key: Key) -> Obj | None:
        with self._lock:
            return self._items.get(key)

    def items(self) -> list[Obj]:
        with self._lock:
            return list(self._items.values())

    def keys(self) -> list[Key]:
        with self._lock:
            return list(self._items)

    def by_index(self, index: str, value: str) -> list[Obj]:
        with self._lock:
            return [self._items[k] for k in self._index[index].get(value, ())]

    def __len__(self) -> int:
        with self._lock:
            return len(self._items)

    def put(self, obj: Obj) -> Obj | None:
        key = obj_key(obj)
        with self._lock:
            old = self._items.get(key)
            if old is not None:
                self._unindex(key, old)
            self._items[key] = obj
            for name, fn in self._indexers.items():
                for value in fn(obj):
                    self._index[name].setdefault(value, set()).add(key)
            return old

    def put_if(self, obj: Obj, newer: Callable[[Obj], bool]) -> bool:
        """Put ``obj`` unless the cached object is at least as new (``newer(cached)``)."""
        with self._lock:
            cached = self._items.get(obj_key(obj))
            if cached is not None and not newer(cached):
                return False
            self.put(obj)
            return True

    def remove(self, key: Key) -> Obj | None:
        with self._lock:
            old = self._items.pop(key, None)
            if old is not None:
                self._unindex(key, old)
            return old

    def _unindex(self, key: Key, obj: Obj) -> None:
        for name, fn in self._indexers.items():
            for value in fn(obj):
                keys = self._index[name].get(value)
                if keys is not None:
                    keys.discard(key)
                    if not keys:
                        del self._index[name][value]


class Informer:
    """Keeps ``store`` equal to the server's view of one resource (optionally filtered)."""

    def __init__(
        self,
        kube: KubeApi,
        resource: Resource,
        *,
        namespace: str | None,
        metrics: Metrics,
        label_selector: str = "",
        field_selector: str = "",
        trim: Trim | None = None,
        store: Store | None = None,
        watch_timeout: int = 290,
    ) -> None:
        self.kube = kube
        self.resource = resource
        self.namespace = namespace
        self.label_selector = label_selector
        self.field_selector = field_selector
        self.trim = trim or (lambda o: o)
        self.store = store if store is not None else Store()
        self.metrics = metrics
        self.watch_timeout = watch_timeout
        self.handlers: list[Handler] = []
        self.synced = threading.Event()
        self.resource_version = ""
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._response: Any = None
        self._name = resource.plural

    def add_handler(self, handler: Handler) -> None:
        self.handlers.append(handler)

    def start(self) -> None:
        self._thread = threading.Thread(
            target=self._run, name=f"informer-{self._name}", daemon=True
        )
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        resp = self._response
        if resp is not None:
            with contextlib.suppress(Exception):
                resp.shutdown()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=5)

    def alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    # ------------------------------------------------------------------ loop
    def _run(self) -> None:
        failures = 0
        while not self._stop.is_set():
            try:
                if not self.resource_version:
                    self.relist()
                self._watch()
                failures = 0
            except GoneError:
                # the resourceVersion fell out of the watch window: only a fresh list is safe
                log.info("watch expired, re-listing", extra={"resource": self._name})
                self.metrics.watch_relists.labels(self._name).inc()
                self.resource_version = ""
            except ApiError as exc:
                if self._stop.is_set():
                    return  # stop() shut the connection down
                failures += 1
                self.metrics.apiserver.failed(exc, f"watch {self._name}")
                self.metrics.watch_errors.labels(self._name, exc.error_type).inc()
                delay = min(30.0, 0.2 * 2 ** min(failures, 8)) * (0.5 + random.random() / 2)
                level = logging.ERROR if isinstance(exc, ForbiddenError) else logging.WARNING
                log.log(
                    level,
                    "watch failed, retrying",
                    extra={"resource": self._name, "error": str(exc), "delay": delay},
                )
                self._stop.wait(delay)
            except Exception:  # a bug must not kill the informer thread silently
                log.exception("informer crashed, restarting", extra={"resource": self._name})
                self.metrics.watch_errors.labels(self._name, "internal").inc()
                self.resource_version = ""
                self._stop.wait(1.0)

    def relist(self) -> None:
        """List into the store (handlers see the differences) and mark it synced; the
        informer thread does this at start and after a 410, tests to fill a cache by hand."""
        items, rv = self.kube.list(
            self.resource,
            self.namespace,
            label_selector=self.label_selector,
            field_selector=self.field_selector,
            transform=self.trim,
        )
        seen = set()
        for obj in items:
            seen.add(obj_key(obj))
            old = self.store.put(obj)
            if old is None or _changed(old, obj):
                self._notify(old, obj)
        for key in set(self.store.keys()) - seen:
            old = self.store.remove(key)
            if old is not None:
                self._notify(old, None)
        self.metrics.apiserver.ok()
        self.resource_version = rv
        self.synced.set()

    def _watch(self) -> None:
        for event in self.kube.watch(
            self.resource,
            self.namespace,
            self.resource_version,
            label_selector=self.label_selector,
            field_selector=self.field_selector,
            timeout_seconds=self.watch_timeout,
            on_open=self._opened,
        ):
            if self._stop.is_set():
                return
            raw = event["object"]
            rv = (raw.get("metadata") or {}).get("resourceVersion")
            kind = event["type"]
            self.metrics.watch_events.labels(self._name, kind).inc()
            if kind != "BOOKMARK":
                obj = self.trim(raw)
                if kind == "DELETED":
                    old = self.store.remove(obj_key(obj))
                    self._notify(old or obj, None)
                else:
                    old = self.store.put(obj)
                    self._notify(old, obj)
            if rv:
                self.resource_version = rv

    def _opened(self, resp: Any) -> None:
        self._response = resp
        if getattr(resp, "status", 200) < 300:  # an idle watch may bring no event for long
            self.metrics.apiserver.ok()
        if self._stop.is_set():
            resp.shutdown()

    def _notify(self, old: Obj | None, new: Obj | None) -> None:
        for handler in self.handlers:
            try:
                handler(old, new)
            except Exception:
                log.exception("event handler failed", extra={"resource": self._name})


def _changed(old: Obj, new: Obj) -> bool:
    return bool(old["metadata"].get("resourceVersion") != new["metadata"].get("resourceVersion"))


def strip_rv(obj: Obj) -> dict[str, Any]:
    """The object without its resourceVersion (to tell real changes from no-op events)."""
    meta = {
        k: v for k, v in obj["metadata"].items() if k not in ("resourceVersion", "managedFields")
    }
    return {**obj, "metadata": meta}
