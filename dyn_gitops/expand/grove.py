"""The Grove path (``spec/dynamo-objects.md`` 7, ``dynamo-pod-spec.md`` 6.2 and 7): one
PodCliqueSet per DGD instead of DCDs. A single-node service is one clique; a multinode
service is a leader clique and a worker clique in a PodCliqueScalingGroup, which Grove
replicates ``replicas`` times. The DGD controller itself creates the Services and
Ingresses that the DCD controller would create on the component path.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .. import coexistence, keys, naming
from .. import kvtransfer as topology
from ..models import v1beta1
from ..settings import RenderSettings, go_duration
from . import components, defaults, multinode
from .context import ComponentContext
from .objects import meta
from .podspec import build_pod_spec, discovery_labels, multinode_role_pod

Obj = dict[str, Any]

GROVE_API = "grove.io/v1alpha1"
STARTUP_ANY_ORDER = "CliqueStartupTypeAnyOrder"
STARTUP_EXPLICIT = "CliqueStartupTypeExplicit"
KAI_SCHEDULER = "kai-scheduler"
DEFAULT_KAI_QUEUE = "dynamo"
VOLCANO_SCHEDULER = "volcano"


@dataclass
class ServiceCliques:
    """What one service contributes to the PodCliqueSet template."""

    cliques: list[Obj] = field(default_factory=list)
    scaling_group: Obj | None = None
    explicit_startup: bool = False  # some clique waits for others (startsAfter)


def is_grove(graph: components.Graph, settings: RenderSettings) -> bool:
    """Grove is on and the DGD does not opt out (``nvidia.com/enable-grove: "false"``)."""
    return settings.grove and graph.annotations.get(keys.ANN_ENABLE_GROVE, "").lower() != "false"


def kai_queue(graph: components.Graph) -> str:
    queue = graph.annotations.get(keys.ANN_KAI_QUEUE, "").strip()
    return queue or DEFAULT_KAI_QUEUE


def pcs_name(graph: components.Graph) -> str:
    """The PodCliqueSet's name (``PCSNameForDGD``, :func:`.naming.pcs_name`): each
    component's share of Grove's combined name budget."""
    budgets = [
        naming.grove_clique_budget(
            c.name, components.node_count(c) > 1, components.force_scaling_group(c)
        )
        for c in graph.components.components
    ]
    return naming.pcs_name(graph.name, budgets)


def clique_labels(ctx: ComponentContext, graph: components.Graph) -> dict[str, str]:
    """``generateLabels`` (``internal/dynamo/graph.go`` @ 2a6da14c8): the system labels,
    the user's (DGD ``spec.labels``, a v1alpha1 service's own, the pod template's) over
    them, then every system label re-applied so a user cannot override it."""
    labels = _system_labels(ctx, graph)
    # Grove reads the DGD's own annotation here, not the component's
    if graph.annotations.get(keys.ANN_ENABLE_METRICS) != "false":
        labels[keys.LABEL_METRICS_ENABLED] = "true"
    labels.update(component_resource_labels(ctx, graph))
    labels.update(_system_labels(ctx, graph))
    # the worker generation of a worker clique (#12769): the pod template's label, which
    # the Grove renderer sets on worker components (dgd_grove_workload_renderer.go)
    whash = _pod_template_labels(ctx).get(keys.LABEL_WORKER_HASH)
    if whash:
        labels[keys.LABEL_WORKER_HASH] = whash
    if ctx.k8s_discovery:
        labels.update(discovery_labels())
    if ctx.settings.kai_scheduler:
        labels[keys.LABEL_KAI_QUEUE] = kai_queue(graph)
    return dict(sorted(labels.items()))


def _system_labels(ctx: ComponentContext, graph: components.Graph) -> dict[str, str]:
    comp = ctx.component
    labels = {
        keys.LABEL_SELECTOR: naming.base_name(ctx.dgd_name, ctx.service),
        keys.LABEL_GRAPH_NAME: ctx.dgd_name,
        keys.LABEL_COMPONENT: ctx.service,
    }
    if ctx.component_type:
        labels[keys.LABEL_COMPONENT_TYPE] = ctx.component_type
    if graph.components.has_type(naming.EPP) and naming.is_worker(ctx.component_type):
        labels[keys.LABEL_COMPONENT_CLASS] = naming.COMPONENT_CLASS_WORKER
    sub_type = components.sub_component_type(comp, ctx.preserved)
    if sub_type:
        labels[keys.LABEL_SUB_COMPONENT_TYPE] = sub_type
    labels[keys.LABEL_DYNAMO_NAMESPACE] = ctx.dynamo_ns
    if comp.modelRef is not None:
        labels[keys.LABEL_BASE_MODEL_HASH] = naming.model_hash(comp.modelRef.name)
    return labels


def _pod_template_labels(ctx: ComponentContext) -> dict[str, str]:
    """The component's pod template labels as the Grove renderer leaves them: the user's,
    and on a worker the worker hash (``applyGroveWorkerHashSuffix``)."""
    epm = _pod_metadata(ctx)
    labels = dict(epm.labels or {}) if epm else {}
    if ctx.worker_hash and naming.is_worker(ctx.component_type):
        labels[keys.LABEL_WORKER_HASH] = ctx.worker_hash
    return labels


def component_resource_labels(ctx: ComponentContext, graph: components.Graph) -> dict[str, str]:
    """``GetDGDComponentResourceLabels`` (``graph.go`` @ 2a6da14c8): DGD ``spec.labels``,
    a v1alpha1 service's own labels, then the pod template's (with the worker hash)."""
    return {**(graph.spec.labels or {}), **ctx.preserved.labels, **_pod_template_labels(ctx)}


def component_resource_annotations(
    ctx: ComponentContext, graph: components.Graph
) -> dict[str, str]:
    """``GetDGDComponentResourceAnnotations``: the same three sources, annotations."""
    epm = _pod_metadata(ctx)
    return {
        **(graph.spec.annotations or {}),
        **ctx.preserved.annotations,
        **((epm.annotations or {}) if epm else {}),
    }


def clique_annotations(ctx: ComponentContext) -> dict[str, str]:
    out = dict(ctx.annotations)
    epm = _pod_metadata(ctx)
    if epm and epm.annotations:
        out.update(epm.annotations)
    out.pop(keys.ANN_RESTART_AT, None)  # restarts belong to the controller
    out = topology.source_annotations(out, ctx.kv_transfer, ctx.component_type)
    return dict(sorted(out.items()))


def _grove_topology(topology_name: str, domain: str | None) -> Obj | None:
    """Grove's alpha.11 constraint (#11405, ``groveTopologyConstraint`` in grove.go @
    2a6da14c8): the ClusterTopologyBinding's name, if any, and the required pack domain."""
    if not domain:
        return None
    out: Obj = {"topologyName": topology_name} if topology_name else {}
    out["pack"] = {"required": domain}
    return out


