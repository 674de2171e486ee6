"""Pod spec of one component (``GenerateBasePodSpec``, single node, component path).

Merge order is the operator's at upstream ``2a6da14c8``, which converts a v1alpha1 service
to a v1beta1 pod template first: defaults, then the user's ``extraPodSpec.mainContainer``
(mergo override); env: graph ``envs`` < service ``envs`` < mainContainer ``env``; probes
and resources: the mainContainer's over the service-level ones; then ``envFromSecret``,
volume mounts, compilation cache, shared memory and backend additions.
"""

from __future__ import annotations

import copy
from typing import Any

from .. import keys, naming
from .. import kvtransfer as topology
from ..errors import NotSupportedError
from ..merge import (
    CONTAINER_ORDER,
    POD_SPEC_ORDER,
    PROBE_HANDLERS,
    add_missing_envs,
    merge_envs,
    merge_override,
    merge_probe,
    omit_empty_values,
    order_keys,
)
from ..models.dump import dump
from . import defaults, elastic_ep, epp, gms, tls
from .context import ComponentContext, ComponentError


def detect_backend(container: dict[str, Any]) -> str | None:
    """Framework named by ``python -m dynamo.<backend>`` in command + args, if exactly one."""
    found = naming.backends_in_command(container)
    if len(found) > 1:
        raise ComponentError(
            ("extraPodSpec", "mainContainer"),
            f"command runs several Dynamo backends ({', '.join(sorted(found))})",
        )
    return found.pop() if found else None


def user_main_container(ctx: ComponentContext) -> dict[str, Any]:
    mc = ctx.spec.main_container
    return dump(mc) if mc is not None else {}


def _resources(ctx: ComponentContext, base: dict[str, Any]) -> dict[str, Any]:
    """The service's ``resources`` under the mainContainer's (``base``): the conversion
    mergo-merges the mainContainer over the dedicated fields (``buildSharedPodTemplateFromAlpha``,
    ``api/v1alpha1/shared_spec_conversion.go`` @ 2a6da14c8)."""
    res = ctx.spec.resources
    if res is None:
        return base
    out = copy.deepcopy(base)
    for side in ("requests", "limits"):
        item = getattr(res, side)
        if item is None:
            continue
        values: dict[str, str] = {}
        if item.cpu is not None:
            values["cpu"] = item.cpu
        if item.memory is not None:
            values["memory"] = item.memory
        if item.gpu is not None:
            values[item.gpuType or naming.GPU_RESOURCE] = item.gpu
        for key, qty in (item.custom or {}).items():
            values[key] = qty
        if values:  # mainContainer fields beat top-level ones, key by key
            out[side] = {**values, **out.get(side, {})}
    if res.claims and not out.get("claims"):  # a mainContainer list replaces the other
        out["claims"] = copy.deepcopy(res.claims)
    return out


def _compilation_cache(ctx: ComponentContext) -> tuple[str, str] | None:
    for i, vm in enumerate(ctx.spec.volumeMounts or []):
        if vm.useAsCompilationCache:
            path = vm.mountPoint
            if not path:
                if ctx.backend == "vllm":
                    path = defaults.VLLM_COMPILATION_CACHE_PATH
                else:
                    raise ComponentError(
                        ("volumeMounts", i, "mountPoint"),
                        f"a compilation cache needs a mountPoint for backend {ctx.backend!r} "
                        "(only vLLM has a default)",
                    )
            return vm.name, path
    return None


