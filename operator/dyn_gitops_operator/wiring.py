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
from dyn_gitops_operator.errors import ApiError, ForbiddenError, NotFoundError
from dyn_gitops_operator.event_keys import Enqueuer, graph_of_adapter, graph_of_workload
from dyn_gitops_operator.informer import Informer, Store
from dyn_gitops_operator.kubeapi import KubeApi
from dyn_gitops_operator.metrics import Metrics
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
    #: watched only when their API is served (``watch_optional_apis``)
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


def served(kube: KubeApi, res: Resource, namespace: str | None) -> bool:
    """The API exists and we may list it (checked once, at start-up)."""
    try:
        kube.check_listable(res, namespace)
    except (NotFoundError, ForbiddenError) as exc:
        log.info("optional API not watched", extra={"resource": res.plural, "reason": str(exc)})
        return False
    except ApiError as exc:
        log.warning("optional API not watched", extra={"resource": res.plural, "reason": str(exc)})
        return False
    return True


def watch_optional_apis(
    kube: KubeApi, settings: OperatorSettings, metrics: Metrics, caches: Caches, enqueuer: Enqueuer
) -> None:
    """LeaderWorkerSets (multinode services), PodCliques and PodCliqueScalingGroups (the
    Grove path) are watched only when the API exists and we may list it, so a cluster
    without them never blocks start-up. Grove creates its objects without our labels for
    sure, so those kinds are watched whole (trimmed) and looked up by namespace/name."""
    ns = settings.watch_namespace
    if served(kube, LWS, ns):
        caches.lws = Informer(
            kube,
            LWS,
            namespace=ns,
            metrics=metrics,
            watch_timeout=settings.watch_timeout,
            label_selector=keys.LABEL_GRAPH_NAME,
            trim=o.trim_lws,
            store=Store({"graph": graph_of_workload}),
        )
        caches.lws.add_handler(enqueuer.on_workload)
        caches.informers.append(caches.lws)
    for res in (PODCLIQUES, PCSGS):
        if not served(kube, res, ns):
            continue
        inf = Informer(
            kube,
            res,
            namespace=ns,
            metrics=metrics,
            watch_timeout=settings.watch_timeout,
            trim=grove.trim,
        )
        inf.add_handler(enqueuer.on_grove)
        caches.informers.append(inf)
        if res is PODCLIQUES:
            caches.podcliques = inf
        else:
            caches.pcsgs = inf


__all__ = [
    "Caches",
    "api_client",
    "build_caches",
    "connect",
    "scope_exclusions",
    "served",
    "watch_optional_apis",
]
