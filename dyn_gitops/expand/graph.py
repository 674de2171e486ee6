"""Expand one DynamoGraphDeployment into the objects the Dynamo operator would create
(component path, single node; ``spec/dynamo-objects.md`` section 5)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from .. import keys, naming
from .. import kvtransfer as topology
from ..bounded import parse_int
from ..errors import FieldPath, Problem, RenderError
from ..merge import merge_envs, merge_override
from ..models import v1beta1
from ..models.dump import dump
from ..settings import RenderSettings
from ..workerhash import compute as workerhash
from ..workerhash import hub
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
from .podspec import build_pod_spec, detect_backend, pod_labels, user_main_container

Obj = dict[str, Any]


def _svc(service: str, *rest: str | int) -> FieldPath:
    return ("spec", "services", service, *rest)


def not_supported(graph: components.Graph, settings: RenderSettings) -> list[Problem]:
    """Features this version does not render, each as a clear 'not yet supported' problem
    (their paths are the v1alpha1 DGD's, located in the document by the expand stage)."""
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
                    _svc(name, "experimental", "grove", "forceScalingGroup"),
                    "forceScalingGroup is supported only on the Grove path (setting grove true "
                    f'and no {keys.ANN_ENABLE_GROVE}: "false")',
                )
            )
        if nodes > 1 and not (settings.lws or on_grove):
            out.append(
                Problem.at(
                    _svc(name, "multinode", "nodeCount"),
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
            problems.append(Problem.at(_svc(name, *exc.path), str(exc)))
            continue
        if found is None:
            continue
        if explicit and found != explicit:
            problems.append(
                Problem.at(
                    _svc(name, "extraPodSpec", "mainContainer"),
                    f"command runs dynamo.{found} but spec.backendFramework is {explicit!r}",
                )
            )
        detected[name] = found
    frameworks = set(detected.values())
    if not explicit and len(frameworks) > 1:
        problems.append(
            Problem.at(
                ("spec", "services"),
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


def graph_worker_hash(
    settings: RenderSettings,
    source: Obj,
    alpha: hub.AlphaComponents | None = None,
    graph: components.GraphComponents | None = None,
) -> str | None:
    """The worker generation: the operator's worker hash v2 of the DGD document ``source``
    (None: no workers). The component path names the worker Deployments with it; on Grove
    it only suffixes the workers' Dynamo namespace and labels their cliques (#12769: a new
    PodCliqueSet renders the suffix whenever it has workers, hashed the same way)."""
    # the components as the operator holds them (v1beta1: prefill/decode are worker types)
    if not (graph or components.of(source, alpha)).has_workers():
        return None
    try:
        # alpha: the conversion of a v1alpha1 source's components, shared with the emitted DGD
        return workerhash.worker_hash(hub.graph(source, settings.namespace, alpha))
    except (GoTypeError, QuantityError) as exc:
        # a field whose type the API server's schema would refuse (the hash encodes the
        # spec as the operator's Go types)
        raise RenderError(
            [Problem.at(("spec",), f"the worker hash cannot be computed: {exc}")]
        ) from None


def expand_graph(
    graph: components.Graph,
    settings: RenderSettings,
    source: Obj,
    alpha: hub.AlphaComponents | None = None,
) -> list[Obj]:
    """Every object the operator creates for the DGD ``graph`` (read from the admitted
    document ``source``), in no particular order (but a PodCliqueSet's cliques in the order
    of its components: as written in a v1beta1 document, name-sorted by the conversion of a
    v1alpha1 one); raises :class:`RenderError` with problems not located yet (their paths
    are the v1alpha1 DGD's fields)."""
    problems = not_supported(graph, settings)
    if problems:
        raise RenderError(problems)
    return _expand_graph(graph, settings, source, alpha)


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
    service = component.name
    _, backends = resolve_backends(graph)
    namespace = graph.namespace or settings.namespace
    # the one graph-level object a multinode pod refers to: our own wait-for-leader script
    multi = components.node_count(component) > 1
    out = [lws.wait_leader_config_map(graph.name, namespace)] if multi else []
    try:
        return out + _expand_service(
            graph,
            service,
            namespace,
            settings,
            backends[service],
            None,
            tuple(dump(graph.spec.env) or []),
            None,
            standalone=True,
        )
    except ComponentError as exc:
        raise RenderError([Problem.at(_svc(service, *exc.path), str(exc))]) from None


def _expand_graph(
    graph: components.Graph,
    settings: RenderSettings,
    source: Obj,
    alpha: hub.AlphaComponents | None = None,
) -> list[Obj]:
    dgd_name = graph.name
    namespace = graph.namespace or settings.namespace
    graph_discovery = naming.discovery_backend(graph.annotations, settings.discovery_backend)
    comps = graph.components  # the internal v1beta1 model
    _, backends = resolve_backends(graph)
    on_grove = grove.is_grove(graph, settings)
    whash = graph_worker_hash(settings, source, alpha, comps)
    graph_envs = tuple(dump(graph.spec.env) or [])
    eps = sorted((c for c in comps.components if c.type == naming.EPP), key=lambda c: c.name)

    out: list[Obj] = []
    problems = []
    # DGD-level objects (dynamo-objects.md 5.1)
    if settings.planner_rbac:
        out.append(objects.service_account(naming.PLANNER_SERVICE_ACCOUNT, namespace))
        out.append(
            objects.cluster_role_binding_for_sa(
                naming.PLANNER_SERVICE_ACCOUNT, namespace, f"{settings.operator_fullname}-planner"
            )
        )
        if eps:
            out.append(objects.service_account(naming.EPP_SERVICE_ACCOUNT, namespace))
            out.append(
                objects.cluster_role_binding_for_sa(
                    naming.EPP_SERVICE_ACCOUNT, namespace, f"{settings.operator_fullname}-epp"
                )
            )
    for p in graph.pvcs:  # v1alpha1 only (the operator keeps them in nvidia.com/dgd-spec)
        if p.create and p.name:
            out.append(objects.pvc(p, namespace))
    out.extend(gms.resource_claim_templates(dgd_name, comps, namespace, settings))  # GMS (DRA)
    if graph_discovery == "kubernetes":
        out.extend(objects.discovery_rbac(dgd_name, namespace))
    if any(components.node_count(c) > 1 for c in comps.components):
        out.append(lws.wait_leader_config_map(dgd_name, namespace))

    epp_cm: tuple[str, str] | None = None
    for epp in eps:
        epp_name, cfg = epp.name, epp.eppConfig
        dyn_ns = naming.dynamo_namespace(epp.globalDynamoNamespace, namespace, dgd_name)
        if cfg is not None and cfg.configMapRef is not None:
            epp_cm = (str(cfg.configMapRef.name), cfg.configMapRef.key or defaults.EPP_CONFIG_KEY)
        elif cfg is not None and cfg.config is not None:
            out.append(objects.epp_config_map(dgd_name, namespace, epp_name, cfg.config))
        out.append(objects.inference_pool(dgd_name, namespace, epp_name, dyn_ns))
        if istio.mesh_enabled(settings):  # dgd_epp_reconciler.go: a DestinationRule per EPP
            out.append(
                istio.destination_rule(
                    naming.epp_service_name(dgd_name, epp_name), namespace, settings
                )
            )

    parts: list[grove.ServiceCliques] = []
    for component in comps.components:  # the operator's component order
        service = component.name
        try:
            if on_grove:
                ctx = _grove_context(
                    graph,
                    component,
                    namespace,
                    settings,
                    backends[service],
                    whash,
                    graph_envs,
                    epp_cm,
                    graph_discovery,
                )
                parts.append(grove.service_cliques(ctx, graph))
                out.extend(_grove_service_objects(ctx, graph))
            else:
                out.extend(
                    _expand_service(
                        graph,
                        service,
                        namespace,
                        settings,
                        backends[service],
                        whash,
                        graph_envs,
                        epp_cm,
                    )
                )
        except ComponentError as exc:
            problems.append(Problem.at(_svc(service, *exc.path), str(exc)))
    if problems:
        raise RenderError(problems)
    if on_grove:
        out.append(
            provider_override.apply(
                override_root(graph), comps, grove.pod_clique_set(graph, namespace, settings, parts)
            )
        )
    return out


def _grove_context(
    graph: components.Graph,
    component: v1beta1.Component,
    namespace: str,
    settings: RenderSettings,
    backend: str,
    whash: str | None,
    graph_envs: tuple[Obj, ...],
    epp_cm: tuple[str, str] | None,
    graph_discovery: str,
) -> ComponentContext:
    """A Grove clique's context: no DCD, so no legacy DCD rewrites and the clique keeps the
    graph's names; workers carry the worker hash (#12769, ``dgd_grove_workload_renderer.go``
    @ 2a6da14c8); the graph's discovery backend is forced into every component's
    annotations."""
    dgd_name, service = graph.name, component.name
    ctype = component.type or ""  # v1beta1: prefill/decode are types of their own
    preserved = graph.components.preserved_of(service)
    annotations = _component_annotations(graph, preserved)
    annotations[keys.ANN_DISCOVERY_BACKEND] = graph_discovery
    return ComponentContext(
        dgd_name=dgd_name,
        namespace=namespace,
        service=service,
        component_type=ctype,
        dynamo_ns=naming.dynamo_namespace(component.globalDynamoNamespace, namespace, dgd_name),
        name=naming.base_name(dgd_name, service),
        worker_hash=whash if naming.is_worker(ctype) else None,
        backend=backend,
        discovery_backend=graph_discovery,
        container_discovery=annotations.get(keys.ANN_KUBE_DISCOVERY_MODE) == "container",
        annotations=annotations,
        labels={},
        graph_envs=tuple(merge_envs(graph_envs)),
        settings=settings,
        component=component,
        epp_config_map=epp_cm,
        grove=True,
        **_kv_transfer(graph, settings, ctype),
        runtime=component_runtime(component),
        preserved=preserved,
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
    graph: components.Graph, component: v1beta1.Component, ctype: str
) -> tuple[dict[str, str], dict[str, str]]:
    """The component's pod-template labels and annotations as the operator builds them:
    ``extraPodMetadata``, then (EPP) the Istio opt-out, then the propagated DGD metadata
    annotations, then DGD ``spec.labels``/``spec.annotations``, each only where the key is
    not set yet (``generateSingleDCD``, ``applyDGDTemplateDefaults``,
    ``mergeLowPriorityMetadata`` in ``internal/dynamo/graph.go`` @ 2a6da14c8)."""
    epm = component.podTemplate.metadata if component.podTemplate is not None else None
    labels = dict(epm.labels or {}) if epm else {}
    annotations = dict(epm.annotations or {}) if epm else {}
    if ctype == naming.EPP:
        annotations.setdefault(keys.ANN_ISTIO_INJECT, "false")
    meta_ann = graph.annotations
    for key in keys.PROPAGATED_DGD_ANNOTATIONS:
        if key in meta_ann:
            annotations.setdefault(key, meta_ann[key])
    for key, value in (graph.spec.annotations or {}).items():
        annotations.setdefault(key, value)
    for key, value in (graph.spec.labels or {}).items():
        labels.setdefault(key, value)
    return labels, annotations


def _expand_service(
    graph: components.Graph,
    service: str,
    namespace: str,
    settings: RenderSettings,
    backend: str,
    whash: str | None,
    graph_envs: tuple[Obj, ...],
    epp_cm: tuple[str, str] | None,
    standalone: bool = False,
) -> list[Obj]:
    """The objects of the component ``service`` of ``graph`` (a standalone DCD's one)."""
    dgd_name = graph.name
    # its v1beta1 type: a v1alpha1 worker with subComponentType prefill/decode is that type
    component = graph.components.get(service)
    assert component is not None  # the name of one of the graph's components
    ctype = component.type or ""
    worker = naming.is_worker(ctype)
    component, env_overrides = legacy.apply(component, graph.spec.env)
    preserved = graph.components.preserved_of(service)
    tmpl_labels, tmpl_ann = _template_metadata(graph, component, ctype)
    # GetDCDKubeAnnotations / GetDCDKubeLabels (internal/dynamo/v1beta1_helpers.go @
    # 2a6da14c8): the v1alpha1 service's own annotations and labels, then the pod
    # template's, then the system labels
    annotations = {**preserved.annotations, **tmpl_ann}
    kvt = topology.graph_policy(graph.spec.experimental)
    annotations = topology.source_annotations(annotations, kvt, ctype)
    dyn_ns = naming.dynamo_namespace(component.globalDynamoNamespace, namespace, dgd_name)
    # a standalone DCD names its workload itself (kubeName = the DCD's name)
    name = (
        dgd_name
        if standalone
        else naming.component_name(dgd_name, service, whash if worker else None)
    )
    labels = {**preserved.labels, **tmpl_labels}
    sub_type = components.sub_component_type(component, preserved)
    if sub_type:
        labels[keys.LABEL_SUB_COMPONENT_TYPE] = sub_type
    labels.update({keys.LABEL_COMPONENT: service, keys.LABEL_DYNAMO_NAMESPACE: dyn_ns})
    if not standalone:
        labels[keys.LABEL_GRAPH_NAME] = dgd_name
    if worker and whash:
        labels[keys.LABEL_WORKER_HASH] = whash
    if worker and graph.components.has_type(naming.EPP):
        labels[keys.LABEL_COMPONENT_CLASS] = naming.COMPONENT_CLASS_WORKER
    discovery = naming.discovery_backend(annotations, settings.discovery_backend)
    ctx = ComponentContext(
        dgd_name=dgd_name,
        namespace=namespace,
        service=service,
        component_type=ctype,
        dynamo_ns=dyn_ns,
        name=name,
        worker_hash=whash if worker else None,
        backend=backend,
        discovery_backend=discovery,
        container_discovery=annotations.get(keys.ANN_KUBE_DISCOVERY_MODE) == "container",
        annotations=annotations,
        labels=labels,
        graph_envs=tuple(merge_envs(graph_envs)),
        settings=settings,
        component=component,
        epp_config_map=epp_cm,
        env_overrides=tuple(sorted(env_overrides.items())),
        **_kv_transfer(graph, settings, ctype),
        graph_label=not standalone,
        runtime=component_runtime(component),
        preserved=preserved,
    )

    model = component.modelRef
    if model is not None:
        labels[keys.LABEL_BASE_MODEL_HASH] = naming.model_hash(model.name)
    dep_ann = dict(annotations)
    strategy = _strategy(dep_ann)
    dep_ann = naming.workload_annotations(dep_ann)
    if model is not None:
        dep_ann[keys.ANN_BASE_MODEL] = model.name
    dep_ann.pop(keys.ANN_RESTART_AT, None)  # restarts belong to the controller
    # GetDCDKubeAnnotations (v1beta1_helpers.go @ 2a6da14c8) drops the origin-version stamp
    # from the workload and its pods; it still gates rendering (ctx.annotations)
    dep_ann.pop(keys.ANN_OPERATOR_ORIGIN_VERSION, None)
    dep_ann = topology.source_annotations(dep_ann, kvt, ctype)

    # the pod template carries the Deployment's annotations (both are GetDCDKubeAnnotations)
    template_meta: dict[str, Any] = {"labels": pod_labels(ctx, labels)}
    if dep_ann:
        template_meta["annotations"] = dict(sorted(dep_ann.items()))

    has_adapter = component.scalingAdapter is not None  # present = enabled
    desired = 1 if component.replicas is None else component.replicas
    multi = components.node_count(component) > 1
    deploy_ann = dict(dep_ann)
    deploy_spec: dict[str, Any] = {}
    out: list[Obj] = []
    if worker and settings.managed_replicas:
        deploy_ann[keys.ANN_MANAGED_REPLICAS] = "true"
        if replica_owners.planner_scaled(graph.components, service):
            deploy_ann[keys.ANN_SEED_REPLICAS] = str(desired)
        elif not has_adapter:
            deploy_ann[keys.ANN_DESIRED_REPLICAS] = str(desired)
        deploy_ann[keys.ANN_ARGOCD_SYNC_OPTIONS] = _with_sync_option(
            deploy_ann.get(keys.ANN_ARGOCD_SYNC_OPTIONS), keys.ARGOCD_PRUNE_FALSE
        )
        deploy_ann[keys.ANN_ARGOCD_COMPARE_OPTIONS] = keys.ARGOCD_IGNORE_EXTRANEOUS
        deploy_ann[keys.ANN_FLUX_PRUNE] = keys.FLUX_PRUNE_DISABLED
    elif not has_adapter:
        deploy_spec["replicas"] = desired
    if multi:
        # the operator sets no annotations on the LWS: only ours for a managed worker
        ours = {k: v for k, v in deploy_ann.items() if k in _MANAGED_ANNOTATIONS}
        # the LWS pods are labelled with the DCD's Dynamo namespace: a v1alpha1
        # dynamoNamespace does not reach them (generateLeaderWorkerSet @ 2a6da14c8; the
        # deepseek-r1 sglang recipe in conformance/operator-output)
        lws_meta = {
            **template_meta,
            "labels": {**template_meta["labels"], keys.LABEL_DYNAMO_NAMESPACE: dyn_ns},
        }
        out.append(_leader_worker_set(ctx, labels, ours, lws_meta, deploy_spec.get("replicas")))
    else:
        deploy_spec["selector"] = {"matchLabels": {keys.LABEL_SELECTOR: name}}
        deploy_spec["strategy"] = strategy
        deploy_spec["template"] = {"metadata": template_meta, "spec": build_pod_spec(ctx)}
        out.append(
            {
                "apiVersion": "apps/v1",
                "kind": "Deployment",
                "metadata": objects.meta(name, namespace, labels, deploy_ann),
                "spec": deploy_spec,
            }
        )

    if ctype == naming.FRONTEND or ctx.k8s_discovery:
        svc_labels = dict(labels)
        if ctx.k8s_discovery:
            svc_labels.update(
                {keys.LABEL_DISCOVERY_BACKEND: "kubernetes", keys.LABEL_DISCOVERY_ENABLED: "true"}
            )
        out.append(objects.component_service(ctx, svc_labels, dep_ann, leader_only=multi))
    ingress = preserved.ingress  # v1alpha1 only (the operator keeps it in nvidia.com/dgd-spec)
    if ingress is None and ctype == naming.FRONTEND:
        ingress = objects.default_ingress(ctx)
    if ingress is not None:
        out.extend(objects.ingress_objects(ctx, ingress))
    if model is not None:
        out.append(objects.model_service(model.name, namespace))
    if has_adapter:
        out.append(objects.scaling_adapter(dgd_name, namespace, service, component.replicas))
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
    single = build_pod_spec(ctx)
    roles = {
        role: multinode.role_pod(
            single,
            role,
            ctx.backend,
            nodes,
            ctx.annotations,
            lws.wait_leader_config_map_name(ctx.dgd_name),
            ctx.settings.mpi_ssh_secret,
            multinode.lws_addressing(nodes),
        )
        for role in (multinode.LEADER, multinode.WORKER)
    }
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
