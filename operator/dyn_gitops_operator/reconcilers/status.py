"""DGD status as the 1.5 operator reports it (v1beta1 ``DynamoGraphDeploymentStatus``,
api/v1beta1/dynamographdeployment_types.go @ 2a6da14c8): ``state``, the ``Ready``
condition with the fine-grained reasons of 1.4+, ``components`` (per-component replica
status, :mod:`..readiness`), ``restart``, ``rollingUpdate`` and ``observedGeneration``.

The state machine is ``applyReconcileResult`` / ``readyCondition``
(internal/controller/dgd_workload_program.go @ 2a6da14c8): a rolling update in progress
reports ``pending`` with reason ``rolling_update_in_progress`` whatever the workloads say;
otherwise the workloads' verdict. Ready is True only for the generation this pass read:
``observedGeneration`` (of the status and of the condition) is the DGD generation the
snapshot holds, the write is conditional on its resourceVersion, and a workload that has
not observed its own spec (or was just written) is not ready. The field names are the
operator's: the Planner, ``kubectl get dgd`` and the Argo CD / Flux health checks read
them. Written only when something changed. Ours: a replica count from Git the controller
refused (:mod:`..counts`) makes the graph ``failed`` with reason ``ReplicasAboveCeiling``
or ``InvalidReplicas``; a pass stopped by a terminal API answer sets the condition
``Stalled`` (:mod:`...terminal`), which the next pass that gets here removes.
"""

from __future__ import annotations

from dyn_gitops_operator import counts, grove, readiness
from dyn_gitops_operator import objects as o
from dyn_gitops_operator.graph import Graph
from dyn_gitops_operator.plan import Plan
from dyn_gitops_operator.reconcilers.base import Context, Obj, timestamp
from dyn_gitops_operator.resources import DGDS

READY_REASON = grove.ALL_READY
NOT_READY_REASON = grove.NOT_READY
FAILED_REASON = readiness.FAILED_REASON
ROLLING_UPDATE_REASON = "rolling_update_in_progress"
#: ours: set by a pass stopped by a terminal API answer (``terminal``), True while it lasts
STALLED = "Stalled"


def without_stalled(conditions: list[Obj]) -> list[Obj]:
    """The conditions but ``Stalled``: a pass that reaches the status succeeded."""
    return [c for c in conditions if c.get("type") != STALLED]


def ready_condition(graph: Graph, plan: Plan) -> tuple[str, Obj]:
    v = readiness.verdict(graph, plan)
    if graph.refused:
        # a count from Git the controller will not apply: failed until Git changes it
        # (Argo CD Degraded, Flux Failed), whatever the workloads still serve
        state = "failed"
        reason, message = counts.condition(graph.refused.values())
    elif plan.rollout_state is not None:
        state, reason, message = plan.rollout_state
    elif v.failed:
        message = "Resources failed: " + "; ".join(v.failed + v.not_ready)
        state, reason = "failed", v.reason
    elif v.not_ready:
        state, reason = "pending", v.reason
        message = "Resources not ready: " + "; ".join(v.not_ready)
    else:
        state, reason, message = "successful", READY_REASON, "All resources are ready"
    return state, {
        "type": "Ready",
        "status": "True" if state == "successful" else "False",
        "reason": reason,
        "message": message,
    }


def rolling_update_status(plan: Plan) -> Obj | None:
    """``RollingUpdateStatus``: phase, startTime, endTime, updatedComponents."""
    if not plan.rolling_update:
        return None
    out = {k: v for k, v in plan.rolling_update.items() if v is not None}
    if "updatedServices" in out:  # the rollout reconciler's name for it
        out["updatedComponents"] = out.pop("updatedServices")
    return out


def desired_status(graph: Graph, plan: Plan, ctx: Context) -> Obj:
    prev = graph.status
    state, cond = ready_condition(graph, plan)
    generation = o.meta(graph.dgd or {}).get("generation")
    cond["observedGeneration"] = generation
    old: Obj = next((c for c in prev.get("conditions") or [] if c.get("type") == "Ready"), {})
    same = old.get("status") == cond["status"] and old.get("lastTransitionTime")
    cond["lastTransitionTime"] = old["lastTransitionTime"] if same else timestamp(ctx.now())
    # other controllers' conditions (listType=map by type) are kept; ``Stalled`` cleared
    others = [c for c in without_stalled(prev.get("conditions") or []) if c.get("type") != "Ready"]
    status: Obj = {
        "state": state,
        "conditions": [cond, *others],
        "components": readiness.components(graph),
        "observedGeneration": generation,
    }
    rolling = rolling_update_status(plan)
    if rolling:
        status["rollingUpdate"] = rolling
    if plan.restart:
        status["restart"] = plan.restart
    return status


def _comparable(status: Obj) -> Obj:
    """Status minus the fields that may legitimately differ without a real change."""
    out = dict(status)
    out["conditions"] = [
        {k: v for k, v in c.items() if k != "lastTransitionTime"}
        for c in status.get("conditions") or []
    ]
    return out


def write_status(graph: Graph, status: Obj, ctx: Context) -> None:
    """Apply ``status`` as the DGD's whole status, conditional on the resourceVersion read
    (server-side apply drops what its manager stops sending)."""
    ctx.apply(
        DGDS,
        {
            "apiVersion": DGDS.api_version,
            "kind": DGDS.kind,
            "metadata": {
                "name": graph.name,
                "namespace": graph.namespace,
                "resourceVersion": o.meta(graph.dgd or {}).get("resourceVersion"),
            },
            "status": status,
        },
        subresource="status",
    )


class StatusReconciler:
    name = "status"

    def reconcile(self, graph: Graph, plan: Plan, ctx: Context) -> None:
        if graph.dgd is None:
            return
        if plan.wrote_deployments:
            return  # the immediate next pass reports on what we just changed
        status = desired_status(graph, plan, ctx)
        if _comparable(status) == _comparable(graph.status):
            return
        write_status(graph, status, ctx)
