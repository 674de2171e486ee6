"""The DynamoModel loop: its own informers (DynamoModels; the pods and Services labelled
with a base model's hash), work queue of ``(namespace, model name)`` keys and worker
threads, so that a slow worker pod never holds the graph reconcilers (and the other way
round).

Events only enqueue keys: a DynamoModel when its spec, finalizers or deletion change; every
model of a base model when one of its worker pods or Services changes (the index on the
hash of ``baseModelName``, as the operator's field index). A worker pod that turns not
ready or goes away makes the controller forget it loaded the adapter there (a restarted
worker has lost it).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from dyn_gitops import keys
from dyn_gitops_operator import objects as o
from dyn_gitops_operator.errors import NotFoundError
from dyn_gitops_operator.informer import Informer, Key, Store, obj_key
from dyn_gitops_operator.keywork import work_on
from dyn_gitops_operator.kubeapi import KubeApi
from dyn_gitops_operator.metrics import Metrics
from dyn_gitops_operator.modelendpoint import pod_ready
from dyn_gitops_operator.reconcilers.base import Context
from dyn_gitops_operator.reconcilers.model import ModelReconciler, base_hash
from dyn_gitops_operator.resources import DYNAMO_MODELS, PODS, SERVICES, Obj
from dyn_gitops_operator.scope import ScopeExclusions
from dyn_gitops_operator.settings import OperatorSettings
from dyn_gitops_operator.workqueue import WorkQueue

log = logging.getLogger(__name__)


def model_index(model: Obj) -> list[str]:
    return [f"{o.meta(model).get('namespace')}/{base_hash(model)}"]


def hash_index(obj: Obj) -> list[str]:
    """``namespace/hash`` of a pod or Service labelled with a base model's hash."""
    h = o.labels(obj).get(keys.LABEL_BASE_MODEL_HASH)
    return [f"{o.meta(obj).get('namespace')}/{h}"] if h else []


def _slim_meta(raw: Obj) -> Obj:
    m = o.meta(raw)
    return {
        k: m.get(k)
        for k in ("name", "namespace", "uid", "resourceVersion", "labels", "deletionTimestamp")
        if m.get(k) is not None
    }


def trim_pod(raw: Obj) -> Obj:
    """What discovery reads: identity, IP, phase and conditions (pod specs are large)."""
    st = raw.get("status") or {}
    return {
        "metadata": _slim_meta(raw),
        "status": {
            "phase": st.get("phase"),
            "podIP": st.get("podIP"),
            "conditions": [
                {"type": c.get("type"), "status": c.get("status")}
                for c in st.get("conditions") or []
            ],
        },
    }


def trim_service(raw: Obj) -> Obj:
    return {"metadata": _slim_meta(raw)}


def trim_model(raw: Obj) -> Obj:
    m = o.meta(raw)
    return {
        "apiVersion": raw.get("apiVersion"),
        "kind": raw.get("kind"),
        "metadata": {k: v for k, v in m.items() if k not in ("managedFields", "annotations")},
        "spec": raw.get("spec") or {},
        "status": raw.get("status") or {},
    }


def _ready_key(pod: Obj | None) -> str | None:
    if pod is None or not pod_ready(pod) or o.meta(pod).get("deletionTimestamp"):
        return None
    return str(o.meta(pod).get("uid") or o.meta(pod).get("name"))


