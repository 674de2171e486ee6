"""Expand one DynamoGraphDeployment into the objects the Dynamo operator would create
(component path, single node; ``spec/dynamo-objects.md`` section 5)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from .. import keys, naming
from .. import kvtransfer as topology
from ..bounded import parse_int
from ..errors import Problem, RenderError
from ..hubform import main_path
from ..merge import merge_envs, merge_override
from ..models import v1beta1
from ..models.dump import dump
from ..settings import RenderSettings
from ..workerhash import compute as workerhash
from ..workerhash.gojson import GoTypeError
from ..workerhash.quantity import QuantityError
from . import (
    checkpoint,
    components,
    defaults,
    elastic_ep,
    gms,
    grove,
    istio,
    legacy,
    lws,
    multinode,
    objects,
    provider_override,
    replica_owners,
)
from .context import ComponentContext, ComponentError, component_runtime, main_container_data
from .podspec import (
    build_pod_spec,
    detect_backend,
    multinode_role_pod,
    pod_labels,
    user_main_container,
)

Obj = dict[str, Any]


def not_supported(graph: components.Graph, settings: RenderSettings) -> list[Problem]:
    """Features this version does not render, each as a clear 'not yet supported' problem
    (their paths are the form's, located in the document by the expand stage)."""
    on_grove = grove.is_grove(graph, settings)
    comps = graph.components
    out = [
        *elastic_ep.requires_command(graph.spec.backendFramework, comps),
        *provider_override.problems(override_root(graph), comps, on_grove),
    ]
    out.extend(_topology_problems(graph, settings, on_grove))
    grove_only = f'setting grove true and no {keys.ANN_ENABLE_GROVE}: "false"'
    if graph.spec.priorityClassName and not on_grove:  # #10217: the webhook forbids it
        out.append(
            Problem.at(
                ("spec", "priorityClassName"),
                f"priorityClassName requires the Grove pathway ({grove_only})",
            )
        )
    if on_grove and settings.kai_scheduler and settings.volcano_scheduler:
        out.append(  # #8225, resolveGroveSchedulerQueue
            Problem.at(
                ("spec",),
                "the Kai and Volcano scheduler integrations cannot both be enabled for Grove "
                "(settings kai-scheduler and volcano-scheduler)",
            )
        )
    for comp in sorted(graph.components.components, key=lambda c: c.name):
        name, nodes = comp.name, components.node_count(comp)
        if components.force_scaling_group(comp) and not on_grove:
            out.append(
                Problem.at(
                    comps.path(name, "experimental", "grove", "forceScalingGroup"),
                    "forceScalingGroup is supported only on the Grove path (setting grove true "
                    f'and no {keys.ANN_ENABLE_GROVE}: "false")',
                )
            )
        if nodes > 1 and not (settings.lws or on_grove):
            out.append(
                Problem.at(
                    comps.path(name, "multinode", "nodeCount"),
                    f"multinode services (nodeCount {nodes}) need "
                    "a multinode orchestrator: set the setting lws to true "
                    "(LeaderWorkerSet) or the setting grove to true (Grove)",
                )
            )
        refused = checkpoint.problem(graph.components, name)
        if refused is not None:
            out.append(refused)
    return out


def override_root(graph: components.Graph) -> provider_override.Root:
    """The DGD's graph-level provider override and whether it sets the typed topology."""
    return provider_override.Root(
        graph.spec.providerOverride, graph.spec.topologyConstraint is not None
    )


def grove_topology_domains(settings: RenderSettings) -> tuple[str, ...]:
    return tuple(d.strip() for d in settings.grove_topology_domains.split(",") if d.strip())


def _topology_problems(
    graph: components.Graph, settings: RenderSettings, on_grove: bool
) -> list[Problem]:
    """What the DGD webhook and the operator check of a ``clusterTopologyName`` against the
    cluster (the Grove path, the ClusterTopologyBinding's levels: here a setting)."""
    kvt = topology.graph_policy(graph.spec.experimental)
    if kvt is None or not kvt.clusterTopologyName:
        return []
    where = ("spec", "experimental", "kvTransferPolicy")
    if not on_grove:
        return [
            Problem.at(
                (*where, "clusterTopologyName"),
                "clusterTopologyName needs the Grove path (setting grove true and no "
                f'{keys.ANN_ENABLE_GROVE}: "false"); use labelKey otherwise',
            )
        ]
    domains = grove_topology_domains(settings)
    if not domains:
        return [
            Problem.at(
                (*where, "clusterTopologyName"),
                "clusterTopologyName needs the levels of that ClusterTopologyBinding: set the "
                "setting grove-topology-domains (for example zone,rack,host)",
            )
        ]
    if kvt.domain not in domains:
        return [
            Problem.at(
                (*where, "domain"),
                f"{kvt.domain!r} is not a level of ClusterTopologyBinding "
                f"{kvt.clusterTopologyName!r} (setting grove-topology-domains: "
                f"{', '.join(domains)})",
            )
        ]
    return []


def _effective_command(component: v1beta1.Component, component_type: str) -> dict[str, Any]:
    """The command and args of the component's container ``main`` over its type's."""
    base = defaults.type_container(
        component_type, dynamo_ns="", worker_hash=None, pool_name="", pool_namespace=""
    )
    user = {k: v for k, v in main_container_data(component).items() if k in ("command", "args")}
    return merge_override({k: base[k] for k in ("command", "args") if k in base}, user)


def resolve_backends(graph: components.Graph) -> tuple[str | None, dict[str, str]]:
    """The graph framework and each worker's backend (detected > explicit > noop), from the
    v1beta1 graph's ``backendFramework`` and its components' container ``main``."""
    explicit = graph.spec.backendFramework
    problems: list[Problem] = []
    detected: dict[str, str] = {}
    for component in sorted(graph.components.components, key=lambda c: c.name):
        name, ctype = component.name, component.type or ""
        if not naming.is_worker(ctype):
            continue
        try:
            found = detect_backend(_effective_command(component, ctype))
        except ComponentError as exc:
            problems.append(Problem.at(exc.where(graph.components, component), str(exc)))
            continue
        if found is None:
            continue
        if explicit and found != explicit:
            problems.append(
                Problem.at(
                    graph.components.path(name, *main_path(component)),
                    f"command runs dynamo.{found} but spec.backendFramework is {explicit!r}",
                )
            )
        detected[name] = found
    frameworks = set(detected.values())
    if not explicit and len(frameworks) > 1:
        problems.append(
            Problem.at(
                ("spec", "components"),
                "workers run different backends "
                f"({', '.join(sorted(frameworks))}); one graph has one",
            )
        )
    if problems:
        raise RenderError(problems)
    framework = explicit or (frameworks.pop() if frameworks else None)
    per_service = {}
    for component in graph.components.components:
        name = component.name
        if naming.is_worker(component.type or ""):
            per_service[name] = detected.get(name) or explicit or "noop"
        else:
            per_service[name] = "noop"
    return framework, per_service


def _component_annotations(
    graph: components.Graph, preserved: components.Preserved
) -> dict[str, str]:
    meta_ann = graph.annotations
    out = dict(graph.spec.annotations or {})
    out.update({k: meta_ann[k] for k in keys.PROPAGATED_DGD_ANNOTATIONS if k in meta_ann})
    out.update(preserved.annotations)
    return out


INT32_MAX = 2**31 - 1


def _strategy(annotations: dict[str, str]) -> dict[str, Any]:
    """The Deployment strategy from the component's annotations, pod template ones included
    (``generateDeployment``, dynamocomponentdeployment_controller.go @ 2a6da14c8): exactly
    ``Recreate`` (#11909), anything else a rolling update."""
    if annotations.get(keys.ANN_DEPLOYMENT_STRATEGY) == keys.DEPLOYMENT_STRATEGY_RECREATE:
        return {"type": keys.DEPLOYMENT_STRATEGY_RECREATE}

    def int_or_percent(value: str) -> int | str:
        # intstr.Parse: a number Atoi reads (ASCII digits, in range), else the text
        number = parse_int(value, low=0, high=INT32_MAX) if value.isdigit() else None
        return value if number is None else number

    return {
        "type": "RollingUpdate",
        "rollingUpdate": {
            "maxSurge": int_or_percent(
                annotations.get(keys.ANN_MAX_SURGE, naming.DEFAULT_ROLLOUT_PERCENT)
            ),
            "maxUnavailable": int_or_percent(
                annotations.get(keys.ANN_MAX_UNAVAILABLE, naming.DEFAULT_ROLLOUT_PERCENT)
            ),
        },
    }


def _with_sync_option(current: str | None, option: str) -> str:
    opts = [o.strip() for o in (current or "").split(",") if o.strip()]
    key = option.split("=", 1)[0]
    opts = [o for o in opts if o.split("=", 1)[0] != key] + [option]
    return ",".join(opts)


def graph_worker_hash(settings: RenderSettings, graph: components.Graph) -> str | None:
    """The worker generation: the operator's worker hash v2 of the DGD's form (None: no
    workers). The component path names the worker Deployments with it; on Grove it only
    suffixes the workers' Dynamo namespace and labels their cliques (#12769: a new
    PodCliqueSet renders the suffix whenever it has workers, hashed the same way)."""
    # the components as the operator holds them (v1beta1: prefill/decode are worker types)
    if not graph.components.has_workers():
        return None
    try:
        return workerhash.worker_hash(graph.hub(settings.namespace))
    except (GoTypeError, QuantityError) as exc:
        # a field whose type the API server's schema would refuse (the hash encodes the
        # spec as the operator's Go types)
        raise RenderError(
            [Problem.at(("spec",), f"the worker hash cannot be computed: {exc}")]
        ) from None


@dataclass(frozen=True)
class GraphScope:
    """What every component of one graph is expanded with."""

    graph: components.Graph
    settings: RenderSettings
    namespace: str
    #: each component's backend (detected or explicit framework, "noop" for none)
    backends: dict[str, str]
    #: the graph's discovery backend (Grove forces it into every component's annotations)
    discovery: str
    worker_hash: str | None = None
    graph_envs: tuple[Obj, ...] = ()
    #: (ConfigMap name, key) of an EPP's config
    epp_config_map: tuple[str, str] | None = None
    #: a standalone DCD: no graph to name, its workload named after it
    standalone: bool = False


def expand_graph(graph: components.Graph, settings: RenderSettings) -> list[Obj]:
    """Every object the operator creates for the DGD ``graph`` (its admitted form), in no
    particular order (but a PodCliqueSet's cliques in the order of its components: as
    written in a v1beta1 document, name-sorted by the conversion of a v1alpha1 one); raises
    :class:`RenderError` with problems not located yet (their paths are the form's)."""
    problems = not_supported(graph, settings)
    if problems:
        raise RenderError(problems)
    namespace = graph.namespace or settings.namespace
    eps = sorted(
        (c for c in graph.components.components if c.type == naming.EPP), key=lambda c: c.name
    )
    epp_objects, epp_cm = _epp_objects(graph, namespace, settings, eps)
    scope = GraphScope(
        graph,
        settings,
        namespace,
        resolve_backends(graph)[1],
        naming.discovery_backend(graph.annotations, settings.discovery_backend),
        graph_worker_hash(settings, graph),
        tuple(dump(graph.spec.env) or []),
        epp_cm,
    )
    return [*_graph_objects(scope, bool(eps)), *epp_objects, *_component_objects(scope)]


def expand_component_deployment(graph: components.Graph, settings: RenderSettings) -> list[Obj]:
    """A standalone DynamoComponentDeployment, given as the one-service DGD named like it
    (``validate.dcd_as_graph``): what the operator's DCD controller renders from it
    (``dynamocomponentdeployment_renderer.go`` @ 2a6da14c8). The workload and its Service
    are named after the DCD; there is no graph: no graph-level objects (RBAC, PVCs, EPP
    pool), no graph-name label, no worker hash (only a DGD's rollout stamps one), and
    never Grove (the DCD controller renders a Deployment or a LeaderWorkerSet)."""
    problems = not_supported(graph, replace(settings, grove=False))
    if problems:
        raise RenderError(problems)
    (component,) = graph.components.components
    namespace = graph.namespace or settings.namespace
    scope = GraphScope(
        graph,
        settings,
        namespace,
        resolve_backends(graph)[1],
        naming.discovery_backend(graph.annotations, settings.discovery_backend),
        graph_envs=tuple(dump(graph.spec.env) or []),
        standalone=True,
    )
    # the one graph-level object a multinode pod refers to: our own wait-for-leader script
    multi = components.node_count(component) > 1
    out = [lws.wait_leader_config_map(graph.name, namespace)] if multi else []
    try:
        return out + _expand_service(scope, component)
    except ComponentError as exc:
        raise RenderError([Problem.at(exc.where(graph.components, component), str(exc))]) from None


def _graph_objects(scope: GraphScope, has_epp: bool) -> list[Obj]:
    """The DGD-level objects (dynamo-objects.md 5.1): the Planner's and EPP's RBAC, the
    PVCs, the GMS claim templates, the discovery RBAC, the wait-for-leader script."""
    graph, settings, namespace = scope.graph, scope.settings, scope.namespace
    comps = graph.components
    out: list[Obj] = []
    if settings.planner_rbac:
        out.append(objects.service_account(naming.PLANNER_SERVICE_ACCOUNT, namespace))
        out.append(
            objects.cluster_role_binding_for_sa(
                naming.PLANNER_SERVICE_ACCOUNT, namespace, f"{settings.operator_fullname}-planner"
            )
        )
        if has_epp:
            out.append(objects.service_account(naming.EPP_SERVICE_ACCOUNT, namespace))
            out.append(
                objects.cluster_role_binding_for_sa(
                    naming.EPP_SERVICE_ACCOUNT, namespace, f"{settings.operator_fullname}-epp"
                )
            )
    for p in graph.pvcs:  # v1alpha1 only (the operator keeps them in nvidia.com/dgd-spec)
        if p.create and p.name:
            out.append(objects.pvc(p, namespace))
    out.extend(gms.resource_claim_templates(graph.name, comps, namespace, settings))  # GMS (DRA)
    if scope.discovery == "kubernetes":
        out.extend(objects.discovery_rbac(graph.name, namespace))
    if any(components.node_count(c) > 1 for c in comps.components):
        out.append(lws.wait_leader_config_map(graph.name, namespace))
    return out


def _epp_objects(
    graph: components.Graph,
    namespace: str,
    settings: RenderSettings,
    eps: list[v1beta1.Component],
) -> tuple[list[Obj], tuple[str, str] | None]:
    """Each EPP's config map, inference pool and (Istio) DestinationRule, and the config
    map the EPP reads ((name, key); None: none)."""
    out: list[Obj] = []
    epp_cm: tuple[str, str] | None = None
    for epp in eps:
        epp_name, cfg = epp.name, epp.eppConfig
        dyn_ns = naming.dynamo_namespace(epp.globalDynamoNamespace, namespace, graph.name)
        if cfg is not None and cfg.configMapRef is not None:
            epp_cm = (str(cfg.configMapRef.name), cfg.configMapRef.key or defaults.EPP_CONFIG_KEY)
        elif cfg is not None and cfg.config is not None:
            out.append(objects.epp_config_map(graph.name, namespace, epp_name, cfg.config))
        out.append(objects.inference_pool(graph.name, namespace, epp_name, dyn_ns))
        if istio.mesh_enabled(settings):  # dgd_epp_reconciler.go: a DestinationRule per EPP
            out.append(
                istio.destination_rule(
                    naming.epp_service_name(graph.name, epp_name), namespace, settings
                )
            )
    return out, epp_cm


def _component_objects(scope: GraphScope) -> list[Obj]:
    """Each component's objects, in the operator's component order; on Grove, its clique
    in the graph's PodCliqueSet (with the provider overrides)."""
    graph, settings = scope.graph, scope.settings
    on_grove = grove.is_grove(graph, settings)
    out: list[Obj] = []
    problems = []
    parts: list[grove.ServiceCliques] = []
    for component in graph.components.components:
        try:
            if on_grove:
                ctx = _grove_context(scope, component)
                parts.append(grove.service_cliques(ctx, graph))
                out.extend(_grove_service_objects(ctx, graph))
            else:
                out.extend(_expand_service(scope, component))
        except ComponentError as exc:
            problems.append(Problem.at(exc.where(graph.components, component), str(exc)))
    if problems:
        raise RenderError(problems)
    if on_grove:
        pcs = grove.pod_clique_set(graph, scope.namespace, settings, parts)
        out.append(provider_override.apply(override_root(graph), graph.components, pcs))
    return out


def _context(
    scope: GraphScope,
    component: v1beta1.Component,
    annotations: dict[str, str],
    labels: dict[str, str],
    *,
    name: str,
    discovery: str,
    env_overrides: tuple[tuple[str, str], ...] = (),
    grove: bool = False,
) -> ComponentContext:
    """The one place a :class:`ComponentContext` is made: component ``component`` of the
    graph of ``scope``, with what its path (a DCD or a Grove clique) gave it."""
    graph, settings, ctype = scope.graph, scope.settings, component.type or ""
    return ComponentContext(
        dgd_name=graph.name,
        namespace=scope.namespace,
        service=component.name,
        component_type=ctype,
        dynamo_ns=naming.dynamo_namespace(
            component.globalDynamoNamespace, scope.namespace, graph.name
        ),
        name=name,
        worker_hash=scope.worker_hash if naming.is_worker(ctype) else None,
        backend=scope.backends[component.name],
        discovery_backend=discovery,
        container_discovery=annotations.get(keys.ANN_KUBE_DISCOVERY_MODE) == "container",
        annotations=annotations,
        labels=labels,
        graph_envs=tuple(merge_envs(scope.graph_envs)),
        settings=settings,
        component=component,
        epp_config_map=scope.epp_config_map,
        env_overrides=env_overrides,
        grove=grove,
        **_kv_transfer(graph, settings, ctype),
        graph_label=not scope.standalone,
        runtime=component_runtime(component),
        preserved=graph.components.preserved_of(component.name),
    )


def _grove_context(scope: GraphScope, component: v1beta1.Component) -> ComponentContext:
    """A Grove clique's context: no DCD, so no legacy DCD rewrites and the clique keeps the
    graph's names; workers carry the worker hash (#12769, ``dgd_grove_workload_renderer.go``
    @ 2a6da14c8); the graph's discovery backend is forced into every component's
    annotations."""
    graph = scope.graph
    annotations = _component_annotations(graph, graph.components.preserved_of(component.name))
    annotations[keys.ANN_DISCOVERY_BACKEND] = scope.discovery
    name = naming.base_name(graph.name, component.name)
    return _context(
        scope, component, annotations, {}, name=name, discovery=scope.discovery, grove=True
    )


def _kv_transfer(
    graph: components.Graph, settings: RenderSettings, component_type: str | None
) -> dict[str, Any]:
    """The context fields of ``kvTransferPolicy``: workers only
    (``shouldApplyKvTransferPolicyToWorkerComponent``)."""
    kvt = topology.graph_policy(graph.spec.experimental)
    if kvt is None or not naming.is_worker(component_type):
        return {}
    return {"kv_transfer": kvt, "topology_domains": grove_topology_domains(settings)}


def _grove_service_objects(ctx: ComponentContext, graph: components.Graph) -> list[Obj]:
    """What the DGD controller creates around a Grove clique (dynamo-objects.md 7.1)."""
    out: list[Obj] = []
    if ctx.component_type == naming.FRONTEND or ctx.k8s_discovery:
        out.append(grove.component_service(ctx, graph))
    if elastic_ep.is_single_pod_leader(ctx.component, user_main_container(ctx)):
        out.append(elastic_ep.leader_service(grove.component_service(ctx, graph)))
    ingress = ctx.preserved.ingress  # v1alpha1 only
    if ingress is None and ctx.component_type == naming.FRONTEND:
        ingress = objects.default_ingress(ctx)
    if ingress is not None:
        out.extend(objects.ingress_objects(ctx, ingress))
    comp = ctx.component
    if comp.modelRef is not None:
        out.append(objects.model_service(comp.modelRef.name, ctx.namespace))
    if comp.scalingAdapter is not None:  # present = enabled
        out.append(objects.scaling_adapter(ctx.dgd_name, ctx.namespace, ctx.service, comp.replicas))
    return out


def _template_metadata(
    graph: components.Graph,
    component: v1beta1.Component,
    ctype: str,
    preserved: components.Preserved,
) -> tuple[dict[str, str], dict[str, str]]:
    """The component's pod-template labels and annotations as the 1.5 operator builds them
    (``generateSingleDCD``, ``applyDGDTemplateDefaults``, ``propagateDGDSpecMetadata``,
    ``propagateDGDAnnotations`` in ``internal/dynamo/graph.go``): ``extraPodMetadata``,
    then (EPP) the Istio opt-out, then the v1alpha1 service's own over the DGD's
    ``spec.labels``/``spec.annotations`` (#14855; at 2a6da14c8 the graph's came first and
    overrode the service's), then the propagated DGD metadata annotations, each only
    where the key is not set yet (``mergeLowPriorityMetadata``)."""
    epm = component.podTemplate.metadata if component.podTemplate is not None else None
    labels = dict(epm.labels or {}) if epm else {}
    annotations = dict(epm.annotations or {}) if epm else {}
    if ctype == naming.EPP:
        annotations.setdefault(keys.ANN_ISTIO_INJECT, "false")
    for key, value in {**(graph.spec.annotations or {}), **preserved.annotations}.items():
        annotations.setdefault(key, value)
    for key, value in {**(graph.spec.labels or {}), **preserved.labels}.items():
        labels.setdefault(key, value)
    meta_ann = graph.annotations
    for key in keys.PROPAGATED_DGD_ANNOTATIONS:
        if key in meta_ann:
            annotations.setdefault(key, meta_ann[key])
    return labels, annotations


def _expand_service(scope: GraphScope, component: v1beta1.Component) -> list[Obj]:
    """The objects of one component of the graph (a standalone DCD's one): its DCD's
    workload (a Deployment, or a LeaderWorkerSet when multinode), then its Service,
    ingress, model Service and scaling adapter."""
    ctx = _dcd_context(scope, component)
    annotations, strategy = _workload_annotations(ctx)
    # the pod template carries the Deployment's annotations (both are GetDCDKubeAnnotations)
    template_meta: dict[str, Any] = {"labels": pod_labels(ctx, ctx.labels)}
    if annotations:
        template_meta["annotations"] = dict(sorted(annotations.items()))
    workload = _workload(scope, ctx, annotations, strategy, template_meta)
    return [workload, *_service_objects(ctx, annotations)]


def _dcd_context(scope: GraphScope, written: v1beta1.Component) -> ComponentContext:
    """A component's context on the DCD path: the legacy config applied, then its
    annotations and labels as ``GetDCDKubeAnnotations`` / ``GetDCDKubeLabels``
    (``internal/dynamo/v1beta1_helpers.go`` @ 2a6da14c8) make them: the v1alpha1 service's
    own, then the pod template's, then the system labels."""
    graph, ctype = scope.graph, written.type or ""
    component, env_overrides = legacy.apply(written, graph.spec.env)
    preserved = graph.components.preserved_of(component.name)
    tmpl_labels, tmpl_ann = _template_metadata(graph, component, ctype, preserved)
    kvt = topology.graph_policy(graph.spec.experimental)
    annotations = topology.source_annotations({**preserved.annotations, **tmpl_ann}, kvt, ctype)
    labels = _dcd_labels(scope, component, {**preserved.labels, **tmpl_labels})
    whash = scope.worker_hash if naming.is_worker(ctype) else None
    # a standalone DCD names its workload itself (kubeName = the DCD's name)
    name = (
        graph.name if scope.standalone else naming.component_name(graph.name, component.name, whash)
    )
    discovery = naming.discovery_backend(annotations, scope.settings.discovery_backend)
    overrides = tuple(sorted(env_overrides.items()))
    return _context(
        scope,
        component,
        annotations,
        labels,
        name=name,
        discovery=discovery,
        env_overrides=overrides,
    )


def _dcd_labels(
    scope: GraphScope, component: v1beta1.Component, labels: dict[str, str]
) -> dict[str, str]:
    """``labels`` (the service's own and the pod template's) with the system labels."""
    graph, ctype = scope.graph, component.type or ""
    worker = naming.is_worker(ctype)
    sub_type = components.sub_component_type(
        component, graph.components.preserved_of(component.name)
    )
    if sub_type:
        labels[keys.LABEL_SUB_COMPONENT_TYPE] = sub_type
    dyn_ns = naming.dynamo_namespace(component.globalDynamoNamespace, scope.namespace, graph.name)
    labels.update({keys.LABEL_COMPONENT: component.name, keys.LABEL_DYNAMO_NAMESPACE: dyn_ns})
    if not scope.standalone:
        labels[keys.LABEL_GRAPH_NAME] = graph.name
    if worker and scope.worker_hash:
        labels[keys.LABEL_WORKER_HASH] = scope.worker_hash
    if worker and graph.components.has_type(naming.EPP):
        labels[keys.LABEL_COMPONENT_CLASS] = naming.COMPONENT_CLASS_WORKER
    if component.modelRef is not None:
        labels[keys.LABEL_BASE_MODEL_HASH] = naming.model_hash(component.modelRef.name)
    return labels


def _workload_annotations(ctx: ComponentContext) -> tuple[dict[str, str], dict[str, Any]]:
    """The workload's (and its pods') annotations, and the Deployment strategy read from
    the component's annotations first."""
    strategy = _strategy(ctx.annotations)
    out = naming.workload_annotations(dict(ctx.annotations))
    model = ctx.component.modelRef
    if model is not None:
        out[keys.ANN_BASE_MODEL] = model.name
    out.pop(keys.ANN_RESTART_AT, None)  # restarts belong to the controller
    # GetDCDKubeAnnotations (v1beta1_helpers.go @ 2a6da14c8) drops the origin-version stamp
    # from the workload and its pods; it still gates rendering (ctx.annotations)
    out.pop(keys.ANN_OPERATOR_ORIGIN_VERSION, None)
    return topology.source_annotations(out, ctx.kv_transfer, ctx.component_type), strategy


def _workload(
    scope: GraphScope,
    ctx: ComponentContext,
    annotations: dict[str, str],
    strategy: dict[str, Any],
    template_meta: dict[str, Any],
) -> Obj:
    """The component's Deployment, or its LeaderWorkerSet when multinode; a managed worker's
    replicas left to the companion controller (annotations)."""
    component = ctx.component
    deploy_ann, replicas = _replica_annotations(scope, ctx, annotations)
    if components.node_count(component) > 1:
        # the operator sets no annotations on the LWS: only ours for a managed worker
        ours = {k: v for k, v in deploy_ann.items() if k in _MANAGED_ANNOTATIONS}
        # the LWS pods are labelled with the DCD's Dynamo namespace: a v1alpha1
        # dynamoNamespace does not reach them (generateLeaderWorkerSet @ 2a6da14c8; the
        # deepseek-r1 sglang recipe in conformance/operator-output)
        lws_meta = {
            **template_meta,
            "labels": {**template_meta["labels"], keys.LABEL_DYNAMO_NAMESPACE: ctx.dynamo_ns},
        }
        return _leader_worker_set(ctx, ctx.labels, ours, lws_meta, replicas)
    spec: dict[str, Any] = {} if replicas is None else {"replicas": replicas}
    spec["selector"] = {"matchLabels": {keys.LABEL_SELECTOR: ctx.name}}
    spec["strategy"] = strategy
    spec["template"] = {"metadata": template_meta, "spec": build_pod_spec(ctx)}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": objects.meta(ctx.name, ctx.namespace, ctx.labels, deploy_ann),
        "spec": spec,
    }


