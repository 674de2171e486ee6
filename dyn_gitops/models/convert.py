"""``nvidia.com/v1beta1`` DGD -> the v1alpha1 DGD it renders like, for one output only: a
v1beta1 DGD emitted with setting source-api-version v1alpha1 (the operator's
``ConvertFrom``). Nothing reads the result to render: the expansion reads the v1beta1 form.
And the mappings of field paths between a DGD and its other version's form.

Section 4 of ``spec/dynamo-pod-spec.md`` in reverse, so that a v1beta1 DGD and the
v1alpha1 DGD emitted for it render identically (and give the same worker hash): the
container ``main`` goes back to the dedicated service fields where they can say the same
thing (``env`` -> ``envs``, a trailing ``secretRef`` -> ``envFromSecret``, cpu/memory/gpu
-> ``resources``, probes, plain volume mounts) and stays in ``extraPodSpec.mainContainer``
otherwise. ``type: prefill|decode`` becomes ``componentType: worker`` +
``subComponentType`` (the upstream v1alpha1 examples' spelling, rendered as the
v1alpha1-era operator did).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pydantic import ValidationError

from .. import naming
from ..errors import FieldPath, Problem, RenderError
from . import v1alpha1, v1beta1

MAIN = "main"
_SPLIT_TYPES = (naming.PREFILL, naming.DECODE)


def _resources(res: dict[str, Any]) -> tuple[dict[str, Any] | None, dict[str, Any]]:
    """(v1alpha1 ``resources``, what must stay on the container)."""
    out: dict[str, Any] = {}
    for side in ("requests", "limits"):
        values = res.get(side)
        if not values:
            continue
        item: dict[str, Any] = {}
        for key, qty in values.items():
            if key in ("cpu", "memory"):
                item[key] = qty
            elif key == naming.GPU_RESOURCE:
                item["gpu"] = qty
            else:
                item.setdefault("custom", {})[key] = qty
        out[side] = item
    if res.get("claims"):
        out["claims"] = res["claims"]
    rest = {k: v for k, v in res.items() if k not in ("requests", "limits", "claims")}
    return (out or None), rest


def _split_main(main: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(service fields, the rest of the main container)."""
    main = dict(main)
    main.pop("name", None)
    fields: dict[str, Any] = {}
    if main.get("env"):
        fields["envs"] = main.pop("env")
    env_from = list(main.pop("envFrom", None) or [])
    last = env_from[-1] if env_from else None
    if (
        isinstance(last, dict)
        and list(last) == ["secretRef"]
        and isinstance(last["secretRef"], dict)
        and list(last["secretRef"]) == ["name"]
    ):
        # envFromSecret is appended after mainContainer.envFrom: same order either way
        fields["envFromSecret"] = last["secretRef"]["name"]
        env_from.pop()
    if env_from:
        main["envFrom"] = env_from
    if main.get("resources"):
        resources, rest = _resources(main.pop("resources"))
        if resources:
            fields["resources"] = resources
        if rest:
            main["resources"] = rest
    for probe in ("livenessProbe", "readinessProbe"):
        if main.get(probe) is not None:
            fields[probe] = main.pop(probe)
    mounts = list(main.pop("volumeMounts", None) or [])
    plain: list[dict[str, Any]] = []
    # the dedicated mounts render after mainContainer's: only a trailing run can move
    while mounts and set(mounts[-1]) == {"name", "mountPath"}:
        m = mounts.pop()
        plain.insert(0, {"name": m["name"], "mountPoint": m["mountPath"]})
    if mounts:
        main["volumeMounts"] = mounts
    if plain:
        fields["volumeMounts"] = plain
    return fields, main


