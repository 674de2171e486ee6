"""A DGD as the operator holds it: the v1beta1 ("hub") form, from either served version.

A v1alpha1 DGD reaches the operator through its conversion (``api/v1alpha1``
``ConvertTo`` at the reference release): services become a name-sorted component list,
``componentType: worker`` with ``subComponentType: prefill|decode`` becomes ``type:
prefill|decode``, and the dedicated pod fields (``resources``, ``envs``,
``envFromSecret``, probes, ``volumeMounts``, ``extraPodSpec``, ``extraPodMetadata``,
``frontendSidecar``) become one ``podTemplate`` whose container ``main`` comes first.
Fields v1beta1 has no place for (``dynamoNamespace``, service ``labels`` and
``annotations``, a non-promoted ``subComponentType``) are kept aside in
:class:`HubComponent` (the operator keeps them in conversion annotations and reads them
back). Both versions then get the defaults the CRD schema gives the pod fields.

Plain data in and out (the JSON field names), so the worker hash can encode it as Go does.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .. import memo, naming
from ..merge import data_copy, merge_override
from ..models import schemadefaults
from ..models.versions import V1ALPHA1, V1BETA1

Obj = dict[str, Any]
MAIN = "main"
FRONTEND_SIDECAR = "sidecar-frontend"
_PROMOTED = (naming.PREFILL, naming.DECODE)


@dataclass
class HubComponent:
    """One v1beta1 component, and what its v1alpha1 form said that v1beta1 cannot."""

    spec: Obj
    alpha_labels: dict[str, str] = field(default_factory=dict)
    alpha_annotations: dict[str, str] = field(default_factory=dict)
    dynamo_namespace: str | None = None  # v1alpha1 ``dynamoNamespace``
    alpha_sub_component_type: str = ""  # a v1alpha1 ``subComponentType`` not promoted

    @property
    def name(self) -> str:
        return str(self.spec.get("name", ""))

    @property
    def type(self) -> str:
        return str(self.spec.get("type") or "")

    @property
    def sub_component_type(self) -> str:
        """What the operator reads back as the v1alpha1 ``subComponentType``."""
        return self.type if self.type in _PROMOTED else self.alpha_sub_component_type


@dataclass
class HubGraph:
    name: str
    namespace: str
    annotations: dict[str, str]
    spec: Obj  # without ``components``
    components: list[HubComponent]


def _mode(value: Any) -> Any:
    """v1alpha1 lower-camel enum values (``intraPod``) are capitalised in v1beta1."""
    return value[:1].upper() + value[1:] if isinstance(value, str) and value else value


def _resource_list(item: Obj | None) -> Obj | None:
    if not item:
        return None
    out: Obj = {}
    for key in ("cpu", "memory"):
        if item.get(key) not in (None, ""):
            out[key] = str(item[key])
    if item.get("gpu") not in (None, ""):
        out[item.get("gpuType") or naming.GPU_RESOURCE] = str(item["gpu"])
    for key, value in (item.get("custom") or {}).items():
        out[key] = str(value)
    return out or None


def _resources(res: Obj) -> Obj:
    out: Obj = {}
    if res.get("claims"):
        out["claims"] = data_copy(res["claims"])
    for side in ("limits", "requests"):
        if res.get(side) is not None:
            values = _resource_list(res[side])
            if values is not None:
                out[side] = values
    return out


def _ordered_env_merge(base: list[Obj], over: list[Obj]) -> list[Obj]:
    """The conversion's env merge: base order kept, same names replaced in place."""
    out = list(base)
    index = {e.get("name"): i for i, e in enumerate(out)}
    for env in over:
        i = index.get(env.get("name"))
        if i is None:
            index[env.get("name")] = len(out)
            out.append(env)
        else:
            out[i] = env
    return out


def _has_pod_content(svc: Obj) -> bool:
    eps = svc.get("extraPodSpec") or {}
    eps_content = any(v not in (None, {}, [], "") for k, v in eps.items() if k != "mainContainer")
    main = {k: v for k, v in (eps.get("mainContainer") or {}).items() if k != "name"}
    return bool(
        svc.get("resources") is not None
        or svc.get("envs")
        or svc.get("envFromSecret") is not None
        or any(not m.get("useAsCompilationCache") for m in svc.get("volumeMounts") or [])
        or svc.get("livenessProbe") is not None
        or svc.get("readinessProbe") is not None
        or eps_content
        or any(v not in (None, {}, [], "") for v in main.values())
        or svc.get("extraPodMetadata") is not None
        or svc.get("frontendSidecar") is not None
    )