def _replica_annotations(
    scope: GraphScope, ctx: ComponentContext, annotations: dict[str, str]
) -> tuple[dict[str, str], int | None]:
    """The workload's annotations and its ``replicas`` (None: not written). A managed
    worker's count goes to the companion controller (desired or seed annotation) and Argo
    CD / Flux leave it alone; a scaling adapter owns the count itself."""
    component, out = ctx.component, dict(annotations)
    has_adapter = component.scalingAdapter is not None  # present = enabled
    desired = 1 if component.replicas is None else component.replicas
    if naming.is_worker(ctx.component_type) and scope.settings.managed_replicas:
        out[keys.ANN_MANAGED_REPLICAS] = "true"
        if replica_owners.planner_scaled(scope.graph.components, ctx.service):
            out[keys.ANN_SEED_REPLICAS] = str(desired)
        elif not has_adapter:
            out[keys.ANN_DESIRED_REPLICAS] = str(desired)
        out[keys.ANN_ARGOCD_SYNC_OPTIONS] = _with_sync_option(
            out.get(keys.ANN_ARGOCD_SYNC_OPTIONS), keys.ARGOCD_PRUNE_FALSE
        )
        out[keys.ANN_ARGOCD_COMPARE_OPTIONS] = keys.ARGOCD_IGNORE_EXTRANEOUS
        out[keys.ANN_FLUX_PRUNE] = keys.FLUX_PRUNE_DISABLED
        return out, None
    return out, None if has_adapter else desired


