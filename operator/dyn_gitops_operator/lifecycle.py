"""Start-up, health and shutdown of the controller.

Start-up: serve /healthz -> fill the caches -> become leader -> (namespace mode) hold the
scope lease -> enqueue every graph -> run the workers. Losing the leadership or the scope
lease stops the controller with a failure (exit code 1: the pod restarts and competes
again); a clean stop hands both leases over.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Protocol

from dyn_gitops_operator.informer import Informer
from dyn_gitops_operator.kubeapi import KubeApi
from dyn_gitops_operator.leader import LeaderElector
from dyn_gitops_operator.metrics import HealthServer, Metrics
from dyn_gitops_operator.scope import ScopeExclusions, ScopeLeaseHolder
from dyn_gitops_operator.settings import OperatorSettings
from dyn_gitops_operator.workqueue import WorkQueue

log = logging.getLogger(__name__)

#: how long a clean shutdown may wait for workers and watches (leases are released too)
SHUTDOWN_BUDGET_SECONDS = 8.0


class Work(Protocol):
    """What runs once the controller may act (``controller_loop.ControllerLoop``)."""

    def enqueue_all(self, namespace: str | None = None) -> None: ...

    def worker(self) -> None: ...

    def ticker(self, stopped: threading.Event) -> None: ...


class Lifecycle:
    def __init__(
        self,
        settings: OperatorSettings,
        kube: KubeApi,
        metrics: Metrics,
        informers: list[Informer],
        queue: WorkQueue[tuple[str, str]],
        exclusions: ScopeExclusions | None = None,
    ) -> None:
        self.s = settings
        #: the caches' list itself: informers of optional APIs join it at start-up
        self.informers = informers
        self.queue = queue
        self.exclusions = exclusions
        self.stopped = threading.Event()
        self.failure: str | None = None
        self._acting = False
        #: set once the workers run: work added later starts at once (``add_work``)
        self._running = False
        self._lock = threading.Lock()
        #: optional APIs whose state is not known yet (``optional.OptionalApis.unknown``)
        self.unknown_apis: Callable[[], list[str]] = list
        self._workers: list[threading.Thread] = []
        #: more loops with their own queue and workers (the DynamoModel loop)
        self._extra: list[tuple[Work, WorkQueue[tuple[str, str]], int]] = []
        self.scope_holder: ScopeLeaseHolder | None = None
        if settings.scope.enabled and settings.mode == "namespace":
            self.scope_holder = ScopeLeaseHolder(
                kube,
                settings.scope,
                settings.namespace,
                settings.identity,
                metrics,
                on_lost=lambda: self.fail("scope lease lost"),
            )
        self.elector: LeaderElector | None = None
        if settings.leader.enabled:
            self.elector = LeaderElector(
                kube,
                settings.leader,
                settings.leader_namespace,
                settings.identity,
                metrics,
                on_lost=lambda: self.fail("leadership lost"),
            )
        self.http: HealthServer | None = None
        if settings.http_address:
            self.http = HealthServer(
                settings.http_address, metrics, self.healthy, self.ready, self.not_ready
            )

    # ------------------------------------------------------------------ start
    def add_work(self, work: Work, queue: WorkQueue[tuple[str, str]], workers: int) -> None:
        """Another loop, started with the main one, or at once when that runs already (an
        optional API found served later)."""
        with self._lock:
            self._extra.append((work, queue, workers))
            if self._running:
                self._run_work(len(self._extra), work, workers)

    def add_informer(self, inf: Informer) -> None:
        """An informer of an API found served after start-up: started now; health and
        readiness count it from now on."""
        self.informers.append(inf)
        if not self.stopped.is_set():
            inf.start()

    def serve_health(self) -> None:
        if self.http is not None:
            self.http.start()

    def start(self, work: Work) -> None:
        """Start the informers, and ``work`` once caches and leases allow (a thread)."""
        for inf in self.informers:
            inf.start()
        threading.Thread(
            target=self._start_acting, args=(work,), name="starter", daemon=True
        ).start()

    def _start_acting(self, work: Work) -> None:
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
        with self._lock:
            self._running = True
            for n, (w, count) in enumerate(
                [(work, self.s.workers), *((w, c) for w, _, c in self._extra)]
            ):
                self._run_work(n, w, count)
        log.info(
            "controller started", extra={"mode": self.s.mode, "namespace": self.s.namespace or "*"}
        )

    def _run_work(self, n: int, w: Work, count: int) -> None:
        """Enqueue every key of loop ``n`` and start its workers and ticker."""
        w.enqueue_all()
        prefix = "worker" if n == 0 else f"worker{n}"
        for i in range(count):
            t = threading.Thread(target=w.worker, name=f"{prefix}-{i}", daemon=True)
            t.start()
            self._workers.append(t)
        threading.Thread(
            target=w.ticker, args=(self.stopped,), name=f"ticker{n or ''}", daemon=True
        ).start()

    # ------------------------------------------------------------------ stop
    def stop(self) -> None:
        self.stopped.set()

    def fail(self, why: str) -> None:
        self.failure = why
        self._acting = False
        self.stopped.set()

    def shutdown(self) -> None:
        # One deadline for the whole shutdown: joining each thread with its own timeout,
        # one after the other, took more than 20 s on a loaded machine. Every thread is a
        # daemon, so whatever is still running at the deadline ends with the process.
        deadline = time.monotonic() + SHUTDOWN_BUDGET_SECONDS
        self.stopped.set()
        self.queue.shutdown()
        for _, queue, _ in self._extra:
            queue.shutdown()
        for t in self._workers:
            t.join(timeout=max(0.0, deadline - time.monotonic()))
        # leases first: handing them over promptly matters more than a tidy watch close
        if self.scope_holder is not None:
            self.scope_holder.stop(release=self.failure is None)
        if self.elector is not None:
            self.elector.stop(release=self.failure is None)
        stoppers = [
            threading.Thread(target=inf.stop, name="informer-stop", daemon=True)
            for inf in self.informers
        ]
        for s in stoppers:
            s.start()
        for s in stoppers:
            s.join(timeout=max(0.0, deadline - time.monotonic()))
        if self.http is not None:
            self.http.stop()

    # ------------------------------------------------------------------ health
    def healthy(self) -> bool:
        return self.failure is None and all(i.alive() for i in self.informers)

    def ready(self) -> bool:
        return not self.not_ready()

    def not_ready(self) -> list[str]:
        """Why /readyz fails (empty: ready): a dead thread or lost lease, a cache not
        synced, an optional API whose state is unknown (then it may not be watched)."""
        why = [] if self.healthy() else ["unhealthy"]
        why += [
            f"cache not synced: {i.resource.plural}"
            for i in self.informers
            if not i.synced.is_set()
        ]
        why += [f"optional API state unknown: {name}" for name in self.unknown_apis()]
        return why

    def acting(self) -> bool:
        if not self._acting or self.stopped.is_set():
            return False
        if self.elector is not None and not self.elector.is_leader():
            return False
        return self.scope_holder is None or self.scope_holder.held


__all__ = ["SHUTDOWN_BUDGET_SECONDS", "Lifecycle", "Work"]
