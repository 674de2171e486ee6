"""What the DGD status reports about the graph's workloads: per-component replica status
(``status.components``, ``ComponentReplicaStatus`` of api/v1beta1/common.go @ 2a6da14c8)
and the not-ready / failed resources with the Ready reason they imply.

Component path: one entry per Deployment (a multinode component: its LeaderWorkerSet),
old worker generations merged in during a rollout as ``mergeWorkerComponentStatuses``
does (internal/controller/dgd_worker_rollout_reconciler.go @ 2a6da14c8): names sorted,
replicas / ready / available summed, only the new generation counted as updated, and the
old generation's runtime namespace kept until the cutover. Its Ready reason is the
generic ``some_resources_are_not_ready`` (``checkResourcesReadiness``,
internal/controller/dgd_workload_result.go): the fine-grained reasons are Grove's.

Grove path: one entry per PodClique / PodCliqueScalingGroup, and the reason its
components agree on (``evaluateGroveComponents``, internal/dynamo/grove.go @ 2a6da14c8).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from dyn_gitops import keys, naming
from dyn_gitops_operator import grove
from dyn_gitops_operator import objects as o
from dyn_gitops_operator.graph import Graph
from dyn_gitops_operator.plan import Plan
from dyn_gitops_operator.resources import Obj

#: ours: a Deployment the Deployment controller gave up on (the operator has no such reason)
FAILED_REASON = "some_resources_failed"


@dataclass
class Verdict:
    """Not-ready and failed resource descriptions (``<name>: <why>``, sorted by name) and
    the Ready reason they imply."""

    not_ready: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    reason: str = grove.ALL_READY

    @property
    def ready(self) -> bool:
        return not self.not_ready and not self.failed


def runtime_namespace(workload: Obj | None, worker: bool) -> str | None:
    """``ComponentRuntimeNamespace`` (internal/dynamo/v1beta1_helpers.go @ 2a6da14c8): the
    Dynamo namespace, with ``-<worker hash>`` for a worker generation."""
    labels = o.meta(workload or {}).get("labels") or {}
    ns = labels.get(keys.LABEL_DYNAMO_NAMESPACE)
    if not ns:
        return None
    hash_ = labels.get(keys.LABEL_WORKER_HASH) if worker else None
    return f"{ns}-{hash_}" if hash_ else str(ns)


def _lws_sets(graph: Graph, service: str) -> list[Obj]:
    """The component's LeaderWorkerSets: the current one, then (workers mid-rollout) the
    older generations still there."""
    sets = graph.current_lws(service)
    if graph.services[service].worker:
        sets += [w for w in graph.generations(service)[1] if o.is_lws(w)]
    return sets


def _replica_status(kind: str, current: Obj | None, olds: list[Obj], worker: bool) -> Obj:
    every = ([current] if current is not None else []) + olds
    out: Obj = {"componentKind": kind, "componentNames": sorted(o.name(w) for w in every)}
    # routing stays on the old generation's namespace until the cutover
    ns = runtime_namespace(olds[0] if olds else current, worker)
    if ns:
        out["runtimeNamespace"] = ns
    out["replicas"] = sum(o.status_count(w, "replicas") for w in every)
    out["updatedReplicas"] = o.status_count(current, "updatedReplicas") if current else 0
    out["readyReplicas"] = sum(o.status_count(w, "readyReplicas") for w in every)
    if kind == "Deployment":
        out["availableReplicas"] = sum(o.status_count(w, "availableReplicas") for w in every)
    return out


def component_status(graph: Graph, service: str) -> Obj | None:
    """``status.components[service]`` (None: nothing of it exists yet)."""
    svc = graph.services[service]
    if graph.grove is not None:
        return grove.component_status(graph.grove.component(service, svc.multinode))
    if svc.multinode:
        sets = _lws_sets(graph, service)
        if not sets:
            return None
        current = next(iter(graph.current_lws(service)), None)
        return _replica_status(
            "LeaderWorkerSet", current, [w for w in sets if w is not current], svc.worker
        )
    current = graph.current_deployment(service)
    olds = graph.generations(service)[1] if svc.worker else []
    if current is None and not olds:
        return None
    return _replica_status("Deployment", current, olds, svc.worker)


def components(graph: Graph) -> dict[str, Obj]:
    return {s: st for s in sorted(graph.services) if (st := component_status(graph, s)) is not None}


def _missing(graph: Graph, service: str, kind: str) -> str:
    svc = graph.services[service]
    dcd = naming.component_name(graph.name, service, graph.worker_hash if svc.worker else None)
    name = naming.leader_worker_set_name(dcd) if kind == "LeaderWorkerSet" else dcd
    return f"{name}: {kind} not found"


def _unsynced(graph: Graph, workload: Obj) -> str | None:
    """The workload was rendered from another commit than the DGD (both stamped by the
    renderer): Git's change has not fully reached the cluster, so the DGD's generation is
    not served yet whatever the workload's own status says."""
    want = o.annotations_of(graph.dgd or {}).get(keys.ANN_SOURCE_COMMIT)
    have = o.annotations_of(workload).get(keys.ANN_SOURCE_COMMIT)
    if want and have and want != have:
        return f"rendered from commit {have[:12]}, the DGD from {want[:12]}"
    return None


def _workload_verdict(graph: Graph, workload: Obj, plan: Plan, out: Verdict) -> None:
    name = o.name(workload)
    reason = o.failure(workload)
    if reason is not None:
        out.failed.append(f"{name}: {reason}")
        return
    ok, why = o.is_ready(workload)
    intent = plan.intents.get(name)
    if ok and intent is not None and intent.changed():
        ok, why = False, "spec change not yet observed"  # written in this very pass
    if ok and (stale := _unsynced(graph, workload)) is not None:
        ok, why = False, stale
    if not ok:
        out.not_ready.append(f"{name}: {why}")


def _grove_verdict(graph: Graph, children: grove.GroveChildren) -> Verdict:
    """The operator's one entry for the PodCliqueSet: ``<pcs>: <component>: <why>; ...``
    in spec order, and the reason the not-ready components agree on."""
    whys, reasons = [], []
    for service, svc in graph.services.items():
        r = grove.classify(children.component(service, svc.multinode))
        if not r.ready:
            whys.append(f"{service}: {r.why}")
            reasons.append(r.reason)
    if not whys:
        return Verdict()
    return Verdict(
        not_ready=[f"{children.pcs}: " + "; ".join(whys)], reason=grove.aggregate(reasons)
    )


def verdict(graph: Graph, plan: Plan) -> Verdict:
    """The graph's readiness: every component's current workload ready, at its observed
    generation, rendered from the DGD's commit."""
    if graph.grove is not None:
        return _grove_verdict(graph, graph.grove)
    out = Verdict()
    for service in sorted(graph.services):
        svc = graph.services[service]
        if svc.multinode:
            sets = graph.current_lws(service)
            if not sets:
                out.not_ready.append(_missing(graph, service, "LeaderWorkerSet"))
            for lws in sets:
                _workload_verdict(graph, lws, plan, out)
            continue
        dep = graph.current_deployment(service)
        if dep is None:
            out.not_ready.append(_missing(graph, service, "Deployment"))
            continue
        _workload_verdict(graph, dep, plan, out)
    out.not_ready.sort()
    out.failed.sort()
    if out.failed:
        out.reason = FAILED_REASON
    elif out.not_ready:
        out.reason = grove.NOT_READY
    return out
