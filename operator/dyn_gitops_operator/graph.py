"""A read-only snapshot of one graph: its DGD, its Deployments (or Grove objects) and its
scaling adapters.

Reconcilers never trust events: each reconcile builds a fresh snapshot from the caches.
The worker hash is recomputed from the live DGD spec with the renderer's own function,
so the controller agrees with ``dyn-gitops render`` on which worker generation is current.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field
from typing import Any

from dyn_gitops import keys, naming
from dyn_gitops.workerhash import compute
from dyn_gitops_operator import dgdview
from dyn_gitops_operator import objects as o
from dyn_gitops_operator.counts import Refusal, check
from dyn_gitops_operator.dgdview import Component, view
from dyn_gitops_operator.dgdview import RestartRequest as RestartRequest  # re-exported
from dyn_gitops_operator.grove import GroveChildren
from dyn_gitops_operator.resources import DEPLOYMENTS, DGDS, DGDSAS
from dyn_gitops_operator.settings import DEFAULT_MAX_REPLICAS

log = logging.getLogger(__name__)

Key = tuple[str, str]
Obj = dict[str, Any]


#: a component of the DGD (a v1alpha1 service): the reconcilers' name for it
Service = Component


@dataclass
class Graph:
    key: Key
    dgd: Obj | None
    services: dict[str, Service] = field(default_factory=dict)
    restart: RestartRequest | None = None
    #: current worker generation per the live DGD spec (None: no DGD or no workers)
    worker_hash: str | None = None
    deployments: list[Obj] = field(default_factory=list)
    #: service name -> its DynamoGraphDeploymentScalingAdapter
    adapters: dict[str, Obj] = field(default_factory=dict)
    #: LeaderWorkerSets of multinode services (managed ones are sized and rolled like
    #: managed worker Deployments)
    lws: list[Obj] = field(default_factory=list)
    #: rendered on the Grove path: its PodCliqueSet's children (no Deployments then)
    grove: GroveChildren | None = None
    #: the most replicas applied from a count read from Git (setting max-replicas)
    ceiling: int = DEFAULT_MAX_REPLICAS
    #: counts read this pass and not applied, by (object, field): the DGD status reports
    #: them, the controller loop logs them
    refused: dict[tuple[str, str], Refusal] = field(default_factory=dict)

    @property
    def namespace(self) -> str:
        return self.key[0]

    @property
    def name(self) -> str:
        return self.key[1]

    @property
    def status(self) -> Obj:
        return dict((self.dgd or {}).get("status") or {})

    def deployments_of(self, service: str) -> list[Obj]:
        return [d for d in self.deployments if o.component(d) == service]

    @property
    def workloads(self) -> list[Obj]:
        """Deployments and LeaderWorkerSets: a worker generation is either."""
        return [*self.deployments, *self.lws]

    def workloads_of(self, service: str) -> list[Obj]:
        return [w for w in self.workloads if o.component(w) == service]

    def rollout_annotations(self, service: str) -> dict[str, str]:
        """What the operator reads the rolling-update settings from, for a LeaderWorkerSet
        here (a Deployment carries them in its rendered strategy): see
        :attr:`Component.annotations`."""
        svc = self.services.get(service)
        return dict(svc.annotations) if svc is not None else {}

    def generations(self, service: str) -> tuple[Obj | None, list[Obj]]:
        """(current, older) worker generations of ``service``, Deployments or
        LeaderWorkerSets (older: oldest first)."""
        deps = sorted(
            (d for d in self.workloads_of(service) if o.worker_hash(d)),
            key=lambda d: (o.meta(d).get("creationTimestamp") or "", o.name(d)),
        )
        target = self.worker_hash
        if target is None and deps:
            target = o.worker_hash(deps[-1])  # no DGD to ask: the newest generation wins
        current = next((d for d in deps if o.worker_hash(d) == target), None)
        return current, [d for d in deps if d is not current]

    def current_lws(self, service: str) -> list[Obj]:
        """The LeaderWorkerSets of the service's current generation."""
        svc = self.services.get(service)
        return sorted(
            (
                w
                for w in self.lws
                if o.component(w) == service
                and (svc is None or not svc.worker or o.worker_hash(w) == self.worker_hash)
            ),
            key=o.name,
        )

    def current_workload(self, service: str) -> Obj | None:
        """The current generation's Deployment, or a multinode service's LeaderWorkerSet."""
        svc = self.services.get(service)
        if svc is not None and svc.multinode:
            return next(iter(self.current_lws(service)), None)
        return self.current_deployment(service)

    def current_deployment(self, service: str) -> Obj | None:
        svc = self.services.get(service)
        if svc is not None and svc.multinode:
            return None
        if svc is not None and svc.worker:
            return self.generations(service)[0]
        plain = [d for d in self.deployments_of(service) if not o.worker_hash(d)]
        wanted = naming.component_name(self.name, service, None)
        return next((d for d in plain if o.name(d) == wanted), plain[0] if plain else None)

    def count(self, kind: str, obj: Obj, where: str, value: Any) -> int | None:
        """``value``, a count read from Git at ``where`` on ``obj``, if it may be applied;
        else None, and the refusal is recorded (``refused``)."""
        checked = check(value, self.ceiling)
        if isinstance(checked, int):
            return checked
        reason, found = checked
        label = f"{kind} {o.meta(obj).get('namespace') or self.namespace}/{o.name(obj)}"
        self.refused[(label, where)] = Refusal(label, where, found, reason, self.ceiling)
        return None

    def _annotation_count(self, workload: Obj, key: str) -> int | None:
        kind = o.LWS_KIND if o.is_lws(workload) else DEPLOYMENTS.kind
        return self.count(kind, workload, f"annotation {key}", o.annotations_of(workload)[key])

    def adapter_replicas(self, service: str) -> int | None:
        """The service's scaling adapter's ``spec.replicas`` (None: no adapter, or refused)."""
        adapter = self.adapters.get(service)
        if adapter is None:
            return None
        value = (adapter.get("spec") or {}).get("replicas", 1)
        return self.count(DGDSAS.kind, adapter, "spec.replicas", value)

    def spec_replicas(self, service: str) -> int | None:
        """The DGD component's ``replicas`` (1 when unset; None: refused)."""
        svc = self.services.get(service)
        if svc is None or svc.replicas is None or self.dgd is None:
            return 1
        where = f"spec.components[{service}].replicas"
        return self.count(DGDS.kind, self.dgd, where, svc.replicas)

    def desired_replicas(
        self, service: str, current: Obj | None, *, applied: bool = True
    ) -> int | None:
        """Adapter value, else the rendered desired-replicas annotation, else the spec (a
        worker a Planner scales through the DGD: its replicas there, else Git's seed).
        None: that count is refused (``refused`` says why), the workloads keep theirs.
        ``applied`` False: the count is only compared against (Git sizes the workload), so
        a refusal is not reported."""
        if not applied:
            kept = dict(self.refused)
            try:
                return self.desired_replicas(service, current)
            finally:
                self.refused = kept
        if service in self.adapters:
            return self.adapter_replicas(service)
        svc = self.services.get(service)
        if current is not None:
            ann = o.annotations_of(current)
            if keys.ANN_DESIRED_REPLICAS in ann:
                return self._annotation_count(current, keys.ANN_DESIRED_REPLICAS)
            if keys.ANN_SEED_REPLICAS in ann and (svc is None or not svc.explicit_replicas):
                return self._annotation_count(current, keys.ANN_SEED_REPLICAS)
        return self.spec_replicas(service)

    def unseeded(self) -> dict[str, int]:
        """Workers a Planner scales through the DGD whose replicas the DGD lacks yet: the
        seed to write there (no adapter: the adapter is the Planner's target then)."""
        out: dict[str, int] = {}
        for service, svc in self.services.items():
            current = self.current_workload(service)
            if current is None or service in self.adapters or svc.explicit_replicas:
                continue
            if keys.ANN_SEED_REPLICAS not in o.annotations_of(current):
                continue
            seed = self._annotation_count(current, keys.ANN_SEED_REPLICAS)
            if seed is not None:
                out[service] = seed
        return out