def _main_from_dedicated(svc: Obj) -> Obj:
    main: Obj = {"name": MAIN}
    if svc.get("resources") is not None:
        main["resources"] = _resources(svc["resources"])
    if svc.get("envs"):
        main["env"] = data_copy(svc["envs"])
    if svc.get("envFromSecret"):
        main["envFrom"] = [{"secretRef": {"name": svc["envFromSecret"]}}]
    for probe in ("livenessProbe", "readinessProbe"):
        if svc.get(probe) is not None:
            main[probe] = data_copy(svc[probe])
    mounts = [
        {"name": m.get("name", ""), "mountPath": m.get("mountPoint") or ""}
        for m in svc.get("volumeMounts") or []
    ]
    if mounts:
        main["volumeMounts"] = mounts
    return main


def _pod_template(svc: Obj) -> Obj | None:
    """``buildSharedPodTemplateFromAlpha``."""
    if not _has_pod_content(svc):
        return None
    tpl: Obj = {}
    meta = svc.get("extraPodMetadata") or {}
    tpl_meta = {k: dict(meta[k]) for k in ("annotations", "labels") if meta.get(k)}
    if tpl_meta:
        tpl["metadata"] = tpl_meta
    eps = data_copy(svc.get("extraPodSpec") or {})
    user_main = eps.pop("mainContainer", None)
    pod: Obj = eps
    main = _main_from_dedicated(svc)
    if user_main:
        user_main = dict(user_main, name=MAIN)
        base_env, dedicated_mounts = main.get("env") or [], main.get("volumeMounts") or []
        main = merge_override(main, user_main)
        env = _ordered_env_merge(base_env, user_main.get("env") or [])
        main.pop("env", None)
        if env:
            main["env"] = env
        mounts = list(user_main.get("volumeMounts") or []) + dedicated_mounts
        main.pop("volumeMounts", None)
        if mounts:
            main["volumeMounts"] = mounts
        if user_main.get("startupProbe") is not None:
            main["startupProbe"] = data_copy(user_main["startupProbe"])
    main["name"] = MAIN
    pod["containers"] = [main] + [c for c in pod.get("containers") or [] if c.get("name") != MAIN]
    sidecar = svc.get("frontendSidecar")
    if sidecar is not None and not any(
        c.get("name") == FRONTEND_SIDECAR for c in pod["containers"]
    ):
        ctr: Obj = {"name": FRONTEND_SIDECAR, "image": sidecar.get("image", "")}
        if sidecar.get("args"):
            ctr["args"] = list(sidecar["args"])
        if sidecar.get("envs"):
            ctr["env"] = data_copy(sidecar["envs"])
        if sidecar.get("envFromSecret"):
            ctr["envFrom"] = [{"secretRef": {"name": sidecar["envFromSecret"]}}]
        pod["containers"].append(ctr)
    tpl["spec"] = pod
    return tpl


#: the v1alpha1 CRD schema's defaults of a service's experimental blocks, which the
#: conversion reads (the API server defaults a v1alpha1 DGD before converting it; the
#: v1beta1 schema's defaults: ``models.schemadefaults``)
_GMS_DEFAULTS: Obj = {"deviceClassName": "gpu.nvidia.com", "mode": "intraPod"}
_FAILOVER_DEFAULTS: Obj = {"mode": "intraPod", "numShadows": 1}
_CHECKPOINT_DEFAULTS: Obj = {
    "deletionPolicy": "Delete",
    "enabled": False,
    "startupPolicy": "Immediate",
    "targetContainerName": "main",
}
_IDENTITY_DEFAULTS: Obj = {"pipelineParallelSize": 1, "tensorParallelSize": 1}


def _with_defaults(block: Any, defaults: Obj) -> Any:
    if not isinstance(block, dict):
        return block
    out = dict(block)
    for key, value in defaults.items():
        out.setdefault(key, value)
    if isinstance(out.get("identity"), dict):
        out["identity"] = {**_IDENTITY_DEFAULTS, **out["identity"]}
    return out


