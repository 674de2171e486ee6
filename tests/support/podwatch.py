"""Every change of a set of pods, in order, from one watch: how many were ready (and not
terminating: no longer routable) after each event, and every pod deleted while it served.
Polling could miss a short gap; a watch from the list's resourceVersion sees every state the
API server stored.

A watch that dies (an exception, an error event, a closed connection) fails the test: its
error is raised by :meth:`ReadyPods.count`, :meth:`ReadyPods.fewest` and at the end of the
``with`` block, never a count that silently stopped moving. ``410 Gone`` (the watch's
resourceVersion expired) is not a death: the pods are listed again (``RELIST`` in the
history) and the watch resumes from that list.
"""

from __future__ import annotations

import threading
import traceback
from typing import Any

#: seconds one watch request lasts before it is re-opened from the last resourceVersion
WATCH_SECONDS = 5
#: seconds ``__exit__`` waits for the watch thread
JOIN_SECONDS = 15


class WatchDied(AssertionError):
    """The pod watch stopped on an error: what it recorded is no proof of anything."""


def _serving(pod: Any) -> bool:
    if pod.metadata.deletion_timestamp:
        return False
    return any(c.type == "Ready" and c.status == "True" for c in pod.status.conditions or [])


class ReadyPods:
    """``with ReadyPods(api, ns, selector) as w: ...; w.fewest()``."""

    def __init__(self, api: Any, namespace: str, selector: str) -> None:
        self.api, self.namespace, self.selector = api, namespace, selector
        self._lock = threading.Lock()
        self._ready: dict[str, bool] = {}
        #: (event, pod name, ready pods after it)
        self.history: list[tuple[str, str, int]] = []
        #: (pod name, ready pods after it): a DELETED event, or the first event with a
        #: deletionTimestamp, for a pod that was Ready until then
        self.deleted_while_serving: list[tuple[str, int]] = []
        #: pod name -> index in :attr:`history` of the first event with the pod serving
        self.serving_from: dict[str, int] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None
        self._where = ""

    def __enter__(self) -> ReadyPods:
        from kubernetes import client

        core = client.CoreV1Api(self.api)
        rv = self._relist(core, "LIST")
        self._thread = threading.Thread(target=self._run, args=(core, rv), daemon=True)
        self._thread.start()
        return self

    def _relist(self, core: Any, event: str) -> str:
        listing = core.list_namespaced_pod(self.namespace, label_selector=self.selector)
        with self._lock:
            self._ready = {p.metadata.name: _serving(p) for p in listing.items}
            self.history.append((event, "", sum(self._ready.values())))
        return str(listing.metadata.resource_version)

    def _run(self, core: Any, rv: str) -> None:
        from kubernetes.client.exceptions import ApiException

        try:
            while not self._stop.is_set():
                try:
                    rv = self._follow(core, rv)
                except ApiException as exc:
                    if exc.status != 410:
                        raise
                    rv = self._relist(core, "RELIST")  # expired: list again, not a death
        except BaseException as exc:
            self._where = traceback.format_exc(limit=-3)
            self._error = exc

    def _follow(self, core: Any, rv: str) -> str:
        """One watch request from ``rv`` (a non-410 error event raises ApiException:
        ``timeout_seconds`` turns the client's own 410 retry off); the last rv seen."""
        from kubernetes import watch

        w = watch.Watch()
        for ev in w.stream(
            core.list_namespaced_pod,
            self.namespace,
            label_selector=self.selector,
            resource_version=rv,
            timeout_seconds=WATCH_SECONDS,
        ):
            if ev["type"] == "BOOKMARK":
                continue
            pod = ev["object"]
            rv = pod.metadata.resource_version
            self._record(ev["type"], pod)
            if self._stop.is_set():
                w.stop()
                break
        return rv

    def _record(self, event: str, pod: Any) -> None:
        name = pod.metadata.name
        with self._lock:
            was = self._ready.get(name, False)
            if event == "DELETED":
                self._ready.pop(name, None)
            else:
                self._ready[name] = _serving(pod)
            now = sum(self._ready.values())
            if self._ready.get(name):
                self.serving_from.setdefault(name, len(self.history))
            if was and (event == "DELETED" or pod.metadata.deletion_timestamp):
                self.deleted_while_serving.append((name, now))
            self.history.append((event, name, now))

    def check_alive(self) -> None:
        """Raise :class:`WatchDied` if the watch thread stopped on an error."""
        if self._error is not None:
            raise WatchDied(
                f"the pod watch died: {type(self._error).__name__}: {self._error}\n{self._where}"
            ) from self._error

    def present(self) -> set[str]:
        """The pods the watch knows of now (terminating ones included)."""
        self.check_alive()
        with self._lock:
            return set(self._ready)

    def count(self) -> int:
        self.check_alive()
        with self._lock:
            return sum(self._ready.values())

    def fewest(self) -> int:
        self.check_alive()
        with self._lock:
            return min(n for _, _, n in self.history)

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(JOIN_SECONDS)
            if self._thread.is_alive() and self._error is None:
                raise WatchDied(f"the pod watch did not stop within {JOIN_SECONDS} s")
        self.check_alive()  # also over an exception of the block: its evidence is void
