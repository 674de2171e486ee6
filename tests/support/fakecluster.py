"""A fake cluster for the reconciler tests: the in-memory API server with the other actors'
clients (the GitOps tool, kube-controller-manager, Grove, an HPA) and the controller's own
caches and loop, driven by hand: no threads, no waiting. ``reconcile`` re-lists the caches
from the server and runs the reconciler chain once, as a worker would for one key.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

from dyn_gitops_operator import wiring
from dyn_gitops_operator.controller_loop import ControllerLoop
from dyn_gitops_operator.event_keys import Enqueuer
from dyn_gitops_operator.fakekube import FakeKube, KindRules
from dyn_gitops_operator.graph import Graph
from dyn_gitops_operator.metrics import Metrics
from dyn_gitops_operator.plan import Plan
from dyn_gitops_operator.reconcilers import Reconciler, default_chain
from dyn_gitops_operator.resources import (
    DEPLOYMENTS,
    DGDS,
    DGDSAS,
    PCSGS,
    PODCLIQUESETS,
    Resource,
)
from dyn_gitops_operator.settings import OperatorSettings
from dyn_gitops_operator.testing import (
    GITOPS_MANAGER,
    GROVE_MANAGER,
    HPA_MANAGER,
    KCM_MANAGER,
    KINDS,
    as_served,
    deployment_status,
    grove_children,
)
from dyn_gitops_operator.workqueue import WorkQueue

Obj = dict[str, Any]
#: what a GitOps tool applies of a rendered component-path graph
COMPONENT_KINDS = ("Deployment", "DynamoGraphDeployment", "DynamoGraphDeploymentScalingAdapter")
#: ... and of a Grove-path graph
GROVE_KINDS = ("DynamoGraphDeployment", "DynamoGraphDeploymentScalingAdapter", "PodCliqueSet")


class FakeCluster:
    def __init__(
        self,
        namespace: str = "ns",
        *,
        rules: Mapping[Resource, KindRules] | None = None,
        served: list[Resource] | None = None,
        chain: list[Reconciler] | None = None,
        max_replicas: int | None = None,
    ) -> None:
        self.ns = namespace
        self.kube = FakeKube(rules=rules, served=served)
        self.gitops = self.kube.as_manager(GITOPS_MANAGER)
        self.kcm = self.kube.as_manager(KCM_MANAGER)
        self.grove = self.kube.as_manager(GROVE_MANAGER)
        self.hpa = self.kube.as_manager(HPA_MANAGER)
        ceiling = {} if max_replicas is None else {"max_replicas": max_replicas}
        settings = OperatorSettings(
            mode="namespace", namespace=namespace, http_address="", **ceiling
        )
        self.metrics = Metrics()
        self.caches = wiring.build_caches(self.kube, settings, self.metrics)
        #: the keys the controller's event handlers asked for (``sync`` delivers events)
        self.enqueued: set[tuple[str, str]] = set()
        enqueuer = Enqueuer(self.enqueued.add, self.caches.dgds.store)
        wiring.connect(self.caches, enqueuer)
        wiring.watch_optional_apis(self.kube, settings, self.metrics, self.caches, enqueuer)
        self.loop = ControllerLoop(
            self.kube,
            self.caches,
            WorkQueue(),
            chain if chain is not None else default_chain(),
            self.metrics,
            acting=lambda: True,
            max_replicas=settings.max_replicas,
        )
        #: the controller's clock (status timestamps): moves only with ``advance``
        self.now = datetime(2025, 6, 1, tzinfo=UTC)
        self.loop.ctx.now = lambda: self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)

    # ------------------------------------------------------------------ the controller
    def sync(self) -> None:
        """The caches catch up with the server (as the watches would); the handlers see
        every change and enqueue keys."""
        for inf in self.caches.informers:
            inf.relist()

    def snapshot(self, dgd: str) -> Graph:
        self.sync()
        return self.loop.snapshot((self.ns, dgd))

    def plan(self, dgd: str, *reconcilers: Reconciler) -> Plan:
        """What ``reconcilers`` decide on a fresh snapshot (they write only what they write
        themselves; the apply step sends the Deployment intents)."""
        graph, plan = self.snapshot(dgd), Plan()
        for rec in reconcilers:
            rec.reconcile(graph, plan, self.loop.ctx)
        return plan

    def reconcile(self, dgd: str) -> float | None:
        """One pass of the chain, as a worker runs it; the requeue it asks for."""
        self.sync()
        return self.loop.reconcile((self.ns, dgd))

    def converge(self, dgd: str, limit: int = 10) -> int:
        """Passes until the graph is quiet: neither an immediate requeue nor an event of
        its own writes asks for another (timed requeues and resyncs are the test's to
        play); how many passes it took."""
        key = (self.ns, dgd)
        for n in range(1, limit + 1):
            self.sync()
            self.enqueued.discard(key)  # this pass sees what those events announced
            requeue = self.loop.reconcile(key)
            self.sync()
            if requeue != 0.0 and key not in self.enqueued:
                return n
        raise AssertionError(f"{dgd} still writing after {limit} passes")

    def writes(self) -> int:
        """The server's resourceVersion: unchanged means nobody wrote anything."""
        return self.kube.server.rv

    # ------------------------------------------------------------------ the GitOps tool
    def apply(self, objects: list[Obj], kinds: tuple[str, ...] = COMPONENT_KINDS) -> None:
        for obj in objects:
            if obj["kind"] in kinds:
                self.gitops.apply(KINDS[obj["kind"]], as_served(obj))

    # ------------------------------------------------------------------ reading
    def deployment(self, name: str) -> Obj:
        return self.kube.get(DEPLOYMENTS, self.ns, name)

    def deployments(self, component: str | None = None) -> dict[str, Obj]:
        sel = f"nvidia.com/dynamo-component={component}" if component else ""
        return {
            d["metadata"]["name"]: d
            for d in self.kube.list(DEPLOYMENTS, self.ns, label_selector=sel)[0]
        }

    def replicas(self, name: str) -> int:
        return int(self.deployment(name)["spec"]["replicas"])

    def dgd(self, name: str) -> Obj:
        return self.kube.get(DGDS, self.ns, name)

    def status(self, name: str) -> Obj:
        return dict(self.dgd(name).get("status") or {})

    def adapter(self, name: str) -> Obj:
        return self.kube.get(DGDSAS, self.ns, name)

    # ------------------------------------------------------------------ other actors
    def set_status(self, name: str, **kw: Any) -> Obj:
        """kube-controller-manager reports a Deployment (default: fully rolled out)."""
        dep = self.deployment(name)
        return self.kcm.update(
            DEPLOYMENTS, {**dep, "status": deployment_status(dep, **kw)}, subresource="status"
        )

    def kcm_step(self, policy: Callable[[Obj], Obj | None]) -> int:
        """Every Deployment gets ``policy(dep)`` as status (None: left alone); writes."""
        n = 0
        for dep in self.deployments().values():
            status = policy(dep)
            if status is not None and status != dep.get("status"):
                self.kcm.update(DEPLOYMENTS, {**dep, "status": status}, subresource="status")
                n += 1
        return n

    def hpa_scale(self, adapter: str, replicas: int) -> None:
        self.hpa.patch(
            DGDSAS, self.ns, adapter, {"spec": {"replicas": replicas}}, subresource="scale"
        )

    def grove_create(self, pcs: Obj) -> dict[str, Resource]:
        """What Grove creates for PCS replica 0 (``testing.grove_children``)."""
        out = {}
        for res, obj in grove_children(pcs):
            self.grove.create(res, obj)
            out[obj["metadata"]["name"]] = res
        return out

    def grove_status(
        self,
        res: Resource,
        name: str,
        *,
        observed: int | Literal["current"] | None = "current",
        **counts: int,
    ) -> Obj:
        """Grove's status of a PodClique / PCSG; as ``testing.grove_status``."""
        obj = self.grove.get(res, self.ns, name)
        want = int(obj["spec"].get("replicas") or 0)
        status: Obj = {
            "replicas": want,
            "updatedReplicas": want,
            "scheduledReplicas": want,
            "availableReplicas" if res is PCSGS else "readyReplicas": want,
        }
        status.update(counts)
        if observed == "current":
            status["observedGeneration"] = obj["metadata"]["generation"]
        elif observed is not None:
            status["observedGeneration"] = observed
        return self.grove.update(res, {**obj, "status": status}, subresource="status")

    def pcs_observed(self, name: str) -> None:
        """Grove has synced the PodCliqueSet: its status.observedGeneration."""
        obj = self.grove.get(PODCLIQUESETS, self.ns, name)
        self.grove.update(
            PODCLIQUESETS,
            {
                **obj,
                "status": {
                    **(obj.get("status") or {}),
                    "observedGeneration": obj["metadata"]["generation"],
                },
            },
            subresource="status",
        )
