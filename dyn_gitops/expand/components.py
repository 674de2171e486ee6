"""The internal model of a DGD being expanded: its v1beta1 component list.

The operator holds every DGD in v1beta1 (``spec.components``, each with a ``podTemplate``
whose container ``main`` carries the user's overrides) and renders from that. So does the
expansion, module by module: :class:`GraphComponents` is the typed v1beta1 component list
(:class:`.v1beta1.Component`) of the admitted DGD document, whichever version it is
written in:

* ``nvidia.com/v1beta1``: the components as written, in the order written;
* ``nvidia.com/v1alpha1``: converted **up** as the operator's conversion webhook does
  (``ConvertTo`` @ 2a6da14c8; :class:`.hub.AlphaComponents`, the conversion the worker hash
  and the emitted v1beta1 DGD read too): services become the name-sorted component list,
  ``worker`` + ``subComponentType: prefill|decode`` becomes ``type: prefill|decode``, a
  disabled scaling adapter is no scaling adapter. What v1beta1 has no field for
  (``dynamoNamespace``, service labels and annotations, a non-promoted
  ``subComponentType``) stays on the :class:`.hub.HubComponent`.

What reads it (``tests/test_internal_model.py`` checks which modules read only it):

* the pod spec builder (:mod:`.podspec`, Deployment, LeaderWorkerSet and Grove pods alike):
  container ``main`` (image, command, args, ports, env, probes, resources, mounts, the
  rest of the container), the pod fields of ``podTemplate.spec``, the other containers,
  the frontend sidecar (the container ``frontendSidecar`` names), ``compilationCache``,
  ``sharedMemorySize`` and ``multinode`` (vLLM elastic EP);
* per component in :mod:`.graph`, :mod:`.grove` and :mod:`.objects`: ``replicas``,
  ``minAvailable``, ``multinode.nodeCount`` (Deployment, LeaderWorkerSet or Grove
  cliques), ``scalingAdapter``, ``modelRef``, ``globalDynamoNamespace``,
  ``podTemplate.metadata`` (pod template labels and annotations), ``topologyConstraint``
  and ``experimental.grove.forceScalingGroup`` (Grove), the single-pod elastic-EP leader,
  each worker's backend (container ``main``'s command, ``graph.resolve_backends``);
* the order components are expanded in (and Grove cliques listed in), each component's
  type, the EPP components and their Go/Rust EPP contract, the component-class label, the
  multinode check, the Planner-scaled workers (:mod:`.replica_owners`) and each
  component's runtime version (:func:`.context.component_runtime`).

The graph level is :class:`Graph` (:func:`graph_of`): the DGD's metadata and its v1beta1
``GraphSpec`` (a v1alpha1 spec converted up by :func:`.hub.spec_from_alpha`, the
operator's ``ConvertFromDynamoGraphDeploymentSpec``), read by :mod:`.graph`, :mod:`.grove`
and :mod:`.objects`.

What v1beta1 cannot say and the renderer still reads stays beside the component
(:class:`Preserved`, ``ComponentContext.preserved``) and the graph (``Graph.pvcs``), as
the operator keeps it in ``nvidia.com/dgd-spec``: a v1alpha1 DGD's ``pvcs``, a service's
``ingress``, ``dynamoNamespace``, ``labels``, ``annotations``, ``subComponentType`` and an
``envFromSecret`` its conversion drops; a v1beta1 DGD converted from v1alpha1 (it carries
that annotation: ``kubectl get`` on an operator cluster) gets them from there. The legacy
``DYN_DEPLOYMENT_CONFIG`` rewrites a component's replicas and container ``main``'s
resources (:func:`.legacy.apply`). No expansion module reads the v1alpha1 model
(``docs/reference-behaviour.md``, *The internal model*).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .. import memo, naming
from ..models import dgdspec, v1beta1
from ..models.preserved import PVC, Ingress
from ..models.versions import V1ALPHA1, V1BETA1
from ..workerhash import hub

Obj = dict[str, Any]


@dataclass(frozen=True)
class Preserved:
    """What a v1alpha1 service says that its v1beta1 component cannot hold and the renderer
    still reads (:class:`.hub.HubComponent` keeps it aside; a v1beta1 component: none)."""

    #: the component was converted from a v1alpha1 service
    alpha: bool = False
    #: the service's own ``labels`` and ``annotations`` (``GetDCDKubeLabels`` /
    #: ``GetDCDKubeAnnotations`` read them back)
    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)
    #: its ``subComponentType`` as written
    sub_component_type: str | None = None
    #: the deprecated ``dynamoNamespace`` (pod labels and selectors, ``GetDCDDynamoNamespace``)
    dynamo_namespace: str | None = None
    #: an ``envFromSecret`` the conversion drops (``mainContainer.envFrom`` replaces it, mergo)
    #: and the pod still gets, after that list (``docs/reference-behaviour.md``)
    env_from_secret: str | None = None
    #: where its compilation cache was written (the index in ``volumeMounts``; errors)
    cache_mount: int | None = None
    #: its ``ingress`` (no v1beta1 field; the operator keeps it in ``nvidia.com/dgd-spec``)
    ingress: Ingress | None = None


NOTHING_PRESERVED = Preserved()


@dataclass(frozen=True)
class GraphComponents:
    """A DGD's components as the operator holds them (v1beta1), in their list order."""

    components: tuple[v1beta1.Component, ...]
    #: per component name, what its v1alpha1 form said beyond the component (only non-empty)
    preserved: tuple[tuple[str, Preserved], ...] = ()
    #: converted from a v1alpha1 document (the legacy config rewrites its service first)
    alpha: bool = False

    def preserved_of(self, name: str) -> Preserved:
        return next((p for n, p in self.preserved if n == name), NOTHING_PRESERVED)

    @property
    def names(self) -> list[str]:
        return [c.name for c in self.components]

    def has_type(self, component_type: str) -> bool:
        return any(c.type == component_type for c in self.components)

    def has_workers(self) -> bool:
        return any(naming.is_worker(c.type) for c in self.components)

    def get(self, name: str) -> v1beta1.Component | None:
        return next((c for c in self.components if c.name == name), None)


