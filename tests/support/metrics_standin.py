"""A stand-in for metrics-server, so kube-controller-manager's real HPA controller scales
on resource metrics in the realistic cluster.

The HPA controller reads pod metrics from ``metrics.k8s.io/v1beta1``
(``GET /apis/metrics.k8s.io/v1beta1/namespaces/<ns>/pods?labelSelector=<the scale
target's status.selector>``, decoded as a ``PodMetricsList``). Here that group, version and
resource are served by a CRD (:data:`POD_METRICS_CRD`) instead of an aggregated API: the
aggregator would have to reach a server through a Service's endpoints, which cannot be a
loopback address, and the test cluster has no pod network. The objects the stand-in writes
have the fields metrics-server returns (``timestamp``, ``window``, ``containers[].usage``),
at the root of the object as there, and the pod's labels so the selector finds them.

The load model: a service receives a total ``load`` (bytes of memory) that its Running pods
share equally, so an HPA with an ``AverageValue`` target of ``t`` wants ``ceil(load / t)``
replicas whatever the current count (memory, not cpu: the HPA skips cpu samples of a pod in
its first minutes unless they were taken a whole window after it became Ready). A change is
written so that the total the HPA can read never exceeds ``load`` (decreases first, then
increases, then new pods, which the HPA counts as 0 until then), so no half-written state
asks for more replicas than the load does.
"""

from __future__ import annotations

import contextlib
import datetime
import threading
import time
from typing import Any

from dyn_gitops_operator.errors import GoneError, NotFoundError, TransientError
from dyn_gitops_operator.kube import Kube
from dyn_gitops_operator.resources import PODS, Resource

Obj = dict[str, Any]

POD_METRICS = Resource("metrics.k8s.io", "v1beta1", "pods", "PodMetrics")
#: the field manager of the stand-in's writes
MANAGER = "metrics-server-standin"
#: metrics-server's default resolution (the window each sample covers)
WINDOW = "15s"

_QUANTITY = {"x-kubernetes-int-or-string": True, "anyOf": [{"type": "integer"}, {"type": "string"}]}
POD_METRICS_CRD: Obj = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {
        "name": "pods.metrics.k8s.io",
        # a *.k8s.io group needs it; "unapproved" is accepted (a condition says so)
        "annotations": {"api-approved.kubernetes.io": "unapproved, a test stand-in"},
    },
    "spec": {
        "group": "metrics.k8s.io",
        "scope": "Namespaced",
        "names": {
            "kind": "PodMetrics",
            "listKind": "PodMetricsList",
            "plural": "pods",
            "singular": "podmetrics",
        },
        "versions": [
            {
                "name": "v1beta1",
                "served": True,
                "storage": True,
                "schema": {
                    "openAPIV3Schema": {
                        "type": "object",
                        "properties": {
                            "apiVersion": {"type": "string"},
                            "kind": {"type": "string"},
                            "metadata": {"type": "object"},
                            "timestamp": {"type": "string"},
                            "window": {"type": "string"},
                            "containers": {
                                "type": "array",
                                "items": {
                                    "type": "object",
                                    "properties": {
                                        "name": {"type": "string"},
                                        "usage": {
                                            "type": "object",
                                            "additionalProperties": _QUANTITY,
                                        },
                                    },
                                },
                            },
                        },
                    }
                },
            }
        ],
    },
}


