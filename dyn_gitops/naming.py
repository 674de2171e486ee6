"""Names, component types and shared constants of the rendered objects
(``spec/dynamo-objects.md`` section 3), defined once for every layer.

This module sits below ``expand/``: validation, the expansion and the companion
controller all read names and constants from here (labels and annotations are in
:mod:`dyn_gitops.keys`). It imports nothing of the project but the models' types.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from typing import Any, Final

from . import keys

# ------------------------------------------------------------------- component types
FRONTEND: Final = "frontend"
PLANNER: Final = "planner"
WORKER: Final = "worker"
PREFILL: Final = "prefill"
DECODE: Final = "decode"
EPP: Final = "epp"
WORKER_TYPES = frozenset({WORKER, PREFILL, DECODE})
#: ``nvidia.com/dynamo-component-class`` of workers in a graph with an EPP (the pool selects it)
COMPONENT_CLASS_WORKER: Final = "worker"

# ------------------------------------------------------------------- resources, rollout
#: the GPU resource key of a container's limits/requests (and a service's default gpuType)
GPU_RESOURCE: Final = "nvidia.com/gpu"
#: a Deployment's default maxSurge / maxUnavailable (Kubernetes' own default)
DEFAULT_ROLLOUT_PERCENT: Final = "25%"
#: the legacy env whose JSON sets a component's replicas and resources (``legacyconfig``)
DYN_DEPLOYMENT_CONFIG: Final = "DYN_DEPLOYMENT_CONFIG"
#: a qualified name, as a label key or a resource name is (``IsQualifiedName``): an
#: optional DNS-subdomain prefix and "/", then a name of at most 63
QUALIFIED_NAME = re.compile(
    r"^(([a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?)(\.[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?)*/)?"
    r"([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)$"
)

# ------------------------------------------------------------------- Grove cliques
#: multinode cliques of a Grove PodCliqueSet: ``<svc>-ldr`` and ``<svc>-wkr``
GROVE_LEADER_SUFFIX: Final = "ldr"
GROVE_WORKER_SUFFIX: Final = "wkr"
GLOBAL_DYNAMO_NAMESPACE = "dynamo"
PLANNER_SERVICE_ACCOUNT = "planner-serviceaccount"
EPP_SERVICE_ACCOUNT = "epp-serviceaccount"
#: the objects every graph of a namespace renders identically (kind, name): one owner per
#: namespace (setting namespace-shared)
NAMESPACE_SHARED: frozenset[tuple[str, str]] = frozenset(
    (kind, name)
    for sa in (PLANNER_SERVICE_ACCOUNT, EPP_SERVICE_ACCOUNT)
    for kind, name in (("ServiceAccount", sa), ("RoleBinding", f"{sa}-binding"))
)


def is_namespace_shared(obj: Mapping[str, Any]) -> bool:
    """One of :data:`NAMESPACE_SHARED` (by kind and name; their API groups are core and RBAC)."""
    meta = obj.get("metadata")
    name = meta.get("name") if isinstance(meta, Mapping) else None
    return (str(obj.get("kind")), str(name)) in NAMESPACE_SHARED


MAX_SERVICES = 25
GROVE_NAME_BUDGET = 45
#: accepted values of nvidia.com/grove-update-strategy (Grove's UpdateStrategyType)
GROVE_UPDATE_STRATEGIES = ("RollingRecreate", "OnDelete")
#: the strategy under which Grove replaces no pod on a template change (GREP-291)
GROVE_ON_DELETE = "OnDelete"


def is_worker(component_type: str | None) -> bool:
    return component_type in WORKER_TYPES


def workload_type(component_type: str | None, sub_component_type: str | None) -> str:
    """The component type the operator renders with (env, pod labels, selectors): a
    v1alpha1 ``worker`` whose ``subComponentType`` is ``prefill`` or ``decode`` converts to
    that v1beta1 type (``sharedComponentTypeToHub``, ``api/v1alpha1/shared_spec_conversion.go``
    @ 2a6da14c8)."""
    if component_type == WORKER and sub_component_type in (PREFILL, DECODE):
        return str(sub_component_type)
    return component_type or ""


def discovery_backend(annotations: Mapping[str, str] | None, default: str) -> str:
    """The effective discovery backend: the ``nvidia.com/dynamo-discovery-backend``
    annotation (of the DGD, or of the service where the operator reads it there), else the
    ``discovery-backend`` setting."""
    return (annotations or {}).get(keys.ANN_DISCOVERY_BACKEND) or default


def workload_provider(annotations: Mapping[str, str] | None, grove_enabled: bool) -> str:
    """The provider the 1.5 defaulting webhook writes on create (``defaultWorkloadProvider``,
    webhook/defaulting/dynamographdeployment_handler.go @ 2a6da14c8, #12942): Grove when it
    is enabled and the DGD does not opt out with ``nvidia.com/enable-grove: "false"``."""
    opted_out = (annotations or {}).get(keys.ANN_ENABLE_GROVE, "").lower() == "false"
    if grove_enabled and not opted_out:
        return keys.WORKLOAD_PROVIDER_GROVE
    return keys.WORKLOAD_PROVIDER_COMPONENT


def workload_annotations(annotations: Mapping[str, str]) -> dict[str, str]:
    """A component's annotations as the operator puts them on the workloads of a DCD."""
    return {k: v for k, v in annotations.items() if k not in keys.DCD_ONLY_ANNOTATIONS}


def normalize(name: str) -> str:
    """``NormalizeKubeResourceName``: lowercase, dots to dashes (Service names)."""
    return name.lower().replace(".", "-")


def dynamo_namespace(global_ns: bool, k8s_namespace: str, dgd_name: str) -> str:
    return GLOBAL_DYNAMO_NAMESPACE if global_ns else f"{k8s_namespace}-{dgd_name.replace('.', '-')}"


def base_name(dgd_name: str, service: str) -> str:
    return f"{dgd_name}-{service.lower()}"


def component_name(dgd_name: str, service: str, worker_hash: str | None) -> str:
    """DCD / Deployment name; workers carry the worker-hash suffix."""
    base = base_name(dgd_name, service)
    return f"{base}-{worker_hash}" if worker_hash else base


def leader_worker_set_name(dcd_name: str) -> str:
    """A multinode DCD's one LeaderWorkerSet (``leaderWorkerSetName`` @ 2a6da14c8): the name
    the first per-replica set had before native scaling (#9612), so it adopts that one."""
    return f"{dcd_name}-0"


def clique_names(service: str, multinode: bool) -> list[str]:
    """The PodCliqueSet cliques a service renders to: ``<svc>``, or for a multinode service
    its leader and worker cliques ``<svc>-ldr`` and ``<svc>-wkr``."""
    lsvc = service.lower()
    if multinode:
        return [f"{lsvc}-{GROVE_LEADER_SUFFIX}", f"{lsvc}-{GROVE_WORKER_SUFFIX}"]
    return [lsvc]


def grove_clique_budget(service: str, multinode: bool, scaling_group: bool = False) -> int:
    """Characters one service adds to Grove's combined name: its clique name, or in a
    scaling group (multinode, or forced) the group's name plus its longest clique name."""
    lsvc = service.lower()
    if multinode:
        return len(lsvc) + max(len(c) for c in clique_names(service, multinode=True))
    return 2 * len(lsvc) if scaling_group else len(lsvc)


def _fnv1a32(data: bytes) -> int:
    h = 0x811C9DC5
    for byte in data:
        h = ((h ^ byte) * 0x01000193) & 0xFFFFFFFF
    return h


def pcs_name(dgd_name: str, budgets: list[int]) -> str:
    """``PCSNameForDGD``: the DGD name, or (too long for Grove's 45-character combined
    PCS + scaling group + clique name) a cut with a 4-hex FNV-1a suffix of the full name."""
    budget = max(GROVE_NAME_BUDGET - max(budgets, default=0), 8)
    if len(dgd_name) <= budget:
        return dgd_name
    return f"{dgd_name[: budget - 5]}-{_fnv1a32(dgd_name.encode()) & 0xFFFF:04x}"


def model_hash(model_name: str) -> str:
    return hashlib.sha256(model_name.encode()).hexdigest()[:8]


def model_service_name(model_name: str) -> str:
    return f"dynamo-model-{model_hash(model_name)}"


#: Kubernetes' limit on a label value
LABEL_VALUE_MAX = 63


def label_value_63(value: str) -> str:
    """A label value of at most 63 characters: a longer one is cut to 54 characters,
    ``-`` and the first 8 hex characters of its SHA-256 (``getK8sDiscoveryLabelValue``)."""
    if len(value) <= LABEL_VALUE_MAX:
        return value
    digest = hashlib.sha256(value.encode()).hexdigest()[:8]
    return f"{value[: LABEL_VALUE_MAX - len(digest) - 1]}-{digest}"


def discovery_service_account(dgd_name: str) -> str:
    return f"{dgd_name}-k8s-service-discovery"


def epp_service_name(dgd_name: str, service: str) -> str:
    """The EPP component's Service (and its DestinationRule): ``<dgd>-<svc>``, normalized."""
    return normalize(base_name(dgd_name, service))


def epp_configmap_name(dgd_name: str) -> str:
    return f"{dgd_name}-epp-config"


def inference_pool_name(dgd_name: str) -> str:
    return f"{dgd_name}-pool"


_BACKEND_RE = re.compile(r"python[0-9.]*\s+[^|&;]*-m\s+[^|&;]*dynamo\.(vllm|sglang|trtllm)[^|&;]*")


def backends_in_command(container: Mapping[str, Any]) -> set[str]:
    """Frameworks named by ``python -m dynamo.<backend>`` in a container's command + args
    (``DetectBackendFrameworkFromArgs``)."""
    line = " ".join([*(container.get("command") or []), *(container.get("args") or [])])
    return {m.group(1) for m in _BACKEND_RE.finditer(line)}


#: the Kubernetes limit on a Service name (a DNS-1035 label)
MAX_SERVICE_NAME = 63


def elastic_ep_leader_service(component_service: str) -> str:
    """``ElasticEPLeaderServiceName`` (#13178): ``<component Service>-ray``, cut to 63
    characters with a 4-hex FNV-1a suffix of the full name (followers derive it too)."""
    name = normalize(component_service + "-ray")
    if len(name) <= MAX_SERVICE_NAME:
        return name
    suffix = f"{_fnv1a32(name.encode()) & 0xFFFF:04x}"
    return f"{name[: MAX_SERVICE_NAME - len(suffix) - 1]}-{suffix}"
