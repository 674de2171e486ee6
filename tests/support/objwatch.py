"""Every state of one object the API server stored, in order, from one watch (for a DGD:
what the graph reported, state, Ready, for which generation) between two moments of a
test, with no gap between polls. A watch that dies fails the test
(:class:`support.podwatch.WatchDied`), 410 Gone relists."""

from __future__ import annotations

import threading
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from dyn_gitops_operator.errors import GoneError
from dyn_gitops_operator.kube import DGDS, Kube, Resource

from support.podwatch import JOIN_SECONDS, WATCH_SECONDS, WatchDied


@dataclass(frozen=True)
class Reported:
    """One stored state of the DGD."""

    resource_version: str
    generation: int
    observed_generation: int | None
    state: str | None
    ready: str | None  # the Ready condition's status

    @classmethod
    def of(cls, dgd: dict[str, Any]) -> Reported:
        st = dgd.get("status") or {}
        cond: dict[str, Any] = next(
            (c for c in st.get("conditions") or [] if c.get("type") == "Ready"), {}
        )
        return cls(
            str(dgd["metadata"]["resourceVersion"]),
            int(dgd["metadata"]["generation"]),
            st.get("observedGeneration"),
            st.get("state"),
            cond.get("status"),
        )

    def serving_claimed(self, generation: int) -> bool:
        """The status says ``generation`` is served: successful or Ready for it."""
        current = self.observed_generation == generation
        return current and (self.state == "successful" or self.ready == "True")


class ObjectStates:
    """``with ObjectStates(k, res, ns, name, view) as w: ...; w.until(k.get(...))``:
    ``view(obj)`` of every stored state, in order."""

    def __init__(
        self, k: Kube, res: Resource, namespace: str, name: str, view: Callable[[Any], Any]
    ) -> None:
        self.k, self.res, self.namespace, self.name, self.view = k, res, namespace, name, view
        self._lock = threading.Lock()
        self.history: list[Any] = []
        self._rvs: list[str] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None
        self._where = ""

    def __enter__(self) -> ObjectStates:
        rv = self._relist()
        self._thread = threading.Thread(target=self._run, args=(rv,), daemon=True)
        self._thread.start()
        return self

    def _relist(self) -> str:
        items, rv = self.k.list(
            self.res, self.namespace, field_selector=f"metadata.name={self.name}"
        )
        for obj in items:
            self._add(obj)
        return rv

    def _add(self, obj: dict[str, Any]) -> None:
        with self._lock:
            self.history.append(self.view(obj))
            self._rvs.append(str(obj["metadata"]["resourceVersion"]))

    def _run(self, rv: str) -> None:
        try:
            while not self._stop.is_set():
                try:
                    rv = self._follow(rv)
                except GoneError:
                    rv = self._relist()  # expired: list again, not a death
        except BaseException as exc:
            self._where = traceback.format_exc(limit=-3)
            self._error = exc

    def _follow(self, rv: str) -> str:
        for ev in self.k.watch(
            self.res,
            self.namespace,
            rv,
            field_selector=f"metadata.name={self.name}",
            timeout_seconds=WATCH_SECONDS,
        ):
            obj = ev["object"]
            rv = str(obj["metadata"]["resourceVersion"])
            if ev["type"] in ("ADDED", "MODIFIED"):
                self._add(obj)
            if self._stop.is_set():
                break
        return rv

    def check_alive(self) -> None:
        if self._error is not None:
            raise WatchDied(
                f"the {self.res.kind} watch died: "
                f"{type(self._error).__name__}: {self._error}\n{self._where}"
            ) from self._error

    def until(self, obj: dict[str, Any]) -> list[Any]:
        """Every state stored up to ``obj`` (the object as the test just read it), once the
        watch has delivered it: nothing stored before that read is missing."""
        from dyn_gitops_operator.testing import wait_for

        rv = str(obj["metadata"]["resourceVersion"])

        def upto() -> list[Any] | None:
            self.check_alive()
            with self._lock:
                at = [i for i, r in enumerate(self._rvs) if r == rv]
                return self.history[: at[-1] + 1] if at else None

        return list(wait_for(upto, 60, f"the {self.res.kind} watch at resourceVersion {rv}"))

    def states(self) -> list[Any]:
        self.check_alive()
        with self._lock:
            return list(self.history)

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(JOIN_SECONDS)
            if self._thread.is_alive() and self._error is None:
                raise WatchDied(f"the {self.res.kind} watch did not stop within {JOIN_SECONDS} s")
        self.check_alive()


class DgdStates(ObjectStates):
    """``with DgdStates(k, ns, name) as w: ...``: every stored state as :class:`Reported`."""

    def __init__(self, k: Kube, namespace: str, name: str) -> None:
        super().__init__(k, DGDS, namespace, name, Reported.of)
