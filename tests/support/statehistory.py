"""Every state a namespace went through, exactly: watches on a few kinds say *that* something
changed (at which resourceVersion); each change is then read back with
``resourceVersionMatch=Exact`` at that resourceVersion (one etcd: a revision orders every
kind), so a state is what all the listed kinds were at one instant, and the history is in
the order etcd saw it, however late the watches deliver or the reads run.

A watch thread that fails makes :meth:`StateHistory.until` raise its error (it cannot die
silently); a history that does not reach the wanted state raises with its last states.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable
from typing import Any, Generic, TypeVar

T = TypeVar("T")
Items = dict[str, list[dict[str, Any]]]
#: a namespaced list call of the kubernetes client, namespace bound
Lister = Callable[..., Any]
#: how long one watch request stays open before it is renewed
WATCH_SECONDS = 10


def _items(api: Any, result: Any) -> tuple[list[dict[str, Any]], str]:
    if isinstance(result, dict):  # CustomObjectsApi
        return list(result.get("items") or []), str(result["metadata"]["resourceVersion"])
    data = api.sanitize_for_serialization(result)
    return list(data.get("items") or []), str(data["metadata"]["resourceVersion"])


def _rv(obj: Any) -> str:
    if isinstance(obj, dict):
        return str(obj["metadata"]["resourceVersion"])
    return str(obj.metadata.resource_version)


class StateHistory(Generic[T]):
    """``listers``: {key: list call}; ``view(items by key)`` makes the state to record."""

    def __init__(self, api: Any, listers: dict[str, Lister], view: Callable[[Items], T]) -> None:
        self.api, self.listers, self.view = api, listers, view
        self.states: dict[int, T] = {}
        self.changes: queue.Queue[int | BaseException] = queue.Queue()
        self.stop = threading.Event()

    def __enter__(self) -> StateHistory[T]:
        """Start watching: the history begins now (the first state is the current one)."""
        for lister in self.listers.values():
            rv = _items(self.api, lister())[1]
            self.changes.put(int(rv))
            threading.Thread(target=self._watch, args=(lister, rv), daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()  # the watch threads end within WATCH_SECONDS

    def read(self, rv: int) -> T:
        """The state at resourceVersion ``rv``, every lister read at exactly that one."""
        items = {}
        for key, lister in self.listers.items():
            result = lister(resource_version=str(rv), resource_version_match="Exact")
            items[key] = _items(self.api, result)[0]
        return self.view(items)

    def _watch(self, lister: Lister, rv: str) -> None:
        from kubernetes import watch
        from kubernetes.client.exceptions import ApiException

        try:
            while not self.stop.is_set():
                w = watch.Watch()
                try:
                    for event in w.stream(
                        lister, resource_version=rv, timeout_seconds=WATCH_SECONDS
                    ):
                        rv = _rv(event["object"])
                        self.changes.put(int(rv))
                        if self.stop.is_set():
                            break
                except ApiException as exc:
                    if exc.status != 410:
                        raise
                    rv = _items(self.api, lister())[1]  # expired: go on from now
                    self.changes.put(int(rv))
                finally:
                    w.stop()
        except BaseException as exc:
            self.changes.put(exc)

    def until(self, done: Callable[[T], bool], timeout: float, what: str) -> list[T]:
        """Record states until one satisfies ``done``; every distinct state up to it, in
        resourceVersion order (consecutive repeats dropped)."""
        end = time.monotonic() + timeout
        for rv in sorted(self.states):  # read already (by an earlier call's drain)
            if done(self.states[rv]):
                return self._ordered(rv)
        while time.monotonic() <= end:
            try:
                change = self.changes.get(timeout=1.0)
            except queue.Empty:
                continue
            if isinstance(change, BaseException):
                raise AssertionError(f"{what}: a watch failed: {change!r}") from change
            if change in self.states:
                continue
            state = self.states[change] = self.read(change)
            if done(state):
                self._drain()
                return self._ordered(change)
        raise AssertionError(f"{what}: not reached in {timeout} s: {self._last()}")

    def _drain(self) -> None:
        """Read the changes already announced (a slower watch's may be older)."""
        while True:
            try:
                change = self.changes.get_nowait()
            except queue.Empty:
                return
            if isinstance(change, BaseException):
                self.changes.put(change)  # for the next call
                return
            if change not in self.states:
                self.states[change] = self.read(change)

    def _ordered(self, last: int) -> list[T]:
        out: list[T] = []
        for rv in sorted(self.states):
            if rv <= last and (not out or self.states[rv] != out[-1]):
                out.append(self.states[rv])
        return out

    def _last(self) -> list[T]:
        return self._ordered(max(self.states, default=0))[-3:]
