"""Pod spec of one component (``GenerateBasePodSpec``, single node, component path), read
from the v1beta1 component alone (the internal model, ``expand/components.py``).

As the operator at upstream ``2a6da14c8`` does: a v1alpha1 service is converted to its
v1beta1 component first (its ``envs``, ``envFromSecret``, probes, ``resources`` and
``volumeMounts`` merged with ``extraPodSpec.mainContainer`` into container ``main``), then
the type's defaults < container ``main`` (mergo override); env: defaults < graph env <
container ``main``'s env; probes: container ``main``'s replace the default; then the
compilation cache, shared memory, frontend sidecar and backend additions. What v1beta1
cannot say (a v1alpha1 ``dynamoNamespace``, an ``envFromSecret`` the conversion drops) comes
from ``ComponentContext.preserved``.
"""

from __future__ import annotations

from typing import Any

from .. import keys, naming
from .. import kvtransfer as topology
from ..errors import NotSupportedError
from ..merge import (
    CONTAINER_ORDER,
    POD_SPEC_ORDER,
    PROBE_HANDLERS,
    add_missing_envs,
    data_copy,
    merge_envs,
    merge_override,
    merge_probe,
    omit_empty_values,
    order_keys,
)
from ..models.dump import dump
from . import components, defaults, elastic_ep, epp, gms, lws, multinode, tls
from .context import ComponentContext, ComponentError, main_container_data, pod_template_spec


def detect_backend(container: dict[str, Any]) -> str | None:
    """Framework named by ``python -m dynamo.<backend>`` in command + args, if exactly one."""
    found = naming.backends_in_command(container)
    if len(found) > 1:
        raise ComponentError(
            (), f"command runs several Dynamo backends ({', '.join(sorted(found))})", in_main=True
        )
    return found.pop() if found else None


def user_main_container(ctx: ComponentContext) -> dict[str, Any]:
    """The component's container ``main`` as plain data (``{}``: none written)."""
    return main_container_data(ctx.component)


#: a container's ``resources`` in the order they render (requests first)
_RESOURCE_ORDER = ("requests", "limits", "claims")


def _resources(user: dict[str, Any]) -> dict[str, Any]:
    """Container ``main``'s resources (a v1alpha1 service's top-level ``resources`` are in
    it already: the conversion mergo-merges the mainContainer's over them key by key,
    ``buildSharedPodTemplateFromAlpha``, ``api/v1alpha1/shared_spec_conversion.go`` @
    2a6da14c8), requests first."""
    return order_keys(data_copy(user), _RESOURCE_ORDER)


def _compilation_cache(ctx: ComponentContext) -> tuple[str, str] | None:
    """(PVC name, mount path) of the component's ``compilationCache``."""
    cache = ctx.component.compilationCache
    if cache is None:
        return None
    path = cache.mountPath
    if not path:
        if ctx.backend == "vllm":
            path = defaults.VLLM_COMPILATION_CACHE_PATH
        else:
            raise ComponentError(
                ("compilationCache", "mountPath"),
                f"a compilation cache needs a mountPoint for backend {ctx.backend!r} "
                "(only vLLM has a default)",
            )
    return cache.pvcName, path


def build_main_container(ctx: ComponentContext) -> dict[str, Any]:
    """Container ``main``: the type's defaults, then the component's container ``main``
    (mergo override), env, probes and resources as ``mergeContainerByName`` (``graph.go`` @
    2a6da14c8) treats them, then the compilation cache, KV-transfer and backend additions."""
    base, base_env = _main_defaults(ctx)
    user = user_main_container(ctx)
    user.pop("name", None)
    user_env = user.pop("env", None) or []
    user_probes: dict[str, Any] = {
        p: user.pop(p) for p in ("livenessProbe", "readinessProbe") if p in user
    }
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
    env = _main_env(ctx, base_env, user_env)
    _main_probes(container, base, user_probes, user_startup)
    # always present, `{}` when empty: Go encodes the struct (component_common.go @ 2a6da14c8)
    container["resources"] = _resources(user_resources)
    if ctx.preserved.env_from_secret:  # dropped by the conversion, still rendered
        container["envFrom"] = [
            *container.get("envFrom", []),
            {"secretRef": {"name": ctx.preserved.env_from_secret}},
        ]
    cache = _main_mounts(ctx, container)
    # backend additions are appended after the sorted env (not merged), as the operator does
    _vllm_elastic_ep(ctx, container, env)
    if cache is not None and ctx.backend == "vllm":
        env.append({"name": "VLLM_CACHE_ROOT", "value": cache[1]})
    container["env"] = omit_empty_values(env)
    return container