def _sidecar(container: dict[str, Any], loc: FieldPath) -> dict[str, Any]:
    extra = sorted(set(container) - {"name", "image", "args", "env", "envFrom"})
    if extra:
        raise RenderError(
            [
                Problem.at(
                    loc,
                    "a frontendSidecar container with "
                    f"{', '.join(extra)} is not yet supported (only image, "
                    "args, env and one envFrom secretRef)",
                )
            ]
        )
    if not container.get("image"):
        raise RenderError([Problem.at(loc, "the frontendSidecar container needs an image")])
    out: dict[str, Any] = {"image": container["image"]}
    if container.get("args"):
        out["args"] = container["args"]
    if container.get("env"):
        out["envs"] = container["env"]
    env_from = container.get("envFrom") or []
    if env_from:
        ref = env_from[0].get("secretRef") if len(env_from) == 1 else None
        if not (isinstance(ref, dict) and list(env_from[0]) == ["secretRef"] and ref.get("name")):
            raise RenderError(
                [
                    Problem.at(
                        loc,
                        "a frontendSidecar envFrom other than one secretRef is not yet supported",
                    )
                ]
            )
        out["envFromSecret"] = ref["name"]
    return out


def _service(c: v1beta1.Component, loc: FieldPath) -> dict[str, Any]:
    """The v1alpha1 service of component ``c`` (at ``loc``): its own fields, then its pod
    template as the dedicated fields and ``extraPodSpec``."""
    svc = _service_fields(c)
    pod = _pod_fields(c, svc, loc)
    if c.compilationCache is not None:
        _cache_mount(c.compilationCache, svc, pod)
    if pod:
        svc["extraPodSpec"] = pod
    return svc


def _service_fields(c: v1beta1.Component) -> dict[str, Any]:
    """The service fields of ``c`` that are not its pod template."""
    exp = c.experimental
    svc: dict[str, Any] = {}
    if c.type in _SPLIT_TYPES:
        svc["componentType"], svc["subComponentType"] = naming.WORKER, c.type
    elif c.type:
        svc["componentType"] = c.type
    if c.globalDynamoNamespace:
        svc["globalDynamoNamespace"] = True
    for name in (
        "replicas",
        "minAvailable",
        "multinode",
        "modelRef",
        "eppConfig",
        "topologyConstraint",
        "providerOverride",
    ):
        value = getattr(c, name)
        if value is not None:
            svc[name] = (
                value.model_dump(exclude_none=True) if hasattr(value, "model_dump") else value
            )
    if c.runtimeVersionOverride:
        svc["runtimeVersionOverride"] = c.runtimeVersionOverride
    if c.scalingAdapter is not None:
        svc["scalingAdapter"] = {"enabled": True}
    if c.sharedMemorySize is not None:
        svc["sharedMemory"] = (
            {"disabled": True} if c.sharedMemorySize == "0" else {"size": c.sharedMemorySize}
        )
    if exp is not None:
        for name in ("gpuMemoryService", "failover"):
            value = getattr(exp, name)
            if value is not None:
                svc[name] = {**{k: v for k, v in value.items() if k != "enabled"}, "enabled": True}
        if exp.checkpoint is not None:
            svc["checkpoint"] = {"enabled": True, **exp.checkpoint}
    return svc


def _pod_fields(c: v1beta1.Component, svc: dict[str, Any], loc: FieldPath) -> dict[str, Any]:
    """``c``'s pod template: its metadata, container ``main`` and the frontend sidecar into
    ``svc``'s dedicated fields; the rest of the pod spec, returned (``extraPodSpec``)."""
    tmpl = c.podTemplate
    meta = tmpl.metadata if tmpl else None
    if meta is not None and (meta.labels or meta.annotations):
        svc["extraPodMetadata"] = meta.model_dump(exclude_none=True)
    pod: dict[str, Any] = tmpl.spec.model_dump(exclude_none=True) if tmpl and tmpl.spec else {}
    containers = pod.pop("containers", None) or []
    main = next((x for x in containers if x.get("name") == MAIN), None)
    others = []
    for i, x in enumerate(containers):
        if x is main:
            continue
        if c.frontendSidecar and x.get("name") == c.frontendSidecar:
            svc["frontendSidecar"] = _sidecar(x, (*loc, "podTemplate", "spec", "containers", i))
            continue
        others.append(x)
    if c.frontendSidecar and "frontendSidecar" not in svc:
        raise RenderError(
            [
                Problem.at(
                    (*loc, "frontendSidecar"),
                    f"no podTemplate container is named {c.frontendSidecar!r}",
                )
            ]
        )
    if main is not None:
        fields, rest = _split_main(main)
        svc.update(fields)
        if rest:
            pod["mainContainer"] = rest
    if others:
        pod["containers"] = others
    return pod


