"""A v1alpha1 DGD as the operator's conversion webhook stores it: ``nvidia.com/v1beta1``.

``ConvertTo`` (``api/v1alpha1/dynamographdeployment_conversion.go`` and
``shared_spec_conversion.go`` @ 2a6da14c8) for a DGD written in v1alpha1 (so, as the
webhook sees a create from Git, with no hub payload to restore): the spec as the DGD's
typed form holds it, converted once (``hubform.Graph.as_v1beta1``, :mod:`.workerhash.hub`,
without the CRD schema's defaults, which the API server applies itself), Go-encoded, and
the v1alpha1 fields v1beta1 has no
place for kept where the operator keeps them: the ``nvidia.com/dgd-spec`` annotation, a
sparse v1alpha1 spec in a ``{"version":1,"spec":...}`` envelope, byte-for-byte as Go's
``encoding/json`` writes it, so ``kubectl get dgd -o yaml`` shows the same object whether
the DGD came through the operator's webhook or through dyn-gitops.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from contextlib import suppress
from typing import Any

from . import keys, memo, naming
from .merge import data_copy
from .models.versions import V1BETA1
from .workerhash import gojson, golayout, hub
from .workerhash.quantity import canonical

Obj = dict[str, Any]
_PROMOTED = (naming.PREFILL, naming.DECODE)
#: the operator's conversion bookkeeping, scrubbed from the metadata before converting
_CONVERSION_ANNOTATIONS = (keys.ANN_DGD_SPEC, "nvidia.com/dgd-status")


def stored(meta: Obj, spec: Obj, components: Iterable[Obj], payload: str | None) -> Obj:
    """The v1beta1 document of a v1alpha1 DGD from its converted form (``hubform.Graph``):
    its document ``meta``, its converted graph ``spec`` (no components) and ``components``
    (neither changed) and the ``payload`` of what v1beta1 cannot hold
    (:func:`preserved_spec`)."""
    meta = data_copy(meta)
    annotations = {
        k: v for k, v in (meta.get("annotations") or {}).items() if k not in _CONVERSION_ANNOTATIONS
    }
    out_spec = data_copy(spec)
    if out_spec.get("env"):
        out_spec["env"] = json.loads(gojson.encode("slice:struct:core/v1.EnvVar", out_spec["env"]))
    converted = [as_stored(c) for c in components]
    if converted:
        out_spec["components"] = converted
    if payload is not None:
        annotations[keys.ANN_DGD_SPEC] = payload
    if annotations:
        meta["annotations"] = annotations
    else:
        meta.pop("annotations", None)
    # a status in Git is never applied (status subresource): not converted
    kind = "DynamoGraphDeployment"
    return {"apiVersion": V1BETA1, "kind": kind, "metadata": meta, "spec": out_spec}


@memo.by_repr_json  # a repository's services repeat; JSON data, fresh for every caller
def as_stored(component: Obj) -> Obj:
    """``component`` as the webhook returns it: Go's encoding of the v1beta1 type (zero
    values of fields without ``omitempty`` written, empty ones dropped, quantities
    canonical), less the empty value-struct artefacts (``resources: {}``, ``metadata: {}``)
    its ``MarshalJSON`` strips (``api/v1beta1/marshal.go`` @ 2a6da14c8)."""
    out: Obj = json.loads(gojson.encode(golayout.ROOT, component))
    _strip_empty_value_structs(golayout.ROOT, out)
    return out


#: per struct: its fields that may hold an empty value struct, by JSON name: (the kind to
#: walk into, None when nothing below can be a struct; whether an empty value is dropped)
_STRIP_PLANS: dict[str, dict[str, tuple[str | None, bool]]] = {}


def _holds_struct(kind: str) -> bool:
    head, _, rest = kind.partition(":")
    if head == "struct":
        return True
    return head in ("ptr", "slice", "map") and _holds_struct(rest)


def _strip_plan(struct: str) -> dict[str, tuple[str | None, bool]]:
    plan = _STRIP_PLANS.get(struct)
    if plan is None:
        plan = {}
        for field in golayout.STRUCTS[struct]:
            name, kind = field[0], field[1]
            # a value (not pointer) struct, or a JSON value (a struct too in Go)
            is_struct = kind.startswith("struct:") or kind.endswith(".JSON")
            walk = kind if _holds_struct(kind) else None
            if walk is not None or is_struct:
                plan[name] = (walk, is_struct)
        _STRIP_PLANS[struct] = plan
    return plan


def _strip_empty_value_structs(kind: str, value: Any) -> None:
    head, _, rest = kind.partition(":")
    if head == "ptr":
        _strip_empty_value_structs(rest, value)
    elif head == "slice" and isinstance(value, list):
        for item in value:
            _strip_empty_value_structs(rest, item)
    elif head == "map" and isinstance(value, dict):
        for item in value.values():
            _strip_empty_value_structs(rest, item)
    elif head == "struct" and isinstance(value, dict):
        # only the fields that can hold a struct (the rest are scalars and lists of them)
        plan = _strip_plan(rest)
        for name in [n for n in value if n in plan]:
            walk, is_struct = plan[name]
            child = value[name]
            if not isinstance(child, (dict, list)):
                continue
            if walk is not None:
                _strip_empty_value_structs(walk, child)
            if is_struct and child == {}:
                del value[name]


# ------------------------------------------------------------------ the sparse save
@memo.by_repr  # pure, and the specs of a repository's DGDs repeat
def preserved_spec(spec: Obj) -> str | None:
    """The ``nvidia.com/dgd-spec`` value for the v1alpha1 ``spec``, or None when v1beta1
    holds all of it (``ConvertFromDynamoGraphDeploymentSpec``'s ``save``)."""
    save: Obj = {}
    if spec.get("pvcs"):
        save["pvcs"] = data_copy(spec["pvcs"])
    services: Obj = {}
    for name, svc in (spec.get("services") or {}).items():
        if svc is None:
            services[name] = None
            continue
        comp = _component_save(svc)
        if svc.get("serviceName") and svc["serviceName"] != name:
            comp["serviceName"] = svc["serviceName"]
        if comp:
            services[name] = comp
    if services:
        save["services"] = services
    if not save:
        return None
    body = gojson.encode(golayout.ALPHA_GRAPH_SPEC, save)
    return '{"version":1,"spec":' + body + "}"


def _present(svc: Obj, key: str) -> bool:
    return svc.get(key) is not None


def _component_save(svc: Obj) -> Obj:
    """``saveSharedAlphaOnlySpec`` with ``includeOriginSplits`` (a DGD created in v1alpha1)."""
    save: Obj = {}
    ctype, sub = svc.get("componentType") or "", svc.get("subComponentType") or ""
    if sub and not (ctype == naming.WORKER and sub in _PROMOTED):
        save["subComponentType"] = sub
    for key in ("dynamoNamespace", "autoscaling", "ingress", "envFromSecret", "frontendSidecar"):
        if _present(svc, key):
            save[key] = data_copy(svc[key])
    for key in ("annotations", "labels"):
        if svc.get(key):
            save[key] = dict(svc[key])
    if _present(svc, "resources") and _resources_lossy(svc["resources"]):
        save["resources"] = data_copy(svc["resources"])
    mounts = svc.get("volumeMounts") or []
    if sum(1 for m in mounts if m.get("useAsCompilationCache")) > 1:
        save["volumeMounts"] = data_copy(mounts)
    if _present(svc, "sharedMemory") and _shared_memory_lossy(svc["sharedMemory"]):
        save["sharedMemory"] = data_copy(svc["sharedMemory"])
    meta = svc.get("extraPodMetadata")
    if meta is not None and not meta.get("annotations") and not meta.get("labels"):
        save["extraPodMetadata"] = data_copy(meta)
    eps = svc.get("extraPodSpec")
    if eps is not None and (
        _extra_pod_spec_lossy(eps)
        or (_present(svc, "frontendSidecar") and _has_container(eps, hub.FRONTEND_SIDECAR))
    ):
        save["extraPodSpec"] = data_copy(eps)
    for key in ("scalingAdapter", "gpuMemoryService", "failover"):
        if _present(svc, key) and not svc[key].get("enabled"):
            save[key] = data_copy(svc[key])
    _save_main_container_origins(svc, save)
    return save


def _save_main_container_origins(svc: Obj, save: Obj) -> None:
    """``saveSharedMainContainerOrigins``: which of the main container's values came from
    ``extraPodSpec.mainContainer`` and which from the dedicated fields."""
    main = (svc.get("extraPodSpec") or {}).get("mainContainer")
    if main is None:
        return

    def saved_main() -> Obj:
        eps = save.setdefault("extraPodSpec", {})
        mc: Obj = eps.setdefault("mainContainer", {})
        return mc

    if main.get("name"):
        saved_main()["name"] = main["name"]
    pairs = (
        ("envs", "env"),
        ("envFromSecret", "envFrom"),
        ("resources", "resources"),
        ("volumeMounts", "volumeMounts"),
        ("livenessProbe", "livenessProbe"),
        ("readinessProbe", "readinessProbe"),
    )
    for dedicated, native in pairs:
        if _given(svc.get(dedicated), dedicated) or _given(main.get(native), native):
            if svc.get(dedicated) is not None:
                save[dedicated] = data_copy(svc[dedicated])
            mc = saved_main()
            if main.get(native) is not None:
                mc[native] = data_copy(main[native])


def _given(value: Any, key: str) -> bool:
    """Go's test for the field: a list when non-empty, the container's ``resources`` (a
    struct) when not all zero, a pointer when set."""
    if key in ("envs", "env", "envFrom", "volumeMounts"):
        return bool(value)
    if key == "resources" and isinstance(value, dict) and "claims" not in value:
        # the container's ResourceRequirements; the service's Resources has no ``claims``
        # key unless given, and is a pointer
        return any(v not in (None, {}, []) for v in value.values())
    return value is not None


def _resource_list(item: Obj | None) -> dict[str, str] | None:
    """``itemToResourceList``: values that parse as quantities, under their native keys."""
    if item is None:
        return None
    out: dict[str, str] = {}

    def put(key: str, value: Any) -> None:
        with suppress(ValueError):  # Go drops what does not parse
            out[key] = canonical(str(value))

    for key in ("cpu", "memory"):
        if item.get(key):
            put(key, item[key])
    if item.get("gpu"):
        put(item.get("gpuType") or naming.GPU_RESOURCE, item["gpu"])
    for key, value in (item.get("custom") or {}).items():
        put(key, value)
    return out or None


def _resource_item(values: dict[str, str] | None) -> Obj | None:
    """``resourceItemFromList``."""
    if not values:
        return None
    out: Obj = {}
    for key, value in values.items():
        if key in ("cpu", "memory"):
            out[key] = value
        elif key == naming.GPU_RESOURCE:
            out["gpu"] = value
        else:
            out.setdefault("custom", {})[key] = value
    return out


def _item_go(item: Obj | None) -> tuple[Any, ...] | None:
    """A ``*ResourceItem`` as Go compares it (absent and empty strings are one value)."""
    if item is None:
        return None
    custom = item.get("custom")
    return (
        *(str(item.get(k) or "") for k in ("cpu", "memory", "gpu", "gpuType")),
        None if custom is None else {k: str(v) for k, v in custom.items()},
    )


def _resources_lossy(res: Obj) -> bool:
    """``resourcesNeedPreservation``: the v1alpha1 resources do not survive the trip
    through native resource requirements unchanged (unparseable or non-canonical values,
    an explicit GPU type, an empty item)."""
    back = [_resource_item(_resource_list(res.get(side))) for side in ("requests", "limits")]
    if back == [None, None] and not res.get("claims"):
        return True  # resourcesFromNative gives nil, never equal to a set value
    here = [_item_go(res.get(side)) for side in ("requests", "limits")]
    return here != [_item_go(b) for b in back]


def _shared_memory_lossy(shm: Obj) -> bool:
    """``sharedMemoryNeedsPreservation``: a disabled one with a size, or an enabled one
    without (neither survives as ``sharedMemorySize``)."""
    zero = shm.get("size") in (None, "", 0, "0")
    return not zero if shm.get("disabled") else zero


def _empty_container(container: Obj | None, *, ignore_name: bool = True) -> bool:
    if container is None:
        return True
    return all(
        v in (None, "", [], {}, False)
        for k, v in container.items()
        if not (ignore_name and k == "name")
    )


def _extra_pod_spec_lossy(eps: Obj) -> bool:
    """``extraPodSpecNeedsPreservation``: no pod field and a main container that is empty
    but for its name (nothing of it reaches the pod template)."""
    pod_zero = all(v in (None, "", [], {}, False) for k, v in eps.items() if k != "mainContainer")
    return pod_zero and _empty_container(eps.get("mainContainer"))


def _has_container(eps: Obj, name: str) -> bool:
    return any(c.get("name") == name for c in eps.get("containers") or [])
