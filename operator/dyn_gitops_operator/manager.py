"""The controller as one object: ``wiring`` builds its parts, ``controller_loop`` reconciles,
``lifecycle`` starts, guards and stops it, ``event_keys`` maps watch events to graph keys.

Watches only enqueue ``(namespace, dgd name)`` keys; every reconcile reads fresh state
from the caches (level-triggered). ``__main__``, ``testing`` and the benchmark use this
facade; its attributes are those of the parts.
"""

from __future__ import annotations

import threading

from dyn_gitops_operator import wiring
from dyn_gitops_operator.controller_loop import ControllerLoop
from dyn_gitops_operator.event_keys import Enqueuer
from dyn_gitops_operator.graph import Graph, HashCache
from dyn_gitops_operator.informer import Informer, Key
from dyn_gitops_operator.kubeapi import KubeApi
from dyn_gitops_operator.leader import LeaderElector
from dyn_gitops_operator.lifecycle import Lifecycle
from dyn_gitops_operator.metrics import HealthServer, Metrics
from dyn_gitops_operator.modelloop import ModelLoop
from dyn_gitops_operator.reconcilers import Context, Reconciler, default_chain
from dyn_gitops_operator.resources import DYNAMO_MODELS
from dyn_gitops_operator.scope import ScopeLeaseHolder
from dyn_gitops_operator.settings import OperatorSettings
from dyn_gitops_operator.workqueue import WorkQueue


class Manager:
    def __init__(
        self,
        settings: OperatorSettings,
        *,
        kube: KubeApi | None = None,
        metrics: Metrics | None = None,
        reconcilers: list[Reconciler] | None = None,
    ) -> None:
        self.s = settings
        self.metrics = metrics or Metrics()
        self.kube = kube or wiring.api_client(settings)
        self.caches = wiring.build_caches(self.kube, settings, self.metrics)
        self.queue: WorkQueue[Key] = WorkQueue(
            backoff_base=settings.backoff_base, backoff_max=settings.backoff_max
        )
        self.enqueuer = Enqueuer(self.queue.add, self.caches.dgds.store)
        wiring.connect(self.caches, self.enqueuer)
        self.exclusions = wiring.scope_exclusions(
            self.kube,
            settings,
            self.metrics,
            self.caches,
            resume=lambda namespace: self.resume(namespace),
        )
        #: the DynamoModel loop (``start_models``)
        self.models: ModelLoop | None = None
        self.lifecycle = Lifecycle(
            settings, self.kube, self.metrics, self.caches.informers, self.queue, self.exclusions
        )
        self.loop = ControllerLoop(
            self.kube,
            self.caches,
            self.queue,
            reconcilers or default_chain(),
            self.metrics,
            acting=self.lifecycle.acting,
            exclusions=self.exclusions,
            resync_period=settings.resync_period,
            reconcile=lambda key: self.reconcile(key),
            max_replicas=settings.max_replicas,
        )

    # ------------------------------------------------------------------ life cycle
    def run(self) -> int:
        """Run until ``stop()`` (exit code 0) or a lost lease / leadership (1)."""
        self.start()
        self.stopped.wait()
        self.shutdown()
        return 1 if self.failure else 0

    def start(self) -> None:
        self.lifecycle.serve_health()
        wiring.watch_optional_apis(self.kube, self.s, self.metrics, self.caches, self.enqueuer)
        self.start_models()
        self.lifecycle.start(self.loop)

    def resume(self, namespace: str) -> None:
        """A namespace whose scope lease lapsed: every graph and model in it again."""
        self.loop.enqueue_all(namespace)
        if self.models is not None:
            self.models.enqueue_all(namespace)

    def start_models(self) -> None:
        """The DynamoModel loop, when enabled and the API is served (checked once)."""
        if not self.s.models.enabled or not wiring.served(
            self.kube, DYNAMO_MODELS, self.s.watch_namespace
        ):
            return
        self.models = ModelLoop(
            self.kube,
            self.s,
            self.metrics,
            acting=self.lifecycle.acting,
            exclusions=self.exclusions,
        )
        self.caches.informers.extend(self.models.informers)
        self.lifecycle.add_work(self.models, self.models.queue, self.s.models.workers)

    def stop(self) -> None:
        self.lifecycle.stop()

    def shutdown(self) -> None:
        self.lifecycle.shutdown()

    def healthy(self) -> bool:
        return self.lifecycle.healthy()

    def ready(self) -> bool:
        return self.lifecycle.ready()

    def acting(self) -> bool:
        return self.lifecycle.acting()

    # ------------------------------------------------------------------ reconciling
    def graph_keys(self, namespace: str | None = None) -> list[Key]:
        return self.loop.graph_keys(namespace)

    def snapshot(self, key: Key) -> Graph:
        return self.loop.snapshot(key)

    def reconcile(self, key: Key) -> float | None:
        return self.loop.reconcile(key)

    # ------------------------------------------------------------------ the parts' state
    @property
    def stopped(self) -> threading.Event:
        return self.lifecycle.stopped

    @property
    def failure(self) -> str | None:
        return self.lifecycle.failure

    @property
    def elector(self) -> LeaderElector | None:
        return self.lifecycle.elector

    @property
    def scope_holder(self) -> ScopeLeaseHolder | None:
        return self.lifecycle.scope_holder

    @property
    def http(self) -> HealthServer | None:
        return self.lifecycle.http

    @property
    def informers(self) -> list[Informer]:
        return self.caches.informers

    @property
    def deployments(self) -> Informer:
        return self.caches.deployments

    @property
    def dgds(self) -> Informer:
        return self.caches.dgds

    @property
    def adapters(self) -> Informer:
        return self.caches.adapters

    @property
    def lws(self) -> Informer | None:
        return self.caches.lws

    @property
    def podcliques(self) -> Informer | None:
        return self.caches.podcliques

    @property
    def pcsgs(self) -> Informer | None:
        return self.caches.pcsgs

    @property
    def chain(self) -> list[Reconciler]:
        return self.loop.chain

    @property
    def ctx(self) -> Context:
        return self.loop.ctx

    @property
    def hashes(self) -> HashCache:
        return self.loop.hashes


__all__ = ["Manager"]
