"""GPU Memory Service (GMS) and active-passive failover (``dynamo-pod-spec.md`` 5 step 14,
``dynamo-objects.md`` 5.3 and 7.1).

What the 1.5.1 operator does is recorded, with sources, in
``docs/reference-behaviour.md`` ("GPU Memory Service and failover"). In short, for a
service with ``gpuMemoryService.enabled``:

* the main container's ``nvidia.com/gpu`` is replaced by a DRA claim shared by every
  container of the pod, through a ResourceClaimTemplate ``<dgd>-<service>-gpu``;
* a native sidecar (init container with ``restartPolicy: Always``) runs the GMS server,
  talking to the engine over Unix sockets in an ``emptyDir`` volume;
* with ``failover.enabled`` the main container is cloned into ``engine-0`` (active) and
  ``engine-1`` (standby) with staggered ports (vLLM only).

On a multinode service the operator does this to each leader and worker pod, after the
backend's multinode rewrites (LeaderWorkerSet and Grove alike); intra-pod failover on a
LeaderWorkerSet is refused (:func:`check_leader_worker_set`).

Everything here is pure: it rewrites the pod-spec dict :func:`apply` is given, and
:func:`resource_claim_templates` builds the DGD's claim templates.
"""

from __future__ import annotations

import copy
import re
from typing import Any

from .. import gpus, naming
from ..bounded import parse_int
from ..merge import CONTAINER_ORDER, order_keys
from ..models import v1beta1
from ..settings import RenderSettings
from . import defaults
from .components import GraphComponents, node_count
from .context import ComponentContext, ComponentError, main_container_data

Obj = dict[str, Any]

RESOURCE_API_VERSION = "resource.k8s.io/v1"
_GO_ATOI = re.compile(r"[+-]?[0-9]+")
_MASTER_PORT_FLAG = "--master-port"
_ENGINE_PREFIX = "engine-"
#: env the engines must not inherit from the main container (replaced or dropped)
_ENGINE_DROPPED_ENV = frozenset(
    {
        "DYN_SYSTEM_USE_ENDPOINT_HEALTH_STATUS",
        "DYN_SYSTEM_PORT",
        "DYN_SYSTEM_ENABLED",
        "DYN_HEALTH_CHECK_ENABLED",
        "CONTAINER_NAME",
        "DYN_FORWARDPASS_METRIC_PORT",
    }
)


def _experimental(component: v1beta1.Component, key: str) -> dict[str, Any] | None:
    exp = component.experimental
    block = getattr(exp, key) if exp is not None else None
    return block if isinstance(block, dict) else None


def gms_enabled(component: v1beta1.Component) -> bool:
    """``experimental.gpuMemoryService`` is there (v1beta1: present = enabled; a v1alpha1
    ``gpuMemoryService`` converts into it only when ``enabled``)."""
    return _experimental(component, "gpuMemoryService") is not None


def failover_enabled(component: v1beta1.Component) -> bool:
    """``experimental.failover`` is there (as :func:`gms_enabled`)."""
    return _experimental(component, "failover") is not None


def _atoi(text: str) -> int | None:
    """Go ``strconv.Atoi``: optional sign and decimal digits only (no spaces, no ``_``)."""
    return parse_int(text) if _GO_ATOI.fullmatch(text) else None  # and its int64 range


def gpu_count(component: v1beta1.Component) -> int:
    """GPUs of a GMS component, as the 1.5 operator counts them for its claim template and
    its admission check (``dra.ExtractGPUCountFromResourceRequirements`` on
    ``GetMainContainerResources``): the first GPU resource name (sorted) of container
    ``main``'s ``limits``, else of its ``requests``; 0 if none, or if that quantity is no
    whole number (the operator's error): :func:`dyn_gitops.gpus.count`, which the GMS
    admission rule uses too. A v1alpha1 service's container ``main`` holds ``resources``
    with ``mainContainer.resources`` winning key by key (the conversion), so a
    ``nvidia.com/gpu`` written in ``mainContainer`` counts."""
    return gpus.count(main_container_data(component).get("resources"))


def claim_template_name(dgd_name: str, service: str) -> str:
    """``dra.ResourceClaimTemplateName``: ``<dgd>-<lower(service)>-gpu``."""
    return f"{dgd_name}-{service.lower()}-gpu"


