"""Owner references: the DGD owns its managed worker Deployments.

Managed worker Deployments are rendered with Prune=false (Argo CD) / prune disabled (Flux):
the GitOps tool must not delete an old worker generation the controller is still draining.
So when a whole DGD is removed from Git, nothing would delete its workers. Once the DGD
exists in the cluster (its uid is known only there), this reconciler adds an ownerReference
to it on each managed worker Deployment; deleting the DGD then lets Kubernetes' garbage
collector delete them, as it deletes the operator's DCDs and Deployments. Not a controller
reference and no blockOwnerDeletion (that would need finalizer rights on DGDs). A DGD that
is not in the cluster (setting emit-source off) owns nothing.
"""

from __future__ import annotations

from dyn_gitops_operator import objects as o
from dyn_gitops_operator.graph import Graph
from dyn_gitops_operator.plan import Plan
from dyn_gitops_operator.reconcilers.base import Context
from dyn_gitops_operator.resources import DGDS


class OwnerReconciler:
    name = "owner"

    def reconcile(self, graph: Graph, plan: Plan, ctx: Context) -> None:
        dgd = graph.dgd
        if dgd is None or o.meta(dgd).get("deletionTimestamp"):
            return
        uid = o.meta(dgd).get("uid")
        if not uid:
            return
        ref = {"apiVersion": DGDS.api_version, "kind": DGDS.kind, "name": graph.name, "uid": uid}
        for dep in graph.deployments:
            if o.is_managed(dep) and not o.meta(dep).get("deletionTimestamp"):
                plan.intent(dep).owner = ref
