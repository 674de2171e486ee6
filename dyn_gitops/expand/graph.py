"""Expand one DynamoGraphDeployment into the objects the Dynamo operator would create
(component path, single node; ``spec/dynamo-objects.md`` section 5)."""

from __future__ import annotations

from typing import Any

from .. import gates, keys, naming
from ..errors import FieldPath, Problem, RenderError
from ..merge import merge_envs, merge_override
from ..models.dump import dump
from ..models.v1alpha1 import DynamoGraphDeployment, ServiceSpec
from ..settings import RenderSettings
from ..workerhash import compute as workerhash
from ..workerhash import hub
from . import defaults, gms, grove, legacy, lws, multinode, objects
from .context import ComponentContext, ComponentError, component_runtime
from .podspec import build_pod_spec, detect_backend, pod_labels

Obj = dict[str, Any]


def _svc(service: str, *rest: str | int) -> FieldPath:
    return ("spec", "services", service, *rest)


def node_count(svc: ServiceSpec) -> int:
    return svc.multinode.nodeCount if svc.multinode is not None else 1


def is_multinode(svc: ServiceSpec) -> bool:
    return node_count(svc) > 1


def not_supported(dgd: DynamoGraphDeployment, settings: RenderSettings) -> list[Problem]:
    """Features this version does not render, each as a clear 'not yet supported' problem."""
    out: list[Problem] = []
    on_grove = grove.is_grove(dgd, settings)
    exp = dgd.spec.experimental
    if exp and exp.kvTransferPolicy is not None:
        out.append(
            Problem.at(
                ("spec", "experimental", "kvTransferPolicy"),
                "kvTransferPolicy is not yet supported",
            )
        )
    for name, svc in sorted((dgd.spec.services or {}).items()):
        if svc.force_scaling_group and not on_grove:
            out.append(
                Problem.at(
                    _svc(name, "experimental", "grove", "forceScalingGroup"),
                    "forceScalingGroup is supported only on the Grove path (setting grove true "
                    f'and no {keys.ANN_ENABLE_GROVE}: "false")',
                )
            )
        if is_multinode(svc) and not (settings.lws or on_grove):
            out.append(
                Problem.at(
                    _svc(name, "multinode", "nodeCount"),
                    f"multinode services (nodeCount {node_count(svc)}) need "
                    "a multinode orchestrator: set the setting lws to true "
                    "(LeaderWorkerSet) or the setting grove to true (Grove)",
                )
            )
        if (
            is_multinode(svc)
            and not on_grove
            and svc.scalingAdapter is not None
            and svc.scalingAdapter.enabled
        ):
            out.append(
                Problem.at(
                    _svc(name, "scalingAdapter"),
                    "a scaling adapter on a multinode service is not yet "
                    "supported (its replicas are LeaderWorkerSets)",
                )
            )
        if (
            svc.componentType == naming.EPP
            and svc.eppConfig is None
            and gates.NATIVE_RUST_EPP.enabled(component_runtime(svc))
        ):
            out.append(
                Problem.at(
                    _svc(name),
                    "the native Rust EPP (runtime version "
                    f"{gates.NATIVE_RUST_EPP.min_runtime} or later, #11355) is not yet "
                    "supported; only the legacy Go EPP (an image before 1.5.0, with eppConfig) "
                    "is rendered",
                )
            )
        if svc.checkpoint and svc.checkpoint.get("enabled"):
            out.append(
                Problem.at(_svc(name, "checkpoint"), "checkpoint/restore is not yet supported")
            )
    return out


def _effective_command(spec: ServiceSpec, component_type: str) -> dict[str, Any]:
    mc = spec.main_container
    base = defaults.type_container(
        component_type, dynamo_ns="", worker_hash=None, pool_name="", pool_namespace=""
    )
    user = {k: v for k, v in (dump(mc) if mc else {}).items() if k in ("command", "args")}
    return merge_override({k: base[k] for k in ("command", "args") if k in base}, user)