def _main_defaults(ctx: ComponentContext) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The component type's default container ``main`` (without env) and its default env."""
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
    return base, base_env


def _main_env(
    ctx: ComponentContext, base_env: list[dict[str, Any]], user_env: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """defaults < graph env < container main's env (a v1alpha1 service's envs with its
    mainContainer's merged over them by the conversion), sorted by name; then the
    KV-transfer policy's, the infrastructure's and the legacy config's replacements."""
    env = merge_envs(base_env, ctx.graph_envs, user_env)
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
    return env


def _main_probes(
    container: dict[str, Any],
    base: dict[str, Any],
    user_probes: dict[str, Any],
    user_startup: Any,
) -> None:
    """Container main's probe replaces the default wholesale (mergeContainerByName,
    graph.go @ 2a6da14c8; a v1alpha1 top-level probe and its mainContainer one are merged
    by the conversion). A handler-less probe alone would leave a probe the API server
    rejects: that one is merged into the default instead."""
    for probe in ("livenessProbe", "readinessProbe"):
        main_probe = user_probes.get(probe)
        if main_probe is not None:
            handled = any(h in main_probe for h in PROBE_HANDLERS)
            container[probe] = (
                data_copy(main_probe) if handled else merge_probe(base.get(probe), main_probe)
            )
    if user_startup is not None:
        container["startupProbe"] = data_copy(user_startup)


def _main_mounts(ctx: ComponentContext, container: dict[str, Any]) -> tuple[str, str] | None:
    """Mounts (mergo: container main's replace the defaults'); the compilation cache's gets
    its path, in the place of the last mount of that name (a v1alpha1 cache mount is
    converted in its place), earlier ones of that name dropped. Returns the cache."""
    mounts = list(container.get("volumeMounts") or [])
    cache = _compilation_cache(ctx)
    if cache is not None:
        named = [i for i, m in enumerate(mounts) if m.get("name") == cache[0]]
        mount = {"name": cache[0], "mountPath": cache[1]}
        if not named:
            mounts.append(mount)
        else:
            at = named[-1]
            head = [m for m in mounts[:at] if m.get("name") != cache[0]]
            mounts = [*head, mount, *mounts[at + 1 :]]
    if ctx.kv_transfer is not None:
        mounts = topology.with_mount(mounts)
    if mounts:
        container["volumeMounts"] = mounts
    return cache


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
    multi = ctx.component.multinode
    nodes = multi.nodeCount if multi is not None else 1
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
    fs = _sidecar_container(ctx)
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
        fs.get("env") or [],
    )
    env = add_missing_envs(env, _infra_env(ctx))
    # the container keeps its own name (``base.Name = sidecarName``): a v1alpha1
    # ``frontendSidecar`` was converted into one named ``sidecar-frontend``
    side: dict[str, Any] = {"name": fs["name"], "image": fs.get("image"), **base}
    if fs.get("args"):
        side["args"] = list(fs["args"])
    if fs.get("envFrom"):
        side["envFrom"] = data_copy(fs["envFrom"])
    side["env"] = omit_empty_values(env)
    side["resources"] = {}
    have = set()
    mounts = []
    for m in main_mounts:
        if m["name"] not in have:
            mounts.append(data_copy(m))
            have.add(m["name"])
    if mounts:
        side["volumeMounts"] = mounts
    return order_keys(side, CONTAINER_ORDER)