@dataclass(frozen=True)
class Graph:
    """A DGD as the expansion reads it: its metadata, its v1beta1 graph spec, its v1beta1
    components, and what a v1alpha1 DGD says at graph level that v1beta1 cannot hold."""

    name: str
    namespace: str | None
    #: ``metadata.annotations`` as admitted (with the defaulting webhook's stamps)
    annotations: dict[str, str]
    #: the v1beta1 ``spec`` less its components (``env``, ``labels``, ``annotations``,
    #: ``backendFramework``, ``priorityClassName``, ``topologyConstraint``,
    #: ``experimental``, ``restart``, ``providerOverride``)
    spec: v1beta1.GraphSpec
    components: GraphComponents
    #: a v1alpha1 DGD's ``spec.pvcs`` (no v1beta1 field; the operator keeps it in
    #: ``nvidia.com/dgd-spec``)
    pvcs: tuple[PVC, ...] = ()

    @property
    def alpha(self) -> bool:
        """Converted from a v1alpha1 document."""
        return self.components.alpha


def graph_of(source: Obj, alpha: hub.AlphaComponents | None = None) -> Graph:
    """The DGD document ``source`` (admitted) as :class:`Graph`: a v1beta1 one as written, a
    v1alpha1 one converted up as the operator's conversion webhook does (``ConvertTo`` @
    2a6da14c8: :func:`.hub.spec_from_alpha` for the graph spec, :func:`of` for the
    components); ``alpha``: the conversion of its components when already at hand."""
    spec = source.get("spec") or {}
    meta = source.get("metadata") or {}
    pvcs: tuple[PVC, ...] = ()
    if is_alpha(source):
        graph_spec = hub.spec_from_alpha(spec)
        pvcs = tuple(PVC.model_validate(p) for p in spec.get("pvcs") or [])
    else:
        graph_spec = {k: v for k, v in spec.items() if k != "components"}
        kept = dgdspec.kept_spec(meta.get("annotations"))  # a DGD converted from v1alpha1
        pvcs = tuple(kept.pvcs or []) if kept is not None else ()
    return Graph(
        name=str(meta.get("name") or ""),
        namespace=meta.get("namespace") or None,
        annotations=dict(meta.get("annotations") or {}),
        spec=v1beta1.GraphSpec.model_validate(graph_spec),
        components=of(source, alpha),
        pvcs=pvcs,
    )


