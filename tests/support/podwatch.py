"""Every change of a set of pods, in order, from one watch: how many were ready (and not
terminating: no longer routable) after each event. Polling could miss a short gap; a watch
from the list's resourceVersion sees every state the API server stored."""

from __future__ import annotations

import threading
from typing import Any


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
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> ReadyPods:
        from kubernetes import client

        core = client.CoreV1Api(self.api)
        listing = core.list_namespaced_pod(self.namespace, label_selector=self.selector)
        for pod in listing.items:
            self._ready[pod.metadata.name] = _serving(pod)
        self.history.append(("LIST", "", self.count()))
        self._thread = threading.Thread(
            target=self._run, args=(listing.metadata.resource_version,), daemon=True
        )
        self._thread.start()
        return self

    def _run(self, rv: str) -> None:
        from kubernetes import client, watch

        core = client.CoreV1Api(self.api)
        while not self._stop.is_set():
            w = watch.Watch()
            for ev in w.stream(
                core.list_namespaced_pod,
                self.namespace,
                label_selector=self.selector,
                resource_version=rv,
                timeout_seconds=5,
            ):
                pod = ev["object"]
                rv = pod.metadata.resource_version
                with self._lock:
                    if ev["type"] == "DELETED":
                        self._ready.pop(pod.metadata.name, None)
                    else:
                        self._ready[pod.metadata.name] = _serving(pod)
                    self.history.append((ev["type"], pod.metadata.name, self.count()))
                if self._stop.is_set():
                    w.stop()
                    break

    def count(self) -> int:
        return sum(self._ready.values())

    def fewest(self) -> int:
        with self._lock:
            return min(n for _, _, n in self.history)

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(10)