def _cache_mount(cache: v1beta1.CompilationCache, svc: dict[str, Any], pod: dict[str, Any]) -> None:
    """The compilation cache as the service's last volume mount (its mount taken off the
    other mounts)."""
    mounts = [m for m in svc.get("volumeMounts", []) if m["name"] != cache.pvcName]
    main_rest = pod.get("mainContainer", {})
    if main_rest.get("volumeMounts"):
        kept = [m for m in main_rest["volumeMounts"] if m.get("name") != cache.pvcName]
        main_rest["volumeMounts"] = kept or None
    mount: dict[str, Any] = {"name": cache.pvcName, "useAsCompilationCache": True}
    if cache.mountPath:
        mount["mountPoint"] = cache.mountPath
    svc["volumeMounts"] = [*mounts, mount]


def to_v1alpha1(dgd: v1beta1.DynamoGraphDeployment) -> v1alpha1.DynamoGraphDeployment:
    """The v1alpha1 DGD that renders like ``dgd``, a DGD the rules admitted (what
    ``rules.beta_checks`` refuses is not looked at again); else :class:`RenderError` with
    problems not located yet (their paths are those of the v1beta1 document)."""
    problems: list[Problem] = []
    services: dict[str, Any] = {}
    for i, c in enumerate(dgd.spec.components or []):
        loc: FieldPath = ("spec", "components", i)
        try:
            services[c.name] = _service(c, loc)
        except RenderError as exc:
            problems.extend(exc.problems)
    if problems:
        raise RenderError(problems)
    spec = dgd.spec.model_dump(exclude_none=True, exclude={"components", "env"})
    spec["services"] = services
    if dgd.spec.env:
        spec["envs"] = [e.model_dump(exclude_none=True) for e in dgd.spec.env]
    try:
        alpha = v1alpha1.DynamoGraphDeployment.model_validate(
            {
                "apiVersion": v1alpha1.API_VERSION,
                "kind": dgd.kind,
                "metadata": dgd.metadata.model_dump(exclude_none=True),
                "spec": spec,
            }
        )
    except ValidationError as exc:  # pragma: no cover - the v1beta1 model checked the values
        raise RenderError(
            [Problem.at(("spec", "components"), e["msg"]) for e in exc.errors(include_url=False)]
        ) from None
    for c in dgd.spec.components or []:
        grove = c.experimental.grove if c.experimental is not None else None
        if grove and grove.get("forceScalingGroup") is True:
            (alpha.spec.services or {})[c.name].set_force_scaling_group(True)
        if (
            c.roles is not None
        ):  # validated by the rules (roles), lowered by expand/provider_override
            (alpha.spec.services or {})[c.name].set_roles(c.roles)
    return alpha


#: a v1beta1 component field -> the v1alpha1 service field its conversion made it from
#: (``ConvertTo`` @ 2a6da14c8)
_ALPHA_HOME: dict[str, FieldPath] = {
    "type": ("componentType",),
    "sharedMemorySize": ("sharedMemory",),
}
_ALPHA_EXPERIMENTAL = ("gpuMemoryService", "failover", "checkpoint")
#: a field of container ``main`` -> the dedicated service field the conversion merges it
#: from (``buildSharedPodTemplateFromAlpha``), where the user wrote it unless
#: ``extraPodSpec.mainContainer`` says it
_DEDICATED = {
    "env": "envs",
    "envFrom": "envFromSecret",
    "resources": "resources",
    "livenessProbe": "livenessProbe",
    "readinessProbe": "readinessProbe",
    "volumeMounts": "volumeMounts",
}
#: a field of ``compilationCache`` -> that of the volume mount it is converted from
_CACHE_MOUNT = {"pvcName": "name", "mountPath": "mountPoint"}