def sub_component_type(component: v1beta1.Component, preserved: Preserved) -> str | None:
    """The sub-component type the workload labels carry (``nvidia.com/dynamo-sub-component-
    type``): a v1alpha1 service's ``subComponentType`` as written; a v1beta1 component's
    promoted type (``prefill``/``decode``)."""
    if preserved.alpha:
        return preserved.sub_component_type
    return component.type if component.type in (naming.PREFILL, naming.DECODE) else None


def node_count(component: v1beta1.Component) -> int:
    """The component's ``multinode.nodeCount`` (1: single node)."""
    return component.multinode.nodeCount if component.multinode is not None else 1


def force_scaling_group(component: v1beta1.Component) -> bool:
    """``experimental.grove.forceScalingGroup`` (Grove: a scaling group for one pod)."""
    grove = component.experimental.grove if component.experimental is not None else None
    return bool(grove and grove.get("forceScalingGroup") is True)


def is_alpha(source: Obj) -> bool:
    """Whether the DGD document ``source`` is converted as a v1alpha1 DGD (the test of
    :func:`.hub.graph`)."""
    version = source.get("apiVersion")
    return version == V1ALPHA1 or (version != V1BETA1 and "services" in (source.get("spec") or {}))


def of(source: Obj, alpha: hub.AlphaComponents | None = None) -> GraphComponents:
    """The v1beta1 components of the admitted DGD document ``source``; ``alpha``: the
    conversion of its components when already at hand (a v1alpha1 document)."""
    spec = source.get("spec") or {}
    preserved: list[tuple[str, Preserved]] = []
    if is_alpha(source):
        converted = (alpha or hub.AlphaComponents(spec)).get()
        written: list[Any] = [c.spec for c in converted]
        services = spec.get("services") or {}
        preserved = [(c.name, _preserved(c, services.get(c.name) or {})) for c in converted]
    else:
        written = [c for c in spec.get("components") or [] if isinstance(c, dict)]
        kept = dgdspec.read((source.get("metadata") or {}).get("annotations"))
        if kept.spec is not None:  # converted from v1alpha1: what the conversion kept aside
            preserved = [
                (str(c.get("name")), _preserved_kept(c, kept.service(str(c.get("name")))))
                for c in written
            ]
    return GraphComponents(
        tuple(_component(c) for c in written),
        tuple(preserved),
        alpha=is_alpha(source),
    )


#: a component validated (a frozen model, which the render only reads), kept by its data:
#: the components of a repository's DGDs repeat (:mod:`dyn_gitops.memo`)
_component = memo.by_repr(v1beta1.Component.model_validate)


def _preserved(component: hub.HubComponent, service: Obj) -> Preserved:
    secret = service.get("envFromSecret") or None
    main = (service.get("extraPodSpec") or {}).get("mainContainer") or {}
    mounts = service.get("volumeMounts") or []
    ingress = service.get("ingress")
    return Preserved(
        alpha=True,
        labels=dict(component.alpha_labels),
        annotations=dict(component.alpha_annotations),
        sub_component_type=service.get("subComponentType") or None,
        dynamo_namespace=component.dynamo_namespace or None,
        env_from_secret=secret if secret and main.get("envFrom") else None,
        cache_mount=next(
            (i for i, m in enumerate(mounts) if (m or {}).get("useAsCompilationCache")), None
        ),
        ingress=Ingress.model_validate(ingress) if ingress is not None else None,
    )


def _preserved_kept(component: Obj, service: dgdspec.KeptService) -> Preserved:
    """What the operator's conversion kept in ``nvidia.com/dgd-spec`` for a v1beta1
    component converted from the v1alpha1 service ``service`` (sparse: only what v1beta1
    cannot hold; typed by :func:`.dgdspec.read`), read as :func:`_preserved` reads the
    service as written."""
    secret = service.env_from_secret or None
    ctype = component.get("type")
    return Preserved(
        alpha=True,
        labels=dict(service.labels),
        annotations=dict(service.annotations),
        sub_component_type=service.sub_component_type
        or (ctype if ctype in (naming.PREFILL, naming.DECODE) else None),
        dynamo_namespace=service.dynamo_namespace or None,
        env_from_secret=secret if secret and service.main_env_from else None,
        ingress=service.ingress,
    )


__all__ = [
    "NOTHING_PRESERVED",
    "Graph",
    "GraphComponents",
    "Preserved",
    "force_scaling_group",
    "graph_of",
    "is_alpha",
    "node_count",
    "of",
    "sub_component_type",
]