class HashCache:
    """Worker hash per (uid, generation): parsing the spec is the costly part of a reconcile."""

    def __init__(self, size: int = 20000) -> None:
        self._lock = threading.Lock()
        self._items: dict[tuple[str, int], str | None] = {}
        self._size = size

    def get(self, dgd: Obj) -> str | None:
        stamped = o.annotations_of(dgd).get(keys.ANN_WORKER_HASH)
        if stamped:
            return stamped  # what the renderer used, whatever version it was
        meta = o.meta(dgd)
        key = (str(meta.get("uid")), int(meta.get("generation") or 0))
        with self._lock:
            if key in self._items:
                return self._items[key]
        value = compute_worker_hash(dgd)
        with self._lock:
            if len(self._items) >= self._size:
                self._items.clear()
            self._items[key] = value
        return value


def compute_worker_hash(dgd: Obj) -> str | None:
    """The operator's worker hash v2 of the live spec, as the renderer computes it (None: no
    workers, rendered on the Grove path, or unparseable)."""
    if o.annotations_of(dgd).get(keys.ANN_PODCLIQUESET):
        return None  # Grove: a PodCliqueSet, no hash-named worker generations
    try:
        graph = dgdview.hub_graph(dgd)
        if not any(naming.is_worker(c.type) for c in graph.components):
            return None
        return compute.worker_hash(graph)
    except (ValueError, TypeError, AttributeError, KeyError) as exc:
        log.warning(
            "cannot compute the worker hash, using the newest generation",
            extra={
                "object": f"{o.meta(dgd).get('namespace')}/{o.name(dgd)}",
                "error": str(exc).splitlines()[0] if str(exc) else type(exc).__name__,
            },
        )
        return None


def parse_services(dgd: Obj) -> dict[str, Service]:
    """The DGD's components by name, from either served version (:mod:`.dgdview`)."""
    return view(dgd).components


def parse_restart(dgd: Obj, services: dict[str, Service]) -> RestartRequest | None:
    """``spec.restart`` (the default order: every component, sorted by name)."""
    del services  # the view knows the components
    return view(dgd).restart