class ModelLoop:
    def __init__(
        self,
        kube: KubeApi,
        settings: OperatorSettings,
        metrics: Metrics,
        *,
        acting: Callable[[], bool],
        exclusions: ScopeExclusions | None = None,
        reconciler: ModelReconciler | None = None,
    ) -> None:
        self.s = settings
        self.metrics = metrics
        self.acting = acting
        self.exclusions = exclusions
        ns = settings.watch_namespace
        self.models = Informer(
            kube,
            DYNAMO_MODELS,
            namespace=ns,
            metrics=metrics,
            watch_timeout=settings.watch_timeout,
            trim=trim_model,
            store=Store({"base": model_index}),
        )
        self.pods = Informer(
            kube,
            PODS,
            namespace=ns,
            metrics=metrics,
            watch_timeout=settings.watch_timeout,
            label_selector=keys.LABEL_BASE_MODEL_HASH,
            trim=trim_pod,
            store=Store({"base": hash_index}),
        )
        self.services = Informer(
            kube,
            SERVICES,
            namespace=ns,
            metrics=metrics,
            watch_timeout=settings.watch_timeout,
            label_selector=keys.LABEL_BASE_MODEL_HASH,
            trim=trim_service,
            store=Store({"base": hash_index}),
        )
        self.queue: WorkQueue[Key] = WorkQueue(
            backoff_base=settings.backoff_base, backoff_max=settings.backoff_max
        )
        self.reconciler = reconciler or ModelReconciler(settings.models, metrics)
        self.reconciler.notify = self.queue.add  # a worker answered: look again
        self.ctx = Context(
            kube=kube, metrics=metrics, remember=lambda res, obj: None, acting=acting
        )
        self.models.add_handler(self.on_model)
        self.pods.add_handler(self.on_pod)
        self.services.add_handler(self.on_base_object)

    @property
    def informers(self) -> list[Informer]:
        return [self.models, self.pods, self.services]

    # ------------------------------------------------------------------ events
    def on_model(self, old: Obj | None, new: Obj | None) -> None:
        if old is not None and new is not None:
            mo, mn = o.meta(old), o.meta(new)
            if all(
                mo.get(f) == mn.get(f) for f in ("generation", "deletionTimestamp", "finalizers")
            ):
                return  # a status write (ours) or a label: nothing to decide
        obj = new if new is not None else old
        if obj is not None:
            self.queue.add(obj_key(obj))

    def on_pod(self, old: Obj | None, new: Obj | None) -> None:
        was = _ready_key(old)
        if was is not None and _ready_key(new) != was:
            self.reconciler.memory.forget_pod(was)
        if (
            old is not None
            and new is not None
            and old.get("status") == new.get("status")
            and o.meta(old).get("deletionTimestamp") == o.meta(new).get("deletionTimestamp")
        ):
            return  # nothing discovery reads changed
        self.on_base_object(old, new)

    def on_base_object(self, old: Obj | None, new: Obj | None) -> None:
        refs = {r for x in (old, new) if x is not None for r in hash_index(x)}
        for ref in refs:
            for model in self.models.store.by_index("base", ref):
                self.queue.add(obj_key(model))

    # ------------------------------------------------------------------ work
    def enqueue_all(self, namespace: str | None = None) -> None:
        for key in self.models.store.keys():  # noqa: SIM118 (a Store, not a dict)
            if namespace is None or key[0] == namespace:
                self.queue.add(key)

    def worker(self) -> None:
        while True:
            key = self.queue.get()
            if key is None:
                self.reconciler.close()
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
            self.reconcile,
            what="model reconcile",
            acting=self.acting,
            exclusions=self.exclusions,
            metrics=self.metrics,
        )
        if outcome is None:
            return
        name = self.reconciler.name
        if outcome.error_type is not None:
            self.metrics.reconcile_errors.labels(name, outcome.error_type).inc()
        self.metrics.reconcile_total.labels(name, outcome.result).inc()
        self.metrics.reconcile_duration.labels(name).observe(time.perf_counter() - start)

    def reconcile(self, key: Key) -> float | None:
        model = self.models.store.get(key)
        pods: list[Obj] = []
        services: set[str] = set()
        if model is not None:
            ref = model_index(model)[0]
            pods = self.pods.store.by_index("base", ref)
            services = {o.name(svc) for svc in self.services.store.by_index("base", ref)}
        try:
            return self.reconciler.reconcile(key, model, pods, services, self.ctx)
        except NotFoundError:
            return None  # deleted meanwhile: its DELETED event comes

    def ticker(self, stopped: threading.Event) -> None:
        last = time.monotonic()
        while not stopped.wait(1.0):
            self.metrics.dynamo_models.set(len(self.models.store))
            if time.monotonic() - last >= self.s.resync_period:
                last = time.monotonic()
                self.enqueue_all()


__all__ = ["ModelLoop", "hash_index", "model_index", "trim_model", "trim_pod", "trim_service"]
