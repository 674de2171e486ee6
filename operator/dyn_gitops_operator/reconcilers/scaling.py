"""DynamoGraphDeploymentScalingAdapter: publish the /scale status and size the workload.

HPA, KEDA and the Planner write ``spec.replicas`` of the adapter (through /scale); that is
the only source of replicas for its service. This reconciler publishes ``status.replicas``
and ``status.selector`` (runtime spec 5.3) and sets ``spec.replicas`` of the service's
Deployment. Managed worker Deployments are sized by the rollout reconciler instead, which
reads the adapter as the desired count.
"""

from __future__ import annotations

from dyn_gitops import keys
from dyn_gitops_operator import objects as o
from dyn_gitops_operator.graph import Graph
from dyn_gitops_operator.kube import DGDSAS
from dyn_gitops_operator.plan import Plan, Write
from dyn_gitops_operator.reconcilers.base import Context, Obj, timestamp


def selector(dgd_name: str, service: str) -> str:
    """Pods of every generation of the service, key-sorted as the operator writes it."""
    pairs = {keys.LABEL_COMPONENT: service, keys.LABEL_GRAPH_NAME: dgd_name}
    return ",".join(f"{k}={v}" for k, v in sorted(pairs.items()))


class ScalingAdapterReconciler:
    name = "scaling_adapter"

    def reconcile(self, graph: Graph, plan: Plan, ctx: Context) -> None:
        for service, adapter in sorted(graph.adapters.items()):
            wanted = int((adapter.get("spec") or {}).get("replicas", 1))
            self._publish(graph, service, adapter, wanted, plan, ctx)
            dep = graph.current_deployment(service)
            if dep is not None and not o.is_managed(dep):
                plan.set_replicas(dep, wanted)

    def _publish(self, graph: Graph, service: str, adapter: Obj, wanted: int, plan: Plan,
                 ctx: Context) -> None:
        status = adapter.get("status") or {}
        sel = selector(graph.name, service)
        generation = o.meta(adapter).get("generation")
        if (status.get("replicas") == wanted and status.get("selector") == sel
                and status.get("observedGeneration") == generation):
            return
        # observedGeneration is ours (the operator has none): the Argo CD health check
        # reads it to tell "not yet seen by the controller" from "scaled"
        new_status: Obj = {"replicas": wanted, "selector": sel,
                           "observedGeneration": generation}
        last = status.get("lastScaleTime")
        new_status["lastScaleTime"] = (timestamp(ctx.now()) if status.get("replicas") != wanted
                                       or not last else last)
        plan.writes.append(Write(DGDSAS, {
            "apiVersion": DGDSAS.api_version, "kind": DGDSAS.kind,
            "metadata": {"name": o.name(adapter), "namespace": graph.namespace,
                         "resourceVersion": o.meta(adapter).get("resourceVersion")},
            "status": new_status,
        }, subresource="status"))
