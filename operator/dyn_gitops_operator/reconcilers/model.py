"""DynamoModel: the LoRA adapter loaded into every worker of its base model.

The Dynamo operator's ``dynamo_model_controller`` (1.5 line), ported to one level-triggered
pass per model:

* the workers are the pods labelled ``nvidia.com/dynamo-base-model-hash: <hash of
  baseModelName>``: what the headless ``dynamo-model-<hash>`` Service (the renderer emits
  it from a component's ``modelRef``) selects; the operator reads the same pods from that
  Service's EndpointSlices;
* a ``lora`` model is loaded (``POST /v1/loras``) into each ready worker, a ``base`` or
  ``adapter`` model only lists them (``ready`` false, nothing called); the pass starts the
  calls (at most ``concurrency`` in flight per model, at most half the controller's pool
  per namespace: ``fairpool``) and never waits for them: each answer is recorded when it
  comes and the model is looked at again;
* the status lists every worker with ``ready`` (loaded), counts them, and sets the
  conditions ``EndpointsReady`` and ``ServicesFound`` (the operator's reasons) and
  ``Ready`` (ours: the same verdict as ``EndpointsReady``, with the reason ``LoadFailed``
  while a worker refused or did not answer the load);
* on deletion, the finalizer ``nvidia.com/finalizer`` is held until the adapter was
  unloaded (``DELETE /v1/loras/<name>``) from every worker; as in the operator, a failed
  unload is reported (log, metric) and does not hold the deletion.

Differences: a failed worker is retried on its own exponential backoff (the operator
requeues the whole model after 30 s and calls every worker again), a worker that already
loaded the adapter is not called again until it is replaced, restarts (turns not ready) or
the model changes, and a worker pod that is not Ready is listed but not
called until it is ready (docs/operator.md).
"""

from __future__ import annotations

import contextlib
import functools
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from dyn_gitops import keys, naming
from dyn_gitops_operator import objects as o
from dyn_gitops_operator.fairpool import FairPool
from dyn_gitops_operator.metrics import Metrics
from dyn_gitops_operator.modelendpoint import (
    Candidate,
    EndpointError,
    LoraClient,
    extract_candidates,
)
from dyn_gitops_operator.reconcilers.base import Context, timestamp
from dyn_gitops_operator.resources import DYNAMO_MODELS, Obj
from dyn_gitops_operator.settings import ModelSettings

log = logging.getLogger(__name__)

Key = tuple[str, str]

COND_ENDPOINTS_READY = "EndpointsReady"
COND_SERVICES_FOUND = "ServicesFound"
COND_READY = "Ready"


def is_lora(model: Obj) -> bool:
    return str((model.get("spec") or {}).get("modelType") or "").lower() == "lora"


def base_hash(model: Obj) -> str:
    return naming.model_hash(str((model.get("spec") or {}).get("baseModelName") or ""))


def fingerprint(model: Obj) -> str:
    """What a loaded adapter depends on: its name and source."""
    spec = model.get("spec") or {}
    return f"{spec.get('modelName')}\x00{(spec.get('source') or {}).get('uri')}"


@dataclass
class _Attempt:
    failures: int = 0
    next_at: float = 0.0
    error: str = ""


@dataclass
class ModelMemory:
    """What one controller process remembers between passes (nothing of it is needed
    after a restart: the first pass calls every ready worker again, loads are idempotent).
    """

    #: model -> pod key -> (address, fingerprint) of a successful load
    loaded: dict[Key, dict[str, tuple[str, str]]] = field(default_factory=dict)
    #: model -> pod key -> failures so far and when to call again
    attempts: dict[Key, dict[str, _Attempt]] = field(default_factory=dict)
    #: model -> pod keys whose load call has not answered yet
    inflight: dict[Key, set[str]] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def forget_pod(self, pod_key: str) -> None:
        """A worker turned not ready or went away: load into it again when it is back."""
        with self.lock:
            for pods in self.loaded.values():
                pods.pop(pod_key, None)

    def forget_model(self, key: Key) -> None:
        with self.lock:
            self.loaded.pop(key, None)
            self.attempts.pop(key, None)
            self.inflight.pop(key, None)


