"""A replay of the Dynamo operator's worker rollout state machine (1.5, ``internal/controller/
dgd_worker_rollout_reconciler.go`` at 2a6da14c8), as a drop-in for the companion controller's
rollout reconciler, so a pain test can show it fails where ours passes; and
:class:`PrematureReadyStatus`, the status reconciler reporting Ready from every generation's
availability (ai-dynamo/dynamo#3567).

What is replayed (and nothing else; the surge/drain arithmetic is the same in both):

* the active generation is kept in the DGD's annotation ``nvidia.com/current-worker-hash-v2``
  (``setCurrentWorkerHashes``), written with a metadata update;
* no annotation (first deploy, or the annotation dropped by a replace): the desired hash is
  recorded as active at once (``initializeWorkerHashIfNeeded``: there is no legacy DCD
  without a hash label here);
* annotation == desired hash while ``status.rollingUpdate.phase`` is still InProgress (a Git
  revert to the active generation mid-rollout, or the re-initialised annotation after a
  replace): the "stuck rolling update" branch of ``reconcileRollingUpdate`` completes it,
  which deletes every other worker generation at once (``completeRollingUpdate`` ->
  ``deleteOldWorkerDCDs``), serving or not;
* otherwise a rollout is under way: surge and drain within the budget; once completed the
  annotation names the new hash.
"""

from __future__ import annotations

import contextlib

from dyn_gitops_operator import objects as o
from dyn_gitops_operator import readiness
from dyn_gitops_operator.errors import NotFoundError
from dyn_gitops_operator.graph import Graph
from dyn_gitops_operator.plan import Plan
from dyn_gitops_operator.reconcilers.apply import resource_of
from dyn_gitops_operator.reconcilers.base import Context, Obj, timestamp
from dyn_gitops_operator.reconcilers.rollout import ACTIVE_PHASES, RolloutReconciler
from dyn_gitops_operator.reconcilers.status import READY_REASON, StatusReconciler
from dyn_gitops_operator.resources import DGDS

from dyn_gitops import keys

CURRENT = keys.ANN_CURRENT_WORKER_HASH_V2


class OperatorRolloutReplay(RolloutReconciler):
    name = "rollout"

    def reconcile(self, graph: Graph, plan: Plan, ctx: Context) -> None:
        wanted = graph.worker_hash
        if graph.dgd is None or graph.grove is not None or wanted is None:
            super().reconcile(graph, plan, ctx)
            return
        # read, not cached: the controller's cache keeps only the annotations it uses
        live = ctx.kube.get(DGDS, graph.namespace, graph.name)
        current = o.annotations_of(live).get(CURRENT)
        prev = dict(graph.status.get("rollingUpdate") or {})
        if not current:
            self._record(graph, ctx, wanted)
            current = wanted
        if current != wanted:
            super().reconcile(graph, plan, ctx)
            if (plan.rolling_update or {}).get("phase") == "Completed":
                self._record(graph, ctx, wanted)
            return
        for service in self._worker_services(graph):
            now, older = graph.generations(service)
            desired = graph.desired_replicas(service, now) if now is not None else None
            if now is not None and o.is_managed(now) and desired is not None:
                plan.set_replicas(now, desired)
            if prev.get("phase") in ACTIVE_PHASES:
                for dep in older:  # deleteOldWorkerDCDs: a plain Delete, serving or not
                    if o.is_managed(dep):
                        with contextlib.suppress(NotFoundError):
                            ctx.kube.delete(resource_of(dep), graph.namespace, o.name(dep))
        if prev.get("phase") in ACTIVE_PHASES:
            plan.rolling_update = {**prev, "phase": "Completed", "endTime": timestamp(ctx.now())}
        else:
            plan.rolling_update = prev or None

    @staticmethod
    def budget(current: Obj, desired: int, annotations: dict[str, str]) -> o.Budget:
        return o.budget(current, desired, annotations)  # resolveRollingUpdateParams, as is

    @staticmethod
    def _record(graph: Graph, ctx: Context, value: str) -> None:
        ctx.kube.patch(
            DGDS, graph.namespace, graph.name, {"metadata": {"annotations": {CURRENT: value}}}
        )


class PrematureReadyStatus(StatusReconciler):
    """ai-dynamo/dynamo#3567 replayed: the DGD's Ready judged from the worker component's
    merged status (``mergeWorkerComponentStatuses``: every generation's available replicas
    summed) instead of the new generation's, so the old generation's pods make the graph
    ``successful`` for the new generation before any of its pods serves. Everything else
    is ours."""

    def reconcile(self, graph: Graph, plan: Plan, ctx: Context) -> None:
        rolling = plan.rollout_state is not None and plan.rollout_state[0] == "pending"
        if graph.dgd is not None and graph.grove is None and rolling and self._available(graph):
            plan.rollout_state = ("successful", READY_REASON, "All resources are ready")
        super().reconcile(graph, plan, ctx)

    @staticmethod
    def _available(graph: Graph) -> bool:
        comps = readiness.components(graph)
        for service, svc in graph.services.items():
            if not svc.worker:
                continue
            current, _ = graph.generations(service)
            want = graph.desired_replicas(service, current)
            have = int((comps.get(service) or {}).get("availableReplicas") or 0)
            if want is None or have < want:
                return False
        return True