def _topology_name(tc: Any) -> str:
    """The deployment's ClusterTopology: v1beta1 ``clusterTopologyName`` (a v1alpha1
    ``topologyProfile`` converts into it; the model also takes it as written)."""
    return str(tc.topologyProfile or tc.clusterTopologyName or "") if tc is not None else ""


def _pcs_topology(graph: components.Graph) -> Obj | None:
    tc = graph.spec.topologyConstraint
    return None if tc is None else _grove_topology(_topology_name(tc), tc.packDomain)


def _pod_metadata(ctx: ComponentContext) -> v1beta1.PodTemplateMeta | None:
    """The component's ``podTemplate.metadata`` (a v1alpha1 ``extraPodMetadata``)."""
    tpl = ctx.component.podTemplate
    return tpl.metadata if tpl is not None else None


def _component_topology(comp: v1beta1.Component, graph: components.Graph) -> Obj | None:
    """A component's constraint inherits the topology name from a constrained PodCliqueSet;
    with no deployment pack domain there is no parent constraint, so it names the topology
    itself (``toGroveTopologyConstraint``)."""
    tc = comp.topologyConstraint
    if tc is None or not tc.packDomain:
        return None
    deployment = graph.spec.topologyConstraint
    inherited = deployment is not None and bool(deployment.packDomain)
    name = "" if deployment is None or inherited else _topology_name(deployment)
    return _grove_topology(name, tc.packDomain)


def _clique(
    name: str,
    labels: dict[str, str],
    annotations: dict[str, str],
    replicas: int,
    min_available: int,
    pod: Obj,
    topology: Obj | None,
) -> Obj:
    clique: Obj = {"name": name, "labels": labels}
    if annotations:
        clique["annotations"] = annotations
    if topology is not None:
        clique["topologyConstraint"] = topology
    clique["spec"] = {
        "roleName": name,
        "replicas": replicas,
        "minAvailable": min_available,
        "podSpec": _as_go_encodes(pod),
    }
    return clique