def _experimental(svc: Obj) -> Obj | None:
    exp: Obj = {}
    svc = dict(svc)
    for key, defaults in (
        ("gpuMemoryService", _GMS_DEFAULTS),
        ("failover", _FAILOVER_DEFAULTS),
        ("checkpoint", _CHECKPOINT_DEFAULTS),
    ):
        if key in svc:
            svc[key] = _with_defaults(svc[key], defaults)
    gms = svc.get("gpuMemoryService")
    if gms and gms.get("enabled"):
        exp["gpuMemoryService"] = {
            k: v
            for k, v in {
                "mode": _mode(gms.get("mode")),
                "deviceClassName": gms.get("deviceClassName"),
                "extraClientContainers": gms.get("extraClientContainers"),
                "extraClientPods": gms.get("extraClientPods"),
            }.items()
            if v not in (None, [], "")
        }
    failover = svc.get("failover")
    if failover and failover.get("enabled"):
        exp["failover"] = {
            k: v
            for k, v in {
                "mode": _mode(failover.get("mode")),
                "numShadows": failover.get("numShadows"),
            }.items()
            if v is not None
        }
    checkpoint = svc.get("checkpoint")
    if checkpoint is not None:
        cp = data_copy(checkpoint)
        for key in ("mode", "startupPolicy", "deletionPolicy"):
            if key in cp:
                cp[key] = _mode(cp[key])
        exp["checkpoint"] = cp
    return exp or None


def component_from_alpha(name: str, svc: Obj, *, defaults: bool = True) -> HubComponent:
    """``ConvertFromDynamoComponentDeploymentSharedSpec`` for the service ``name``; with
    ``defaults``, also the CRD schema's pod-field defaults (the stored form the hash reads)."""
    ctype, sub = svc.get("componentType") or "", svc.get("subComponentType") or ""
    promoted = ctype == naming.WORKER and sub in _PROMOTED
    out: Obj = {"name": name}
    if svc.get("providerOverride") is not None:
        out["providerOverride"] = data_copy(svc["providerOverride"])
    if promoted or ctype:
        out["type"] = sub if promoted else ctype
    for key in ("runtimeVersionOverride", "replicas", "minAvailable"):
        if svc.get(key) not in (None, ""):
            out[key] = svc[key]
    if svc.get("globalDynamoNamespace"):
        out["globalDynamoNamespace"] = True
    _placement_from_alpha(svc, out)
    _storage_from_alpha(svc, out)
    exp = _experimental(svc)
    if exp is not None:
        out["experimental"] = exp
    tpl = _pod_template(svc)
    if tpl is not None:
        if svc.get("frontendSidecar") is not None:
            out["frontendSidecar"] = FRONTEND_SIDECAR
        out["podTemplate"] = tpl
    return HubComponent(
        spec=apply_pod_defaults(out) if defaults else out,
        alpha_labels=dict(svc.get("labels") or {}),
        alpha_annotations=dict(svc.get("annotations") or {}),
        dynamo_namespace=svc.get("dynamoNamespace"),
        alpha_sub_component_type="" if promoted else sub,
    )


def _placement_from_alpha(svc: Obj, out: Obj) -> None:
    """``multinode`` (and its roles' overrides), ``modelRef``, ``topologyConstraint`` and
    ``eppConfig`` of the service, into the component ``out``."""
    if svc.get("multinode") is not None:
        mn = svc["multinode"]
        multinode: Obj = {"nodeCount": mn.get("nodeCount", 2)}
        for role in ("leader", "worker"):
            if mn.get(role) is not None:
                po = mn[role].get("providerOverride")
                multinode[role] = {"providerOverride": data_copy(po)} if po else {}
        out["multinode"] = multinode
    if svc.get("modelRef") is not None:
        out["modelRef"] = {
            k: v for k, v in svc["modelRef"].items() if k in ("name", "revision") and v
        }
    if svc.get("topologyConstraint") is not None:
        pack = svc["topologyConstraint"].get("packDomain")
        out["topologyConstraint"] = {"packDomain": pack} if pack else {}
    if svc.get("eppConfig") is not None:
        out["eppConfig"] = data_copy(svc["eppConfig"])


def _storage_from_alpha(svc: Obj, out: Obj) -> None:
    """``sharedMemory`` (``sharedMemorySize``), the compilation-cache mount
    (``compilationCache``) and an enabled ``scalingAdapter`` of the service, into ``out``."""
    shm = svc.get("sharedMemory")
    if shm is not None:
        if shm.get("disabled"):
            out["sharedMemorySize"] = "0"
        elif shm.get("size") not in (None, "", 0, "0"):
            out["sharedMemorySize"] = str(shm["size"])
    for mount in svc.get("volumeMounts") or []:
        if mount.get("useAsCompilationCache"):
            cache = {"pvcName": mount.get("name", "")}
            if mount.get("mountPoint"):
                cache["mountPath"] = mount["mountPoint"]
            out["compilationCache"] = cache
            break
    if (svc.get("scalingAdapter") or {}).get("enabled"):
        out["scalingAdapter"] = {}


# -------------------------------------------------------------- CRD schema defaults
def apply_pod_defaults(component: Obj) -> Obj:
    """``component`` with the CRD schema's defaults, as the API server stores it (the
    operator's v1beta1 CRD's own, :mod:`..models.schemadefaults`)."""
    out: Obj = schemadefaults.component(component)
    return out


