"""``spec.restart``: stamp ``nvidia.com/restartAt: <id>`` on pod templates (runtime spec 3).

Parallel stamps every service at once; Sequential stamps the next service in ``order``
only when every earlier one is stamped *and* ready again. Progress is read back from the
live Deployments (which carry the stamp) rather than from the status we wrote, so a
restart of the controller or the API server resumes it without stamping anything twice.

On the Grove path the token goes where the Dynamo operator puts it: the clique annotations
of the PodCliqueSet (``spec.template.cliques[name].annotations``), each service's cliques
(``<svc>``, or ``<svc>-ldr`` and ``<svc>-wkr``), and Sequential waits for the PCS's
observedGeneration and the service's PodClique / PCSG readiness. The PCS is Git's: the
controller reads it with a GET only while a restart is under way, and writes it with a
server-side apply carrying nothing but those annotations (entries keyed by ``name``) and
the resourceVersion read. That is only safe when the CRD declares ``cliques`` a map list:
with an atomic list the apply would take over and replace the whole list. The live
managedFields tell (``grove.cliques_map_list``); otherwise the restart is reported as
``phase: Failed`` with a message, logged once per DGD generation, and the PCS is not
written.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from dyn_gitops import keys, naming
from dyn_gitops_operator import grove
from dyn_gitops_operator import objects as o
from dyn_gitops_operator.errors import ForbiddenError, NotFoundError
from dyn_gitops_operator.graph import Graph, RestartRequest
from dyn_gitops_operator.plan import Plan, Write
from dyn_gitops_operator.reconcilers.base import Context, Obj
from dyn_gitops_operator.resources import PODCLIQUESETS, PODS

log = logging.getLogger(__name__)

TERMINAL = ("Completed", "Failed", "Superseded")


#: while a Grove restart waits for Grove (the PCS is read, not watched)
GROVE_POLL = 2.0


def grove_unsupported(pcs: str) -> str:
    return (
        f"Restart failed: not supported by this PodCliqueSet CRD: the cliques list "
        f"of the PodCliqueSet {pcs} is not a map list keyed by name (an older Grove?), "
        "so applying nvidia.com/restartAt to its cliques would replace the whole list "
        "the GitOps tool owns; the controller does not write it"
    )


def written_at_create(dgd: Obj) -> bool:
    """The DGD's spec is the one it was created with (generation 1: status is a subresource,
    so only spec changes count)."""
    return int(o.meta(dgd).get("generation") or 0) == 1


def restarted(dep: Obj | None, restart_id: str) -> bool:
    """The Deployment runs pods of this restart: stamped and fully rolled."""
    return dep is not None and o.restart_at(dep) == restart_id and o.is_ready(dep)[0]


def lws_restarted(lws: Obj | None, restart_id: str, pods: list[Obj] | None) -> bool:
    """The LeaderWorkerSet runs groups of this restart. Its status has no
    observedGeneration, so right after the stamp it still reports the old groups ready;
    the pods tell: every group's leader and workers carry the stamp (the templates'
    annotations reach the pods) and are Ready. ``pods`` None (not listable): the status
    only, which a stale status can satisfy too early (docs/operator.md)."""
    if lws is None or o.restart_at(lws) != restart_id or not o.is_ready(lws)[0]:
        return False
    if pods is None:
        return True
    fresh = [
        p
        for p in pods
        if o.annotations_of(p).get(keys.ANN_RESTART_AT) == restart_id and o.pod_serving(p)
    ]
    return len(fresh) >= o.replicas(lws) * o.lws_size(lws)


def lws_pods(ctx: Context, lws: Obj) -> list[Obj] | None:
    """The set's pods (a GET-like list by the LeaderWorkerSet's own pod label)."""
    try:
        selector = f"{keys.LABEL_LWS_NAME}={o.name(lws)}"
        items, _ = ctx.kube.list(PODS, o.meta(lws).get("namespace"), label_selector=selector)
    except (ForbiddenError, NotFoundError):
        return None
    return items


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
        # a restart that is over (or gone from Git) still leaves our stamps on a Grove
        # PodCliqueSet; one in progress handles them in _grove (one write per pass)
        over = req is None or (prev.get("observedID") == req.id and prev.get("phase") in TERMINAL)
        if over and graph.grove is not None and prev:
            self._grove_release_stale(graph, plan, ctx)
        if req is None:
            plan.restart = prev if prev.get("phase") in TERMINAL else None
            return
        if prev.get("observedID") == req.id and prev.get("phase") in TERMINAL:
            plan.restart = prev
            return
        if not prev and written_at_create(graph.dgd):
            # an id the DGD was created with asks for nothing: Dynamo >= 1.3 refuses it at
            # create ("spec.restart must be unset on create", #10955), so a restart is only
            # ever a later change of the id; fresh pods are not restarted
            plan.restart = {"observedID": req.id, "phase": "Completed"}
            return
        if graph.grove is not None:
            self._grove(graph, req, plan, ctx)
            return
        rolling = (plan.rolling_update or {}).get("phase") in ("Pending", "InProgress")
        if rolling and not self._started(graph, req):
            # the rollout replaces the pods anyway (operator 1.2+ behaviour)
            plan.restart = {"observedID": req.id, "phase": "Superseded"}
            return

        def done(workload: Obj | None) -> bool:
            if workload is not None and o.is_lws(workload):
                if o.restart_at(workload) != req.id or not o.is_ready(workload)[0]:
                    return False  # no need to list its pods yet
                return lws_restarted(workload, req.id, lws_pods(ctx, workload))
            return restarted(workload, req.id)

        in_progress = (
            self._parallel(graph, req, plan, done)
            if req.strategy == "Parallel"
            else self._sequential(graph, req, plan, done)
        )
        if in_progress:
            plan.restart = {"observedID": req.id, "phase": "Restarting", "inProgress": in_progress}
        else:
            plan.restart = {"observedID": req.id, "phase": "Completed"}

    @staticmethod
    def _grove_release_stale(graph: Graph, plan: Plan, ctx: Context) -> None:
        """Drop our stamp from cliques whose service left the DGD. Otherwise we would keep
        owning that clique's ``name`` and annotation, the entry would outlive the GitOps
        tool's removal of the clique, and the real CRD (a clique needs its spec) would
        refuse the GitOps tool's next apply."""
        children = graph.grove
        assert children is not None
        try:
            pcs = ctx.kube.get(PODCLIQUESETS, graph.namespace, children.pcs)
        except NotFoundError:
            return
        owned = grove.owned_restart_cliques(pcs)
        known = {
            c for s, svc in graph.services.items() for c in naming.clique_names(s, svc.multinode)
        }
        if not owned - known:
            return
        live = grove.restart_values(pcs)
        keep = {c: v for c, v in live.items() if c in owned and c in known and v}
        plan.writes.append(Write(PODCLIQUESETS, grove.restart_apply(pcs, keep)))
        plan.requeue(0.0)

    def _grove(self, graph: Graph, req: RestartRequest, plan: Plan, ctx: Context) -> None:
        children = graph.grove
        assert children is not None
        try:
            pcs = ctx.kube.get(PODCLIQUESETS, graph.namespace, children.pcs)
        except NotFoundError:
            # not synced by the GitOps tool yet: nothing to stamp, look again later
            plan.restart = {"observedID": req.id, "phase": "Pending"}
            plan.requeue(GROVE_POLL)
            return
        if not grove.cliques_map_list(pcs):
            message = grove_unsupported(children.pcs)
            plan.restart = {"observedID": req.id, "phase": "Failed", "message": message}
            self._log_once(graph, req, message)
            return
        live = grove.restart_values(pcs)
        owned = grove.owned_restart_cliques(pcs)
        services = {
            s: [c for c in naming.clique_names(s, svc.multinode) if c in live]
            for s, svc in graph.services.items()
        }
        known = {c for cs in services.values() for c in cs}
        # what we keep (an apply drops the fields it leaves out), then the new stamps
        values = {c: v for c, v in live.items() if c in owned and c in known and v}
        observed = grove.pcs_observed(pcs)

        def stamped(service: str) -> bool:
            return all(live.get(c) == req.id for c in services[service])

        def done(service: str) -> bool:
            svc = graph.services[service]
            return (
                stamped(service)
                and observed
                and grove.readiness(children.component(service, svc.multinode))[0]
            )

        waiting: list[str] = []
        if req.strategy == "Parallel":
            for service in sorted(s for s in services if services[s]):
                values.update(dict.fromkeys(services[service], req.id))
                if not done(service):
                    waiting.append(service)
        else:
            # unknown names are rejected by the renderer; a service without cliques in the
            # PCS has nothing to restart. The last stamped service is the current one (the
            # earlier ones were ready when we moved on; a stamp bumps the PCS generation,
            # so they cannot be asked again); the next one only once it is ready again.
            order = [s for s in req.order if services.get(s)]
            current = max((i for i, s in enumerate(order) if stamped(s)), default=-1)
            if current < 0 or done(order[current]):
                current += 1
            if current < len(order):
                waiting = [order[current]]
            for service in order[: current + 1]:
                values.update(dict.fromkeys(services[service], req.id))
        if any(live.get(c) != v for c, v in values.items()):
            plan.writes.append(Write(PODCLIQUESETS, grove.restart_apply(pcs, values)))
            plan.wrote_deployments = True  # report after reading our write back
            plan.requeue(0.0)
        if waiting:
            plan.restart = {"observedID": req.id, "phase": "Restarting", "inProgress": waiting}
            plan.requeue(GROVE_POLL)  # the PCS's observedGeneration brings no event
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
        log.warning(
            "restart not supported on the Grove path: cliques is not a map list",
            extra={
                "object": f"{graph.namespace}/{graph.name}",
                "restart_id": req.id,
                "generation": key[1],
                "reason": message,
            },
        )

    @staticmethod
    def _started(graph: Graph, req: RestartRequest) -> bool:
        return any(o.restart_at(d) == req.id for d in graph.workloads)

    @staticmethod
    def _parallel(
        graph: Graph, req: RestartRequest, plan: Plan, done: Callable[[Obj | None], bool]
    ) -> list[str]:
        waiting = []
        for service in sorted(graph.services):
            workload = graph.current_workload(service)
            if workload is not None and o.restart_at(workload) != req.id:
                plan.set_restart(workload, req.id)
            if not done(workload):
                waiting.append(service)
        return waiting

    @staticmethod
    def _sequential(
        graph: Graph, req: RestartRequest, plan: Plan, done: Callable[[Obj | None], bool]
    ) -> list[str]:
        for service in req.order:
            if service not in graph.services:
                continue  # unknown names are rejected by the renderer: never wait on one
            workload = graph.current_workload(service)
            if workload is not None and o.restart_at(workload) != req.id:
                plan.set_restart(workload, req.id)
            if not done(workload):
                return [service]
        return []
