"""``nvidia.com/v1beta1`` DynamoGraphDeployment (``spec/dynamo-pod-spec.md`` section 9):
a list of components, each with a native ``podTemplate`` whose container ``main`` carries
the user's overrides. The expansion's internal component list (``expand/components.py``);
the modules that still read v1alpha1 get it through ``convert.py``."""

from typing import Any, Literal

from pydantic import BaseModel, Field

from .k8s import EnvVar, ObjectMeta, PodSpecFields, Strict
from .v1alpha1 import BackendFramework as BackendFramework
from .v1alpha1 import (
    ComponentRole,
    EPPConfig,
    Experimental,
    ModelRef,
    Multinode,
    Restart,
    TopologyConstraint,
)
from .v1alpha1 import KVTransferPolicy as KVTransferPolicy  # the same type in both versions
from .v1alpha1 import ProviderOverride as ProviderOverride
from .versions import V1BETA1

API_VERSION = V1BETA1


class PodTemplateMeta(Strict):
    labels: dict[str, str] | None = None
    annotations: dict[str, str] | None = None


class PodTemplate(Strict):
    metadata: PodTemplateMeta | None = None
    spec: PodSpecFields | None = None  # container ``main`` gets the defaults


class CompilationCache(Strict):
    pvcName: str
    mountPath: str | None = None


class ComponentExperimental(Strict):
    gpuMemoryService: dict[str, Any] | None = None
    failover: dict[str, Any] | None = None
    checkpoint: dict[str, Any] | None = None
    grove: dict[str, Any] | None = None


class Component(Strict):
    """One entry of ``spec.components``."""

    name: str = Field(min_length=1)
    type: str | None = None
    runtimeVersionOverride: str | None = None  # JSON name at 2a6da14c8 (v1beta1 types)
    globalDynamoNamespace: bool = False
    podTemplate: PodTemplate | None = None
    replicas: int | None = Field(default=None, ge=0)
    minAvailable: int | None = None
    multinode: Multinode | None = None
    roles: list[ComponentRole] | None = None
    providerOverride: ProviderOverride | None = None
    sharedMemorySize: str | None = None
    modelRef: ModelRef | None = None
    scalingAdapter: dict[str, Any] | None = None  # presence = enabled
    eppConfig: EPPConfig | None = None
    frontendSidecar: str | None = None  # name of a podTemplate container
    compilationCache: CompilationCache | None = None
    topologyConstraint: TopologyConstraint | None = None
    experimental: ComponentExperimental | None = None
    extraPodSpecMergeStrategy: Literal["override", "strategic"] | None = None


class GraphSpec(Strict):
    # a map list keyed by name (+listType=map, +listMapKey=name in api/v1beta1 @ 2a6da14c8):
    # server-side apply gives each component's fields (replicas) their own owner
    components: list[Component] | None = Field(
        default=None,
        max_length=25,
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"]},
    )
    env: list[EnvVar] | None = None
    backendFramework: BackendFramework | None = None
    annotations: dict[str, str] | None = None
    labels: dict[str, str] | None = None
    priorityClassName: str | None = None
    restart: Restart | None = None
    topologyConstraint: TopologyConstraint | None = None
    experimental: Experimental | None = None
    providerOverride: ProviderOverride | None = None


class DynamoGraphDeployment(Strict):
    apiVersion: Literal["nvidia.com/v1beta1"]
    kind: Literal["DynamoGraphDeployment"]
    metadata: ObjectMeta
    spec: GraphSpec
    status: dict[str, Any] | None = None  # never read; tolerated on exported objects


class ComponentDeploymentSpec(Component):
    """A v1beta1 DynamoComponentDeployment's spec: one component and its backend."""

    backendFramework: BackendFramework | None = None


class DynamoComponentDeployment(Strict):
    """``nvidia.com/v1beta1`` DynamoComponentDeployment (the CRD's schema; a standalone DCD
    in Git is read in v1alpha1)."""

    apiVersion: Literal["nvidia.com/v1beta1"]
    kind: Literal["DynamoComponentDeployment"]
    metadata: ObjectMeta
    spec: ComponentDeploymentSpec
    status: dict[str, Any] | None = None


#: what converting a v1beta1 DGD validates and dumps on its own, and the internal model's
#: component (``expand/components.py``, every render), innermost first (see
#: ``v1alpha1.PREBUILT``)
PREBUILT: tuple[type[BaseModel], ...] = (
    ObjectMeta,
    PodSpecFields,
    PodTemplateMeta,
    Component,
    GraphSpec,
    DynamoGraphDeployment,
)
for _model in PREBUILT:
    _model.model_rebuild()
del _model
