"""The controller loop: a worker takes a graph key from the work queue, builds a snapshot
of the graph from the caches and runs the reconciler chain on it; the outcome decides
between forgetting the key, a retry with backoff and another look later. A ticker
publishes the queue and state gauges and re-enqueues every graph once per resync period.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from collections.abc import Callable

from dyn_gitops_operator import grove
from dyn_gitops_operator import objects as o
from dyn_gitops_operator.counts import RefusalLog
from dyn_gitops_operator.dgdview import view
from dyn_gitops_operator.errors import ConflictError, ControllerError
from dyn_gitops_operator.event_keys import known_graph_keys
from dyn_gitops_operator.graph import Graph, HashCache
from dyn_gitops_operator.informer import Key
from dyn_gitops_operator.keywork import work_on
from dyn_gitops_operator.kubeapi import KubeApi
from dyn_gitops_operator.metrics import Metrics
from dyn_gitops_operator.plan import Plan
from dyn_gitops_operator.reconcilers import Context, Reconciler
from dyn_gitops_operator.resources import DEPLOYMENTS, DGDS, DGDSAS, Obj, Resource
from dyn_gitops_operator.scope import ScopeExclusions
from dyn_gitops_operator.settings import DEFAULT_MAX_REPLICAS
from dyn_gitops_operator.wiring import Caches
from dyn_gitops_operator.workqueue import WorkQueue

log = logging.getLogger(__name__)


def snapshot(
    caches: Caches, hashes: HashCache, key: Key, ceiling: int = DEFAULT_MAX_REPLICAS
) -> Graph:
    """The graph as the caches see it now: its DGD (parsed), live workloads and adapters;
    ``ceiling``: the most replicas applied from a count read from Git."""
    ns, name = key
    dgd = caches.dgds.store.get(key)
    g = Graph(key=key, dgd=dgd, ceiling=ceiling)
    if dgd is not None:
        spec = view(dgd)  # either served version
        g.services = spec.components
        g.restart = spec.restart
        g.worker_hash = hashes.get(dgd)
    index = f"{ns}/{name}"
    g.deployments = [
        d
        for d in caches.deployments.store.by_index("graph", index)
        if not o.meta(d).get("deletionTimestamp")
    ]
    if caches.lws is not None:
        g.lws = caches.lws.store.by_index("graph", index)
    pcs = grove.pcs_name(dgd)
    if pcs is not None:
        g.grove = grove.GroveChildren(pcs)
        for inf, found in ((caches.podcliques, g.grove.podcliques), (caches.pcsgs, g.grove.pcsgs)):
            if inf is None:
                continue  # the API is not served: every service reads "not found"
            for service in g.services:
                child = inf.store.get((ns, grove.component_name(pcs, service)))
                if child is not None and not o.meta(child).get("deletionTimestamp"):
                    found[o.name(child)] = child
    for adapter in caches.adapters.store.by_index("graph", index):
        svc = ((adapter.get("spec") or {}).get("dgdRef") or {}).get("serviceName")
        if svc:
            g.adapters[svc] = adapter
    return g


def _rv_int(obj: Obj) -> int:
    try:
        return int(o.meta(obj).get("resourceVersion") or 0)
    except ValueError:
        return 0


class ControllerLoop:
    """Workers, the reconcile of one key, and the periodic ticker."""

    def __init__(
        self,
        kube: KubeApi,
        caches: Caches,
        queue: WorkQueue[Key],
        chain: list[Reconciler],
        metrics: Metrics,
        *,
        acting: Callable[[], bool],
        exclusions: ScopeExclusions | None = None,
        resync_period: float = 300.0,
        reconcile: Callable[[Key], float | None] | None = None,
        max_replicas: int = DEFAULT_MAX_REPLICAS,
    ) -> None:
        self.caches = caches
        self.queue = queue
        self.chain = chain
        self.metrics = metrics
        self.acting = acting
        self.exclusions = exclusions
        self.resync_period = resync_period
        #: what a worker calls per key; the Manager passes its own method, so that a
        #: wrapper put on it (the benchmark times every reconcile that way) sees each call
        self.run_reconcile = reconcile or self.reconcile
        self.hashes = HashCache()
        self.max_replicas = max_replicas
        #: replica counts refused, logged once per change of each graph's
        self.refusals = RefusalLog()
        self.ctx = Context(kube=kube, metrics=metrics, remember=self.remember, acting=acting)

    # ------------------------------------------------------------------ keys
    def graph_keys(self, namespace: str | None = None) -> list[Key]:
        return known_graph_keys(
            self.caches.dgds.store,
            self.caches.deployments.store,
            self.caches.adapters.store,
            namespace,
        )

    def enqueue_all(self, namespace: str | None = None) -> None:
        for key in self.graph_keys(namespace):
            self.queue.add(key)

    # ------------------------------------------------------------------ workers
    def worker(self) -> None:
        while True:
            key = self.queue.get()
            if key is None:
                return
            try:
                self.process(key)
            finally:
                self.queue.done(key)

    def process(self, key: Key) -> None:
        start = time.perf_counter()
        outcome = work_on(
            key,
            self.queue,
            self.run_reconcile,
            what="graph reconcile",
            acting=self.acting,
            exclusions=self.exclusions,
            metrics=self.metrics,
        )
        if outcome is not None:
            self.metrics.graph_reconcile_duration.observe(time.perf_counter() - start)

    # ------------------------------------------------------------------ one graph
    def snapshot(self, key: Key) -> Graph:
        return snapshot(self.caches, self.hashes, key, self.max_replicas)

    def reconcile(self, key: Key) -> float | None:
        """Run the chain on a fresh snapshot; seconds until the graph wants another look. A
        refused replica count is not an error: it is reported (status, one log line) and
        the key is done until one of the graph's objects changes."""
        graph = self.snapshot(key)
        if graph.dgd is None and not graph.deployments and not graph.adapters:
            self.refusals.report(key, ())
            return None
        plan = Plan()
        for rec in self.chain:
            start = time.perf_counter()
            result = "success"
            try:
                rec.reconcile(graph, plan, self.ctx)
            except ConflictError:
                result = "conflict"
                self.metrics.reconcile_errors.labels(rec.name, "conflict").inc()
                raise
            except ControllerError as exc:
                result = "error"
                self.metrics.reconcile_errors.labels(rec.name, exc.error_type).inc()
                raise
            except Exception:
                result = "error"
                self.metrics.reconcile_errors.labels(rec.name, "internal").inc()
                raise
            finally:
                self.metrics.reconcile_total.labels(rec.name, result).inc()
                self.metrics.reconcile_duration.labels(rec.name).observe(
                    time.perf_counter() - start
                )
        self.refusals.report(key, graph.refused.values())
        return plan.requeue_after

    def remember(self, res: Resource, obj: Obj) -> None:
        """Write-through: keep our own write unless the watch already delivered newer."""
        store = {
            DEPLOYMENTS: self.caches.deployments.store,
            DGDS: self.caches.dgds.store,
            DGDSAS: self.caches.adapters.store,
        }.get(res)
        if store is None:
            return
        trim = o.trim_deployment if res is DEPLOYMENTS else o.trim_custom
        fresh = trim(obj)
        store.put_if(fresh, lambda cached: _rv_int(cached) < _rv_int(fresh))

    # ------------------------------------------------------------------ ticker
    def ticker(self, stopped: threading.Event) -> None:
        last_resync = time.monotonic()
        while not stopped.wait(1.0):
            self.metrics.workqueue_depth.set(len(self.queue))
            self.count_states()
            if self.exclusions is not None:
                self.exclusions.refresh()  # resumes namespaces whose lease expired
            if time.monotonic() - last_resync >= self.resync_period:
                last_resync = time.monotonic()
                self.enqueue_all()

    def count_states(self) -> None:
        counts: Counter[str] = Counter()
        for dgd in self.caches.dgds.store.items():
            ns = o.meta(dgd).get("namespace") or ""
            if self.exclusions is not None and self.exclusions.excluded(ns):
                continue
            counts[str((dgd.get("status") or {}).get("state") or "initializing")] += 1
        for state in set(counts) | {"initializing", "pending", "successful", "failed"}:
            self.metrics.dgds.labels(state).set(counts.get(state, 0))


__all__ = ["ControllerLoop", "snapshot"]
