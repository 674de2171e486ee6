"""Managed replicas and the managed rolling update of worker generations.

Worker Deployments and LeaderWorkerSets (multinode workers) rendered with
``dyn-gitops.io/managed-replicas: "true"`` carry no ``spec.replicas``: this reconciler
sizes them (a LeaderWorkerSet's replicas are its groups, natively scaled since #9612).
When the live DGD's worker hash names a new generation while older generations of the
same service still exist, it surges the new one
and drains the old ones within max-surge / max-unavailable (runtime spec 2.5), deletes the
old generations once they are drained and the new one is ready, and reports
``status.rollingUpdate``. A new generation the Deployment controller gave up on
(ProgressDeadlineExceeded, ReplicaFailure) freezes both sides: the old one keeps serving.

Nothing to roll on the Grove path: there are no worker generations, Grove rolls the pods
of its PodCliques itself (the operator does not run a managed rollout there either). A DGD
that moved there from the component path still has its managed worker Deployments (not
pruned by the GitOps tool): each is drained once its service's Grove workload is ready, and
deleted once drained, so both never run side by side for long and never both stop.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime

from dyn_gitops import keys
from dyn_gitops_operator import grove
from dyn_gitops_operator import objects as o
from dyn_gitops_operator.errors import ForbiddenError, NotFoundError
from dyn_gitops_operator.graph import Graph
from dyn_gitops_operator.plan import Plan
from dyn_gitops_operator.reconcilers.base import Context, Obj, timestamp
from dyn_gitops_operator.reconcilers.restart import GROVE_POLL
from dyn_gitops_operator.resources import PODCLIQUESETS, PODS
from dyn_gitops_operator.settings import LWS_PODS_POLL, UNNAMED_GENERATION_GRACE

ACTIVE_PHASES = ("Pending", "InProgress", "Failed")


@dataclass(frozen=True)
class Sizes:
    old: int
    new: int


def size(
    desired: int,
    budget: o.Budget,
    *,
    old_spec: int,
    old_available: int,
    new_spec: int,
    new_available: int,
) -> Sizes:
    """Targets for the old (summed) and new generation (the operator's 1.2+ arithmetic)."""
    min_available = desired - budget.max_unavailable
    new_unavailable = max(0, new_spec - new_available)
    max_scaled_down = max(0, old_spec + new_spec - min_available - new_unavailable)
    old_unhealthy = max(0, old_spec - old_available)
    surplus = max(0, old_available + new_available - min_available)
    old_target = max(0, old_spec - min(max_scaled_down, old_unhealthy + surplus))
    scale_up = max(0, desired + budget.max_surge - old_spec - new_spec)
    new_target = min(desired, new_spec + scale_up)
    return Sizes(old_target, new_target)


def keep_one_serving(budget: o.Budget, desired: int) -> o.Budget:
    """Never plan a moment with no serving worker (ai-dynamo/dynamo#13622): when
    max-unavailable would let every old replica go before a new one is available (e.g.
    ``desired 1, maxUnavailable 1, maxSurge 0``), one old replica stays and one new replica
    surges instead. ``Recreate`` asks for the gap and is left as it is."""
    if desired < 1 or desired - budget.max_unavailable >= 1:
        return budget
    return o.Budget(max(budget.max_surge, 1), desired - 1)


def distribute(olds: list[Obj], total: int) -> dict[str, int]:
    """Keep the newest old generations first; older ones go to zero first."""
    out: dict[str, int] = {}
    for dep in reversed(olds):
        keep = min(o.replicas(dep), total)
        out[o.name(dep)] = keep
        total -= keep
    return out


def ready_now(workloads: list[Obj], pods: list[Obj] | None) -> dict[str, int]:
    """Serving replicas of each generation right now. A Deployment's: its pods that are
    Ready (``pods``, listed this pass); its status lags behind its pods (a ReplicaSet's
    status is written after the pods change, and the Deployment's after that), so a
    generation just scaled down can still report the pods it lost. Without pods to count
    (no ``list`` on pods, or no pod of the service at all) and for a LeaderWorkerSet
    (ready groups): the status. Never more than the spec: a generation scaled down keeps its
    surplus pods Ready until its ReplicaSet acts (a few moments, longer under load), and
    counting them would let another generation's serving pod go below the floor."""
    out: dict[str, int] = {}
    for w in workloads:
        status_count = min(o.available(w), o.replicas(w))
        if pods is None or o.is_lws(w):
            out[o.name(w)] = status_count
            continue
        match = ((w.get("spec") or {}).get("selector") or {}).get("matchLabels") or {}
        serving = sum(
            1
            for p in pods
            if match and all(o.labels(p).get(k) == v for k, v in match.items()) and o.pod_serving(p)
        )
        out[o.name(w)] = min(serving, o.replicas(w))
    return out


def keep_floor(
    olds: list[Obj], targets: dict[str, int], ready: dict[str, int], floor: int
) -> dict[str, int]:
    """Level-triggered floor: scaling a generation down removes its not-ready pods first
    (the ReplicaSet controller's order), so going from ``ready`` to ``target`` loses
    ``ready - target`` serving pods; allow that only while the ready pods of all
    generations, counted now, stay at or above ``floor`` (oldest generation drained
    first). Below the floor already, no serving pod is removed at all."""
    allowance = max(0, sum(ready.values()) - floor)
    out = dict(targets)
    for dep in olds:
        name = o.name(dep)
        have = ready.get(name, 0)
        lost = max(0, have - out[name])
        let = min(lost, allowance)
        allowance -= let
        out[name] = max(out[name], have - let)
    return out


def grove_gate(graph: Graph, ctx: Context) -> tuple[str, str, str] | None:
    """Not ready while Grove has not processed the PodCliqueSet's current generation
    (ai-dynamo/dynamo#3567 on Grove): until then its PodCliques still describe the previous
    spec, fully ready and updated, and the operator reports the graph ready. A PCS whose
    status has no observedGeneration at all is left to the PodCliques' readiness."""
    assert graph.grove is not None
    try:
        pcs = ctx.kube.get(PODCLIQUESETS, graph.namespace, graph.grove.pcs)
    except NotFoundError:
        return None  # its PodCliques are missing too: not ready for that reason
    observed = (pcs.get("status") or {}).get("observedGeneration")
    generation = int(o.meta(pcs).get("generation") or 0)
    if observed is None or int(observed) >= generation:
        return None
    why = f"spec not yet processed: generation={generation}, observedGeneration={int(observed)}"
    pcs_name = graph.grove.pcs
    return ("pending", grove.UPDATING, f"Resources not ready: {pcs_name}: {pcs_name}: {why}")


def created(workload: Obj) -> datetime | None:
    raw = o.meta(workload).get("creationTimestamp")
    try:
        return datetime.fromisoformat(str(raw).replace("Z", "+00:00")) if raw else None
    except ValueError:
        return None


def unnamed_for(workload: Obj, current: Obj, now: datetime) -> float:
    """Seconds ``workload`` is still left alone as a generation the DGD does not name yet
    (0: it is an old generation). Such a generation was created after the current one and
    never sized by the controller: the GitOps tool applied it before the DGD naming it. A
    generation the controller sized was current once, so it is abandoned (a Git revert), and
    one the DGD never names within the grace is abandoned too."""
    if o.owns_replicas(workload):
        return 0.0
    born, base = created(workload), created(current)
    if born is None or base is None or born <= base:
        return 0.0
    return max(0.0, UNNAMED_GENERATION_GRACE - (now - born).total_seconds())


def drained(dep: Obj) -> bool:
    st = dep.get("status") or {}
    if o.is_lws(dep):  # no observedGeneration in a LeaderWorkerSet's status
        return o.replicas(dep) == 0 and int(st.get("replicas") or 0) == 0
    # status.replicas leaves terminating pods out; terminatingReplicas (Kubernetes 1.33+,
    # on by default since 1.35) counts them: Recreate starts nothing while an old pod runs
    return (
        o.replicas(dep) == 0
        and int(st.get("replicas") or 0) == 0
        and int(st.get("terminatingReplicas") or 0) == 0
        and int(st.get("observedGeneration") or 0) >= int(o.meta(dep).get("generation") or 0)
    )


@dataclass
class _Progress:
    waiting: list[str] = field(default_factory=list)
    rolling: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)


