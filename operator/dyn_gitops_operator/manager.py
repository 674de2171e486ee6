"""Wires informers, the work queue, leases and the reconciler chain together.

Life cycle: serve /healthz -> fill caches -> become leader -> (namespace mode) hold the
scope lease -> enqueue every graph -> run workers until stopped or a lease is lost.
Watches only enqueue ``(namespace, dgd name)`` keys; every reconcile reads fresh state
from the caches (level-triggered).
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections import Counter
from typing import Any

from dyn_gitops import keys
from dyn_gitops_operator import grove
from dyn_gitops_operator import objects as o
from dyn_gitops_operator.errors import (
    ApiError,
    ConflictError,
    ControllerError,
    ForbiddenError,
    NotFoundError,
)
from dyn_gitops_operator.graph import Graph, HashCache, parse_restart, parse_services
from dyn_gitops_operator.informer import Informer, Key, Store, obj_key, strip_rv
from dyn_gitops_operator.kube import (
    DEPLOYMENTS,
    DGDS,
    DGDSAS,
    LEASES,
    LWS,
    PCSGS,
    PODCLIQUES,
    Kube,
    Resource,
    make_api_client,
)
from dyn_gitops_operator.leader import LeaderElector
from dyn_gitops_operator.metrics import HealthServer, Metrics
from dyn_gitops_operator.plan import Plan
from dyn_gitops_operator.reconcilers import Context, Reconciler, default_chain
from dyn_gitops_operator.scope import ScopeExclusions, ScopeLeaseHolder
from dyn_gitops_operator.settings import SCOPE_LEASE_NAME, OperatorSettings
from dyn_gitops_operator.workqueue import WorkQueue

log = logging.getLogger(__name__)

Obj = dict[str, Any]


def _graph_of_deployment(dep: Obj) -> list[str]:
    g = o.labels(dep).get(keys.LABEL_GRAPH_NAME)
    return [f"{o.meta(dep).get('namespace')}/{g}"] if g else []


def _graph_of_adapter(adapter: Obj) -> list[str]:
    ref = ((adapter.get("spec") or {}).get("dgdRef") or {}).get("name")
    return [f"{o.meta(adapter).get('namespace')}/{ref}"] if ref else []


def _rv_int(obj: Obj) -> int:
    try:
        return int(o.meta(obj).get("resourceVersion") or 0)
    except ValueError:
        return 0


#: how long a clean shutdown may wait for workers and watches (leases are released too)
_SHUTDOWN_BUDGET_SECONDS = 8.0


class Manager:
    def __init__(self, settings: OperatorSettings, *, kube: Kube | None = None,
                 metrics: Metrics | None = None,
                 reconcilers: list[Reconciler] | None = None) -> None:
        self.s = settings
        self.metrics = metrics or Metrics()
        # one long-lived connection per watch, one per worker and per parallel write
        # (a full pool makes urllib3 open and drop a TLS connection per request)
        pool = 3 * settings.workers + 16
        self.kube = kube or Kube(make_api_client(settings.kubeconfig, pool),
                                 settings.request_timeout)
        ns = settings.watch_namespace
        common: dict[str, Any] = {"namespace": ns, "metrics": self.metrics,
                                  "watch_timeout": settings.watch_timeout}
        self.deployments = Informer(
            self.kube, DEPLOYMENTS, label_selector=keys.LABEL_GRAPH_NAME,
            trim=o.trim_deployment, store=Store({"graph": _graph_of_deployment}), **common)
        # index: the Grove objects (by namespace/name) a Grove DGD's services map to
        self.dgds = Informer(self.kube, DGDS, trim=o.trim_custom,
                             store=Store({"grove": grove.child_keys}), **common)
        self.adapters = Informer(self.kube, DGDSAS, trim=o.trim_custom,
                                 store=Store({"graph": _graph_of_adapter}), **common)
        self.informers = [self.deployments, self.dgds, self.adapters]
        self.lws: Informer | None = None
        self.podcliques: Informer | None = None
        self.pcsgs: Informer | None = None
        self.queue: WorkQueue[Key] = WorkQueue(backoff_base=settings.backoff_base,
                                               backoff_max=settings.backoff_max)
        self.chain = reconcilers or default_chain()
        self.hashes = HashCache()
        self.ctx = Context(kube=self.kube, metrics=self.metrics, remember=self._remember)
        self.stopped = threading.Event()
        self.failure: str | None = None
        self._workers: list[threading.Thread] = []
        self._acting = False

        self.exclusions: ScopeExclusions | None = None
        self.scope_holder: ScopeLeaseHolder | None = None
        if settings.scope.enabled and settings.mode == "cluster":
            leases = Informer(self.kube, LEASES, field_selector=f"metadata.name={SCOPE_LEASE_NAME}",
                              trim=o.trim_lease, **common)
            self.exclusions = ScopeExclusions(leases.store, self.metrics, settings.identity,
                                              self._resume_namespace)
            leases.add_handler(self.exclusions.on_event)
            self.informers.append(leases)
        elif settings.scope.enabled:
            self.scope_holder = ScopeLeaseHolder(
                self.kube, settings.scope, settings.namespace, settings.identity, self.metrics,
                on_lost=lambda: self._fail("scope lease lost"))
        self.elector: LeaderElector | None = None
        if settings.leader.enabled:
            self.elector = LeaderElector(
                self.kube, settings.leader, settings.leader_namespace,
                settings.identity, self.metrics, on_lost=lambda: self._fail("leadership lost"))
        self.dgds.add_handler(self._on_dgd)
        self.deployments.add_handler(self._on_deployment)
        self.adapters.add_handler(self._on_adapter)
        self.http: HealthServer | None = None
        if settings.http_address:
            self.http = HealthServer(settings.http_address, self.metrics, self.healthy,
                                     self.ready)

    # ------------------------------------------------------------------ life cycle
    def run(self) -> int:
        """Run until ``stop()`` (exit code 0) or a lost lease / leadership (1)."""
        self.start()
        self.stopped.wait()
        self.shutdown()
        return 1 if self.failure else 0

    def start(self) -> None:
        if self.http is not None:
            self.http.start()
        self._watch_lws_if_served()
        self._watch_grove_if_served()
        for inf in self.informers:
            inf.start()
        threading.Thread(target=self._start_acting, name="starter", daemon=True).start()

    def stop(self) -> None:
        self.stopped.set()

    def _served(self, res: Resource) -> bool:
        """The API exists and we may list it (checked once, at start-up)."""
        try:
            self.kube.request("GET", res.path(self.s.watch_namespace), [("limit", "1")])
        except (NotFoundError, ForbiddenError) as exc:
            log.info("optional API not watched", extra={"resource": res.plural,
                                                        "reason": str(exc)})
            return False
        except ApiError as exc:
            log.warning("optional API not watched", extra={"resource": res.plural,
                                                           "reason": str(exc)})
            return False
        return True

    def _watch_lws_if_served(self) -> None:
        """LeaderWorkerSets (multinode services) are optional: watched only when the API
        exists and we may list it, so a cluster without LWS never blocks start-up."""
        if not self._served(LWS):
            return
        self.lws = Informer(self.kube, LWS, namespace=self.s.watch_namespace,
                            metrics=self.metrics, watch_timeout=self.s.watch_timeout,
                            label_selector=keys.LABEL_GRAPH_NAME, trim=o.trim_lws,
                            store=Store({"graph": _graph_of_deployment}))
        self.lws.add_handler(self._on_deployment)
        self.informers.append(self.lws)

    def _watch_grove_if_served(self) -> None:
        """PodCliques and PodCliqueScalingGroups (Grove path), optional like LWS. Grove
        creates them without our labels for sure, so the whole kind is watched (trimmed)
        and looked up by namespace/name."""
        for res in (PODCLIQUES, PCSGS):
            if not self._served(res):
                continue
            inf = Informer(self.kube, res, namespace=self.s.watch_namespace,
                           metrics=self.metrics, watch_timeout=self.s.watch_timeout,
                           trim=grove.trim)
            inf.add_handler(self._on_grove)
            self.informers.append(inf)
            if res is PODCLIQUES:
                self.podcliques = inf
            else:
                self.pcsgs = inf

    def shutdown(self) -> None:
        # One deadline for the whole shutdown: joining each thread with its own timeout,
        # one after the other, took more than 20 s on a loaded machine. Every thread is a
        # daemon, so whatever is still running at the deadline ends with the process.
        deadline = time.monotonic() + _SHUTDOWN_BUDGET_SECONDS
        self.stopped.set()
        self.queue.shutdown()
        for t in self._workers:
            t.join(timeout=max(0.0, deadline - time.monotonic()))
        # leases first: handing them over promptly matters more than a tidy watch close
        if self.scope_holder is not None:
            self.scope_holder.stop(release=self.failure is None)
        if self.elector is not None:
            self.elector.stop(release=self.failure is None)
        stoppers = [threading.Thread(target=inf.stop, name="informer-stop", daemon=True)
                    for inf in self.informers]
        for s in stoppers:
            s.start()
        for s in stoppers:
            s.join(timeout=max(0.0, deadline - time.monotonic()))
        if self.http is not None:
            self.http.stop()

    def _fail(self, why: str) -> None:
        self.failure = why
        self._acting = False
        self.stopped.set()

    def _start_acting(self) -> None:
        for inf in self.informers:
            while not inf.synced.wait(0.5):
                if self.stopped.is_set():
                    return
        if self.elector is not None:
            self.elector.start()
            while not self.elector.acquired.wait(0.2):
                if self.stopped.is_set():
                    return
        if self.scope_holder is not None:
            if not self.scope_holder.acquire(self.stopped):
                return
            self.scope_holder.start_renewing()
        if self.exclusions is not None:
            self.exclusions.refresh()
        self._acting = True
        for key in self.graph_keys():
            self.queue.add(key)
        for i in range(self.s.workers):
            t = threading.Thread(target=self._worker, name=f"worker-{i}", daemon=True)
            t.start()
            self._workers.append(t)
        threading.Thread(target=self._ticker, name="ticker", daemon=True).start()
        log.info("controller started", extra={"mode": self.s.mode,
                                              "namespace": self.s.namespace or "*"})

    # ------------------------------------------------------------------ health
    def healthy(self) -> bool:
        return self.failure is None and all(i.alive() for i in self.informers)

    def ready(self) -> bool:
        return self.healthy() and all(i.synced.is_set() for i in self.informers)

    def acting(self) -> bool:
        if not self._acting or self.stopped.is_set():
            return False
        if self.elector is not None and not self.elector.is_leader():
            return False
        return self.scope_holder is None or self.scope_holder.held

    # ------------------------------------------------------------------ events -> keys
    def _on_dgd(self, old: Obj | None, new: Obj | None) -> None:
        if old is not None and new is not None:
            mo, mn = o.meta(old), o.meta(new)
            if all(mo.get(f) == mn.get(f) for f in ("generation", "deletionTimestamp",
                                                     "annotations", "labels")):
                return  # status-only change (mostly our own writes); resync covers drift
        self.queue.add(obj_key(new or old))  # type: ignore[arg-type]

    def _on_deployment(self, old: Obj | None, new: Obj | None) -> None:
        if old is not None and new is not None and strip_rv(old) == strip_rv(new):
            return
        for obj in (old, new):
            for g in _graph_of_deployment(obj) if obj is not None else []:
                self.queue.add(_split(g))

    def _on_grove(self, old: Obj | None, new: Obj | None) -> None:
        """A PodClique / PCSG changed: enqueue the DGD whose services map to its name."""
        if old is not None and new is not None and strip_rv(old) == strip_rv(new):
            return
        obj = new or old
        if obj is None:
            return
        child = f"{o.meta(obj).get('namespace') or ''}/{o.name(obj)}"
        for dgd in self.dgds.store.by_index("grove", child):
            self.queue.add(obj_key(dgd))

    def _on_adapter(self, old: Obj | None, new: Obj | None) -> None:
        if old is not None and new is not None and \
                o.meta(old).get("generation") == o.meta(new).get("generation"):
            return
        for obj in (old, new):
            for g in _graph_of_adapter(obj) if obj is not None else []:
                self.queue.add(_split(g))

    def graph_keys(self, namespace: str | None = None) -> list[Key]:
        found = {obj_key(d) for d in self.dgds.store.items()}
        found |= {_split(g) for d in self.deployments.store.items()
                  for g in _graph_of_deployment(d)}
        found |= {_split(g) for a in self.adapters.store.items() for g in _graph_of_adapter(a)}
        return sorted(k for k in found if namespace is None or k[0] == namespace)

    def _resume_namespace(self, namespace: str) -> None:
        for key in self.graph_keys(namespace):
            self.queue.add(key)

    def _ticker(self) -> None:
        last_resync = time.monotonic()
        while not self.stopped.wait(1.0):
            self.metrics.workqueue_depth.set(len(self.queue))
            self._count_states()
            if self.exclusions is not None:
                self.exclusions.refresh()  # resumes namespaces whose lease expired
            if time.monotonic() - last_resync >= self.s.resync_period:
                last_resync = time.monotonic()
                for key in self.graph_keys():
                    self.queue.add(key)

    def _count_states(self) -> None:
        counts: Counter[str] = Counter()
        for dgd in self.dgds.store.items():
            ns = o.meta(dgd).get("namespace") or ""
            if self.exclusions is not None and self.exclusions.excluded(ns):
                continue
            counts[str((dgd.get("status") or {}).get("state") or "initializing")] += 1
        for state in set(counts) | {"initializing", "pending", "successful", "failed"}:
            self.metrics.dgds.labels(state).set(counts.get(state, 0))

    # ------------------------------------------------------------------ workers
    def _worker(self) -> None:
        while True:
            key = self.queue.get()
            if key is None:
                return
            try:
                self._process(key)
            finally:
                self.queue.done(key)

    def _process(self, key: Key) -> None:
        if not self.acting():
            self.queue.add_after(key, 1.0)  # keep it for when we act again
            return
        if self.exclusions is not None and self.exclusions.excluded(key[0]):
            self.queue.forget(key)  # resumed by ScopeExclusions.refresh
            return
        rid = uuid.uuid4().hex[:8]
        start = time.perf_counter()
        try:
            requeue_after = self.reconcile(key)
        except ConflictError as exc:
            delay = self.queue.add_rate_limited(key)
            self.metrics.workqueue_retries.inc()
            log.info("write conflict, retrying", extra={"object": "/".join(key),
                                                        "reconcile_id": rid, "delay": delay,
                                                        "error": str(exc)})
        except Exception as exc:
            delay = self.queue.add_rate_limited(key)
            self.metrics.workqueue_retries.inc()
            level = logging.WARNING if isinstance(exc, ControllerError) else logging.ERROR
            log.log(level, "reconcile failed, retrying",
                    exc_info=not isinstance(exc, ControllerError),
                    extra={"object": "/".join(key), "reconcile_id": rid, "delay": delay,
                           "error": str(exc)})
        else:
            self.queue.forget(key)
            if requeue_after is not None:
                self.queue.add_after(key, requeue_after)
        finally:
            self.metrics.graph_reconcile_duration.observe(time.perf_counter() - start)

    def snapshot(self, key: Key) -> Graph:
        ns, name = key
        dgd = self.dgds.store.get(key)
        g = Graph(key=key, dgd=dgd)
        if dgd is not None:
            g.services = parse_services(dgd)
            g.restart = parse_restart(dgd, g.services)
            g.worker_hash = self.hashes.get(dgd)
        index = f"{ns}/{name}"
        g.deployments = [d for d in self.deployments.store.by_index("graph", index)
                         if not o.meta(d).get("deletionTimestamp")]
        if self.lws is not None:
            g.lws = self.lws.store.by_index("graph", index)
        pcs = grove.pcs_name(dgd)
        if pcs is not None:
            g.grove = grove.GroveChildren(pcs)
            for inf, found in ((self.podcliques, g.grove.podcliques),
                               (self.pcsgs, g.grove.pcsgs)):
                if inf is None:
                    continue  # the API is not served: every service reads "not found"
                for service in g.services:
                    child = inf.store.get((ns, grove.component_name(pcs, service)))
                    if child is not None and not o.meta(child).get("deletionTimestamp"):
                        found[o.name(child)] = child
        for adapter in self.adapters.store.by_index("graph", index):
            svc = ((adapter.get("spec") or {}).get("dgdRef") or {}).get("serviceName")
            if svc:
                g.adapters[svc] = adapter
        return g

    def reconcile(self, key: Key) -> float | None:
        graph = self.snapshot(key)
        if graph.dgd is None and not graph.deployments and not graph.adapters:
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
                    time.perf_counter() - start)
        return plan.requeue_after

    def _remember(self, res: Resource, obj: Obj) -> None:
        """Write-through: keep our own write unless the watch already delivered newer."""
        store = {DEPLOYMENTS: self.deployments.store, DGDS: self.dgds.store,
                 DGDSAS: self.adapters.store}.get(res)
        if store is None:
            return
        trim = o.trim_deployment if res is DEPLOYMENTS else o.trim_custom
        fresh = trim(obj)
        store.put_if(fresh, lambda cached: _rv_int(cached) < _rv_int(fresh))


def _split(g: str) -> Key:
    ns, _, name = g.partition("/")
    return ns, name


__all__ = ["Manager"]
