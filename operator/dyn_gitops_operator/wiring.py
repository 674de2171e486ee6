"""Builds the controller's parts from its settings: the API client, the informers with the
indexes that snapshots and event mapping read, and the cluster-mode scope exclusions.

Nothing here runs; ``lifecycle`` starts and stops what is built here.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field

from dyn_gitops import keys
from dyn_gitops_operator import grove
from dyn_gitops_operator import objects as o
from dyn_gitops_operator.event_keys import Enqueuer, graph_of_adapter, graph_of_workload
from dyn_gitops_operator.informer import Informer, Store
from dyn_gitops_operator.kubeapi import KubeApi
from dyn_gitops_operator.metrics import Metrics
from dyn_gitops_operator.optional import ApiState, probe
from dyn_gitops_operator.resources import (
    DEPLOYMENTS,
    DGDS,
    DGDSAS,
    LEASES,
    LWS,
    PCSGS,
    PODCLIQUES,
    Resource,
)
from dyn_gitops_operator.scope import ScopeExclusions
from dyn_gitops_operator.settings import SCOPE_LEASE_NAME, OperatorSettings

log = logging.getLogger(__name__)


def api_client(settings: OperatorSettings) -> KubeApi:
    """The real client (imported here: ``kubernetes`` is slow to import and a fake needs
    none of it)."""
    from dyn_gitops_operator.kube import Kube, make_api_client

    # one long-lived connection per watch, one per worker and per parallel write
    # (a full pool makes urllib3 open and drop a TLS connection per request)
    pool = 3 * settings.workers + 16
    return Kube(make_api_client(settings.kubeconfig, pool), settings.request_timeout)


@dataclass
class Caches:
    """The informers whose stores every snapshot reads."""

    deployments: Informer
    dgds: Informer
    adapters: Informer
    #: every informer to start, wait for and stop (optional and lease informers included)
    informers: list[Informer] = field(default_factory=list)
    #: watched only when their API is served (``OPTIONAL_WORKLOADS``)
    lws: Informer | None = None
    podcliques: Informer | None = None
    pcsgs: Informer | None = None


def build_caches(kube: KubeApi, settings: OperatorSettings, metrics: Metrics) -> Caches:
    """The Deployment, DGD and adapter informers (no handlers yet: ``connect``)."""
    ns = settings.watch_namespace
    timeout = settings.watch_timeout
    deployments = Informer(
        kube,
        DEPLOYMENTS,
        namespace=ns,
        metrics=metrics,
        watch_timeout=timeout,
        label_selector=keys.LABEL_GRAPH_NAME,
        trim=o.trim_deployment,
        store=Store({"graph": graph_of_workload}),
    )
    # index: the Grove objects (by namespace/name) a Grove DGD's services map to
    dgds = Informer(
        kube,
        DGDS,
        namespace=ns,
        metrics=metrics,
        watch_timeout=timeout,
        trim=o.trim_custom,
        store=Store({"grove": grove.child_keys}),
    )
    adapters = Informer(
        kube,
        DGDSAS,
        namespace=ns,
        metrics=metrics,
        watch_timeout=timeout,
        trim=o.trim_custom,
        store=Store({"graph": graph_of_adapter}),
    )
    return Caches(deployments, dgds, adapters, informers=[deployments, dgds, adapters])


def connect(caches: Caches, enqueuer: Enqueuer) -> None:
    caches.dgds.add_handler(enqueuer.on_dgd)
    caches.deployments.add_handler(enqueuer.on_workload)
    caches.adapters.add_handler(enqueuer.on_adapter)


def scope_exclusions(
    kube: KubeApi,
    settings: OperatorSettings,
    metrics: Metrics,
    caches: Caches,
    resume: Callable[[str], None],
) -> ScopeExclusions | None:
    """Cluster mode: skip namespaces whose scope lease someone else holds (the lease
    informer joins ``caches.informers``); ``resume(namespace)`` once a lease lapses."""
    if not (settings.scope.enabled and settings.mode == "cluster"):
        return None
    leases = Informer(
        kube,
        LEASES,
        namespace=settings.watch_namespace,
        metrics=metrics,
        watch_timeout=settings.watch_timeout,
        field_selector=f"metadata.name={SCOPE_LEASE_NAME}",
        trim=o.trim_lease,
    )
    exclusions = ScopeExclusions(leases.store, metrics, settings.identity, resume)
    leases.add_handler(exclusions.on_event)
    caches.informers.append(leases)
    return exclusions


#: watched only when served (``optional.OptionalApis`` finds out, for the process lifetime);
#: DynamoModels are the model loop's (``Manager``)
OPTIONAL_WORKLOADS = (LWS, PODCLIQUES, PCSGS)


def optional_informer(
    kube: KubeApi, settings: OperatorSettings, metrics: Metrics, res: Resource
) -> Informer:
    """The informer of an optional workload API, without its handler (``attach``).
    LeaderWorkerSets (multinode services) carry our graph label; Grove creates PodCliques
    and PodCliqueScalingGroups without our labels for sure, so those kinds are watched whole
    (trimmed) and looked up by namespace/name."""
    ns = settings.watch_namespace
    if res is LWS:
        return Informer(
            kube,
            LWS,
            namespace=ns,
            metrics=metrics,
            watch_timeout=settings.watch_timeout,
            label_selector=keys.LABEL_GRAPH_NAME,
            trim=o.trim_lws,
            store=Store({"graph": graph_of_workload}),
        )
    return Informer(
        kube,
        res,
        namespace=ns,
        metrics=metrics,
        watch_timeout=settings.watch_timeout,
        trim=grove.trim,
    )


def attach(caches: Caches, enqueuer: Enqueuer, res: Resource, inf: Informer) -> None:
    """Snapshots read ``inf`` from now on and its events enqueue graphs (``inf`` is in
    ``caches.informers`` already)."""
    if res is LWS:
        caches.lws = inf
        inf.add_handler(enqueuer.on_workload)
        return
    if res is PODCLIQUES:
        caches.podcliques = inf
    else:
        caches.pcsgs = inf
    inf.add_handler(enqueuer.on_grove)


def watch_optional_apis(
    kube: KubeApi, settings: OperatorSettings, metrics: Metrics, caches: Caches, enqueuer: Enqueuer
) -> None:
    """One check of each optional workload API, watching those served: a one-shot wiring
    (the unit tests' fake cluster); the Manager re-checks them (``optional.OptionalApis``)."""
    for res in OPTIONAL_WORKLOADS:
        if probe(kube, res, settings.watch_namespace)[0] is ApiState.SERVED:
            inf = optional_informer(kube, settings, metrics, res)
            caches.informers.append(inf)
            attach(caches, enqueuer, res, inf)


__all__ = [
    "OPTIONAL_WORKLOADS",
    "Caches",
    "api_client",
    "attach",
    "build_caches",
    "connect",
    "optional_informer",
    "scope_exclusions",
    "watch_optional_apis",
]
