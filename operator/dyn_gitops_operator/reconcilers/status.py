"""DGD status: state, the Ready condition, per-service replicas, observedGeneration.

Aggregated from the live Deployments found by their labels (runtime spec 6), or on the
Grove path from the PodCliques / PodCliqueScalingGroups named after the services
(``grove``). The field names are the operator's, because the Planner, ``kubectl get dgd``
and the Argo CD health check read them. Written only when something changed.
"""

from __future__ import annotations

from dyn_gitops import naming
from dyn_gitops_operator import grove
from dyn_gitops_operator import objects as o
from dyn_gitops_operator.graph import Graph
from dyn_gitops_operator.plan import Plan
from dyn_gitops_operator.reconcilers.base import Context, Obj, timestamp
from dyn_gitops_operator.resources import DGDS

READY_REASON = "all_resources_are_ready"
NOT_READY_REASON = "some_resources_are_not_ready"
#: ours: a Deployment the Deployment controller gave up on (the operator has no such reason)
FAILED_REASON = "some_resources_failed"


def _lws_generations(graph: Graph, service: str) -> list[Obj]:
    """The service's LeaderWorkerSets: the current one, then (workers mid-rollout) the
    older generations still there."""
    sets = graph.current_lws(service)
    if graph.services[service].worker:
        sets += [w for w in graph.generations(service)[1] if o.is_lws(w)]
    return sets


def lws_status(graph: Graph, service: str) -> Obj | None:
    """The operator's ``getLeaderWorkerSetReplicasStatus`` (one natively scaled set per
    DCD since #9612), summed over the generations of a rollout."""
    sets = _lws_generations(graph, service)
    if not sets:
        return None
    out: Obj = {
        "componentKind": "LeaderWorkerSet",
        "componentNames": sorted(o.name(w) for w in sets),
    }
    for field in ("replicas", "readyReplicas", "updatedReplicas"):
        out[field] = sum(o.status_count(w, field) for w in sets)
    return out


def lws_readiness(graph: Graph, service: str, plan: Plan) -> list[str]:
    """Not-ready descriptions: the current LeaderWorkerSet with every group ready
    (``IsLeaderWorkerSetReady``); a generation sized in this very pass is not yet."""
    sets = graph.current_lws(service)
    if not sets:
        svc = graph.services[service]
        dcd = naming.component_name(graph.name, service, graph.worker_hash if svc.worker else None)
        return [f"{naming.leader_worker_set_name(dcd)}: LeaderWorkerSet not found"]
    out = []
    for lws in sets:
        ok, why = o.lws_ready(lws)
        intent = plan.intents.get(o.name(lws))
        if ok and intent is not None and intent.changed():
            ok, why = False, "spec change not yet observed"
        if not ok:
            out.append(f"{o.name(lws)}: {why}")
    return out


def grove_readiness(graph: Graph, children: grove.GroveChildren) -> list[str]:
    """The operator's one entry for the PodCliqueSet: ``<pcs>: <component>: <why>; ...``
    (components sorted by name; the operator iterates a Go map)."""
    reasons = []
    comps = sorted(
        (children.component(s, graph.services[s].multinode) for s in graph.services),
        key=lambda c: c.name,
    )
    for comp in comps:
        ok, why = grove.readiness(comp)
        if not ok:
            reasons.append(f"{comp.prefix}: {why}")
    return [f"{children.pcs}: " + "; ".join(reasons)] if reasons else []


def service_status(graph: Graph, service: str) -> Obj | None:
    svc = graph.services[service]
    if graph.grove is not None:
        return grove.service_status(graph.grove.component(service, svc.multinode))
    if svc.multinode:
        return lws_status(graph, service)
    current = graph.current_deployment(service)
    deps = [current] if current is not None else []
    if svc.worker:
        deps += graph.generations(service)[1]
    if not deps:
        return None
    out: Obj = {"componentKind": "Deployment", "componentNames": sorted(o.name(d) for d in deps)}
    if current is not None:
        out["componentName"] = o.name(current)
    for field in ("replicas", "readyReplicas", "availableReplicas"):
        out[field] = sum(o.status_count(d, field) for d in deps)
    # during a rollout only the new generation counts as updated (runtime spec 2.7)
    out["updatedReplicas"] = o.status_count(current, "updatedReplicas") if current else 0
    return out


def readiness(graph: Graph, plan: Plan) -> tuple[list[str], list[str]]:
    """(not ready, failed) resource descriptions, sorted by name."""
    if graph.grove is not None:
        return grove_readiness(graph, graph.grove), []
    not_ready: list[str] = []
    failed: list[str] = []
    for service in sorted(graph.services):
        if graph.services[service].multinode:
            not_ready.extend(lws_readiness(graph, service, plan))
            continue
        dep = graph.current_deployment(service)
        if dep is None:
            svc = graph.services[service]
            wanted = naming.component_name(
                graph.name, service, graph.worker_hash if svc.worker else None
            )
            not_ready.append(f"{wanted}: Deployment not found")
            continue
        reason = o.failure(dep)
        if reason is not None:
            failed.append(f"{o.name(dep)}: {reason}")
            continue
        ok, why = o.is_ready(dep)
        intent = plan.intents.get(o.name(dep))
        if ok and intent is not None and intent.changed():
            ok, why = False, "spec change not yet observed"  # written in this very pass
        if not ok:
            not_ready.append(f"{o.name(dep)}: {why}")
    return sorted(not_ready), sorted(failed)


def ready_condition(graph: Graph, plan: Plan) -> tuple[str, Obj]:
    not_ready, failed = readiness(graph, plan)
    if plan.rollout_state is not None:
        state, reason, message = plan.rollout_state
    elif failed:
        state, reason, message = (
            "failed",
            FAILED_REASON,
            "Resources failed: " + "; ".join(failed + not_ready),
        )
    elif not_ready:
        state, reason = "pending", NOT_READY_REASON
        message = "Resources not ready: " + "; ".join(not_ready)
    else:
        state, reason, message = "successful", READY_REASON, "All resources are ready"
    return state, {
        "type": "Ready",
        "status": "True" if state == "successful" else "False",
        "reason": reason,
        "message": message,
    }


def desired_status(graph: Graph, plan: Plan, ctx: Context) -> Obj:
    prev = graph.status
    state, cond = ready_condition(graph, plan)
    generation = o.meta(graph.dgd or {}).get("generation")
    cond["observedGeneration"] = generation
    old: Obj = next((c for c in prev.get("conditions") or [] if c.get("type") == "Ready"), {})
    same = old.get("status") == cond["status"] and old.get("lastTransitionTime")
    cond["lastTransitionTime"] = old["lastTransitionTime"] if same else timestamp(ctx.now())
    services = {
        s: st for s in sorted(graph.services) if (st := service_status(graph, s)) is not None
    }
    status: Obj = {
        "state": state,
        "conditions": [cond],
        "services": services,
        "observedGeneration": generation,
    }
    if plan.rolling_update:
        status["rollingUpdate"] = {k: v for k, v in plan.rolling_update.items() if v is not None}
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
        ctx.apply(
            DGDS,
            {
                "apiVersion": DGDS.api_version,
                "kind": DGDS.kind,
                "metadata": {
                    "name": graph.name,
                    "namespace": graph.namespace,
                    "resourceVersion": o.meta(graph.dgd).get("resourceVersion"),
                },
                "status": status,
            },
            subresource="status",
        )