def resolve_backends(dgd: DynamoGraphDeployment) -> tuple[str | None, dict[str, str]]:
    """The graph framework and each worker's backend (detected > explicit > noop)."""
    explicit = dgd.spec.backendFramework
    problems: list[Problem] = []
    detected: dict[str, str] = {}
    for name, svc in sorted((dgd.spec.services or {}).items()):
        ctype = svc.componentType or ""
        if not naming.is_worker(ctype):
            continue
        try:
            found = detect_backend(_effective_command(svc, ctype))
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
    graph = explicit or (frameworks.pop() if frameworks else None)
    per_service = {}
    for name, svc in (dgd.spec.services or {}).items():
        if naming.is_worker(svc.componentType or ""):
            per_service[name] = detected.get(name) or explicit or "noop"
        else:
            per_service[name] = "noop"
    return graph, per_service


def _component_annotations(dgd: DynamoGraphDeployment, svc: ServiceSpec) -> dict[str, str]:
    meta_ann = dgd.metadata.annotations or {}
    out = dict(dgd.spec.annotations or {})
    out.update({k: meta_ann[k] for k in keys.PROPAGATED_DGD_ANNOTATIONS if k in meta_ann})
    out.update(svc.annotations or {})
    return out


def _strategy(annotations: dict[str, str]) -> dict[str, Any]:
    """The Deployment strategy from the component's annotations, pod template ones included
    (``generateDeployment``, dynamocomponentdeployment_controller.go @ 2a6da14c8): exactly
    ``Recreate`` (#11909), anything else a rolling update."""
    if annotations.get(keys.ANN_DEPLOYMENT_STRATEGY) == keys.DEPLOYMENT_STRATEGY_RECREATE:
        return {"type": keys.DEPLOYMENT_STRATEGY_RECREATE}

    def int_or_percent(value: str) -> int | str:
        return int(value) if value.isdigit() else value

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
    dgd: DynamoGraphDeployment, settings: RenderSettings, source: Obj
) -> str | None:
    """The worker generation the workers are named with: the operator's worker hash v2 of
    the DGD document ``source`` (None: no workers, or Grove, which rolls pods itself)."""
    if grove.is_grove(dgd, settings):
        return None
    if not any(naming.is_worker(s.componentType) for s in (dgd.spec.services or {}).values()):
        return None
    return workerhash.worker_hash(hub.graph(source, settings.namespace))


