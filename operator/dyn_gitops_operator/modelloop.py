"""The DynamoModel loop: its own informers (DynamoModels; EndpointSlices of base-model
Services), work queue of ``(namespace, model name)`` keys and worker threads, so that a
slow worker pod never holds the graph reconcilers (and the other way round).

Events only enqueue keys: a DynamoModel when its spec, finalizers or deletion change; every
model of a base model when one of the base model's EndpointSlices changes (the index on
the hash of ``baseModelName``, as the operator's field index). An EndpointSlice endpoint
that turns not ready or goes away makes the controller forget it loaded the adapter there
(a restarted worker has lost it).
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable

from dyn_gitops import keys
from dyn_gitops_operator import objects as o
from dyn_gitops_operator.errors import ConflictError, ControllerError, NotFoundError
from dyn_gitops_operator.informer import Informer, Key, Store, obj_key
from dyn_gitops_operator.kubeapi import KubeApi
from dyn_gitops_operator.metrics import Metrics
from dyn_gitops_operator.reconcilers.base import Context
from dyn_gitops_operator.reconcilers.model import ModelReconciler, base_hash
from dyn_gitops_operator.resources import DYNAMO_MODELS, ENDPOINT_SLICES, Obj
from dyn_gitops_operator.scope import ScopeExclusions
from dyn_gitops_operator.settings import OperatorSettings
from dyn_gitops_operator.workqueue import WorkQueue

log = logging.getLogger(__name__)


def model_index(model: Obj) -> list[str]:
    return [f"{o.meta(model).get('namespace')}/{base_hash(model)}"]


def slice_index(s: Obj) -> list[str]:
    h = o.labels(s).get(keys.LABEL_BASE_MODEL_HASH)
    return [f"{o.meta(s).get('namespace')}/{h}"] if h else []


def trim_slice(raw: Obj) -> Obj:
    m = o.meta(raw)
    return {
        "metadata": {
            k: m.get(k)
            for k in ("name", "namespace", "uid", "resourceVersion", "labels")
            if m.get(k) is not None
        },
        "endpoints": [
            {
                "addresses": ep.get("addresses"),
                "conditions": ep.get("conditions") or {},
                "targetRef": ep.get("targetRef"),
            }
            for ep in raw.get("endpoints") or []
        ],
    }


def trim_model(raw: Obj) -> Obj:
    m = o.meta(raw)
    return {
        "apiVersion": raw.get("apiVersion"),
        "kind": raw.get("kind"),
        "metadata": {k: v for k, v in m.items() if k not in ("managedFields", "annotations")},
        "spec": raw.get("spec") or {},
        "status": raw.get("status") or {},
    }


def _ready_pods(s: Obj | None) -> set[str]:
    out = set()
    for ep in (s or {}).get("endpoints") or []:
        ref = ep.get("targetRef") or {}
        if (ep.get("conditions") or {}).get("ready") is True and ref.get("name"):
            out.add(str(ref.get("uid") or ref["name"]))
    return out


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
        self.slices = Informer(
            kube,
            ENDPOINT_SLICES,
            namespace=ns,
            metrics=metrics,
            watch_timeout=settings.watch_timeout,
            label_selector=keys.LABEL_BASE_MODEL_HASH,
            trim=trim_slice,
            store=Store({"base": slice_index}),
        )
        self.queue: WorkQueue[Key] = WorkQueue(
            backoff_base=settings.backoff_base, backoff_max=settings.backoff_max
        )
        self.reconciler = reconciler or ModelReconciler(settings.models, metrics)
        self.ctx = Context(kube=kube, metrics=metrics, remember=lambda res, obj: None)
        self.models.add_handler(self.on_model)
        self.slices.add_handler(self.on_slice)

    @property
    def informers(self) -> list[Informer]:
        return [self.models, self.slices]

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

    def on_slice(self, old: Obj | None, new: Obj | None) -> None:
        for pod in _ready_pods(old) - _ready_pods(new):
            self.reconciler.memory.forget_pod(pod)
        refs = {r for s in (old, new) if s is not None for r in slice_index(s)}
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
                return
            try:
                self.process(key)
            finally:
                self.queue.done(key)

    def process(self, key: Key) -> None:
        if not self.acting():
            self.queue.add_after(key, 1.0)
            return
        if self.exclusions is not None and self.exclusions.excluded(key[0]):
            self.queue.forget(key)
            return
        rid = uuid.uuid4().hex[:8]
        start = time.perf_counter()
        result = "success"
        try:
            requeue = self.reconcile(key)
        except Exception as exc:
            result = "conflict" if isinstance(exc, ConflictError) else "error"
            etype = exc.error_type if isinstance(exc, ControllerError) else "internal"
            self.metrics.reconcile_errors.labels(self.reconciler.name, etype).inc()
            delay = self.queue.add_rate_limited(key)
            self.metrics.workqueue_retries.inc()
            log.log(
                logging.INFO if result == "conflict" else logging.WARNING,
                "model reconcile failed, retrying",
                exc_info=not isinstance(exc, ControllerError),
                extra={
                    "object": "/".join(key),
                    "reconcile_id": rid,
                    "delay": delay,
                    "error": str(exc),
                },
            )
        else:
            self.queue.forget(key)
            if requeue is not None:
                self.queue.add_after(key, requeue)
        finally:
            self.metrics.reconcile_total.labels(self.reconciler.name, result).inc()
            self.metrics.reconcile_duration.labels(self.reconciler.name).observe(
                time.perf_counter() - start
            )

    def reconcile(self, key: Key) -> float | None:
        model = self.models.store.get(key)
        slices: list[Obj] = []
        if model is not None:
            slices = self.slices.store.by_index("base", model_index(model)[0])
        try:
            return self.reconciler.reconcile(key, model, slices, self.ctx)
        except NotFoundError:
            return None  # deleted meanwhile: its DELETED event comes

    def ticker(self, stopped: threading.Event) -> None:
        last = time.monotonic()
        while not stopped.wait(1.0):
            self.metrics.dynamo_models.set(len(self.models.store))
            if time.monotonic() - last >= self.s.resync_period:
                last = time.monotonic()
                self.enqueue_all()


__all__ = ["ModelLoop", "model_index", "slice_index", "trim_model", "trim_slice"]