# ------------------------------------------------------------------------- graphs
def spec_from_alpha(spec: Obj) -> Obj:
    """``ConvertFromDynamoGraphDeploymentSpec`` without the components."""
    out: Obj = {
        k: data_copy(spec[k])
        for k in (
            "annotations",
            "labels",
            "priorityClassName",
            "backendFramework",
            "providerOverride",
            "restart",
            "experimental",
        )
        if spec.get(k) is not None
    }
    if spec.get("topologyConstraint") is not None:
        out["topologyConstraint"] = spec_topology_from_alpha(spec["topologyConstraint"])
    if spec.get("envs"):
        out["env"] = data_copy(spec["envs"])
    return out


def spec_topology_from_alpha(tc: Obj) -> Obj:
    """``ConvertFromSpecTopologyConstraint``: ``topologyProfile`` is v1beta1's
    ``clusterTopologyName`` (a v1alpha1 DGD that already says ``clusterTopologyName``, which
    our model tolerates, keeps it)."""
    out: Obj = {
        "clusterTopologyName": tc.get("topologyProfile") or tc.get("clusterTopologyName") or ""
    }
    if tc.get("packDomain"):
        out["packDomain"] = tc["packDomain"]
    return out


def converted(services: Obj) -> list[HubComponent]:
    """The components of a v1alpha1 DGD's ``services`` as its conversion makes them (without
    the CRD schema's defaults), in name order."""
    return [
        HubComponent(spec, labels, annotations, namespace, sub)
        for spec, labels, annotations, namespace, sub in _converted(services)
    ]


@memo.by_repr_json  # the services of a repository's DGDs repeat (JSON data in and out)
def _converted(services: Obj) -> list[list[Any]]:
    """The conversion of ``services``: per component, the fields of a :class:`HubComponent`."""
    return [
        [
            c.spec,
            c.alpha_labels,
            c.alpha_annotations,
            c.dynamo_namespace,
            c.alpha_sub_component_type,
        ]
        for c in (
            component_from_alpha(name, services[name], defaults=False)
            for name in sorted(services)
            if services[name] is not None
        )
    ]


@memo.by_repr_json  # JSON data in and out; the components of a repository's DGDs repeat
def pod_defaults(spec: Obj) -> Obj:
    """A copy of the component ``spec`` with the CRD schema's pod-field defaults
    (``component_from_alpha`` with ``defaults``)."""
    return apply_pod_defaults(data_copy(spec))


if TYPE_CHECKING:
    from ..models import dgdspec


def _kept(c: HubComponent, kept: dgdspec.Kept) -> HubComponent:
    """A v1beta1 component with what the conversion kept of its v1alpha1 service in
    ``nvidia.com/dgd-spec`` (``kept``: that payload, read by :func:`.dgdspec.read`; one
    with problems is not read: the render refuses it, the companion controller reads a
    live DGD's as it can, ``dgdview``)."""
    if kept.spec is None:
        return c
    svc = kept.service(c.name)
    c.alpha_labels = dict(svc.labels)
    c.alpha_annotations = dict(svc.annotations)
    c.dynamo_namespace = svc.dynamo_namespace
    c.alpha_sub_component_type = str(svc.sub_component_type or "")
    return c


def graph(data: Obj, default_namespace: str) -> HubGraph:
    """The hub form of a DGD document (either served version), as the companion controller
    reads a live DGD (the render reads the DGD's typed form, ``hubform.Graph.hub``)."""
    meta = data.get("metadata") or {}
    spec = data.get("spec") or {}
    if data.get("apiVersion") == V1ALPHA1 or (
        data.get("apiVersion") != V1BETA1 and "services" in spec
    ):
        hub_spec = spec_from_alpha(spec)
        services = spec.get("services") or {}
        components = [
            component_from_alpha(name, services[name] or {})
            for name in sorted(services)
            if services[name] is not None
        ]
    else:
        hub_spec = {k: data_copy(v) for k, v in spec.items() if k != "components"}
        from ..models import dgdspec  # its models cost start-up: imported for a payload only

        kept = dgdspec.read(meta.get("annotations"))  # converted from v1alpha1: kept aside
        components = [
            _kept(HubComponent(spec=apply_pod_defaults(data_copy(c))), kept)
            for c in spec.get("components") or []
            if isinstance(c, dict)
        ]
    return HubGraph(
        name=str(meta.get("name", "")),
        namespace=str(meta.get("namespace") or default_namespace),
        annotations=dict(meta.get("annotations") or {}),
        spec=hub_spec,
        components=components,
    )
