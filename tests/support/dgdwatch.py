"""Every state of one DGD's status the API server stored, in order, from one watch: what the
graph reported (state, Ready, for which generation) between two moments of a test, with no
gap between polls. A watch that dies fails the test (:class:`support.podwatch.WatchDied`),
410 Gone relists."""

from __future__ import annotations

import threading
import traceback
from dataclasses import dataclass
from typing import Any

from dyn_gitops_operator.errors import GoneError
from dyn_gitops_operator.kube import DGDS, Kube

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


class DgdStates:
    """``with DgdStates(k, ns, name) as w: ...; w.until(k.get(...))``."""

    def __init__(self, k: Kube, namespace: str, name: str) -> None:
        self.k, self.namespace, self.name = k, namespace, name
        self._lock = threading.Lock()
        self.history: list[Reported] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None
        self._where = ""

    def __enter__(self) -> DgdStates:
        rv = self._relist()
        self._thread = threading.Thread(target=self._run, args=(rv,), daemon=True)
        self._thread.start()
        return self

    def _relist(self) -> str:
        items, rv = self.k.list(DGDS, self.namespace, field_selector=f"metadata.name={self.name}")
        with self._lock:
            self.history.extend(Reported.of(d) for d in items)
        return rv

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
            DGDS,
            self.namespace,
            rv,
            field_selector=f"metadata.name={self.name}",
            timeout_seconds=WATCH_SECONDS,
        ):
            obj = ev["object"]
            rv = str(obj["metadata"]["resourceVersion"])
            if ev["type"] in ("ADDED", "MODIFIED"):
                with self._lock:
                    self.history.append(Reported.of(obj))
            if self._stop.is_set():
                break
        return rv

    def check_alive(self) -> None:
        if self._error is not None:
            raise WatchDied(
                f"the DGD watch died: {type(self._error).__name__}: {self._error}\n{self._where}"
            ) from self._error

    def until(self, dgd: dict[str, Any]) -> list[Reported]:
        """Every state stored up to ``dgd`` (an object the test just read), once the watch
        has delivered it: nothing stored before that read is missing."""
        from dyn_gitops_operator.testing import wait_for

        rv = str(dgd["metadata"]["resourceVersion"])

        def upto() -> list[Reported] | None:
            self.check_alive()
            with self._lock:
                at = [i for i, r in enumerate(self.history) if r.resource_version == rv]
                return self.history[: at[-1] + 1] if at else None

        return list(wait_for(upto, 60, f"the DGD watch at resourceVersion {rv}"))

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(JOIN_SECONDS)
            if self._thread.is_alive() and self._error is None:
                raise WatchDied(f"the DGD watch did not stop within {JOIN_SECONDS} s")
        self.check_alive()