def device_class(component: v1beta1.Component) -> str:
    gms = _experimental(component, "gpuMemoryService") or {}
    return gms.get("deviceClassName") or defaults.GMS_DEVICE_CLASS


# --- the pod spec --------------------------------------------------------------------------


def apply(pod: Obj, ctx: ComponentContext) -> None:
    """Step 14 of ``GenerateBasePodSpec``: the GMS rewrite, then the failover rewrite.

    ``pod`` is the finished pod spec (main container first) of a single-node pod or of one
    multinode role (leader or worker: the operator runs it on each, after the backend's
    multinode rewrites); it is changed in place. Raises :class:`ComponentError` (with the
    field path) for what the operator refuses.
    """
    component = ctx.component
    if failover_enabled(component) and not gms_enabled(component):
        raise ComponentError(
            ("experimental", "failover"), "failover requires gpuMemoryService.enabled"
        )
    if not gms_enabled(component):
        return
    nodes = node_count(component)
    if not ctx.settings.dra:
        raise ComponentError(
            ("experimental", "gpuMemoryService"),
            "gpuMemoryService needs Dynamic Resource Allocation (the "
            "resource.k8s.io/v1 API); the operator refuses it without DRA: "
            "set the setting dra to true if the cluster serves it",
        )
    if gpu_count(component) < 1:
        raise ComponentError(
            ("experimental", "gpuMemoryService"),
            "gpuMemoryService needs a GPU count >= 1 (resources.limits.gpu "
            "or resources.requests.gpu)",
        )
    if failover_enabled(component) and ctx.backend != "vllm":
        raise ComponentError(
            ("experimental", "failover"),
            f"failover is supported only for vLLM workers (backend: {ctx.backend})",
        )

    containers: list[Obj] = pod["containers"]
    _apply_claim(pod, containers, claim_template_name(ctx.dgd_name, ctx.service))
    _ensure_server_sidecar(pod, containers)
    if failover_enabled(component):
        pod["containers"] = _failover_containers(containers, nodes)


def _apply_claim(pod: Obj, containers: list[Obj], template: str) -> None:
    """``dra.ApplyClaim``: the first container's GPUs become the shared pod-level claim."""
    if any(c.get("name") == defaults.GMS_CLAIM for c in pod.get("resourceClaims") or []):
        return
    main = containers[0]
    resources = dict(main.get("resources") or {})
    for side in ("limits", "requests"):
        if side in resources:
            rest = {k: v for k, v in resources[side].items() if not gpus.is_gpu_resource(k)}
            if rest:
                resources[side] = rest
            else:
                del resources[side]
    resources["claims"] = [*resources.get("claims", []), {"name": defaults.GMS_CLAIM}]
    main["resources"] = order_keys(resources, ("limits", "requests", "claims"))
    containers[0] = order_keys(main, CONTAINER_ORDER)
    tolerations = list(pod.get("tolerations") or [])
    if not any(
        t.get("key") == naming.GPU_RESOURCE and t.get("effect") == "NoSchedule" for t in tolerations
    ):
        tolerations.append(
            {"key": naming.GPU_RESOURCE, "operator": "Exists", "effect": "NoSchedule"}
        )
    pod["tolerations"] = tolerations
    pod["resourceClaims"] = [
        *(pod.get("resourceClaims") or []),
        {"name": defaults.GMS_CLAIM, "resourceClaimTemplateName": template},
    ]


def _socket_mount() -> Obj:
    return {"name": defaults.GMS_VOLUME, "mountPath": defaults.GMS_MOUNT_PATH}


def _socket_env() -> Obj:
    return {"name": defaults.GMS_SOCKET_DIR_ENV, "value": defaults.GMS_MOUNT_PATH}