def _sidecar_container(ctx: ComponentContext) -> dict[str, Any] | None:
    """The podTemplate container the component names its ``frontendSidecar``."""
    name = ctx.component.frontendSidecar
    pod = pod_template_spec(ctx.component)
    if not name or pod is None:
        return None
    containers = pod.model_dump(exclude_none=True, include={"containers"}).get("containers")
    return next((c for c in containers or [] if c.get("name") == name), None)


def build_pod_spec(ctx: ComponentContext, *, memory_service: bool = True) -> dict[str, Any]:
    """The component's pod spec: pod defaults, its ``podTemplate.spec`` (mergo override),
    container ``main``, the other containers as written, the frontend sidecar, volumes,
    shared memory, then (``memory_service``) the GMS and failover rewrites.

    A multinode service builds it without them: they come last, on each role's pod after
    the backend's multinode rewrites (:func:`with_memory_service`)."""
    main = build_main_container(ctx)
    written = pod_template_spec(ctx.component)
    user_pod: dict[str, Any] = dump(written) if written is not None else {}
    user_containers = user_pod.pop("containers", None) or []
    user_security = "securityContext" in user_pod
    user_sa = user_pod.get("serviceAccountName")
    pod = merge_override(_pod_defaults(ctx), user_pod)
    sa = _service_account(ctx, user_sa)
    if sa is not None:
        pod["serviceAccountName"] = sa
    if not user_security:
        pod["securityContext"] = {"fsGroup": defaults.DEFAULT_FS_GROUP}
    elif pod.get("securityContext") is None:
        pod["securityContext"] = {}

    volumes = _volumes(ctx, pod, main)
    sidecar_mounts = list(main.get("volumeMounts") or [])
    mounts, volumes = _shared_memory(ctx, main, volumes)
    if mounts:
        main["volumeMounts"] = mounts
    if volumes:
        pod["volumes"] = volumes

    containers = [order_keys(main, CONTAINER_ORDER)]
    containers += [c for c in user_containers if c.get("name") != defaults.MAIN_CONTAINER]
    _place_sidecar(containers, _sidecar(ctx, sidecar_mounts))
    pod["containers"] = containers
    if memory_service:
        gms.apply(pod, ctx)  # step 14: GMS and failover rewrites
    return order_keys(pod, POD_SPEC_ORDER)


def _place_sidecar(containers: list[dict[str, Any]], sidecar: dict[str, Any] | None) -> None:
    """The frontend sidecar in the place of the container it was made from, the first of
    that name after container ``main`` (``mergeFrontendSidecarDefaults``,
    ``internal/dynamo/graph.go`` @ 2a6da14c8: the pod's other containers keep the order
    of the podTemplate; a v1alpha1 ``frontendSidecar`` was appended after its
    ``extraPodSpec.containers`` by the conversion, ``appendFrontendSidecar``)."""
    if sidecar is None:
        return
    at = next((k for k, c in enumerate(containers) if k and c["name"] == sidecar["name"]), None)
    if at is None:  # the rules refuse a name no container has, or ``main``
        containers.append(sidecar)
    else:
        containers[at] = sidecar


def with_memory_service(pod: dict[str, Any], ctx: ComponentContext) -> dict[str, Any]:
    """Step 14 of ``GenerateBasePodSpec`` (``internal/dynamo/graph.go`` @ 2a6da14c8) on a
    multinode role's pod (leader or worker): the GMS and failover rewrites, after the
    backend's ``UpdateContainer``/``UpdatePodSpec`` and the PVC volumes. ``pod`` is changed
    in place (its keys keep their order, new ones last) and returned."""
    gms.apply(pod, ctx)
    return pod