def expand_graph(dgd: DynamoGraphDeployment, settings: RenderSettings, source: Obj) -> list[Obj]:
    """Every object the operator creates for ``dgd`` (parsed from the document ``source``),
    in no particular order; raises :class:`RenderError` with problems not located yet
    (their paths are the DGD's fields)."""
    problems = not_supported(dgd, settings)
    if problems:
        raise RenderError(problems)
    dgd_name = dgd.metadata.name
    namespace = dgd.metadata.namespace or settings.namespace
    services = dgd.spec.services or {}
    meta_ann = dgd.metadata.annotations or {}
    graph_discovery = naming.discovery_backend(meta_ann, settings.discovery_backend)
    _, backends = resolve_backends(dgd)
    on_grove = grove.is_grove(dgd, settings)

    whash = graph_worker_hash(dgd, settings, source)
    graph_envs = tuple(dump(dgd.spec.envs) or [])
    eps = [(n, s) for n, s in sorted(services.items()) if s.componentType == naming.EPP]

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
    for p in dgd.spec.pvcs or []:
        if p.create and p.name:
            out.append(objects.pvc(p, namespace))
    out.extend(gms.resource_claim_templates(dgd, namespace, settings))  # GMS (DRA)
    if graph_discovery == "kubernetes":
        out.extend(objects.discovery_rbac(dgd_name, namespace))
    if any(is_multinode(s) for s in services.values()):
        out.append(lws.wait_leader_config_map(dgd_name, namespace))

    epp_cm: tuple[str, str] | None = None
    for epp_name, epp in eps:
        cfg = epp.eppConfig
        dyn_ns = naming.dynamo_namespace(epp.globalDynamoNamespace, namespace, dgd_name)
        if cfg is not None and cfg.configMapRef is not None:
            epp_cm = (str(cfg.configMapRef.name), cfg.configMapRef.key or defaults.EPP_CONFIG_KEY)
        elif cfg is not None and cfg.config is not None:
            out.append(objects.epp_config_map(dgd_name, namespace, epp_name, cfg.config))
        out.append(objects.inference_pool(dgd_name, namespace, epp_name, dyn_ns))

    parts: list[grove.ServiceCliques] = []
    for service, svc in sorted(services.items()):
        try:
            if on_grove:
                ctx = _grove_context(
                    dgd,
                    service,
                    svc,
                    namespace,
                    settings,
                    backends[service],
                    graph_envs,
                    epp_cm,
                    graph_discovery,
                )
                parts.append(grove.service_cliques(ctx, dgd))
                out.extend(_grove_service_objects(ctx, dgd))
            else:
                out.extend(
                    _expand_service(
                        dgd,
                        service,
                        svc,
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
        out.append(grove.pod_clique_set(dgd, namespace, settings, parts))
    return out


def _grove_context(
    dgd: DynamoGraphDeployment,
    service: str,
    svc: ServiceSpec,
    namespace: str,
    settings: RenderSettings,
    backend: str,
    graph_envs: tuple[Obj, ...],
    epp_cm: tuple[str, str] | None,
    graph_discovery: str,
) -> ComponentContext:
    """A Grove clique's context: no DCD, so no worker hash and no legacy DCD rewrites; the
    graph's discovery backend is forced into every component's annotations."""
    dgd_name = dgd.metadata.name
    annotations = _component_annotations(dgd, svc)
    annotations[keys.ANN_DISCOVERY_BACKEND] = graph_discovery
    return ComponentContext(
        dgd_name=dgd_name,
        namespace=namespace,
        service=service,
        spec=svc,
        component_type=svc.componentType or "",
        dynamo_ns=naming.dynamo_namespace(svc.globalDynamoNamespace, namespace, dgd_name),
        name=naming.base_name(dgd_name, service),
        worker_hash=None,
        backend=backend,
        discovery_backend=graph_discovery,
        container_discovery=annotations.get(keys.ANN_KUBE_DISCOVERY_MODE) == "container",
        annotations=annotations,
        labels={},
        graph_envs=tuple(merge_envs(graph_envs)),
        settings=settings,
        epp_config_map=epp_cm,
        grove=True,
        runtime=component_runtime(svc),
    )


def _grove_service_objects(ctx: ComponentContext, dgd: DynamoGraphDeployment) -> list[Obj]:
    """What the DGD controller creates around a Grove clique (dynamo-objects.md 7.1)."""
    svc = ctx.spec
    out: list[Obj] = []
    if ctx.component_type == naming.FRONTEND or ctx.k8s_discovery:
        out.append(grove.component_service(ctx, dgd))
    ingress = svc.ingress
    if ingress is None and ctx.component_type == naming.FRONTEND:
        ingress = objects.default_ingress(ctx)
    if ingress is not None:
        out.extend(objects.ingress_objects(ctx, ingress))
    if svc.modelRef is not None:
        out.append(objects.model_service(svc.modelRef.name, ctx.namespace))
    if svc.scalingAdapter is not None and svc.scalingAdapter.enabled:
        out.append(objects.scaling_adapter(ctx.dgd_name, ctx.namespace, ctx.service, svc.replicas))
    return out


def _expand_service(
    dgd: DynamoGraphDeployment,
    service: str,
    svc: ServiceSpec,
    namespace: str,
    settings: RenderSettings,
    backend: str,
    whash: str | None,
    graph_envs: tuple[Obj, ...],
    epp_cm: tuple[str, str] | None,
) -> list[Obj]:
    dgd_name = dgd.metadata.name
    ctype = svc.componentType or ""
    worker = naming.is_worker(ctype)
    svc, env_overrides = legacy.apply(
        service, svc, ctype, merge_envs(graph_envs, dump(svc.envs) or [])
    )
    annotations = _component_annotations(dgd, svc)
    dyn_ns = naming.dynamo_namespace(svc.globalDynamoNamespace, namespace, dgd_name)
    name = naming.component_name(dgd_name, service, whash if worker else None)
    labels = dict(dgd.spec.labels or {})
    labels.update(svc.labels or {})
    labels.update(
        {
            keys.LABEL_COMPONENT: service,
            keys.LABEL_DYNAMO_NAMESPACE: dyn_ns,
            keys.LABEL_GRAPH_NAME: dgd_name,
        }
    )
    if worker and whash:
        labels[keys.LABEL_WORKER_HASH] = whash
    discovery = naming.discovery_backend(annotations, settings.discovery_backend)
    ctx = ComponentContext(
        dgd_name=dgd_name,
        namespace=namespace,
        service=service,
        spec=svc,
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
        epp_config_map=epp_cm,
        env_overrides=tuple(sorted(env_overrides.items())),
        runtime=component_runtime(svc),
    )

    if svc.modelRef is not None:
        labels[keys.LABEL_BASE_MODEL_HASH] = naming.model_hash(svc.modelRef.name)
    dep_ann = dict(annotations)
    if svc.extraPodMetadata and svc.extraPodMetadata.annotations:
        dep_ann.update(svc.extraPodMetadata.annotations)
    strategy = _strategy(dep_ann)
    dep_ann = naming.workload_annotations(dep_ann)
    if svc.modelRef is not None:
        dep_ann[keys.ANN_BASE_MODEL] = svc.modelRef.name
    dep_ann.pop(keys.ANN_RESTART_AT, None)  # restarts belong to the controller

    pod_ann = naming.workload_annotations(
        svc.extraPodMetadata.annotations or {} if svc.extraPodMetadata else {}
    )
    pod_ann.pop(keys.ANN_RESTART_AT, None)
    template_meta: dict[str, Any] = {"labels": pod_labels(ctx, labels)}
    if pod_ann:
        template_meta["annotations"] = dict(sorted(pod_ann.items()))

    has_adapter = svc.scalingAdapter is not None and svc.scalingAdapter.enabled
    desired = 1 if svc.replicas is None else svc.replicas
    deploy_ann = dict(dep_ann)
    deploy_spec: dict[str, Any] = {}
    out: list[Obj] = []
    if is_multinode(svc):
        out.extend(_leader_worker_sets(ctx, labels, dep_ann, template_meta, desired))
    elif worker and settings.managed_replicas:
        deploy_ann[keys.ANN_MANAGED_REPLICAS] = "true"
        if not has_adapter:
            deploy_ann[keys.ANN_DESIRED_REPLICAS] = str(desired)
        deploy_ann[keys.ANN_ARGOCD_SYNC_OPTIONS] = _with_sync_option(
            deploy_ann.get(keys.ANN_ARGOCD_SYNC_OPTIONS), keys.ARGOCD_PRUNE_FALSE
        )
        deploy_ann[keys.ANN_ARGOCD_COMPARE_OPTIONS] = keys.ARGOCD_IGNORE_EXTRANEOUS
        deploy_ann[keys.ANN_FLUX_PRUNE] = keys.FLUX_PRUNE_DISABLED
    elif not has_adapter:
        deploy_spec["replicas"] = desired
    if not is_multinode(svc):
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
        out.append(
            objects.component_service(ctx, svc_labels, dep_ann, leader_only=is_multinode(svc))
        )
    ingress = svc.ingress
    if ingress is None and ctype == naming.FRONTEND:
        ingress = objects.default_ingress(ctx)
    if ingress is not None:
        out.extend(objects.ingress_objects(ctx, ingress))
    if svc.modelRef is not None:
        out.append(objects.model_service(svc.modelRef.name, namespace))
    if has_adapter:
        out.append(objects.scaling_adapter(dgd_name, namespace, service, svc.replicas))
    return out


def _leader_worker_sets(
    ctx: ComponentContext,
    labels: dict[str, str],
    annotations: dict[str, str],
    template_meta: dict[str, Any],
    replicas: int,
) -> list[Obj]:
    """A multinode service: LeaderWorkerSets + PodGroups instead of a Deployment."""
    nodes = node_count(ctx.spec)
    single = build_pod_spec(ctx)
    main = single["containers"][0]
    if not (main.get("resources") or {}).get("limits", {}).get(naming.GPU_RESOURCE):
        raise ComponentError(
            ("resources", "limits", "gpu"),
            "a multinode service needs a GPU limit (its LeaderWorkerSet "
            "worker template requires one)",
        )
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
    return lws.leader_worker_sets(
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
