"""A DGD's one typed form: v1beta1, as the operator holds every DGD (the hub version).

Built once per DGD, in validate (:func:`of_v1alpha1`, :func:`of_v1beta1`), and read by
everything after it: the rules, the admission stamps, the expansion, the worker hash
(:meth:`Graph.hub`) and the emitted v1beta1 DGD (:meth:`Graph.as_v1beta1`). Nothing
converts or validates a DGD again after validate.

* ``nvidia.com/v1beta1``: the components as written, in the order written;
* ``nvidia.com/v1alpha1``: converted **up** as the operator's conversion webhook does
  (``ConvertTo`` @ 2a6da14c8, :mod:`.workerhash.hub`): services become the name-sorted
  component list, ``worker`` + ``subComponentType: prefill|decode`` becomes ``type:
  prefill|decode``, a disabled scaling adapter is no scaling adapter.

What v1beta1 cannot say and the renderer still reads stays beside the components
(:class:`Preserved`) and the graph (``Graph.pvcs``), as the operator keeps it in
``nvidia.com/dgd-spec``: a v1alpha1 DGD's ``pvcs``, a service's ``ingress``,
``dynamoNamespace``, ``labels``, ``annotations``, ``subComponentType`` and an
``envFromSecret`` its conversion drops; a v1beta1 DGD converted from v1alpha1 (it carries
that annotation: ``kubectl get`` on an operator cluster) gets them from there, read here
only (:func:`_kept`).

The typed form is the DGD as the API server stores it: with the CRD schema's defaults
(:func:`as_stored`, :mod:`.models.schemadefaults`), which the operator copies into its
objects with ``podTemplate`` and the graph ``env``; ``Stored`` is the form as written.

One path system: every rule and the expansion name a field of this form (a v1beta1 path);
:meth:`Graph.written_path` alone maps it to the field the user wrote (a v1alpha1 DGD's
through ``convert.loc_in_v1alpha1``, a standalone DCD's into the DCD).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import BaseModel

from . import keys, memo, naming, to_v1beta1
from .errors import FieldPath, Problem
from .models import schemadefaults, v1alpha1, v1beta1
from .models.k8s import ObjectMeta
from .models.preserved import PVC, Ingress
from .workerhash import hub

Obj = dict[str, Any]
MAIN = "main"
_M = TypeVar("_M", bound=BaseModel)


@dataclass(frozen=True)
class Preserved:
    """What a v1alpha1 service says that its v1beta1 component cannot hold and the renderer
    still reads (a v1beta1 component: none)."""

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

    def located(self) -> list[tuple[FieldPath, v1beta1.Component]]:
        """Each component with its path, in list order (a v1alpha1 DGD's: name order)."""
        return [(("spec", "components", i), c) for i, c in enumerate(self.components)]

    def path(self, name: str, *rest: str | int) -> FieldPath:
        """The path of field ``rest`` of component ``name`` in the form."""
        i = next((i for i, c in enumerate(self.components) if c.name == name), None)
        return ("spec", "components") if i is None else ("spec", "components", i, *rest)


def main_index(component: v1beta1.Component) -> int:
    """The index of the component's container ``main`` (where it would be appended when it
    has none)."""
    pod = component.podTemplate.spec if component.podTemplate is not None else None
    containers = (pod.containers if pod is not None else None) or []
    return next((k for k, c in enumerate(containers) if c.name == MAIN), len(containers))


def main_path(component: v1beta1.Component, *rest: str | int) -> FieldPath:
    """The path of field ``rest`` of the component's container ``main``, from the component."""
    return ("podTemplate", "spec", "containers", main_index(component), *rest)


@dataclass(frozen=True)
class Stored:
    """The form as JSON data, as written (its typed models have the CRD schema's defaults):
    the graph spec without its components, and each component. The worker hash and the
    emitted v1beta1 DGD encode it as the operator's Go types. Read only."""

    spec: Obj
    components: tuple[Obj, ...]


@dataclass(frozen=True)
class Graph:
    """A DGD's one typed form (see the module)."""

    #: the DGD's metadata (after validate: as admitted, with the defaulting webhook's stamps)
    metadata: ObjectMeta
    #: the v1beta1 graph spec, with its components
    spec: v1beta1.GraphSpec
    components: GraphComponents
    stored: Stored
    #: a v1alpha1 DGD's ``spec.pvcs`` (no v1beta1 field; the operator keeps them in
    #: ``nvidia.com/dgd-spec``)
    pvcs: tuple[PVC, ...] = ()
    #: the v1alpha1 DGD as written (None: written in v1beta1): the paths the user wrote, and
    #: what its conversion keeps in ``nvidia.com/dgd-spec``
    alpha: v1alpha1.DynamoGraphDeployment | None = None
    #: the v1alpha1 spec as written (the conversion's payload is made from it)
    alpha_spec: Obj | None = None
    #: a standalone DCD read as the one-component DGD named like it: where its component is
    dcd_where: FieldPath | None = None

    @property
    def name(self) -> str:
        return self.metadata.name

    @property
    def namespace(self) -> str | None:
        return self.metadata.namespace or None

    @property
    def annotations(self) -> dict[str, str]:
        return dict(self.metadata.annotations or {})

    def written_path(self, path: FieldPath) -> FieldPath:
        """The one mapping of paths: ``path``, a field of this form, as every rule and the
        expansion name it -> the field in the document as the user wrote it."""
        if self.alpha is not None:
            from .models.convert import loc_in_v1alpha1  # only for a problem (start-up)

            path = loc_in_v1alpha1(self.alpha)(path)
        return dcd_path(path, self.dcd_where) if self.dcd_where is not None else path

    def hub(self, default_namespace: str) -> hub.HubGraph:
        """The form as the worker hash reads it: the stored components with the CRD schema's
        pod-field defaults, and what the operator reads back of their v1alpha1 fields."""
        components = [
            _hub_component(hub.pod_defaults(data), self.components.preserved_of(c.name))
            for data, c in zip(self.stored.components, self.components.components, strict=True)
        ]
        return hub.HubGraph(
            name=self.name,
            namespace=str(self.namespace or default_namespace),
            annotations=self.annotations,
            spec=self.stored.spec,
            components=components,
        )

    def written_spec(self) -> v1beta1.GraphSpec:
        """The v1beta1 graph spec as written, typed: without the CRD schema's defaults, which
        the API server gives an emitted DGD itself (the input of the output conversion of
        setting source-api-version v1alpha1 only; a v1alpha1 spec refuses some of them as
        v1beta1 spells them, ``mode: IntraPod``)."""
        comps = [_component(c) for c in self.stored.components]
        return v1beta1.GraphSpec.model_validate(self.stored.spec).model_copy(
            update={"components": comps}
        )

    def as_v1beta1(self, metadata: Obj) -> Obj:
        """A DGD written in v1alpha1 as the operator's conversion webhook stores it
        (:func:`.to_v1beta1.stored`), with the document's ``metadata`` (as admitted)."""
        payload = to_v1beta1.preserved_spec(self.alpha_spec) if self.alpha_spec else None
        return to_v1beta1.stored(metadata, self.stored.spec, self.stored.components, payload)


def _hub_component(data: Obj, kept: Preserved) -> hub.HubComponent:
    return hub.HubComponent(
        spec=data,
        alpha_labels=dict(kept.labels),
        alpha_annotations=dict(kept.annotations),
        dynamo_namespace=kept.dynamo_namespace,
        # a promoted prefill/decode is the component's type, which the hash reads first
        alpha_sub_component_type=kept.sub_component_type or "",
    )


def dcd_path(path: FieldPath, where: FieldPath) -> FieldPath:
    """A field of a standalone DCD's one-component DGD (its component at ``where``), in the
    DCD."""
    n = len(where)
    if tuple(path[:n]) == where:
        return ("spec", *path[n:])
    return path


#: a component validated (a frozen model, which the render only reads), kept by its data:
#: the components of a repository's DGDs repeat (:mod:`dyn_gitops.memo`)
_component = memo.by_repr(v1beta1.Component.model_validate)


# ------------------------------------------------------------------------ v1alpha1
def of_v1alpha1(dgd: v1alpha1.DynamoGraphDeployment, spec: Obj) -> Graph:
    """The form of the v1alpha1 DGD ``dgd`` whose document spec is ``spec``: the graph spec
    by ``ConvertFromDynamoGraphDeploymentSpec``, the components by
    ``ConvertFromDynamoComponentDeploymentSharedSpec``, each converted and validated once.
    Raises ``ValidationError`` when a value v1alpha1 accepts does not fit v1beta1
    (``rules.alpha_checks`` names it)."""
    hub_spec = hub.spec_from_alpha(spec)
    graph_spec = v1beta1.GraphSpec.model_validate(schemadefaults.graph_spec(hub_spec))
    converted = hub.converted(spec.get("services") or {})
    services = dgd.spec.services or {}
    # stored in v1beta1, read back with its schema's defaults (what the pods copy)
    comps = tuple(_component(schemadefaults.component(_fitting(c.spec))) for c in converted)
    return Graph(
        metadata=dgd.metadata,
        spec=graph_spec.model_copy(update={"components": list(comps)}),
        components=GraphComponents(
            comps,
            tuple((c.name, _preserved(c, services.get(c.name))) for c in converted),
            alpha=True,
        ),
        stored=Stored(hub_spec, tuple(c.spec for c in converted)),
        pvcs=tuple(dgd.spec.pvcs or ()),
        alpha=dgd,
        alpha_spec=spec,
    )


def _fitting(component: Obj) -> Obj:
    """A converted component without a negative ``replicas``, which the v1beta1 schema
    refuses and ``rules.alpha_checks`` reports as written (the other rules still run)."""
    replicas = component.get("replicas")
    if isinstance(replicas, int) and replicas < 0:
        return {k: v for k, v in component.items() if k != "replicas"}
    return component


def _preserved(component: hub.HubComponent, svc: v1alpha1.ServiceSpec | None) -> Preserved:
    main = svc.main_container if svc is not None else None
    secret = (svc.envFromSecret if svc is not None else None) or None
    return Preserved(
        alpha=True,
        labels=dict(component.alpha_labels),
        annotations=dict(component.alpha_annotations),
        sub_component_type=(svc.subComponentType if svc is not None else None) or None,
        dynamo_namespace=component.dynamo_namespace or None,
        env_from_secret=secret if secret and main is not None and main.envFrom else None,
        ingress=svc.ingress if svc is not None else None,
    )


# ------------------------------------------------------------------------- v1beta1
def as_stored(document: Obj) -> Obj:
    """A v1beta1 DGD document (or a standalone DCD's one-component DGD) with its spec as the
    API server stores it, what its form is typed from: the CRD schema's defaults
    (:mod:`.models.schemadefaults`: ``protocol: TCP`` on a container port and the rest),
    which the operator copies with ``podTemplate`` and the graph ``env`` into its objects.
    The document as written stays the ``Stored`` form (the emitted DGD, the worker hash)."""
    spec = document.get("spec")
    if not isinstance(spec, dict):
        return document
    return {**document, "spec": schemadefaults.graph_spec(spec)}


def of_v1beta1(dgd: v1beta1.DynamoGraphDeployment, spec: Obj) -> tuple[Graph, list[Problem]]:
    """The form of the v1beta1 DGD ``dgd`` whose document spec is ``spec``: as written, with
    what its ``nvidia.com/dgd-spec`` annotation keeps; and that annotation's problems (the
    form is not to be rendered when there are any)."""
    problems: list[Problem] = []
    kept = _kept(dgd.metadata, problems)
    comps = tuple(dgd.spec.components or ())
    preserved: tuple[tuple[str, Preserved], ...] = ()
    if kept is not None:  # converted from v1alpha1: what the conversion kept aside
        preserved = tuple((c.name, _preserved_kept(c, kept.service(c.name))) for c in comps)
    written = spec.get("components") or []
    graph = Graph(
        metadata=dgd.metadata,
        spec=dgd.spec,
        components=GraphComponents(comps, preserved),
        stored=Stored(
            {k: v for k, v in spec.items() if k != "components"},
            tuple(c for c in written if isinstance(c, dict)),
        ),
        pvcs=tuple(kept.spec.pvcs or ()) if kept is not None and kept.spec is not None else (),
    )
    return graph, problems


if TYPE_CHECKING:
    from .models import dgdspec


def _kept(meta: ObjectMeta, problems: list[Problem]) -> dgdspec.Kept | None:
    """The one read of a v1beta1 DGD's ``nvidia.com/dgd-spec`` annotation (``kubectl get``
    from an operator cluster, or a v1alpha1 DGD as emitted): the sparse v1alpha1 spec the
    operator's conversion keeps there (:func:`.dgdspec.read`: bounded, typed), read for what
    v1beta1 cannot hold (``pvcs``, a service's ``ingress``, ``labels``, ``annotations``,
    ``dynamoNamespace``, ``subComponentType``, ``envFromSecret``). What is wrong with it
    is appended to ``problems``."""
    if keys.ANN_DGD_SPEC not in (meta.annotations or {}):
        return None
    from .models import dgdspec  # its models cost start-up: imported for a payload only

    kept = dgdspec.read(meta.annotations)
    problems.extend(kept.problems)
    return kept if kept.spec is not None else None


def _preserved_kept(component: v1beta1.Component, service: dgdspec.KeptService) -> Preserved:
    """What the operator's conversion kept in ``nvidia.com/dgd-spec`` for a v1beta1
    component converted from the v1alpha1 service ``service`` (sparse: only what v1beta1
    cannot hold; typed by :func:`.dgdspec.read`), read as :func:`_preserved` reads the
    service as written."""
    secret = service.env_from_secret or None
    ctype = component.type
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
    "Stored",
    "as_stored",
    "dcd_path",
    "main_index",
    "main_path",
    "of_v1alpha1",
    "of_v1beta1",
]
