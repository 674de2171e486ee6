"""Grove ``OnDelete``: replace a PodClique's pods with a surge, never below its count.

Under Grove's default ``RollingRecreate`` a one-replica PodClique loses its only pod before
the new one exists (ai-dynamo/dynamo#13622 on Grove). A DGD whose PodCliqueSet is rendered
with ``updateStrategy: OnDelete`` (the DGD's ``nvidia.com/grove-update-strategy``, or the
render setting grove-safe-rollout; the emitted DGD says which in
``dyn-gitops.io/grove-update-strategy``, :func:`grove.on_delete`) has a PodCliqueSet on
which Grove replaces no pod on a template change (GREP-291): it creates new pods from the
current template on
scale-out and removes not-ready, then older-template pods first on scale-in. This
reconciler drives the replacement of every standalone PodClique of such a graph one pod at a
time through ``/scale`` (:func:`grove.surge_target`): one more pod, wait until the
new-template pods are Ready, back to the clique's own count. Every decision is read from the
cluster on each pass (the PodClique, its pods' ``grove.io/pod-template-hash`` labels, the
DGD and its adapter); nothing is remembered between passes.

It only decides the PodClique's replicas (``plan.grove_replicas``); the scaling reconciler
writes them, so one writer owns ``/scale``. PodCliqueScalingGroups (multinode services) are
not replaced: a PCSG scale-in removes the highest replica index, not an outdated one.
"""

from __future__ import annotations

import logging

from dyn_gitops import keys
from dyn_gitops_operator import grove
from dyn_gitops_operator import objects as o
from dyn_gitops_operator.errors import ForbiddenError, NotFoundError
from dyn_gitops_operator.graph import Graph
from dyn_gitops_operator.plan import Plan
from dyn_gitops_operator.reconcilers.base import Context, Obj
from dyn_gitops_operator.resources import PODCLIQUES, PODS
from dyn_gitops_operator.settings import GROVE_SURGE_POLL

log = logging.getLogger(__name__)


class GroveSurgeReconciler:
    name = "grove_surge"

    def reconcile(self, graph: Graph, plan: Plan, ctx: Context) -> None:
        children = graph.grove
        if children is None or not grove.on_delete(graph.dgd):
            return
        for service, svc in sorted(graph.services.items()):
            if svc.multinode:
                continue
            comp = children.component(service, False)
            if comp.resource is not PODCLIQUES or comp.obj is None:
                continue
            if service in graph.adapters:
                base = graph.adapter_replicas(service)
            else:
                base = graph.spec_replicas(service)
            if base is None:
                continue  # refused (reported in the DGD status): nothing is scaled
            target = self._target(graph, comp.obj, base, ctx)
            if target is None:
                continue
            plan.grove_replicas[comp.name] = target
            if target != base or grove.desired(comp.obj) != base:
                plan.requeue(GROVE_SURGE_POLL)  # pods are not watched: look again

    @staticmethod
    def _target(graph: Graph, obj: Obj, base: int, ctx: Context) -> int | None:
        """The clique's replicas for this step (None: not this reconciler's to decide)."""
        spec = grove.desired(obj)
        if not grove.observed(obj):
            # Grove has not acted on the last /scale yet: keep a surge in place
            return spec if spec == base + 1 else None
        st = obj.get("status") or {}
        rolling = int(st.get("updatedReplicas") or 0) < int(st.get("replicas") or 0)
        if not rolling and spec == base:
            return None  # nothing outdated, nothing surged: no pod read
        want_hash = grove.expected_hash(obj)
        if want_hash is None:
            return None
        selector = f"{keys.LABEL_GROVE_PODCLIQUE}={o.name(obj)}"
        try:
            pods, _ = ctx.kube.list(PODS, graph.namespace, label_selector=selector)
        except (ForbiddenError, NotFoundError) as exc:
            log.warning(
                "cannot read a PodClique's pods: its OnDelete replacement waits",
                extra={"object": f"{graph.namespace}/{o.name(obj)}", "error": str(exc)},
            )
            return spec if spec == base + 1 else None
        return grove.surge_target(base, spec, grove.CliquePods.of(pods, want_hash))


__all__ = ["GroveSurgeReconciler"]