class ModelReconciler:
    name = "dynamo_model"

    def __init__(
        self,
        settings: ModelSettings,
        metrics: Metrics,
        client: LoraClient | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.s = settings
        self.metrics = metrics
        #: every load and unload call runs here, a namespace's calls on at most its share
        #: (``ModelSettings.namespace_calls``); an answer calls ``notify(model key)``
        self._pool = FairPool(settings.pool_size, settings.namespace_calls)
        self.client = client or LoraClient(
            settings.request_timeout, settings.total_timeout, settings.concurrency, self._pool
        )
        self.memory = ModelMemory()
        self.clock = clock
        self.notify: Callable[[Key], None] = lambda key: None

    def close(self) -> None:
        """Stop starting calls; those under way end by their deadline."""
        self._pool.close()

    # ------------------------------------------------------------------ one pass
    def reconcile(
        self,
        key: Key,
        model: Obj | None,
        pods: list[Obj],
        services: set[str],
        ctx: Context,
    ) -> float | None:
        """One pass over ``model`` (None: it is gone); seconds until the next look."""
        if model is None:
            self.memory.forget_model(key)
            self._forget_gauges(key)
            return None
        meta = o.meta(model)
        if meta.get("deletionTimestamp"):
            self._finalize(key, model, pods, ctx)
            return None
        if keys.FINALIZER not in (meta.get("finalizers") or []):
            self._set_finalizers(ctx, model, [*(meta.get("finalizers") or []), keys.FINALIZER])
        candidates = extract_candidates(pods, self.s.port)
        endpoints, errors, retry_in = self._load(key, model, candidates)
        status = self._status(model, candidates, services, endpoints, errors, ctx)
        self._gauges(key, status)  # first: whoever sees the status sees the gauges
        self._write_status(ctx, model, status)
        return retry_in

    # ------------------------------------------------------------------ loading
    def _load(
        self, key: Key, model: Obj, candidates: list[Candidate]
    ) -> tuple[list[Obj], dict[str, str], float | None]:
        """Start the load on every ready worker that is due (never waiting for an answer:
        each answer is recorded when it comes and re-enqueues the model); the endpoints
        for the status, the last error of each failing worker, and when one is due."""
        lora = is_lora(model)
        now = self.clock()
        fp = fingerprint(model)
        spec = model.get("spec") or {}
        m = self.memory
        with m.lock:
            loaded = m.loaded.setdefault(key, {})
            attempts = m.attempts.setdefault(key, {})
            inflight = m.inflight.setdefault(key, set())
            current = {c.pod_key for c in candidates}
            for gone in set(loaded) - current:
                del loaded[gone]
            for gone in set(attempts) - current:
                del attempts[gone]
            room = self.s.concurrency - len(inflight)
            due = [
                c
                for c in candidates
                if lora
                and c.ready
                and c.pod_key not in inflight
                and loaded.get(c.pod_key) != (c.address, fp)
                and attempts.get(c.pod_key, _Attempt()).next_at <= now
            ][: max(0, room)]
            for c in due:
                inflight.add(c.pod_key)
        model_name = str(spec.get("modelName") or "")
        uri = str((spec.get("source") or {}).get("uri") or "")
        for c in due:
            call = functools.partial(self._load_one, key, c, fp, model_name, uri)
            if not self._pool.submit(key[0], call):  # closing: not started, not in flight
                with m.lock:
                    inflight.discard(c.pod_key)
        errors: dict[str, str] = {}
        retry_at: float | None = None
        with m.lock:
            endpoints = []
            for c in candidates:
                ready = lora and loaded.get(c.pod_key) == (c.address, fp)
                endpoints.append({"address": c.address, "podName": c.pod_name, "ready": ready})
                failed = attempts.get(c.pod_key)
                if lora and not ready and failed is not None and c.ready:
                    errors[c.pod_key] = failed.error
                    if c.pod_key not in inflight:
                        retry_at = (
                            failed.next_at if retry_at is None else min(retry_at, failed.next_at)
                        )
        retry_in = None if retry_at is None else max(0.05, retry_at - self.clock())
        return endpoints, errors, retry_in

    def _load_one(self, key: Key, c: Candidate, fp: str, model_name: str, uri: str) -> None:
        """One worker's load, on the pool; the outcome goes into the memory, then the model
        is looked at again."""
        err: str | None = None
        try:
            self.client.load(c.address, model_name, uri)
        except EndpointError as exc:
            err = str(exc)
        except Exception as exc:  # a bug must not leave the worker "in flight" forever
            log.exception("LoRA load crashed", extra={"object": "/".join(key)})
            err = f"{type(exc).__name__}: {exc}"
        m = self.memory
        with m.lock:
            m.inflight.get(key, set()).discard(c.pod_key)
            if key not in m.loaded:  # the model went away meanwhile
                return
            if err is None:
                m.loaded[key][c.pod_key] = (c.address, fp)
                m.attempts.get(key, {}).pop(c.pod_key, None)
            else:
                a = m.attempts.setdefault(key, {}).setdefault(c.pod_key, _Attempt())
                a.failures += 1
                a.next_at = self.clock() + min(
                    self.s.retry_max, self.s.retry_base * 2 ** (a.failures - 1)
                )
                a.error = err
        if err is None:
            self.metrics.lora_requests.labels("load", "success").inc()
        else:
            self.metrics.lora_requests.labels("load", "failure").inc()
            log.warning(
                "LoRA load failed",
                extra={
                    "object": "/".join(key),
                    "address": c.address,
                    "pod": c.pod_name,
                    "error": err,
                },
            )
        self.notify(key)

    # ------------------------------------------------------------------ status
    def _status(
        self,
        model: Obj,
        candidates: list[Candidate],
        services: set[str],
        endpoints: list[Obj],
        errors: dict[str, str],
        ctx: Context,
    ) -> Obj:
        spec = model.get("spec") or {}
        base = spec.get("baseModelName")
        total = len(endpoints)
        ready = sum(1 for e in endpoints if e["ready"])
        conds: list[tuple[str, bool, str, str]] = []
        if not candidates:
            msg = (
                f"No endpoints found for base model {base} (no pod labelled "
                f"{keys.LABEL_BASE_MODEL_HASH}={base_hash(model)}, selected by Service "
                f"{naming.model_service_name(str(base or ''))})"
            )
            conds.append((COND_SERVICES_FOUND, False, "NoServicesFound", msg))
            conds.append((COND_ENDPOINTS_READY, False, "NoEndpoints", msg))
        else:
            if services:
                conds.append(
                    (
                        COND_SERVICES_FOUND,
                        True,
                        "ServicesFound",
                        f"Found {len(services)} service(s)",
                    )
                )
            else:
                conds.append(
                    (
                        COND_SERVICES_FOUND,
                        False,
                        "NoServicesFound",
                        "No Service labelled with the base model's hash selects the workers",
                    )
                )
            if not is_lora(model):
                conds.append(
                    (
                        COND_ENDPOINTS_READY,
                        True,
                        "EndpointsDiscovered",
                        f"Found {total} endpoint(s) for base model",
                    )
                )
            elif ready == total:
                conds.append(
                    (
                        COND_ENDPOINTS_READY,
                        True,
                        "AllEndpointsReady",
                        f"All {total} endpoint(s) are ready",
                    )
                )
            else:
                msg = f"Found {ready} ready endpoint(s) out of {total} total"
                waiting = [c.pod_name for c in candidates if not c.ready]
                if waiting:
                    msg += f"; pod(s) not ready yet: {', '.join(waiting[:5])}"
                failed = [
                    f"{c.pod_name} ({c.address}): {errors[c.pod_key]}"
                    for c in candidates
                    if c.pod_key in errors
                ]
                if failed:
                    msg += "; load failed, retrying: " + "; ".join(failed[:5])
                conds.append((COND_ENDPOINTS_READY, False, "NotReady", msg[:1000]))
        er = next(c for c in conds if c[0] == COND_ENDPOINTS_READY)
        # Ready: EndpointsReady's verdict; its reason tells a worker that refused or did
        # not answer the load (LoadFailed, retried) from one not there yet (health checks)
        conds.append((COND_READY, er[1], "LoadFailed" if errors else er[2], er[3]))
        old = {c.get("type"): c for c in (model.get("status") or {}).get("conditions") or []}
        gen = o.meta(model).get("generation")
        now = timestamp(ctx.now())
        conditions = []
        for ctype, ok, reason, message in conds:
            st = "True" if ok else "False"
            prev = old.get(ctype) or {}
            conditions.append(
                {
                    "type": ctype,
                    "status": st,
                    "observedGeneration": gen,
                    "lastTransitionTime": prev.get("lastTransitionTime")
                    if prev.get("status") == st and prev.get("lastTransitionTime")
                    else now,
                    "reason": reason,
                    "message": message,
                }
            )
        return {
            # absent when empty (a merge patch's null), as the operator's omitempty
            "endpoints": endpoints or None,
            "readyEndpoints": ready,
            "totalEndpoints": total,
            "conditions": conditions,
        }

    def _write_status(self, ctx: Context, model: Obj, status: Obj) -> None:
        current = model.get("status") or {}
        if all(current.get(k) == v for k, v in status.items()):
            return
        meta = o.meta(model)
        ctx.patch(
            DYNAMO_MODELS,
            {
                # not conditional: the status is ours alone (one leader writes it)
                "metadata": {"name": meta["name"], "namespace": meta.get("namespace")},
                "status": status,
            },
            subresource="status",
        )

    # ------------------------------------------------------------------ deletion
    def _finalize(self, key: Key, model: Obj, pods: list[Obj], ctx: Context) -> None:
        finalizers = o.meta(model).get("finalizers") or []
        if keys.FINALIZER not in finalizers:
            return
        if is_lora(model):
            candidates = extract_candidates(pods, self.s.port)
            name = str((model.get("spec") or {}).get("modelName") or "")
            outcome = self.client.run_all(
                [c.address for c in candidates],
                lambda a: self.client.unload(a, name),
                group=key[0],
            )
            for address, err in sorted(outcome.items()):
                self.metrics.lora_requests.labels(
                    "unload", "success" if err is None else "failure"
                ).inc()
                if err is not None:
                    # as the operator: reported, and the deletion goes on
                    log.warning(
                        "LoRA unload failed, deleting anyway",
                        extra={"object": "/".join(key), "address": address, "error": err},
                    )
            log.info(
                "LoRA unloaded",
                extra={
                    "object": "/".join(key),
                    "endpoints": len(outcome),
                    "failed": sum(1 for e in outcome.values() if e is not None),
                },
            )
        self._forget_gauges(key)
        self._set_finalizers(ctx, model, [f for f in finalizers if f != keys.FINALIZER])
        self.memory.forget_model(key)

    def _set_finalizers(self, ctx: Context, model: Obj, finalizers: list[str]) -> None:
        meta = o.meta(model)
        ctx.patch(
            DYNAMO_MODELS,
            {
                "metadata": {
                    "name": meta["name"],
                    "namespace": meta.get("namespace"),
                    # conditional: the list is replaced whole
                    "resourceVersion": meta.get("resourceVersion"),
                    "finalizers": finalizers,
                }
            },
        )

    # ------------------------------------------------------------------ metrics
    def _gauges(self, key: Key, status: Obj) -> None:
        ns, name = key
        self.metrics.model_endpoints.labels(ns, name, "total").set(status["totalEndpoints"])
        self.metrics.model_endpoints.labels(ns, name, "ready").set(status["readyEndpoints"])

    def _forget_gauges(self, key: Key) -> None:
        ns, name = key
        for state in ("total", "ready"):
            with contextlib.suppress(KeyError):
                self.metrics.model_endpoints.remove(ns, name, state)


__all__ = ["ModelMemory", "ModelReconciler", "base_hash", "fingerprint", "is_lora"]
