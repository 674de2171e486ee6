"""``spec.restart``: stamp ``nvidia.com/restartAt: <id>`` on pod templates (runtime spec 3).

Parallel stamps every service at once; Sequential stamps the next service in ``order``
only when every earlier one is stamped *and* ready again. Progress is read back from the
live Deployments (which carry the stamp) rather than from the status we wrote, so a
restart of the controller or the API server resumes it without stamping anything twice.

Not on the Grove path: the operator stamps the token into the PodCliqueSet's clique
annotations, but the PodCliqueSet belongs to the GitOps tool (and its free-form ``cliques``
list would be taken over whole by a server-side apply). The restart is reported as
``phase: Failed`` with a message instead, and logged once per DGD generation.
"""

from __future__ import annotations

import logging
import threading

from dyn_gitops_operator import objects as o
from dyn_gitops_operator.graph import Graph, RestartRequest
from dyn_gitops_operator.plan import Plan
from dyn_gitops_operator.reconcilers.base import Context, Obj

log = logging.getLogger(__name__)

TERMINAL = ("Completed", "Failed", "Superseded")


def grove_unsupported(pcs: str) -> str:
    return (f"Restart failed: not supported on the Grove path (the PodCliqueSet {pcs} "
            "belongs to the GitOps tool; the controller does not stamp "
            "nvidia.com/restartAt on its cliques)")


def restarted(dep: Obj | None, restart_id: str) -> bool:
    """The Deployment runs pods of this restart: stamped and fully rolled."""
    return dep is not None and o.restart_at(dep) == restart_id and o.is_ready(dep)[0]


class RestartReconciler:
    name = "restart"

    def __init__(self) -> None:
        self._lock = threading.Lock()
        #: (uid, generation) of Grove DGDs whose unsupported restart was logged
        self._logged: set[tuple[str, int]] = set()

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
        if graph.grove is not None:
            message = grove_unsupported(graph.grove.pcs)
            plan.restart = {"observedID": req.id, "phase": "Failed", "message": message}
            self._log_once(graph, req, message)
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

    def _log_once(self, graph: Graph, req: RestartRequest, message: str) -> None:
        meta = o.meta(graph.dgd or {})
        key = (str(meta.get("uid")), int(meta.get("generation") or 0))
        with self._lock:
            if key in self._logged:
                return
            if len(self._logged) >= 10000:
                self._logged.clear()
            self._logged.add(key)
        log.warning("restart not supported on the Grove path",
                    extra={"object": f"{graph.namespace}/{graph.name}", "restart_id": req.id,
                           "generation": key[1], "reason": message})

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
