"""The controller as one object: ``wiring`` builds its parts, ``controller_loop`` reconciles,
``lifecycle`` starts, guards and stops it, ``event_keys`` maps watch events to graph keys.

Watches only enqueue ``(namespace, dgd name)`` keys; every reconcile reads fresh state
from the caches (level-triggered). ``__main__``, ``testing`` and the benchmark use this
facade; its attributes are those of the parts.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path

from dyn_gitops_operator import wiring
from dyn_gitops_operator.artifacts import ArtifactServer, ArtifactStore
from dyn_gitops_operator.controller_loop import ControllerLoop
from dyn_gitops_operator.event_keys import Enqueuer
from dyn_gitops_operator.graph import Graph, HashCache
from dyn_gitops_operator.informer import Informer, Key
from dyn_gitops_operator.kubeapi import KubeApi
from dyn_gitops_operator.leader import LeaderElector
from dyn_gitops_operator.lifecycle import Lifecycle
from dyn_gitops_operator.metrics import HealthServer, Metrics
from dyn_gitops_operator.modelloop import ModelLoop
from dyn_gitops_operator.optional import OptionalApis
from dyn_gitops_operator.reconcilers import Context, Reconciler, default_chain
from dyn_gitops_operator.renderloop import RenderLoop
from dyn_gitops_operator.resources import DYNAMO_MODELS, EXTERNAL_ARTIFACTS, Resource
from dyn_gitops_operator.scope import ScopeLeaseHolder
from dyn_gitops_operator.settings import OperatorSettings
from dyn_gitops_operator.workqueue import WorkQueue

log = logging.getLogger(__name__)


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
        #: the in-cluster rendering for Flux (``start_render``), its store and server
        self.render: RenderLoop | None = None
        self.artifact_store: ArtifactStore | None = None
        self.artifact_server: ArtifactServer | None = None
        apis = [*wiring.OPTIONAL_WORKLOADS, *([DYNAMO_MODELS] if settings.models.enabled else [])]
        if settings.artifacts.enabled:
            a = settings.artifacts
            self.artifact_store = ArtifactStore(
                Path(a.storage_dir), keep=a.keep, max_size=a.max_size
            )
            self.artifact_server = ArtifactServer(a.address, self.artifact_store)
            apis.append(EXTERNAL_ARTIFACTS)
        #: which optional APIs are served, for the process lifetime (``optional``)
        self.optional = OptionalApis(
            self.kube,
            settings.watch_namespace,
            apis,
            self._served,
            recheck=settings.optional_api_recheck,
            retry_base=settings.optional_api_retry_base,
            retry_max=settings.optional_api_retry_max,
            stopped=self.lifecycle.stopped,
        )
        self.lifecycle.unknown_apis = self.optional.unknown
        self._started = False
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
        if self.artifact_server is not None:
            self.artifact_server.start()
        self.optional.check_all()  # the APIs served now are watched before anything acts
        self.lifecycle.start(self.loop)
        self._started = True
        self.optional.start()  # the others are checked again, for the process lifetime

    def resume(self, namespace: str) -> None:
        """A namespace whose scope lease lapsed: every graph and model in it again."""
        self.loop.enqueue_all(namespace)
        if self.models is not None:
            self.models.enqueue_all(namespace)

    def _served(self, res: Resource) -> None:
        """An optional API found served: watch it. At start-up its caches fill with the
        others'; later, its informer starts, and once its cache is filled the snapshots read
        it and every graph is looked at again (its objects may concern any of them)."""
        if self._started:  # its own thread: a slow first list delays no other check
            threading.Thread(target=self._watch_late, args=(res,), daemon=True).start()
        elif res is DYNAMO_MODELS:
            self.start_models()
        elif res is EXTERNAL_ARTIFACTS:
            self.start_render()
        else:
            inf = wiring.optional_informer(self.kube, self.s, self.metrics, res)
            self.caches.informers.append(inf)
            wiring.attach(self.caches, self.enqueuer, res, inf)

    def _watch_late(self, res: Resource) -> None:
        if res is DYNAMO_MODELS:
            self.start_models(late=True)
            return
        if res is EXTERNAL_ARTIFACTS:
            self.start_render(late=True)
            return
        inf = wiring.optional_informer(self.kube, self.s, self.metrics, res)
        self.lifecycle.add_informer(inf)
        if not self._synced(inf):
            return
        wiring.attach(self.caches, self.enqueuer, res, inf)
        log.info("optional API watched", extra={"resource": res.plural})
        self.loop.enqueue_all()

    def _synced(self, inf: Informer) -> bool:
        while not inf.synced.wait(0.5):
            if self.lifecycle.stopped.is_set():
                return False
        return True

    def start_models(self, late: bool = False) -> None:
        """The DynamoModel loop (its API found served): its informers fill, then its workers
        run with the graph workers (at once when those run already)."""
        models = ModelLoop(
            self.kube,
            self.s,
            self.metrics,
            acting=self.lifecycle.acting,
            exclusions=self.exclusions,
        )
        if not late:
            self.caches.informers.extend(models.informers)
        else:
            for inf in models.informers:
                self.lifecycle.add_informer(inf)
            if not all(self._synced(inf) for inf in models.informers):
                return
        self.models = models
        self.lifecycle.add_work(models, models.queue, self.s.models.workers)

    def start_render(self, late: bool = False) -> None:
        """The in-cluster rendering loop (the ExternalArtifact API found served), as
        ``start_models``."""
        assert self.artifact_store is not None
        loop = RenderLoop(
            self.kube,
            self.s,
            self.metrics,
            self.artifact_store,
            acting=self.lifecycle.acting,
            exclusions=self.exclusions,
        )
        if not late:
            self.caches.informers.extend(loop.informers)
        else:
            for inf in loop.informers:
                self.lifecycle.add_informer(inf)
            if not all(self._synced(inf) for inf in loop.informers):
                return
        self.render = loop
        self.lifecycle.add_work(loop, loop.queue, self.s.artifacts.workers)

    def stop(self) -> None:
        self.lifecycle.stop()

    def shutdown(self) -> None:
        self.lifecycle.shutdown()
        if self.artifact_server is not None:
            self.artifact_server.stop()

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