def _service_objects(ctx: ComponentContext, annotations: dict[str, str]) -> list[Obj]:
    """The component's Service (a frontend, or any component with Kubernetes discovery),
    ingress, model Service and scaling adapter."""
    out: list[Obj] = []
    multi = components.node_count(ctx.component) > 1
    if ctx.component_type == naming.FRONTEND or ctx.k8s_discovery:
        svc_labels = dict(ctx.labels)
        if ctx.k8s_discovery:
            svc_labels.update(
                {keys.LABEL_DISCOVERY_BACKEND: "kubernetes", keys.LABEL_DISCOVERY_ENABLED: "true"}
            )
        out.append(objects.component_service(ctx, svc_labels, annotations, leader_only=multi))
    ingress = ctx.preserved.ingress  # v1alpha1 only (the operator keeps it in nvidia.com/dgd-spec)
    if ingress is None and ctx.component_type == naming.FRONTEND:
        ingress = objects.default_ingress(ctx)
    if ingress is not None:
        out.extend(objects.ingress_objects(ctx, ingress))
    model = ctx.component.modelRef
    if model is not None:
        out.append(objects.model_service(model.name, ctx.namespace))
    if ctx.component.scalingAdapter is not None:
        out.append(
            objects.scaling_adapter(
                ctx.dgd_name, ctx.namespace, ctx.service, ctx.component.replicas
            )
        )
    return out