def _ensure_server_sidecar(pod: Obj, containers: list[Obj]) -> None:
    """``gms.EnsureServerSidecar`` (``internal/gms/gms.go`` @ 2a6da14c8): socket volume,
    mount and env on the main container, and the GMS server as a native sidecar without a
    startup probe (each only if not there yet)."""
    main = containers[0]
    volumes = list(pod.get("volumes") or [])
    if not any(v.get("name") == defaults.GMS_VOLUME for v in volumes):
        volumes.append({"name": defaults.GMS_VOLUME, "emptyDir": {}})
    pod["volumes"] = volumes
    mounts = list(main.get("volumeMounts") or [])
    if not any(m.get("name") == defaults.GMS_VOLUME for m in mounts):
        mounts.append(_socket_mount())
    main["volumeMounts"] = mounts
    env = list(main.get("env") or [])
    if not any(e.get("name") == defaults.GMS_SOCKET_DIR_ENV for e in env):
        env.append(_socket_env())
    main["env"] = env
    containers[0] = order_keys(main, CONTAINER_ORDER)

    init = list(pod.get("initContainers") or [])
    if any(c.get("name") == defaults.GMS_SERVER_CONTAINER for c in init):
        return
    sidecar: Obj = {"name": defaults.GMS_SERVER_CONTAINER}
    if main.get("image"):
        sidecar["image"] = main["image"]
    sidecar.update(
        {
            "command": ["python3", "-m", defaults.GMS_SERVER_MODULE],
            "env": [_socket_env()],
            "resources": {"claims": [{"name": defaults.GMS_CLAIM}]},
            "restartPolicy": "Always",
            "volumeMounts": [_socket_mount()],
        }
    )
    pod["initContainers"] = [*init, sidecar]


def check_leader_worker_set(component: v1beta1.Component) -> None:
    """``checkMainContainer`` on each LeaderWorkerSet pod template
    (``generateLeaderPodTemplateSpec`` / ``generateWorkerPodTemplateSpec`` in
    ``internal/controller/dynamocomponentdeployment_renderer.go`` @ 2a6da14c8), after
    ``GenerateBasePodSpec``: intra-pod failover has renamed container ``main`` to the
    engines by then, so the operator creates no LeaderWorkerSet ("main container not found
    in pod spec"). The Grove path does not check it and renders both engines per role."""
    if failover_enabled(component) and node_count(component) > 1:
        raise ComponentError(
            ("experimental", "failover"),
            "intra-pod failover on a multinode service is not created on the "
            "LeaderWorkerSet path (the operator replaces container main by engine-0 and "
            "engine-1, then refuses the leader and worker templates: main container not "
            "found in pod spec); render it on the Grove path (setting grove true), or "
            "remove failover, or use one node",
        )


# --- failover ------------------------------------------------------------------------------


def _failover_containers(containers: list[Obj], nodes: int) -> list[Obj]:
    """``buildFailoverPod`` (vLLM): ``engine-0`` and ``engine-1`` cloned from the main
    container, the other containers after them, then the vLLM overrides."""
    main, others = containers[0], containers[1:]
    engines = [_engine(main, i) for i in range(defaults.FAILOVER_ENGINES)]
    return [
        _vllm_overrides(c, nodes) if str(c.get("name", "")).startswith(_ENGINE_PREFIX) else c
        for c in (*engines, *others)
    ]


def _engine(main: Obj, engine_id: int) -> Obj:
    engine = copy.deepcopy(main)
    name = f"{_ENGINE_PREFIX}{engine_id}"
    port_name = f"system-{engine_id}"
    system_port = defaults.SYSTEM_PORT + engine_id
    engine["name"] = name
    engine["ports"] = [{"name": port_name, "containerPort": system_port, "protocol": "TCP"}]
    env = [e for e in engine.get("env") or [] if e.get("name") not in _ENGINE_DROPPED_ENV]
    env += [
        {"name": "ENGINE_ID", "value": str(engine_id)},
        {"name": "CONTAINER_NAME", "value": name},
        {
            "name": "FAILOVER_LOCK_PATH",
            "value": f"{defaults.GMS_MOUNT_PATH}/{defaults.FAILOVER_LOCK_FILE}",
        },
        {"name": "DYN_SYSTEM_STARTING_HEALTH_STATUS", "value": "notready"},
        {"name": "DYN_SYSTEM_PORT", "value": str(system_port)},
        {"name": "DYN_SYSTEM_ENABLED", "value": "true"},
        # both engines share the pod network: one forward-pass metric port each
        # (buildEngineContainer, internal/dynamo/failover.go @ 2a6da14c8)
        {
            "name": "DYN_FORWARDPASS_METRIC_PORT",
            "value": str(defaults.FORWARDPASS_METRIC_PORT + engine_id),
        },
    ]
    engine["env"] = env
    for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
        http = (engine.get(probe) or {}).get("httpGet")
        if http is not None:
            http["port"] = port_name
    return order_keys(engine, CONTAINER_ORDER)


