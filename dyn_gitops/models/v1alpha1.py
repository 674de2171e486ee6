"""``nvidia.com/v1alpha1`` DynamoGraphDeployment and DynamoComponentDeployment (the
field names of ``spec/dynamo-pod-spec.md`` section 1)."""

from typing import Any, Literal

from pydantic import Field, PrivateAttr

from .k8s import Container, EnvVar, ExtraPodSpec, ObjectMeta, Probe, Quantity, Strict
from .preserved import PVC as PVC
from .preserved import Ingress as Ingress
from .preserved import IngressTLS as IngressTLS
from .versions import GROUP as GROUP
from .versions import V1ALPHA1

VERSION = "v1alpha1"
API_VERSION = V1ALPHA1

BackendFramework = Literal["sglang", "vllm", "trtllm"]


class ResourceItem(Strict):
    cpu: Quantity | None = None
    memory: Quantity | None = None
    gpu: Quantity | None = None
    gpuType: str | None = None
    custom: dict[str, Quantity] | None = None


class Resources(Strict):
    requests: ResourceItem | None = None
    limits: ResourceItem | None = None
    claims: list[dict[str, Any]] | None = None


class VolumeMount(Strict):
    name: str
    mountPoint: str | None = None
    useAsCompilationCache: bool = False


class SharedMemory(Strict):
    disabled: bool = False
    size: Quantity | None = None


class ExtraPodMetadata(Strict):
    annotations: dict[str, str] | None = None
    labels: dict[str, str] | None = None


class Multinode(Strict):
    nodeCount: int = Field(default=2, ge=1)


class ScalingAdapter(Strict):
    enabled: bool = False


class ModelRef(Strict):
    name: str
    revision: str | None = None


class ConfigMapKeyRef(Strict):
    name: str | None = None
    key: str | None = None


class EPPConfig(Strict):
    configMapRef: ConfigMapKeyRef | None = None
    config: dict[str, Any] | None = None


class FrontendSidecar(Strict):
    image: str
    args: list[str] | None = None
    envFromSecret: str | None = None
    envs: list[EnvVar] | None = None


class GPUMemoryService(Strict):
    enabled: bool = False
    mode: str | None = None
    deviceClassName: str | None = None


class Failover(Strict):
    enabled: bool = False
    mode: str | None = None
    numShadows: int | None = None


class TopologyConstraint(Strict):
    packDomain: str | None = None
    topologyProfile: str | None = None
    clusterTopologyName: str | None = None


class ProviderOverride(Strict):
    """A sparse provider-native fragment (#13273 df7deed0d, ``api/v1beta1/common.go``): for
    Grove, ``apiVersion: grove.io/v1alpha1``, a ``target`` admission resolves from where it
    is written, and a ``value`` that may set only the target's ``topologyConstraint``."""

    apiVersion: str = Field(min_length=1)
    target: str | None = None
    value: dict[str, Any]


