"""A version-neutral view of a live DGD: what the reconcilers read from its spec.

The controller reads DGDs as ``nvidia.com/v1beta1`` (the operator's storage and hub
version since 1.2): a ``spec.components`` list of ``{name, type, replicas, multinode,
scalingAdapter, podTemplate, ...}``. A v1alpha1 object (``spec.services``, a map) is still
accepted, for a cluster whose CRD serves only v1alpha1 or a replayed old object: it is
converted with the renderer's port of the operator's conversion
(:mod:`dyn_gitops.workerhash.hub`), so both spellings give the same view.

Only plain reads here; the worker hash is computed from the whole object elsewhere
(``graph.compute_worker_hash``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Literal

from dyn_gitops import naming
from dyn_gitops.bounded import DOCUMENT_BOUNDS, loads_json
from dyn_gitops.models.versions import V1ALPHA1, V1BETA1
from dyn_gitops.settings import LIMIT_MAX
from dyn_gitops.workerhash import hub
from dyn_gitops_operator.counts import ABOVE_CEILING, check

Obj = dict[str, Any]

#: where the operator's conversion keeps the v1alpha1 fields v1beta1 has no place for
#: (``saveDGDSpokeAnnotations``, api/v1alpha1/dynamographdeployment_conversion.go @ 2a6da14c8)
ANN_ALPHA_SPEC = "nvidia.com/dgd-spec"


@dataclass(frozen=True)
class Component:
    """One component (a v1alpha1 service) as the reconcilers need it."""

    name: str
    #: the v1beta1 ``type`` (a v1alpha1 ``worker`` + ``prefill|decode`` is promoted)
    component_type: str
    #: the spec's replicas as written (None: unset, the operator's default 1); a count from
    #: Git, checked against the controller's ceiling where it is used (``Graph.count``)
    replicas: Any
    adapter: bool
    #: rendered as a LeaderWorkerSet (natively scaled: one per generation), not a Deployment
    multinode: bool = False
    #: ``replicas`` written in the spec (Grove scaling only follows an explicit value)
    explicit_replicas: bool = False
    #: what the operator reads the rolling-update and strategy settings from:
    #: ``GetDGDComponentResourceAnnotations`` (internal/dynamo/graph.go @ 2a6da14c8):
    #: the graph's ``spec.annotations``, the preserved v1alpha1 service annotations, then
    #: the pod template's annotations
    annotations: dict[str, str] = field(default_factory=dict)

    @property
    def worker(self) -> bool:
        return naming.is_worker(self.component_type)


@dataclass(frozen=True)
class RestartRequest:
    id: str
    strategy: Literal["Sequential", "Parallel"]
    order: tuple[str, ...]


@dataclass(frozen=True)
class DgdView:
    components: dict[str, Component]
    restart: RestartRequest | None


def is_alpha(dgd: Obj) -> bool:
    """A v1alpha1 object (by apiVersion, or a ``services`` map without ``components``, as a
    CRD without conversion hands out an object stored under the other version)."""
    spec = dgd.get("spec") or {}
    if dgd.get("apiVersion") == V1ALPHA1:
        return True
    return "services" in spec and "components" not in spec


def component_names(dgd: Obj) -> list[str]:
    """The component names, cheaply (no conversion): event indexes use them."""
    spec = dgd.get("spec") or {}
    if is_alpha(dgd):
        return [str(n) for n in (spec.get("services") or {})]
    return [str(c.get("name")) for c in spec.get("components") or [] if isinstance(c, dict)]


def preserved_services(dgd: Obj) -> dict[str, Obj]:
    """The v1alpha1 services the conversion preserved on a v1beta1 object (only the fields
    v1beta1 cannot hold: labels, annotations, ``dynamoNamespace``, ``subComponentType``).
    The annotation is the ``{version, spec}`` envelope (api/v1alpha1/preservation.go @
    2a6da14c8) or, from older operators, the bare spec."""
    raw = ((dgd.get("metadata") or {}).get("annotations") or {}).get(ANN_ALPHA_SPEC)
    if not raw:
        return {}
    try:  # bounded as the render reads it: a live object's annotation is input too
        saved = loads_json(raw, DOCUMENT_BOUNDS)
    except ValueError:
        return {}
    if isinstance(saved, dict) and isinstance(saved.get("spec"), dict):
        saved = saved["spec"]
    services = saved.get("services") if isinstance(saved, dict) else None
    if not isinstance(services, dict):
        return {}
    return {str(n): s for n, s in services.items() if isinstance(s, dict)}


def _alpha_annotations(dgd: Obj) -> dict[str, dict[str, str]]:
    return {
        name: {str(k): str(v) for k, v in (svc.get("annotations") or {}).items()}
        for name, svc in preserved_services(dgd).items()
    }


def restore_alpha_fields(graph: hub.HubGraph, dgd: Obj) -> hub.HubGraph:
    """``graph`` (the hub form of the v1beta1 ``dgd``) with the preserved v1alpha1 fields
    put back on its components, as the operator reads them (``getDGDAlpha``,
    internal/dynamo/graph.go @ 2a6da14c8): the worker hash covers labels and annotations."""
    saved = preserved_services(dgd)
    for comp in graph.components:
        svc = saved.get(comp.name)
        if not svc:
            continue
        comp.alpha_labels = {str(k): str(v) for k, v in (svc.get("labels") or {}).items()}
        comp.alpha_annotations = {str(k): str(v) for k, v in (svc.get("annotations") or {}).items()}
        comp.dynamo_namespace = svc.get("dynamoNamespace") or comp.dynamo_namespace
        sub = str(svc.get("subComponentType") or "")
        if sub and sub != comp.type:
            comp.alpha_sub_component_type = sub
    return graph


def hub_graph(dgd: Obj) -> hub.HubGraph:
    """The hub form the worker hash is computed from, of either served version."""
    namespace = str((dgd.get("metadata") or {}).get("namespace") or "")
    if is_alpha(dgd):
        return hub.graph({**dgd, "apiVersion": V1ALPHA1}, namespace)
    return restore_alpha_fields(hub.graph(dgd, namespace), dgd)


def as_v1beta1(dgd: Obj) -> Obj:
    """A v1alpha1 DGD document as the operator stores it: v1beta1, with what v1beta1
    cannot hold kept in the conversion annotation (a v1beta1 one is returned as is).
    Tests and replays apply old objects through it; status is not converted."""
    if not is_alpha(dgd):
        return dgd
    meta = dict(dgd.get("metadata") or {})
    graph = hub_graph(dgd)
    saved: Obj = {}
    for comp in graph.components:
        keep: Obj = {}
        if comp.alpha_labels:
            keep["labels"] = comp.alpha_labels
        if comp.alpha_annotations:
            keep["annotations"] = comp.alpha_annotations
        if comp.dynamo_namespace:
            keep["dynamoNamespace"] = comp.dynamo_namespace
        if comp.alpha_sub_component_type:
            keep["subComponentType"] = comp.alpha_sub_component_type
        if keep:
            saved[comp.name] = keep
    if saved:
        envelope = {"version": 1, "spec": {"services": saved}}
        meta["annotations"] = {
            **(meta.get("annotations") or {}),
            ANN_ALPHA_SPEC: json.dumps(envelope, sort_keys=True, separators=(",", ":")),
        }
    return {
        "apiVersion": V1BETA1,
        "kind": dgd.get("kind", "DynamoGraphDeployment"),
        "metadata": meta,
        "spec": {**graph.spec, "components": [c.spec for c in graph.components]},
    }


def _component(spec: Obj, graph_ann: dict[str, str], alpha_ann: dict[str, str]) -> Component:
    reps = spec.get("replicas")
    # only "more than one node" matters here (the controller applies no node count)
    nodes = check((spec.get("multinode") or {}).get("nodeCount") or 1, LIMIT_MAX)
    pod_ann = ((spec.get("podTemplate") or {}).get("metadata") or {}).get("annotations") or {}
    return Component(
        name=str(spec.get("name") or ""),
        component_type=str(spec.get("type") or ""),
        replicas=reps,
        adapter=spec.get("scalingAdapter") is not None,
        multinode=nodes[0] == ABOVE_CEILING if isinstance(nodes, tuple) else nodes > 1,
        explicit_replicas=reps is not None,
        annotations={**graph_ann, **alpha_ann, **{str(k): str(v) for k, v in pod_ann.items()}},
    )


def _restart(spec: Obj, names: list[str]) -> RestartRequest | None:
    restart = spec.get("restart") or {}
    rid = restart.get("id")
    if not rid:
        return None
    strategy = restart.get("strategy") or {}
    kind: Literal["Sequential", "Parallel"] = (
        "Parallel" if strategy.get("type") == "Parallel" else "Sequential"
    )
    return RestartRequest(str(rid), kind, tuple(strategy.get("order") or sorted(names)))


def view(dgd: Obj) -> DgdView:
    """The view of either served version (v1alpha1 converted as the operator does)."""
    spec = dgd.get("spec") or {}
    graph_ann = {str(k): str(v) for k, v in (spec.get("annotations") or {}).items()}
    comps: dict[str, Component] = {}
    if is_alpha(dgd):
        for hc in hub_graph(dgd).components:
            comps[hc.name] = _component(hc.spec, graph_ann, hc.alpha_annotations)
    else:
        preserved = _alpha_annotations(dgd)
        for raw in spec.get("components") or []:
            if isinstance(raw, dict) and raw.get("name"):
                name = str(raw["name"])
                comps[name] = _component(raw, graph_ann, preserved.get(name, {}))
    return DgdView(components=comps, restart=_restart(spec, list(comps)))