def multinode_role_pod(
    ctx: ComponentContext,
    single: dict[str, Any],
    role: str,
    addr: multinode.Addressing,
    *,
    require_command: bool = True,
) -> dict[str, Any]:
    """One role's pod (leader or worker) of a multinode service: the backend's multinode
    launch rewrite of the single-node pod (:func:`.multinode.role_pod`), then the GMS and
    failover rewrites (:func:`with_memory_service`), on the LeaderWorkerSet and Grove paths."""
    pod = multinode.role_pod(
        single,
        role,
        ctx.backend,
        components.node_count(ctx.component),
        ctx.annotations,
        lws.wait_leader_config_map_name(ctx.dgd_name),
        ctx.settings.mpi_ssh_secret,
        addr,
        require_command=require_command,
    )
    return with_memory_service(pod, ctx)


def _pod_defaults(ctx: ComponentContext) -> dict[str, Any]:
    """The operator's pod defaults, an EPP's grace period and volumes."""
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
    return pod


def _service_account(ctx: ComponentContext, user_sa: str | None) -> str | None:
    """Service account precedence (dynamo-objects.md 5.4): the DCD forces the planner's;
    Grove has no DCD, so the user's wins there, and nothing falls back to "default"."""
    if ctx.component_type == naming.PLANNER and not (ctx.grove and user_sa):
        return naming.PLANNER_SERVICE_ACCOUNT
    if user_sa:
        return user_sa
    if ctx.component_type == naming.EPP:
        return naming.EPP_SERVICE_ACCOUNT
    if ctx.k8s_discovery:
        return naming.discovery_service_account(ctx.dgd_name)
    return None if ctx.grove else "default"


def _volumes(
    ctx: ComponentContext, pod: dict[str, Any], main: dict[str, Any]
) -> list[dict[str, Any]]:
    """The pod's volumes, the KV-transfer one, and a PVC for every main-container mount
    without a volume (the operator's appendMissingPVCVolumesForMounts), so the pod stays
    valid."""
    volumes: list[dict[str, Any]] = list(pod.get("volumes") or [])
    if ctx.kv_transfer is not None:
        volumes = topology.with_volume(
            volumes, topology.volume(ctx.kv_transfer, ctx.topology_domains)
        )
    have = {v["name"] for v in volumes}
    for mount in main.get("volumeMounts") or []:
        name = mount["name"]
        if name not in have and name != defaults.SHARED_MEMORY_VOLUME:
            volumes.append({"name": name, "persistentVolumeClaim": {"claimName": name}})
            have.add(name)
    return volumes


def _shared_memory(
    ctx: ComponentContext, main: dict[str, Any], volumes: list[dict[str, Any]]
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Container main's mounts and the pod's volumes with the shared-memory ``emptyDir``
    (``sharedMemorySize`` "0": disabled; unset: the default size) replacing the user's."""
    shm = ctx.component.sharedMemorySize
    if shm == "0":
        return list(main.get("volumeMounts", [])), volumes
    mounts = [
        m
        for m in main.get("volumeMounts", [])
        if m["name"] != defaults.SHARED_MEMORY_VOLUME
        and m.get("mountPath") != defaults.SHARED_MEMORY_PATH
    ]
    volumes = [v for v in volumes if v["name"] != defaults.SHARED_MEMORY_VOLUME]
    size = shm or defaults.SHARED_MEMORY_SIZE
    volumes.append(
        {"name": defaults.SHARED_MEMORY_VOLUME, "emptyDir": {"medium": "Memory", "sizeLimit": size}}
    )
    mounts.append({"name": defaults.SHARED_MEMORY_VOLUME, "mountPath": defaults.SHARED_MEMORY_PATH})
    return mounts, volumes


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
    return ctx.preserved.dynamo_namespace or ctx.dynamo_ns


def discovery_labels() -> dict[str, str]:
    return {keys.LABEL_DISCOVERY_BACKEND: "kubernetes", keys.LABEL_DISCOVERY_ENABLED: "true"}