#: what a managed worker carries for the companion controller and the GitOps tools
_MANAGED_ANNOTATIONS = (
    keys.ANN_MANAGED_REPLICAS,
    keys.ANN_DESIRED_REPLICAS,
    keys.ANN_SEED_REPLICAS,
    keys.ANN_ARGOCD_SYNC_OPTIONS,
    keys.ANN_ARGOCD_COMPARE_OPTIONS,
    keys.ANN_FLUX_PRUNE,
)


def _leader_worker_set(
    ctx: ComponentContext,
    labels: dict[str, str],
    annotations: dict[str, str],
    template_meta: dict[str, Any],
    replicas: int | None,
) -> Obj:
    """A multinode service: one LeaderWorkerSet instead of a Deployment (no GPU check:
    CPU-only multinode renders since #11115, v1.4)."""
    nodes = components.node_count(ctx.component)
    single = build_pod_spec(ctx, memory_service=False)
    roles = {
        role: multinode_role_pod(ctx, single, role, multinode.lws_addressing(nodes))
        for role in (multinode.LEADER, multinode.WORKER)
    }
    gms.check_leader_worker_set(ctx.component)
    return lws.leader_worker_set(
        ctx.name,
        ctx.namespace,
        replicas,
        nodes,
        labels,
        annotations,
        template_meta,
        roles[multinode.LEADER],
        roles[multinode.WORKER],
    )
