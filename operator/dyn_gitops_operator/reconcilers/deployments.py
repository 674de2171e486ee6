"""The one writer of Deployments: applies the plan's intents, then deletes old generations.

Each apply carries every field the controller owns on that Deployment (see ``plan``) and
the resourceVersion the decision was based on, so a decision made from a stale cache
fails with 409 and is retried from fresh state instead of overwriting a newer object.
"""

from __future__ import annotations

import contextlib

from dyn_gitops import keys
from dyn_gitops_operator import objects as o
from dyn_gitops_operator.errors import NotFoundError
from dyn_gitops_operator.graph import Graph
from dyn_gitops_operator.kube import DEPLOYMENTS
from dyn_gitops_operator.plan import DeploymentIntent, Plan
from dyn_gitops_operator.reconcilers.base import Context, Obj


def apply_body(intent: DeploymentIntent) -> Obj:
    live = intent.live
    spec: Obj = {}
    if intent.replicas is not None:
        spec["replicas"] = intent.replicas
    if intent.restart_at is not None:
        spec["template"] = {"metadata": {"annotations": {keys.ANN_RESTART_AT: intent.restart_at}}}
    return {
        "apiVersion": DEPLOYMENTS.api_version, "kind": DEPLOYMENTS.kind,
        "metadata": {"name": o.name(live), "namespace": o.meta(live).get("namespace"),
                     "resourceVersion": o.meta(live).get("resourceVersion")},
        "spec": spec,
    }


class DeploymentWriter:
    name = "deployments"

    def reconcile(self, graph: Graph, plan: Plan, ctx: Context) -> None:
        deleting = {o.name(d) for d in plan.deletions}
        for dep_name, intent in sorted(plan.intents.items()):
            if dep_name in deleting or not intent.changed():
                continue
            if o.meta(intent.live).get("deletionTimestamp"):
                continue
            ctx.apply(DEPLOYMENTS, apply_body(intent))
        for dep in plan.deletions:
            with contextlib.suppress(NotFoundError):  # already gone: the goal is reached
                ctx.delete(DEPLOYMENTS, dep)