def build_main_container(ctx: ComponentContext) -> dict[str, Any]:
    spec = ctx.spec
    base = defaults.type_container(
        ctx.component_type,
        dynamo_ns=ctx.dynamo_ns,
        worker_hash=ctx.worker_hash,
        pool_name=naming.inference_pool_name(ctx.dgd_name),
        pool_namespace=ctx.namespace,
        runtime=ctx.runtime,
    )
    if ctx.component_type == naming.EPP and not epp.is_legacy(ctx.component):
        epp.to_native(base)
    base_env = merge_envs(
        defaults.common_env(
            dynamo_ns=ctx.dynamo_ns,
            component_type=ctx.component_type,
            dgd_name=ctx.dgd_name,
            dgd_namespace=ctx.namespace,
            discovery_backend=ctx.discovery_backend,
            container_discovery=ctx.container_discovery,
        ),
        base.pop("env"),
    )
    user = user_main_container(ctx)
    user.pop("name", None)
    user_env = user.pop("env", None) or []
    user_probes = {p: user.pop(p) for p in ("livenessProbe", "readinessProbe") if p in user}
    user_startup = user.pop("startupProbe", None)
    user_resources = user.pop("resources", None) or {}

    container: dict[str, Any] = {"name": defaults.MAIN_CONTAINER}
    container.update(merge_override({k: v for k, v in base.items()}, user))
    container["name"] = defaults.MAIN_CONTAINER
    if container.get("ports"):
        container["ports"] = [
            {**p, "protocol": p.get("protocol") or "TCP"} for p in container["ports"]
        ]
    if container.get("command") == []:
        del container["command"]

    # env: the v1beta1 conversion merges mainContainer env over the service envs
    # (mergeExtraPodSpecMainContainer, api/v1alpha1/shared_spec_conversion.go @ 2a6da14c8),
    # the graph envs go under them (applyDGDTemplateDefaults) and all over the defaults:
    # defaults < graph envs < service envs < mainContainer env
    env = merge_envs(base_env, ctx.graph_envs, dump(spec.envs) or [], user_env)
    if ctx.kv_transfer is not None:  # the policy's env replaces the user's of those names
        kept = [e for e in env if e["name"] not in topology.POLICY_ENV]
        env = merge_envs(kept, topology.worker_env(ctx.kv_transfer))
    env = add_missing_envs(env, _infra_env(ctx))
    if ctx.env_overrides:
        values = dict(ctx.env_overrides)
        env = [
            {"name": e["name"], "value": values[e["name"]]} if e["name"] in values else e
            for e in env
        ]

    # probes: the conversion merges a mainContainer probe over the service-level one, and
    # the result replaces the default wholesale (mergeContainerByName, graph.go @
    # 2a6da14c8). A handler-less mainContainer probe alone would leave a probe the API
    # server rejects: that one is merged into the default instead.
    for probe in ("livenessProbe", "readinessProbe"):
        top = getattr(spec, probe)
        main_probe = user_probes.get(probe)
        if top is not None:
            container[probe] = merge_probe(top, main_probe) if main_probe else copy.deepcopy(top)
        elif main_probe is not None:
            handled = any(h in main_probe for h in PROBE_HANDLERS)
            container[probe] = (
                copy.deepcopy(main_probe) if handled else merge_probe(base.get(probe), main_probe)
            )
    if user_startup is not None:
        container["startupProbe"] = copy.deepcopy(user_startup)

    # always present, `{}` when empty: Go encodes the struct (component_common.go @ 2a6da14c8)
    container["resources"] = _resources(ctx, user_resources)

    if spec.envFromSecret:
        container["envFrom"] = [
            *container.get("envFrom", []),
            {"secretRef": {"name": spec.envFromSecret}},
        ]

    mounts = list(container.get("volumeMounts") or [])
    cache = _compilation_cache(ctx)
    for vm in spec.volumeMounts or []:  # in the order written; the cache gets its path
        if cache is not None and vm.useAsCompilationCache and vm.name == cache[0]:
            mounts = [m for m in mounts if m["name"] != cache[0]]
            mounts.append({"name": cache[0], "mountPath": cache[1]})
        elif not vm.useAsCompilationCache:
            mounts.append({"name": vm.name, "mountPath": vm.mountPoint})
    if ctx.kv_transfer is not None:
        mounts = topology.with_mount(mounts)
    if mounts:
        container["volumeMounts"] = mounts

    # backend additions are appended after the sorted env (not merged), as the operator does
    _vllm_elastic_ep(ctx, container, env)
    if cache is not None and ctx.backend == "vllm":
        env.append({"name": "VLLM_CACHE_ROOT", "value": cache[1]})
    container["env"] = omit_empty_values(env)
    return container


def _infra_env(ctx: ComponentContext) -> list[dict[str, Any]]:
    s = ctx.settings
    pairs = (
        ("NATS_SERVER", s.nats_address),
        ("ETCD_ENDPOINTS", s.etcd_address),
        ("MODEL_EXPRESS_URL", s.model_express_url),
        ("PROMETHEUS_ENDPOINT", s.prometheus_endpoint),
    )
    standard = [{"name": n, "value": v} for n, v in pairs if v]
    return [*standard, *tls.transport_env(s)]  # AddStandardEnvVars, AddTransportTLSEnvVars


