"""DynamoGraphDeploymentScalingAdapter: publish the /scale status and size the workload.

HPA, KEDA and the Planner write ``spec.replicas`` of the adapter (through /scale); that is
the only source of replicas for its service. This reconciler publishes ``status.replicas``
and ``status.selector`` (runtime spec 5.3) and sets ``spec.replicas`` of the service's
Deployment (a multinode service's LeaderWorkerSet: its groups, natively scaled since
#9612). Managed workers are sized by the rollout reconciler instead, which reads the
adapter as the desired count.

On the Grove path there are no Deployments: the service's PodClique (or
PodCliqueScalingGroup) ``<pcs>-0-<svc>`` is scaled through its ``/scale`` subresource, to
the adapter's replicas, else to the DGD's explicit ``replicas``, as the operator's
``reconcileGroveScaling`` does (Grove seeds those replicas from the PodCliqueSet only at
creation, so a later change in Git reaches them only this way). The PodCliqueSet itself
is not scaled: Git owns it (only a restart writes its clique annotations, ``restart``).
Under Grove ``OnDelete`` the surge reconciler may ask one more pod of a PodClique for a
while (``plan.grove_replicas``); that value is written here in place of the adapter's.
"""

from __future__ import annotations

from dyn_gitops import keys
from dyn_gitops_operator import grove
from dyn_gitops_operator import objects as o
from dyn_gitops_operator.graph import Graph
from dyn_gitops_operator.plan import Plan, Write
from dyn_gitops_operator.reconcilers.base import Context, Obj, timestamp
from dyn_gitops_operator.resources import DGDS, DGDSAS


def selector(dgd_name: str, service: str) -> str:
    """Pods of every generation of the service, key-sorted as the operator writes it."""
    pairs = {keys.LABEL_COMPONENT: service, keys.LABEL_GRAPH_NAME: dgd_name}
    return ",".join(f"{k}={v}" for k, v in sorted(pairs.items()))


class ScalingAdapterReconciler:
    name = "scaling_adapter"

    def reconcile(self, graph: Graph, plan: Plan, ctx: Context) -> None:
        for service, adapter in sorted(graph.adapters.items()):
            wanted = graph.adapter_replicas(service)
            if wanted is None:
                continue  # refused (reported in the DGD status): status and workload stay
            self._publish(graph, service, adapter, wanted, plan, ctx)
            if graph.grove is not None:
                continue  # no Deployments on the Grove path: see _grove
            dep = graph.current_workload(service)  # a Deployment, or a LeaderWorkerSet
            if dep is not None and not o.is_managed(dep):
                plan.set_replicas(dep, wanted)
        if graph.grove is not None:
            self._grove(graph, graph.grove, plan)
        else:
            self._seed(graph, plan)

    @staticmethod
    def _seed(graph: Graph, plan: Plan) -> None:
        """Write Git's count into the DGD for the workers a Planner scales there, once: the
        emitted DGD leaves their ``replicas`` out (GitOps would take it back on every sync),
        the Planner reads it as the current count and owns it after its first patch. A
        merge patch carrying the whole components list, conditional on the resourceVersion
        read: an update claims only the fields it changes, and a list-map CRD or a free-form
        one both take it."""
        seeds = graph.unseeded()
        if not seeds or graph.dgd is None:
            return
        spec = graph.dgd.get("spec") or {}
        body_spec: Obj
        if isinstance(spec.get("components"), list):
            comps = [dict(c) for c in spec["components"]]
            for comp in comps:
                if comp.get("name") in seeds:
                    comp["replicas"] = seeds[str(comp["name"])]
            body_spec = {"components": comps}
        else:  # a v1alpha1 object read without conversion: the services map
            body_spec = {"services": {name: {"replicas": n} for name, n in sorted(seeds.items())}}
        meta = o.meta(graph.dgd)
        body = {
            "metadata": {
                "name": meta.get("name"),
                "namespace": graph.namespace,
                "resourceVersion": meta.get("resourceVersion"),
            },
            "spec": body_spec,
        }
        plan.writes.append(Write(DGDS, body, merge=True))

    @staticmethod
    def _grove(graph: Graph, children: grove.GroveChildren, plan: Plan) -> None:
        """Scale each PodClique / PCSG; a PodClique an OnDelete surge is replacing gets the
        surge's value (``grove_surge`` ran first)."""
        for service, svc in sorted(graph.services.items()):
            comp = children.component(service, svc.multinode)
            wanted: int | None
            if comp.name in plan.grove_replicas:
                wanted = plan.grove_replicas[comp.name]  # an OnDelete surge step
            elif service in graph.adapters:
                wanted = graph.adapter_replicas(service)
            elif svc.explicit_replicas:
                wanted = graph.spec_replicas(service)
            else:
                continue  # nothing asked for: the operator skips it too
            if wanted is None or comp.obj is None or grove.desired(comp.obj) == wanted:
                continue  # refused, not created by Grove yet (the operator skips it too), or done
            plan.writes.append(
                Write(
                    comp.resource, grove.scale_patch(comp, wanted), subresource="scale", merge=True
                )
            )
            # the watch event of the scaled object triggers the next pass
            plan.wrote_deployments = True

    def _publish(
        self, graph: Graph, service: str, adapter: Obj, wanted: int, plan: Plan, ctx: Context
    ) -> None:
        status = adapter.get("status") or {}
        sel = selector(graph.name, service)
        generation = o.meta(adapter).get("generation")
        if (
            status.get("replicas") == wanted
            and status.get("selector") == sel
            and status.get("observedGeneration") == generation
        ):
            return
        # observedGeneration is ours (the operator has none): the Argo CD health check
        # reads it to tell "not yet seen by the controller" from "scaled"
        new_status: Obj = {"replicas": wanted, "selector": sel, "observedGeneration": generation}
        last = status.get("lastScaleTime")
        new_status["lastScaleTime"] = (
            timestamp(ctx.now()) if status.get("replicas") != wanted or not last else last
        )
        plan.writes.append(
            Write(
                DGDSAS,
                {
                    "apiVersion": DGDSAS.api_version,
                    "kind": DGDSAS.kind,
                    "metadata": {
                        "name": o.name(adapter),
                        "namespace": graph.namespace,
                        "resourceVersion": o.meta(adapter).get("resourceVersion"),
                    },
                    "status": new_status,
                },
                subresource="status",
            )
        )