def _as_go_encodes(pod: Obj) -> Obj:
    """The pod spec as the operator's Go client writes it into the PodCliqueSet: a
    container's ``resources`` is a struct, encoded even when empty (``resources: {}``, the
    dgd/grove golden output @ 2a6da14c8). A Deployment gets the same from the API server."""
    out = dict(pod)
    for key in ("initContainers", "containers"):
        if key in out:
            out[key] = [{**c, "resources": c.get("resources") or {}} for c in out[key]]
    return out


def _with_scheduler(pod: Obj, ctx: ComponentContext) -> Obj:
    """Kai or Volcano (#8225, ``injectVolcanoSchedulerIfEnabled``): the cliques use its
    scheduler unless the user chose another one."""
    for enabled, scheduler in (
        (ctx.settings.kai_scheduler, KAI_SCHEDULER),
        (ctx.settings.volcano_scheduler, VOLCANO_SCHEDULER),
    ):
        if enabled and pod.get("schedulerName") in (None, "", scheduler):
            pod = {**pod, "schedulerName": scheduler}
    return pod


def service_cliques(ctx: ComponentContext, graph: components.Graph) -> ServiceCliques:
    comp = ctx.component
    labels = clique_labels(ctx, graph)
    annotations = clique_annotations(ctx)
    if components.node_count(comp) <= 1:
        return _single_node_cliques(ctx, graph, labels, annotations, build_pod_spec(ctx))
    single = build_pod_spec(ctx, memory_service=False)  # GMS: per role, last
    return _multinode_cliques(ctx, graph, labels, annotations, single)


def _single_node_cliques(
    ctx: ComponentContext, graph: components.Graph, labels: Obj, annotations: Obj, pod: Obj
) -> ServiceCliques:
    """One clique; with a forced scaling group, of one pod, the group carrying the scale."""
    comp = ctx.component
    lsvc = ctx.service.lower()
    replicas = 1 if comp.replicas is None else comp.replicas
    min_available = comp.minAvailable if comp.minAvailable is not None else 1
    pod = _with_scheduler(pod, ctx)
    topology = _component_topology(comp, graph)
    if components.force_scaling_group(comp):
        return ServiceCliques(
            cliques=[_clique(lsvc, labels, annotations, 1, 1, pod, None)],
            scaling_group=_scaling_group(lsvc, [lsvc], replicas, min_available, topology),
        )
    return ServiceCliques(
        cliques=[_clique(lsvc, labels, annotations, replicas, min_available, pod, topology)]
    )


def _multinode_cliques(
    ctx: ComponentContext, graph: components.Graph, labels: Obj, annotations: Obj, single: Obj
) -> ServiceCliques:
    """A leader clique of one pod and a worker clique of the other nodes, in a scaling group
    of the component's replicas."""
    comp = ctx.component
    nodes = components.node_count(comp)
    addr = multinode.grove_addressing(ctx.service, nodes)
    leader_name, worker_name = naming.clique_names(ctx.service, multinode=True)
    pods = {
        role: _with_scheduler(
            multinode_role_pod(ctx, single, role, addr, require_command=False),
            ctx,
        )
        for role in (multinode.LEADER, multinode.WORKER)
    }
    leader = _clique(leader_name, labels, annotations, 1, 1, pods[multinode.LEADER], None)
    worker = _clique(
        worker_name, labels, annotations, nodes - 1, nodes - 1, pods[multinode.WORKER], None
    )
    out = ServiceCliques(cliques=[leader, worker])
    # TRT-LLM: mpirun on the leader needs every worker's sshd up first
    if ctx.backend == "trtllm":
        leader["spec"]["startsAfter"] = [worker_name]
        out.explicit_startup = True
    replicas = 1 if comp.replicas is None else comp.replicas
    min_available = comp.minAvailable if comp.minAvailable is not None else 1
    out.scaling_group = _scaling_group(
        ctx.service.lower(),
        [leader_name, worker_name],
        replicas,
        min_available,
        _component_topology(comp, graph),
    )
    return out