def _running(pod: Obj) -> bool:
    return not pod["metadata"].get("deletionTimestamp") and (
        (pod.get("status") or {}).get("phase") == "Running"
    )


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class PodMetricsStandIn:
    """``with PodMetricsStandIn(k, ns, selector, load) as m: ...; m.set_load(n)``: keeps a
    PodMetrics per Running pod of ``selector`` (a pod watch), each ``load // pods`` bytes of
    memory. A dead thread fails the test (:meth:`check`, and on leaving the block)."""

    def __init__(self, k: Kube, namespace: str, selector: str, load: int) -> None:
        self.k = Kube(k.api, k.timeout, field_manager=MANAGER)
        self.namespace, self.selector = namespace, selector
        self._load = load
        self._pods: dict[str, Obj] = {}
        self._written: dict[str, int] = {}
        self._lock = threading.Lock()
        self._dirty = threading.Event()
        self._stop = threading.Event()
        self._error: BaseException | None = None
        self._threads: list[threading.Thread] = []

    def __enter__(self) -> PodMetricsStandIn:
        rv = self._relist()
        for target, args in ((self._watch, (rv,)), (self._publisher, ())):
            t = threading.Thread(target=self._guard, args=(target, *args), daemon=True)
            t.start()
            self._threads.append(t)
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._dirty.set()
        for t in self._threads:
            t.join(timeout=30)
        if exc[0] is None:
            self.check()

    def set_load(self, load: int) -> None:
        with self._lock:
            self._load = load
        self._dirty.set()

    def check(self) -> None:
        if self._error is not None:
            raise AssertionError(f"the metrics stand-in died: {self._error!r}")
        if not self._stop.is_set() and not all(t.is_alive() for t in self._threads):
            raise AssertionError("the metrics stand-in's threads ended")

    def _guard(self, target: Any, *args: Any) -> None:
        try:
            target(*args)
        except BaseException as exc:
            self._error = exc

    def _relist(self) -> str:
        items, rv = self.k.list(PODS, self.namespace, label_selector=self.selector)
        with self._lock:
            self._pods = {p["metadata"]["name"]: p for p in items}
        self._dirty.set()
        return rv

    def _watch(self, rv: str) -> None:
        while not self._stop.is_set():
            try:
                for ev in self.k.watch(
                    PODS, self.namespace, rv, label_selector=self.selector, timeout_seconds=5
                ):
                    pod = ev["object"]
                    rv = pod["metadata"]["resourceVersion"]
                    if ev["type"] == "BOOKMARK":
                        continue
                    with self._lock:
                        if ev["type"] == "DELETED":
                            self._pods.pop(pod["metadata"]["name"], None)
                        else:
                            self._pods[pod["metadata"]["name"]] = pod
                    self._dirty.set()
            except GoneError:
                rv = self._relist()  # a full state again: the metrics follow it
            except TransientError:
                time.sleep(0.2)

    def _publisher(self) -> None:
        while not self._stop.is_set():
            self._dirty.wait()
            self._dirty.clear()
            if not self._stop.is_set():
                self._publish()

    def _publish(self) -> None:
        with self._lock:
            running = {n: p for n, p in self._pods.items() if _running(p)}
            load = self._load
        each = load // len(running) if running else 0
        for gone in sorted(set(self._written) - set(running)):
            with contextlib.suppress(NotFoundError):
                self.k.delete(POD_METRICS, self.namespace, gone)
            del self._written[gone]
        old = self._written
        # the total the HPA reads never exceeds ``load``: down first, up next, new pods last
        order = sorted(running, key=lambda n: (n not in old, n in old and old[n] < each, n))
        for name in order:
            if old.get(name) != each:
                self._write(running[name], each)
                self._written[name] = each

    def _write(self, pod: Obj, usage: int) -> None:
        containers = [c["name"] for c in pod["spec"]["containers"]]
        self.k.apply(
            POD_METRICS,
            {
                "apiVersion": POD_METRICS.api_version,
                "kind": POD_METRICS.kind,
                "metadata": {
                    "name": pod["metadata"]["name"],
                    "namespace": self.namespace,
                    "labels": pod["metadata"].get("labels") or {},
                },
                "timestamp": _now(),
                "window": WINDOW,
                # every container reports (the HPA drops a pod with a container missing)
                "containers": [
                    {"name": c, "usage": {"cpu": "0", "memory": str(usage if i == 0 else 0)}}
                    for i, c in enumerate(containers)
                ],
            },
        )
