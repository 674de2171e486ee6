"""Everything the pod-spec builder needs to know about one component."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..errors import DynGitopsError, FieldPath
from ..hubform import main_path
from ..models import v1beta1
from ..models.k8s import NamedContainer, PodSpecFields
from ..runtimeversion import RuntimeVersionError, Version, resolve
from ..settings import RenderSettings
from .components import NOTHING_PRESERVED, GraphComponents, Preserved

#: the operator's name of the component's own container in a v1beta1 pod template
MAIN = "main"


class ComponentError(DynGitopsError):
    """A problem found expanding one component: the path of the field in the component (its
    v1beta1 form; ``in_main``: in its container ``main``; ``in_graph``: a path of the DGD's
    form), and what is wrong. The expansion places it in the DGD's form (:meth:`where`),
    whose path the expand stage maps to the field the user wrote."""

    def __init__(
        self, path: FieldPath, message: str, *, in_main: bool = False, in_graph: bool = False
    ) -> None:
        self.path = path
        self.in_main = in_main
        self.in_graph = in_graph
        super().__init__(message)

    def where(self, components: GraphComponents, component: v1beta1.Component) -> FieldPath:
        """The path of the field in the DGD's form."""
        if self.in_graph:
            return self.path
        rest = main_path(component, *self.path) if self.in_main else self.path
        return components.path(component.name, *rest)


@dataclass(frozen=True)
class ComponentContext:
    dgd_name: str
    namespace: str
    service: str  # the component's name (a v1alpha1 key in spec.services, original case)
    component_type: str
    dynamo_ns: str
    name: str  # DCD / Deployment name (with the worker hash for workers)
    worker_hash: str | None
    backend: str  # detected or explicit framework, "noop" for none
    discovery_backend: str  # effective: "kubernetes" | "etcd"
    container_discovery: bool  # nvidia.com/dynamo-kube-discovery-mode: container
    annotations: dict[str, str]  # component annotations (DGD spec < propagated < service)
    labels: dict[str, str]  # component labels (DGD spec < service < system)
    graph_envs: tuple[dict[str, Any], ...]
    settings: RenderSettings
    #: the component as the operator holds it (v1beta1, the expansion's internal model,
    #: ``expand/components.py``)
    component: v1beta1.Component
    epp_config_map: tuple[str, str] | None = None  # (ConfigMap name, key) for EPP
    env_overrides: tuple[tuple[str, str], ...] = ()  # env values rewritten (legacy config)
    grove: bool = False  # rendered as a Grove clique, not a DCD (no DCD defaults apply)
    # the graph's kvTransferPolicy, set on workers only, and the levels of its Grove
    # ClusterTopologyBinding (setting grove-topology-domains) when it names one
    kv_transfer: v1beta1.KVTransferPolicy | None = None
    topology_domains: tuple[str, ...] = ()
    #: pods name their graph (nvidia.com/dynamo-graph-deployment-name); a standalone DCD
    #: has no graph to name
    graph_label: bool = True
    #: the component's runtime version; None: it does not resolve (the legacy profile)
    runtime: Version | None = None
    #: what its v1alpha1 form said beyond the component (``components.Preserved``)
    preserved: Preserved = NOTHING_PRESERVED

    @property
    def k8s_discovery(self) -> bool:
        return self.discovery_backend == "kubernetes"


def component_runtime(component: v1beta1.Component) -> Version | None:
    """The runtime version the operator renders the component by (``graph.go``
    ``generateComponentContext`` in the 1.5 release), read from its v1beta1 form: its
    ``runtimeVersionOverride``, else the tag of its container ``main``'s image; None when
    neither resolves. A bad override is an error, not a fallback."""
    override = component.runtimeVersionOverride
    try:
        return resolve(main_image(component), override)
    except RuntimeVersionError as exc:
        if override:
            raise ComponentError(("runtimeVersionOverride",), str(exc)) from None
        return None


def pod_template_spec(component: v1beta1.Component) -> PodSpecFields | None:
    """The component's ``podTemplate.spec`` (None: none written)."""
    return component.podTemplate.spec if component.podTemplate is not None else None


def main_container(component: v1beta1.Component) -> NamedContainer | None:
    """The component's container ``main`` (None: none written)."""
    pod = pod_template_spec(component)
    for container in (pod.containers if pod is not None else None) or []:
        if container.name == MAIN:
            return container
    return None


def main_container_data(component: v1beta1.Component) -> dict[str, Any]:
    """The component's container ``main`` as plain data (``{}``: none written), dumped with
    its pod spec (a model the render dumps on its own must be prebuilt, test_startup)."""
    pod = pod_template_spec(component)
    if pod is None:
        return {}
    containers = pod.model_dump(exclude_none=True, include={"containers"}).get("containers")
    return next((c for c in containers or [] if c.get("name") == MAIN), {})


def main_image(component: v1beta1.Component) -> str:
    """The image of the component's container ``main`` (``""``: none)."""
    main = main_container(component)
    return (main.image or "") if main is not None else ""
