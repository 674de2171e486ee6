"""The in-cluster rendering loop for Flux: its own informers (GitRepositories,
OCIRepositories, ExternalArtifacts), work queue of ``(namespace, "<Kind>/<name>")`` keys and
render workers, so that a slow render never holds the graph reconcilers.

Events only enqueue keys: a source when it is (or was) annotated with
``dyn-gitops.io/render-path`` and its annotations or artifact changed; the source an
ExternalArtifact points at when the ExternalArtifact changes (someone else edited or deleted
it). Each pass reads both from the caches (``reconcilers/rendered.py``).
"""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable

from dyn_gitops import keys
from dyn_gitops_operator import objects as o
from dyn_gitops_operator.artifacts import ArtifactStore
from dyn_gitops_operator.errors import NotFoundError
from dyn_gitops_operator.informer import Informer, Key, Trim
from dyn_gitops_operator.keywork import work_on
from dyn_gitops_operator.kubeapi import KubeApi
from dyn_gitops_operator.metrics import Metrics
from dyn_gitops_operator.reconcilers.base import Context
from dyn_gitops_operator.reconcilers.rendered import RenderedArtifactReconciler
from dyn_gitops_operator.resources import (
    EXTERNAL_ARTIFACTS,
    GIT_REPOSITORIES,
    OCI_REPOSITORIES,
    Obj,
    Resource,
)
from dyn_gitops_operator.scope import ScopeExclusions
from dyn_gitops_operator.settings import OperatorSettings
from dyn_gitops_operator.workqueue import WorkQueue

SOURCES = {r.kind: r for r in (GIT_REPOSITORIES, OCI_REPOSITORIES)}


def trim_source(raw: Obj) -> Obj:
    """Identity, our annotations and the artifact (a source's spec is not read)."""
    m = o.meta(raw)
    ann = {k: v for k, v in o.annotations_of(raw).items() if k.startswith(keys.OUR_PREFIX)}
    return {
        "apiVersion": raw.get("apiVersion"),
        "kind": raw.get("kind"),
        "metadata": {
            **{k: m.get(k) for k in ("name", "namespace", "uid", "resourceVersion")},
            "annotations": ann,
        },
        "status": {"artifact": (raw.get("status") or {}).get("artifact")},
    }


def trim_artifact(raw: Obj) -> Obj:
    m = o.meta(raw)
    keep = ("name", "namespace", "uid", "resourceVersion", "generation", "ownerReferences")
    return {
        "metadata": {k: m.get(k) for k in keep if m.get(k) is not None},
        "spec": raw.get("spec") or {},
        "status": raw.get("status") or {},
    }


def _annotated(obj: Obj | None) -> bool:
    return obj is not None and keys.ANN_RENDER_PATH in o.annotations_of(obj)


def _same(old: Obj, new: Obj) -> bool:
    """Nothing a render reads changed (the trimmed source: annotations and artifact)."""
    return o.annotations_of(old) == o.annotations_of(new) and old.get("status") == new.get("status")


class RenderLoop:
    def __init__(
        self,
        kube: KubeApi,
        settings: OperatorSettings,
        metrics: Metrics,
        store: ArtifactStore,
        *,
        acting: Callable[[], bool],
        exclusions: ScopeExclusions | None = None,
    ) -> None:
        self.s = settings.artifacts
        self.resync = settings.resync_period
        self.metrics = metrics
        self.acting = acting
        self.exclusions = exclusions
        ns = settings.watch_namespace

        def informer(res: Resource, trim: Trim) -> Informer:
            return Informer(
                kube,
                res,
                namespace=ns,
                metrics=metrics,
                watch_timeout=settings.watch_timeout,
                trim=trim,
            )

        self.sources = {kind: informer(res, trim_source) for kind, res in SOURCES.items()}
        self.artifacts = informer(EXTERNAL_ARTIFACTS, trim_artifact)
        self.queue: WorkQueue[Key] = WorkQueue(
            backoff_base=settings.backoff_base, backoff_max=settings.backoff_max
        )
        self.reconciler = RenderedArtifactReconciler(self.s, store)
        self.ctx = Context(
            kube=kube, metrics=metrics, remember=lambda res, obj: None, acting=acting
        )
        for kind, inf in self.sources.items():
            inf.add_handler(functools.partial(self.on_source, kind))
        self.artifacts.add_handler(self.on_artifact)

    @property
    def informers(self) -> list[Informer]:
        return [*self.sources.values(), self.artifacts]

    # ------------------------------------------------------------------ events
    def on_source(self, kind: str, old: Obj | None, new: Obj | None) -> None:
        if not (_annotated(old) or _annotated(new)):
            return
        if old is not None and new is not None and _same(old, new):
            return
        obj = new if new is not None else old
        assert obj is not None
        self.queue.add((str(o.meta(obj).get("namespace")), f"{kind}/{o.name(obj)}"))

    def on_artifact(self, old: Obj | None, new: Obj | None) -> None:
        obj = new if new is not None else old
        assert obj is not None
        ref = (obj.get("spec") or {}).get("sourceRef") or {}
        if ref.get("kind") in SOURCES and ref.get("name"):
            ns = ref.get("namespace") or o.meta(obj).get("namespace")
            self.queue.add((str(ns), f"{ref['kind']}/{ref['name']}"))

    # ------------------------------------------------------------------ work
    def enqueue_all(self, namespace: str | None = None) -> None:
        for kind, inf in self.sources.items():
            for obj in inf.store.items():
                if _annotated(obj) and namespace in (None, o.meta(obj).get("namespace")):
                    self.queue.add((str(o.meta(obj).get("namespace")), f"{kind}/{o.name(obj)}"))

    def worker(self) -> None:
        while True:
            key = self.queue.get()
            if key is None:
                return
            try:
                start = time.perf_counter()
                outcome = work_on(
                    key,
                    self.queue,
                    self.reconcile,
                    what="render",
                    acting=self.acting,
                    exclusions=self.exclusions,
                    metrics=self.metrics,
                )
                if outcome is not None:
                    name = self.reconciler.name
                    if outcome.error_type is not None:
                        self.metrics.reconcile_errors.labels(name, outcome.error_type).inc()
                    self.metrics.reconcile_total.labels(name, outcome.result).inc()
                    self.metrics.reconcile_duration.labels(name).observe(
                        time.perf_counter() - start
                    )
            finally:
                self.queue.done(key)

    def reconcile(self, key: Key) -> float | None:
        kind, name = key[1].split("/", 1)
        source = self.sources[kind].store.get((key[0], name))
        ea = self.artifacts.store.get((key[0], name))
        try:
            self.reconciler.reconcile(key, source, ea, self.ctx)
        except NotFoundError:
            return None  # deleted meanwhile: its DELETED event comes
        return None

    def ticker(self, stopped: threading.Event) -> None:
        last = time.monotonic()
        while not stopped.wait(1.0):
            if time.monotonic() - last >= self.resync:
                last = time.monotonic()
                self.enqueue_all()


__all__ = ["SOURCES", "RenderLoop", "trim_artifact", "trim_source"]