class RolloutReconciler:
    name = "rollout"

    def reconcile(self, graph: Graph, plan: Plan, ctx: Context) -> None:
        if graph.grove is not None:
            # keep a finished record; an active one (the DGD left the component path
            # mid-rollout) describes Deployments that are no longer the DGD's workload
            prev: Obj = dict(graph.status.get("rollingUpdate") or {})
            plan.rolling_update = None if prev.get("phase") in ACTIVE_PHASES else prev or None
            self._left_component_path(graph, plan)
            gate = grove_gate(graph, ctx)
            if gate is not None:
                plan.rollout_state = gate
                plan.requeue(GROVE_POLL)  # the PCS is read, not watched
            return
        progress = _Progress()
        for service in self._worker_services(graph):
            self._service(graph, service, plan, progress, ctx)
        for dep in self._orphans(graph):
            # a worker service removed from the DGD: Argo CD does not prune managed workers
            plan.set_replicas(dep, 0)
            progress.rolling.append(o.component(dep) or "")
            if drained(dep):
                plan.deletions.append(dep)
        if graph.dgd is not None:
            self._status(graph, plan, progress, ctx)

    # ------------------------------------------------------------------ per service
    def _service(
        self, graph: Graph, service: str, plan: Plan, progress: _Progress, ctx: Context
    ) -> None:
        now = ctx.now()
        current, older = graph.generations(service)
        olds = [d for d in older if o.is_managed(d)]
        if current is not None:
            waits = {o.name(d): unnamed_for(d, current, now) for d in olds}
            if any(waits.values()):
                plan.requeue(min(w for w in waits.values() if w))
            olds = [d for d in olds if not waits[o.name(d)]]
        if current is None:
            if olds:
                progress.waiting.append(service)  # the new generation is not applied yet
            return
        managed = o.is_managed(current)
        # not managed and nothing to drain: Git sizes it, the count is only compared against
        desired = graph.desired_replicas(service, current, applied=managed or bool(olds))
        if desired is None:
            # a count from Git refused (graph.refused, reported in the status): every
            # generation keeps its replicas until the object changes
            if olds:
                progress.rolling.append(service)
            return
        if not olds:
            if managed:
                plan.set_replicas(current, desired)
            if o.replicas(current) == desired and o.is_ready(current)[0]:
                progress.updated.append(service)
            return
        reason = o.failure(current)
        if reason is not None:
            progress.failed.append(f"{service}: {o.name(current)}: {reason}")
            return  # stop the drain; the old generation keeps serving
        progress.rolling.append(service)
        self._step(
            current,
            olds,
            desired,
            managed,
            plan,
            graph.rollout_annotations(service),
            lambda: self._pods(graph, service, ctx),
        )
        ready = o.replicas(current) == desired and o.is_ready(current)[0]
        if ready and sum(o.status_count(d, "readyReplicas") for d in olds) == 0:
            progress.updated.append(service)
        if ready and all(drained(d) for d in olds):
            plan.deletions.extend(olds)

    def _step(
        self,
        current: Obj,
        olds: list[Obj],
        desired: int,
        managed: bool,
        plan: Plan,
        annotations: dict[str, str],
        pods: Callable[[], list[Obj] | None],
    ) -> None:
        old_spec = sum(o.replicas(d) for d in olds)
        old_avail = sum(o.available(d) for d in olds)
        new_spec = o.replicas(current)
        new_avail = o.available(current)
        if o.is_recreate(current, annotations):
            # drain first, start the new generation only when nothing old runs any more
            targets = {o.name(d): 0 for d in olds}
            new_target = 0
            if all(drained(d) for d in olds):
                # a LeaderWorkerSet's status counts no terminating pods: its pods tell
                lws = {o.name(d) for d in olds if o.is_lws(d)}
                left = [
                    p
                    for p in (pods() if lws else None) or []
                    if o.labels(p).get(keys.LABEL_LWS_NAME) in lws
                ]
                new_target = 0 if left else desired
                if left:  # read, not watched: their going brings no event of the set's
                    plan.requeue(LWS_PODS_POLL)
        else:
            budget = self.budget(current, desired, annotations)
            sizes = size(
                desired,
                budget,
                old_spec=old_spec,
                old_available=old_avail,
                new_spec=new_spec,
                new_available=new_avail,
            )
            targets = distribute(olds, sizes.old)
            new_target = sizes.new
            if any(targets[o.name(d)] < o.replicas(d) for d in olds):
                ready = ready_now([current, *olds], pods())
                targets = keep_floor(olds, targets, ready, desired - budget.max_unavailable)
        for dep in olds:
            plan.set_replicas(dep, targets[o.name(dep)])
        if managed:
            plan.set_replicas(current, new_target)

    # ------------------------------------------------------------------ helpers
    @staticmethod
    def budget(current: Obj, desired: int, annotations: dict[str, str]) -> o.Budget:
        """Max surge / unavailable for this step (the operator's, never planning zero)."""
        return keep_one_serving(o.budget(current, desired, annotations), desired)

    @staticmethod
    def _pods(graph: Graph, service: str, ctx: Context) -> list[Obj] | None:
        """The service's pods (every generation), read from the API server: only while it
        rolls and only when a scale-down is planned. None: not readable, or none exists
        (the status is used then)."""
        selector = f"{keys.LABEL_COMPONENT}={service},{keys.LABEL_GRAPH_NAME}={graph.name}"
        try:
            items, _ = ctx.kube.list(PODS, graph.namespace, label_selector=selector)
        except (ForbiddenError, NotFoundError):
            return None
        return items or None

    @staticmethod
    def _worker_services(graph: Graph) -> list[str]:
        if graph.dgd is not None:
            return sorted(s.name for s in graph.services.values() if s.worker)
        return sorted(
            {c for d in graph.workloads if o.worker_hash(d) and (c := o.component(d)) is not None}
        )

    @staticmethod
    def _left_component_path(graph: Graph, plan: Plan) -> None:
        """Drain and delete managed worker Deployments (and LeaderWorkerSets) of a DGD now
        rendered for Grove."""
        assert graph.grove is not None
        for dep in graph.workloads:
            if not (o.worker_hash(dep) and o.is_managed(dep)):
                continue  # only what the controller sizes; the GitOps tool prunes the rest
            svc = graph.services.get(o.component(dep) or "")
            if svc is not None:
                ready, _ = grove.readiness(graph.grove.component(svc.name, svc.multinode))
                if not ready:
                    continue  # keep serving until Grove's pods are ready
            plan.set_replicas(dep, 0)
            if drained(dep):
                plan.deletions.append(dep)

    @staticmethod
    def _orphans(graph: Graph) -> list[Obj]:
        if graph.dgd is None:
            return []
        return [
            d
            for d in graph.workloads
            if o.worker_hash(d) and o.is_managed(d) and o.component(d) not in graph.services
        ]

    def _status(self, graph: Graph, plan: Plan, p: _Progress, ctx: Context) -> None:
        prev: Obj = dict(graph.status.get("rollingUpdate") or {})
        active = prev.get("phase") in ACTIVE_PHASES
        if p.failed or p.waiting or p.rolling:
            phase = "Failed" if p.failed else "Pending" if p.waiting else "InProgress"
            ru: Obj = {
                "phase": phase,
                "startTime": prev.get("startTime")
                if active and prev.get("startTime")
                else timestamp(ctx.now()),
            }
            if p.updated:
                ru["updatedServices"] = sorted(p.updated)
            plan.rolling_update = ru
            if p.failed:
                plan.rollout_state = (
                    "failed",
                    "rolling_update_failed",
                    "Rolling update failed: " + "; ".join(sorted(p.failed)),
                )
            else:
                plan.rollout_state = (
                    "pending",
                    "rolling_update_in_progress",
                    "Rolling update in progress",
                )
        elif active:
            plan.rolling_update = {
                "phase": "Completed",
                "startTime": prev.get("startTime"),
                "endTime": timestamp(ctx.now()),
                "updatedServices": sorted(s.name for s in graph.services.values() if s.worker),
            }
        else:
            plan.rolling_update = prev or None


__all__ = ["RolloutReconciler", "Sizes", "distribute", "keep_one_serving", "size"]