def _vllm_elastic_ep(ctx: ComponentContext, container: dict[str, Any], env: list[Any]) -> None:
    """A single pod heads its own Ray cluster (#12943); the multinode form is not ported."""
    if ctx.backend != "vllm":
        return
    nodes = ctx.spec.multinode.nodeCount if ctx.spec.multinode is not None else 1
    if nodes <= 1:
        elastic_ep.apply_single_pod(container, env)
        return
    line = " ".join([*(container.get("command") or []), *(container.get("args") or [])])
    if elastic_ep.ENABLE_FLAG in line:
        raise NotSupportedError(
            "vLLM elastic expert parallelism (--enable-elastic-ep) on a multinode service "
            "is not yet supported by dyn-gitops (the single-pod form is)"
        )


def _sidecar(ctx: ComponentContext, main_mounts: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The frontend sidecar; it shares the main container's mounts as they were before
    shared memory was added (``frontendSidecarMounts`` in ``GenerateBasePodSpec``,
    ``internal/dynamo/graph.go`` @ 2a6da14c8). Its defaults are the frontend's common
    container, so in container discovery mode its ``CONTAINER_NAME`` is ``main``
    (``getCommonContainer``, ``component_common.go`` @ 2a6da14c8)."""
    fs = ctx.spec.frontendSidecar
    if fs is None:
        return None
    base = defaults.frontend_container(ctx.dynamo_ns)
    env = merge_envs(
        defaults.common_env(
            dynamo_ns=ctx.dynamo_ns,
            component_type=naming.FRONTEND,
            dgd_name=ctx.dgd_name,
            dgd_namespace=ctx.namespace,
            discovery_backend=ctx.discovery_backend,
            container_discovery=ctx.container_discovery,
        ),
        base.pop("env"),
        dump(fs.envs) or [],
    )
    env = add_missing_envs(env, _infra_env(ctx))
    side: dict[str, Any] = {"name": defaults.SIDECAR_FRONTEND, "image": fs.image, **base}
    if fs.args:
        side["args"] = list(fs.args)
    if fs.envFromSecret:
        side["envFrom"] = [{"secretRef": {"name": fs.envFromSecret}}]
    side["env"] = omit_empty_values(env)
    side["resources"] = {}
    have = set()
    mounts = []
    for m in main_mounts:
        if m["name"] not in have:
            mounts.append(copy.deepcopy(m))
            have.add(m["name"])
    if mounts:
        side["volumeMounts"] = mounts
    return order_keys(side, CONTAINER_ORDER)


def build_pod_spec(ctx: ComponentContext) -> dict[str, Any]:
    spec = ctx.spec
    main = build_main_container(ctx)
    eps = spec.extraPodSpec
    user_pod: dict[str, Any] = dump(eps) if eps is not None else {}
    user_pod.pop("mainContainer", None)
    user_containers = user_pod.pop("containers", None) or []

    pod: dict[str, Any] = {
        "restartPolicy": "Always",
        "terminationGracePeriodSeconds": defaults.TERMINATION_GRACE_SECONDS,
    }
    if ctx.component_type == naming.EPP:
        pod["terminationGracePeriodSeconds"] = defaults.EPP_TERMINATION_GRACE_SECONDS
        cm, key = ctx.epp_config_map or (
            naming.epp_configmap_name(ctx.dgd_name),
            defaults.EPP_CONFIG_KEY,
        )
        legacy = epp.is_legacy(ctx.component)
        pod["volumes"] = defaults.epp_volumes(cm, key) if legacy else epp.native_volumes()
    user_security = "securityContext" in user_pod
    user_sa = user_pod.get("serviceAccountName")
    pod = merge_override(pod, user_pod)

    # service account precedence (dynamo-objects.md 5.4): the DCD forces the planner's;
    # Grove has no DCD, so the user's wins there, and nothing falls back to "default"
    sa: str | None
    if ctx.component_type == naming.PLANNER and not (ctx.grove and user_sa):
        sa = naming.PLANNER_SERVICE_ACCOUNT
    elif user_sa:
        sa = user_sa
    elif ctx.component_type == naming.EPP:
        sa = naming.EPP_SERVICE_ACCOUNT
    elif ctx.k8s_discovery:
        sa = naming.discovery_service_account(ctx.dgd_name)
    else:
        sa = None if ctx.grove else "default"
    if sa is not None:
        pod["serviceAccountName"] = sa

    if not user_security:
        pod["securityContext"] = {"fsGroup": defaults.DEFAULT_FS_GROUP}
    elif pod.get("securityContext") is None:
        pod["securityContext"] = {}

    volumes: list[dict[str, Any]] = list(pod.get("volumes") or [])
    if ctx.kv_transfer is not None:
        volumes = topology.with_volume(
            volumes, topology.volume(ctx.kv_transfer, ctx.topology_domains)
        )
    have = {v["name"] for v in volumes}
    # every main-container mount needs a volume: a missing one is taken to be the PVC of
    # that name (the operator's appendMissingPVCVolumesForMounts), so the pod stays valid
    for mount in main.get("volumeMounts") or []:
        name = mount["name"]
        if name not in have and name != defaults.SHARED_MEMORY_VOLUME:
            volumes.append({"name": name, "persistentVolumeClaim": {"claimName": name}})
            have.add(name)

    sidecar_mounts = list(main.get("volumeMounts") or [])
    shm = spec.sharedMemory
    mounts = (
        [
            m
            for m in main.get("volumeMounts", [])
            if m["name"] != defaults.SHARED_MEMORY_VOLUME
            and m.get("mountPath") != defaults.SHARED_MEMORY_PATH
        ]
        if not (shm and shm.disabled)
        else list(main.get("volumeMounts", []))
    )
    if not (shm and shm.disabled):
        volumes = [v for v in volumes if v["name"] != defaults.SHARED_MEMORY_VOLUME]
        size = shm.size if shm and shm.size else defaults.SHARED_MEMORY_SIZE
        volumes.append(
            {
                "name": defaults.SHARED_MEMORY_VOLUME,
                "emptyDir": {"medium": "Memory", "sizeLimit": size},
            }
        )
        mounts.append(
            {"name": defaults.SHARED_MEMORY_VOLUME, "mountPath": defaults.SHARED_MEMORY_PATH}
        )
    if mounts:
        main["volumeMounts"] = mounts
    if volumes:
        pod["volumes"] = volumes

    containers = [order_keys(main, CONTAINER_ORDER)]
    for c in user_containers:
        if c.get("name") != defaults.MAIN_CONTAINER:
            containers.append(c)
    sidecar = _sidecar(ctx, sidecar_mounts)
    if sidecar is not None:
        containers.append(sidecar)
    pod["containers"] = containers
    gms.apply(pod, ctx)  # step 14: GMS and failover rewrites
    return order_keys(pod, POD_SPEC_ORDER)


def pod_labels(ctx: ComponentContext, deployment_labels: dict[str, str]) -> dict[str, str]:
    """``generatePodTemplateSpec`` (``internal/controller/dynamocomponentdeployment_renderer.go``
    @ 2a6da14c8): the Deployment's labels, then the system labels over them."""
    labels = dict(deployment_labels)
    if ctx.annotations.get(keys.ANN_ENABLE_METRICS) != "false":
        labels[keys.LABEL_METRICS_ENABLED] = "true"
    if ctx.graph_label:
        labels[keys.LABEL_GRAPH_NAME] = ctx.dgd_name
    if ctx.component_type:
        labels[keys.LABEL_COMPONENT_TYPE] = ctx.component_type
    labels[keys.LABEL_COMPONENT] = ctx.service
    labels[keys.LABEL_DYNAMO_NAMESPACE] = selector_dynamo_namespace(ctx)
    if ctx.worker_hash:
        labels[keys.LABEL_WORKER_HASH] = ctx.worker_hash
    labels[keys.LABEL_SELECTOR] = ctx.name
    if ctx.k8s_discovery:
        labels.update(discovery_labels())
    return dict(sorted(labels.items()))


def selector_dynamo_namespace(ctx: ComponentContext) -> str:
    """The Dynamo namespace pods are labelled and selected with: a v1alpha1 service's
    deprecated ``dynamoNamespace`` survives conversion and wins there (not in env or
    object labels; ``GetDCDDynamoNamespace``, ``internal/dynamo/v1beta1_helpers.go`` @
    2a6da14c8)."""
    return ctx.spec.dynamoNamespace or ctx.dynamo_ns


def discovery_labels() -> dict[str, str]:
    return {keys.LABEL_DISCOVERY_BACKEND: "kubernetes", keys.LABEL_DISCOVERY_ENABLED: "true"}