def loc_in_v1alpha1(dgd: v1alpha1.DynamoGraphDeployment) -> Callable[[FieldPath], FieldPath]:
    """Map a field path of the v1beta1 form of the v1alpha1 DGD ``dgd`` (its conversion
    **up**, ``hubform.of_v1alpha1``) back to the field the user wrote in ``dgd``, the one
    mapping between the versions (``hubform.Graph.written_path``). Its components are the
    services in name order; container ``main`` (``containers[0]``) is
    ``extraPodSpec.mainContainer`` merged over the dedicated fields (``envs``,
    ``resources``, ...), the other containers those of ``extraPodSpec.containers`` in order,
    then the frontend sidecar; ``compilationCache`` is the volume mount used as one."""
    services = dgd.spec.services or {}
    names = sorted(n for n, s in services.items() if s is not None)

    def convert(loc: FieldPath) -> FieldPath:
        if loc[:2] == ("spec", "env"):
            return ("spec", "envs", *loc[2:])
        if loc[:3] == ("spec", "topologyConstraint", "clusterTopologyName"):
            return ("spec", "topologyConstraint", "topologyProfile", *loc[3:])
        if loc[:2] != ("spec", "components"):
            return loc
        i = loc[2] if len(loc) > 2 else None
        if not isinstance(i, int) or not 0 <= i < len(names):
            return ("spec", "services")
        base: FieldPath = ("spec", "services", names[i])
        return (*base, *_in_service(services[names[i]], loc[3:]))

    return convert


def _in_service(svc: v1alpha1.ServiceSpec, loc: FieldPath) -> FieldPath:
    """A field path of a service's v1beta1 component -> the field written in ``svc``."""
    field, rest = (str(loc[0]), loc[1:]) if loc else ("", ())
    if not field:
        return ()
    if field in _ALPHA_HOME:
        return _ALPHA_HOME[field]
    if field == "compilationCache":
        mounts = svc.volumeMounts or []
        at = next((k for k, m in enumerate(mounts) if m.useAsCompilationCache), None)
        if at is None:
            return ("volumeMounts",)
        sub = (_CACHE_MOUNT[str(rest[0])],) if rest and rest[0] in _CACHE_MOUNT else ()
        return ("volumeMounts", at, *sub)
    if field == "experimental" and rest and rest[0] in _ALPHA_EXPERIMENTAL:
        return rest
    if field == "podTemplate" and rest[:1] == ("metadata",):
        return ("extraPodMetadata", *rest[1:])
    if field == "podTemplate" and rest[:1] == ("spec",):
        if rest[1:2] == ("containers",) and len(rest) > 2 and isinstance(rest[2], int):
            return _in_container(svc, rest[2], rest[3:])
        return ("extraPodSpec", *rest[1:])
    return (field, *rest)


def _in_container(svc: v1alpha1.ServiceSpec, k: int, loc: FieldPath) -> FieldPath:
    """Field ``loc`` of container ``k`` of a service's converted pod template."""
    if k == 0:
        return _in_main(svc, loc)
    written = (svc.extraPodSpec.containers if svc.extraPodSpec else None) or []
    others = [j for j, c in enumerate(written) if c.name != MAIN]
    if k - 1 < len(others):
        return ("extraPodSpec", "containers", others[k - 1], *loc)
    return ("frontendSidecar", *loc)


def _in_main(svc: v1alpha1.ServiceSpec, loc: FieldPath) -> FieldPath:
    """Field ``loc`` of container ``main``: in ``extraPodSpec.mainContainer`` or in the
    dedicated field it merges over (an env var where its name is written last)."""
    field = str(loc[0]) if loc else ""
    main = svc.main_container
    mine: FieldPath = ("extraPodSpec", "mainContainer", *loc)
    dedicated = _DEDICATED.get(field)
    if dedicated is None or getattr(svc, dedicated) is None:
        return mine
    if main is None or getattr(main, field) is None:  # only the dedicated field says it
        return (dedicated, *loc[1:]) if field == "env" else (dedicated,)
    if field != "env" or len(loc) < 2 or not isinstance(loc[1], int):
        return mine
    # the conversion's env merge: the envs in order, a same-named mainContainer env in place
    own = [e.name for e in main.env or []]
    merged = [e.name for e in svc.envs or []]
    merged += [n for n in own if n not in merged]
    name = merged[loc[1]] if loc[1] < len(merged) else None
    if name is None or name in own:
        return ("extraPodSpec", "mainContainer", "env", own.index(name), *loc[2:]) if name else mine
    return ("envs", merged.index(name), *loc[2:])