class ComponentRole(Strict):
    """One named pod-producing part of a compound component (v1beta1 ``roles[]``, #14419,
    v1.5.0): for a multinode component exactly ``leader`` and ``worker``."""

    name: str = Field(min_length=1, max_length=63, pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
    replicas: int | None = Field(default=None, ge=1)
    providerOverride: ProviderOverride | None = None
    podTemplate: dict[str, Any] | None = None  # no role supports its own template yet


class CheckpointConfig(Strict):
    """``checkpoint`` (ServiceCheckpointConfig, ``api/v1alpha1/common.go`` @ 2a6da14c8); in
    1.5 ``checkpointRef`` names a PodSnapshot of the standalone Snapshot operator (#14076)."""

    enabled: bool | None = None
    mode: Literal["Auto", "Manual"] | None = None  # deprecated
    startupPolicy: Literal["Immediate", "WaitForCheckpoint"] | None = None
    deletionPolicy: Literal["Delete", "Retain"] | None = None
    checkpointRef: str | None = None
    identity: dict[str, Any] | None = None  # deprecated, ignored by the operator
    targetContainerName: str | None = None
    job: dict[str, Any] | None = None


class ServiceSpec(Strict):
    """``spec.services.<name>``: DynamoComponentDeploymentSharedSpec."""

    annotations: dict[str, str] | None = None
    labels: dict[str, str] | None = None
    serviceName: str | None = None
    componentType: str | None = None
    subComponentType: str | None = None
    dynamoNamespace: str | None = None
    globalDynamoNamespace: bool = False
    resources: Resources | None = None
    autoscaling: dict[str, Any] | None = None
    envs: list[EnvVar] | None = None
    envFromSecret: str | None = None
    volumeMounts: list[VolumeMount] | None = None
    ingress: Ingress | None = None
    modelRef: ModelRef | None = None
    sharedMemory: SharedMemory | None = None
    extraPodMetadata: ExtraPodMetadata | None = None
    extraPodSpec: ExtraPodSpec | None = None
    livenessProbe: Probe | None = None
    readinessProbe: Probe | None = None
    replicas: int | None = None
    minAvailable: int | None = None
    multinode: Multinode | None = None
    scalingAdapter: ScalingAdapter | None = None
    eppConfig: EPPConfig | None = None
    frontendSidecar: FrontendSidecar | None = None
    checkpoint: CheckpointConfig | None = None
    topologyConstraint: TopologyConstraint | None = None
    gpuMemoryService: GPUMemoryService | None = None
    failover: Failover | None = None
    runtimeVersionOverride: str | None = None
    providerOverride: ProviderOverride | None = None
    # v1beta1 experimental.grove.forceScalingGroup (no v1alpha1 field): set by conversion
    _force_scaling_group: bool = PrivateAttr(default=False)
    # v1beta1 roles (no v1alpha1 field): set by conversion
    _roles: tuple[ComponentRole, ...] | None = PrivateAttr(default=None)

    @property
    def roles(self) -> tuple[ComponentRole, ...] | None:
        """The explicit multinode roles (v1beta1 only; None: the implicit layout)."""
        return self._roles

    def set_roles(self, roles: list[ComponentRole]) -> None:
        self._roles = tuple(roles)

    @property
    def force_scaling_group(self) -> bool:
        """Grove: a single-node service in its own PodCliqueScalingGroup (v1beta1 only)."""
        return self._force_scaling_group

    def set_force_scaling_group(self, value: bool) -> None:
        self._force_scaling_group = value

    @property
    def main_container(self) -> Container | None:
        return self.extraPodSpec.mainContainer if self.extraPodSpec else None


class RestartStrategy(Strict):
    type: Literal["Sequential", "Parallel"] = "Sequential"
    order: list[str] | None = None


class Restart(Strict):
    id: str | None = None
    strategy: RestartStrategy | None = None


class KVTransferPolicy(Strict):
    labelKey: str | None = None
    clusterTopologyName: str | None = None
    domain: str | None = None
    enforcement: Literal["required", "preferred"] | None = None
    preferredWeight: float | None = None  # a float32 in [0, 1]


class Experimental(Strict):
    kvTransferPolicy: KVTransferPolicy | None = None
    componentGroups: list[dict[str, Any]] | None = None


class GraphSpec(Strict):
    services: dict[str, ServiceSpec] | None = None
    envs: list[EnvVar] | None = None
    backendFramework: BackendFramework | None = None
    pvcs: list[PVC] | None = Field(default=None, max_length=100)
    annotations: dict[str, str] | None = None
    labels: dict[str, str] | None = None
    priorityClassName: str | None = None
    restart: Restart | None = None
    topologyConstraint: TopologyConstraint | None = None
    experimental: Experimental | None = None
    providerOverride: ProviderOverride | None = None


class DynamoGraphDeployment(Strict):
    apiVersion: Literal["nvidia.com/v1alpha1"]
    kind: Literal["DynamoGraphDeployment"]
    metadata: ObjectMeta
    spec: GraphSpec
    status: dict[str, Any] | None = None  # never read; tolerated on exported objects


class DGDRef(Strict):
    name: str = Field(min_length=1)
    serviceName: str = Field(min_length=1)


class ScalingAdapterSpec(Strict):
    replicas: int = Field(default=1, ge=0)
    dgdRef: DGDRef


class DynamoGraphDeploymentScalingAdapter(Strict):
    apiVersion: Literal["nvidia.com/v1alpha1"]
    kind: Literal["DynamoGraphDeploymentScalingAdapter"]
    metadata: ObjectMeta
    spec: ScalingAdapterSpec
    status: dict[str, Any] | None = None


#: ``spec.modelType`` of a DynamoModel (the operator's enum; its default is ``base``)
ModelType = Literal["base", "lora", "adapter"]
#: the schemes a LoRA ``source.uri`` may use (the operator's DynamoModel webhook)
MODEL_SOURCE_SCHEMES = ("s3://", "hf://")


class ModelSource(Strict):
    #: ``s3://bucket/path`` or ``hf://org/model@revision``
    uri: str


class DynamoModelSpec(Strict):
    """``api/v1alpha1/dynamo_model_types.go`` (1.5): a model served by the workers whose
    ``modelRef.name`` is ``baseModelName``; ``lora`` adapters are loaded into them."""

    modelName: str = Field(min_length=1)
    baseModelName: str = Field(min_length=1)
    modelType: ModelType = "base"
    source: ModelSource | None = None


class ModelEndpoint(Strict):
    """``EndpointInfo``: one worker pod; ``ready`` is true once it loaded the adapter."""

    address: str
    podName: str | None = None
    ready: bool


class Condition(Strict):
    """``metav1.Condition``."""

    type: str
    status: Literal["True", "False", "Unknown"]
    observedGeneration: int | None = None
    lastTransitionTime: str
    reason: str
    message: str


class DynamoModelStatus(Strict):
    endpoints: list[ModelEndpoint] | None = None
    readyEndpoints: int = 0
    totalEndpoints: int = 0
    conditions: list[Condition] | None = None


class DynamoModel(Strict):
    apiVersion: Literal["nvidia.com/v1alpha1"]
    kind: Literal["DynamoModel"]
    metadata: ObjectMeta
    spec: DynamoModelSpec
    status: dict[str, Any] | None = None  # never read; tolerated on exported objects


class ComponentSpec(ServiceSpec):
    """DynamoComponentDeployment spec: the shared spec plus the graph-level bits."""

    backendFramework: BackendFramework | None = None


class DynamoComponentDeployment(Strict):
    apiVersion: Literal["nvidia.com/v1alpha1"]
    kind: Literal["DynamoComponentDeployment"]
    metadata: ObjectMeta
    spec: ComponentSpec
    status: dict[str, Any] | None = None


#: what rendering a DGD validates and dumps on its own, innermost first: built here, each
#: from the schemas built before it (built on first use instead, each would build its nested
#: models again); every other model is built on its first use
PREBUILT: tuple[type[Strict], ...] = (
    EnvVar,
    Container,
    ExtraPodSpec,
    ServiceSpec,
    DynamoGraphDeployment,
)
for _model in PREBUILT:
    _model.model_rebuild()
del _model

__all__ = [
    "API_VERSION",
    "Container",
    "DynamoComponentDeployment",
    "DynamoGraphDeployment",
    "EnvVar",
    "GraphSpec",
    "ServiceSpec",
]
