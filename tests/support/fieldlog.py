"""Every value one field of one object took, in order, from a watch (a poll could miss a
value that was written and undone between two reads): ``FieldLog`` records the changes and
lets a test wait for a state of the object without polling. A watch thread that dies fails
the test (:meth:`FieldLog.check`, and on leaving the ``with`` block)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from dyn_gitops_operator.errors import GoneError, TransientError
from dyn_gitops_operator.kube import Kube
from dyn_gitops_operator.resources import Resource

Obj = dict[str, Any]


def spec_replicas(obj: Obj) -> Any:
    return (obj.get("spec") or {}).get("replicas")


class FieldLog:
    """``with FieldLog(k, DEPLOYMENTS, ns, name) as log: ...; log.values``: the distinct
    consecutive values of ``read(object)`` (default ``spec.replicas``) since the start; a
    deleted object reads as None."""

    def __init__(
        self,
        k: Kube,
        res: Resource,
        namespace: str,
        name: str,
        read: Callable[[Obj], Any] = spec_replicas,
    ) -> None:
        self.k, self.res, self.namespace, self.name, self.read = k, res, namespace, name, read
        self.values: list[Any] = []
        self.latest: Obj | None = None
        self._cond = threading.Condition()
        self._stop = threading.Event()
        self._error: BaseException | None = None
        self._thread: threading.Thread | None = None

    def __enter__(self) -> FieldLog:
        rv = self._relist()
        self._thread = threading.Thread(target=self._run, args=(rv,), daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)
        if exc[0] is None:
            self.check()

    def check(self) -> None:
        """Raise if the watch thread died: what it saw since is unknown."""
        if self._error is not None:
            raise AssertionError(f"the watch of {self.what} died: {self._error!r}")
        if self._thread is not None and not self._thread.is_alive() and not self._stop.is_set():
            raise AssertionError(f"the watch of {self.what} ended")

    @property
    def what(self) -> str:
        return f"{self.res.kind} {self.namespace}/{self.name}"

    def wait_until(self, pred: Callable[[Obj], bool], what: str, timeout: float = 180) -> Obj:
        """The object once ``pred`` holds for it (checked on every event)."""
        end = time.monotonic() + timeout
        with self._cond:
            while True:
                self.check()
                if self.latest is not None and pred(self.latest):
                    return self.latest
                left = end - time.monotonic()
                if left <= 0:
                    raise AssertionError(
                        f"timed out after {timeout} s waiting for {what} ({self.what}: "
                        f"values {self.values})"
                    )
                self._cond.wait(min(left, 1.0))

    def _see(self, obj: Obj | None) -> None:
        with self._cond:
            self.latest = obj
            value = None if obj is None else self.read(obj)
            if not self.values or self.values[-1] != value:
                self.values.append(value)
            self._cond.notify_all()

    def _relist(self) -> str:
        items, rv = self.k.list(
            self.res, self.namespace, field_selector=f"metadata.name={self.name}"
        )
        self._see(items[0] if items else None)
        return rv

    def _run(self, rv: str) -> None:
        try:
            while not self._stop.is_set():
                try:
                    for ev in self.k.watch(
                        self.res,
                        self.namespace,
                        rv,
                        field_selector=f"metadata.name={self.name}",
                        timeout_seconds=5,
                    ):
                        obj = ev["object"]
                        rv = obj["metadata"]["resourceVersion"]
                        if ev["type"] != "BOOKMARK":
                            self._see(None if ev["type"] == "DELETED" else obj)
                        if self._stop.is_set():
                            return
                except GoneError as exc:
                    raise AssertionError("events were lost (410 Gone)") from exc
                except TransientError:
                    time.sleep(0.2)  # the connection dropped: resume from the last event
        except BaseException as exc:
            self._error = exc
            with self._cond:
                self._cond.notify_all()