def _scaling_group(
    name: str, cliques: list[str], replicas: int, min_available: int, topology: Obj | None
) -> Obj:
    group: Obj = {
        "name": name,
        "cliqueNames": cliques,
        "replicas": replicas,
        "minAvailable": min_available,
    }
    if topology is not None:  # the group's, not its cliques'
        group["topologyConstraint"] = topology
    return group


def update_strategy(
    graph: components.Graph, settings: RenderSettings, *, scaling_groups: bool
) -> str | None:
    """The PodCliqueSet's ``spec.updateStrategy.type`` (None: none written, Grove's
    ``RollingRecreate``). The DGD's ``nvidia.com/grove-update-strategy`` wins, copied as the
    operator does. Without it, the setting grove-safe-rollout picks ``OnDelete`` (a
    deliberate difference from the operator) only where the companion controller replaces
    the pods: it runs (managed-replicas), it sees the graph (the DGD is emitted, carrying the
    PodCliqueSet's name) and every clique is a standalone PodClique (a scaling group's
    pods would keep their old template until deleted)."""
    annotated = graph.annotations.get(keys.ANN_GROVE_UPDATE_STRATEGY)
    if annotated:
        return annotated
    if (
        settings.grove_safe_rollout
        and settings.managed_replicas
        and coexistence.emits_source(settings)
        and not scaling_groups
    ):
        return naming.GROVE_ON_DELETE
    return None


def pod_clique_set(
    graph: components.Graph,
    namespace: str,
    settings: RenderSettings,
    parts: list[ServiceCliques],
) -> Obj:
    # in component order, roles in their order (GenerateGrovePodCliqueSet @ 2a6da14c8)
    cliques = [c for p in parts for c in p.cliques]
    groups = [p.scaling_group for p in parts if p.scaling_group is not None]
    template: Obj = {
        "cliques": cliques,
        "cliqueStartupType": (
            STARTUP_EXPLICIT if any(p.explicit_startup for p in parts) else STARTUP_ANY_ORDER
        ),
    }
    if graph.spec.priorityClassName:
        template["priorityClassName"] = graph.spec.priorityClassName
    template["headlessServiceConfig"] = {"publishNotReadyAddresses": True}
    topology = _pcs_topology(graph)
    if topology is not None:
        template["topologyConstraint"] = topology
    delay = go_duration(settings.grove_termination_delay)
    if delay != "0s":
        template["terminationDelay"] = delay
    if groups:
        template["podCliqueScalingGroups"] = groups
    spec: Obj = {"replicas": 1}
    strategy = update_strategy(graph, settings, scaling_groups=bool(groups))
    if strategy:
        spec["updateStrategy"] = {"type": strategy}
    spec["template"] = template
    # the PCS name may be cut (#8563): the label names the DGD it renders
    labels = {**(graph.spec.labels or {}), keys.LABEL_GRAPH_NAME: graph.name}
    annotations = dict(graph.spec.annotations or {})
    queue = graph.annotations.get(keys.ANN_VOLCANO_QUEUE, "").strip()
    if settings.volcano_scheduler and queue:  # #8225, injectVolcanoQueueAnnotation
        annotations[keys.ANN_GROVE_VOLCANO_QUEUE] = queue
    return {
        "apiVersion": GROVE_API,
        "kind": "PodCliqueSet",
        "metadata": meta(pcs_name(graph), namespace, labels, annotations),
        "spec": spec,
    }


def component_service(ctx: ComponentContext, graph: components.Graph) -> Obj:
    """The Service the DGD controller creates on the Grove path
    (``dgd_grove_stable_resources_reconciler.go`` ``reconcileComponentService`` and
    ``GenerateComponentService`` @ 2a6da14c8): the component's resource labels and
    annotations, the discovery labels, and the component selector (leader and workers)."""
    labels = component_resource_labels(ctx, graph)
    if ctx.k8s_discovery:
        labels.update(discovery_labels())
    selector = {
        keys.LABEL_COMPONENT_TYPE: ctx.component_type,
        keys.LABEL_DYNAMO_NAMESPACE: ctx.dynamo_ns,
        keys.LABEL_COMPONENT: ctx.service,
    }
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": meta(
            naming.normalize(ctx.name),
            ctx.namespace,
            labels,
            component_resource_annotations(ctx, graph),
        ),
        "spec": {
            "selector": dict(sorted(selector.items())),
            "ports": [defaults.service_port(ctx.component_type)],
        },
    }
