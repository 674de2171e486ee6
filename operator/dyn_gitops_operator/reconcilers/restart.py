"""``spec.restart``: stamp ``nvidia.com/restartAt: <id>`` on pod templates (runtime spec 3).

Parallel stamps every service at once; Sequential stamps the next service in ``order``
only when every earlier one is stamped *and* ready again. Progress is read back from the
live Deployments (which carry the stamp) rather than from the status we wrote, so a
restart of the controller or the API server resumes it without stamping anything twice.
"""

from __future__ import annotations

from dyn_gitops_operator import objects as o
from dyn_gitops_operator.graph import Graph, RestartRequest
from dyn_gitops_operator.plan import Plan
from dyn_gitops_operator.reconcilers.base import Context, Obj

TERMINAL = ("Completed", "Failed", "Superseded")


def restarted(dep: Obj | None, restart_id: str) -> bool:
    """The Deployment runs pods of this restart: stamped and fully rolled."""
    return dep is not None and o.restart_at(dep) == restart_id and o.is_ready(dep)[0]


class RestartReconciler:
    name = "restart"

    def reconcile(self, graph: Graph, plan: Plan, ctx: Context) -> None:
        if graph.dgd is None:
            return
        prev: Obj = dict(graph.status.get("restart") or {})
        req = graph.restart
        if req is None:
            plan.restart = prev if prev.get("phase") in TERMINAL else None
            return
        if prev.get("observedID") == req.id and prev.get("phase") in TERMINAL:
            plan.restart = prev
            return
        rolling = (plan.rolling_update or {}).get("phase") in ("Pending", "InProgress")
        if rolling and not self._started(graph, req):
            # the rollout replaces the pods anyway (operator 1.2+ behaviour)
            plan.restart = {"observedID": req.id, "phase": "Superseded"}
            return
        in_progress = (self._parallel(graph, req, plan) if req.strategy == "Parallel"
                       else self._sequential(graph, req, plan))
        if in_progress:
            plan.restart = {"observedID": req.id, "phase": "Restarting",
                            "inProgress": in_progress}
        else:
            plan.restart = {"observedID": req.id, "phase": "Completed"}

    @staticmethod
    def _started(graph: Graph, req: RestartRequest) -> bool:
        return any(o.restart_at(d) == req.id for d in graph.deployments)

    @staticmethod
    def _parallel(graph: Graph, req: RestartRequest, plan: Plan) -> list[str]:
        waiting = []
        for service in sorted(graph.services):
            if graph.services[service].multinode:
                continue  # LeaderWorkerSets are not restarted by this controller (docs)
            dep = graph.current_deployment(service)
            if dep is not None and o.restart_at(dep) != req.id:
                plan.set_restart(dep, req.id)
            if not restarted(dep, req.id):
                waiting.append(service)
        return waiting

    @staticmethod
    def _sequential(graph: Graph, req: RestartRequest, plan: Plan) -> list[str]:
        for service in req.order:
            if service not in graph.services or graph.services[service].multinode:
                # unknown names are rejected by the renderer; LeaderWorkerSets are not
                # restarted by this controller (docs/operator.md): never wait on either
                continue
            dep = graph.current_deployment(service)
            if dep is not None and o.restart_at(dep) != req.id:
                plan.set_restart(dep, req.id)
            if not restarted(dep, req.id):
                return [service]
        return []