def _vllm_overrides(container: Obj, nodes: int) -> Obj:
    """``applyVLLMOverrides``: per-engine NIXL side-channel, KV-event and master ports
    (every container whose name starts with ``engine-``)."""
    c = copy.deepcopy(container)
    engine_id = _atoi(str(c["name"])[len(_ENGINE_PREFIX) :]) or 0
    c["env"] = [
        *(c.get("env") or []),
        {"name": "DYN_VLLM_GMS_SHADOW_MODE", "value": "true"},
        {
            "name": "VLLM_NIXL_SIDE_CHANNEL_PORT",
            "value": str(defaults.FAILOVER_VLLM_NIXL_SIDE_CHANNEL_PORT + engine_id),
        },
        {
            "name": "DYN_VLLM_KV_EVENT_PORT",
            "value": str(defaults.FAILOVER_VLLM_KV_EVENT_PORT + engine_id),
        },
    ]
    if engine_id > 0:
        offset = engine_id * defaults.FAILOVER_VLLM_MASTER_PORT_STRIDE
        if _has_master_port(c):
            _stagger_flag(c, _MASTER_PORT_FLAG, offset)
        else:
            c["args"] = [
                *(c.get("args") or []),
                _MASTER_PORT_FLAG,
                str(defaults.FAILOVER_VLLM_MASTER_PORT + offset),
            ]
    if nodes > 1:
        c["env"].append({"name": "NNODES", "value": str(nodes)})
    return order_keys(c, CONTAINER_ORDER)


def _has_master_port(c: Obj) -> bool:
    spaced = _MASTER_PORT_FLAG + " "
    return any(a == _MASTER_PORT_FLAG or spaced in a for a in c.get("args") or []) or any(
        spaced in a for a in c.get("command") or []
    )


def _leading_digits(text: str) -> str:
    match = re.match(r"[0-9]*", text)
    return match.group(0) if match else ""


def _stagger_flag(c: Obj, flag: str, offset: int) -> None:
    """``staggerFlagValue``: add ``offset`` to the first ``flag N`` found: a separate
    ``N`` token in args, else inside an args string, else inside a command string."""
    args: list[str] = list(c.get("args") or [])
    for i, arg in enumerate(args):
        if arg == flag and i + 1 < len(args):
            port = _atoi(args[i + 1])
            if port is not None:
                args[i + 1] = str(port + offset)
                c["args"] = args
                return
    spaced = flag + " "
    for field in ("args", "command"):
        items: list[str] = list(c.get(field) or [])
        for i, item in enumerate(items):
            if spaced not in item:
                continue
            digits = _leading_digits(item.split(spaced)[1])
            port = _atoi(digits)
            if port is not None:
                items[i] = item.replace(spaced + digits, spaced + str(port + offset), 1)
                c[field] = items
                return


# --- the ResourceClaimTemplates --------------------------------------------------------------


def resource_claim_template(
    dgd_name: str, namespace: str, component: v1beta1.Component
) -> Obj | None:
    """The component's template (``dra.GenerateResourceClaimTemplate``), or None where the
    operator has none (GMS off, or no GPU count)."""
    if not gms_enabled(component):
        return None
    count = gpu_count(component)
    if count <= 0:
        return None
    return {
        "apiVersion": RESOURCE_API_VERSION,
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": claim_template_name(dgd_name, component.name), "namespace": namespace},
        # Go encodes the template's empty ObjectMeta (dra.GenerateResourceClaimTemplate)
        "spec": {
            "metadata": {},
            "spec": {
                "devices": {
                    "requests": [
                        {
                            "name": defaults.GMS_DEVICE_REQUEST,
                            "exactly": {
                                "deviceClassName": device_class(component),
                                "allocationMode": "ExactCount",
                                "count": count,
                            },
                        }
                    ]
                }
            },
        },
    }


def resource_claim_templates(
    dgd_name: str, graph: GraphComponents, namespace: str, settings: RenderSettings
) -> list[Obj]:
    """Every component's template, by component name (``reconcileGMSResourceClaimTemplates``
    walks the components); none at all without DRA (the operator syncs none then)."""
    if not settings.dra:
        return []
    out = []
    for component in sorted(graph.components, key=lambda c: c.name):
        rct = resource_claim_template(dgd_name, namespace, component)
        if rct is not None:
            out.append(rct)
    return out
