"""What the Dynamo operator puts in every component by default (``dynamo-pod-spec.md`` 5.1).

Baseline: the Dynamo 1.1 line, with the 1.5 runtime-version gates (:mod:`dyn_gitops.gates`)
of the worker defaults: a runtime that does not resolve gets the legacy profile.
"""

from __future__ import annotations

from typing import Any, Final

from .. import gates, naming
from ..runtimeversion import Version

MAIN_CONTAINER: Final = "main"

FRONTEND_PORT: Final = 8000
SYSTEM_PORT: Final = 9090
NIXL_PORT: Final = 19090
PLANNER_METRICS_PORT: Final = 9085
EPP_GRPC_PORT: Final = 9002
EPP_GRPC_HEALTH_PORT: Final = 9003
FORWARDPASS_METRIC_PORT: Final = 20380

TERMINATION_GRACE_SECONDS: Final = 60
EPP_TERMINATION_GRACE_SECONDS: Final = 130
DEFAULT_FS_GROUP: Final = 1000
SHARED_MEMORY_VOLUME: Final = "shared-memory"
SHARED_MEMORY_PATH: Final = "/dev/shm"
SHARED_MEMORY_SIZE: Final = "8Gi"
VLLM_COMPILATION_CACHE_PATH: Final = "/root/.cache/vllm"
DEFAULT_INGRESS_HOST_SUFFIX: Final = "local"
INFERENCE_POOL_GROUP: Final = "inference.networking.k8s.io"
EPP_CONFIG_KEY: Final = "epp-config-dynamo.yaml"
EPP_CONFIG_DIR: Final = "/etc/epp"
EPP_CONFIG_VOLUME: Final = "epp-config"

# GPU Memory Service and failover (the operator's internal/gms, internal/dra and
# internal/dynamo/failover*.go @ 2a6da14c8; ERRATA 2: the intra-pod control volume)
GMS_CLAIM: Final = "intrapod-shared-gpu"
GMS_DEVICE_CLASS: Final = "gpu.nvidia.com"
GMS_DEVICE_REQUEST: Final = "gpus"
GMS_SERVER_CONTAINER: Final = "gms-server"
GMS_SERVER_MODULE: Final = "gpu_memory_service.cli.server"
GMS_VOLUME: Final = "gms-intrapod-control"
GMS_MOUNT_PATH: Final = "/gms-intrapod-control"
GMS_SOCKET_DIR_ENV: Final = "GMS_SOCKET_DIR"
FAILOVER_ENGINES: Final = 2
FAILOVER_LOCK_FILE: Final = "failover.lock"
FAILOVER_VLLM_NIXL_SIDE_CHANNEL_PORT: Final = 5600
FAILOVER_VLLM_KV_EVENT_PORT: Final = 20080
FAILOVER_VLLM_MASTER_PORT: Final = 29500
FAILOVER_VLLM_MASTER_PORT_STRIDE: Final = 100


def _port(name: str, number: int) -> dict[str, Any]:
    return {"name": name, "containerPort": number, "protocol": "TCP"}


def _http_probe(path: str, port: str, **timing: int) -> dict[str, Any]:
    return {"httpGet": {"path": path, "port": port}, **timing}


def _grpc_probe(**timing: int) -> dict[str, Any]:
    return {"grpc": {"port": EPP_GRPC_HEALTH_PORT, "service": "inference-extension"}, **timing}


def _env(name: str, value: str) -> dict[str, Any]:
    return {"name": name, "value": value}


def _field_env(name: str, path: str) -> dict[str, Any]:
    return {"name": name, "valueFrom": {"fieldRef": {"fieldPath": path}}}


def common_env(
    *,
    dynamo_ns: str,
    component_type: str,
    dgd_name: str,
    dgd_namespace: str,
    discovery_backend: str,
    container_discovery: bool,
) -> list[dict[str, Any]]:
    env = [
        _env("DYN_NAMESPACE", dynamo_ns),
        _env("DYN_COMPONENT", component_type),
        _env("DYN_PARENT_DGD_K8S_NAME", dgd_name),
        _env("DYN_PARENT_DGD_K8S_NAMESPACE", dgd_namespace),
        _field_env("POD_NAME", "metadata.name"),
        _field_env("POD_NAMESPACE", "metadata.namespace"),
        _field_env("POD_UID", "metadata.uid"),
    ]
    if discovery_backend != "etcd":
        env.append(_env("DYN_DISCOVERY_BACKEND", "kubernetes"))
    if container_discovery:
        env.append(_env("CONTAINER_NAME", MAIN_CONTAINER))
        env.append(_env("DYN_KUBE_DISCOVERY_MODE", "container"))
    return env


def frontend_container(dynamo_ns: str) -> dict[str, Any]:
    return {
        "command": ["python3"],
        "args": ["-m", "dynamo.frontend"],
        "ports": [_port("http", FRONTEND_PORT)],
        "livenessProbe": _http_probe(
            "/live",
            "http",
            initialDelaySeconds=15,
            periodSeconds=10,
            timeoutSeconds=1,
            failureThreshold=3,
        ),
        "readinessProbe": _http_probe(
            "/health",
            "http",
            initialDelaySeconds=10,
            periodSeconds=10,
            timeoutSeconds=3,
            failureThreshold=3,
        ),
        "env": [
            _env("DYNAMO_PORT", str(FRONTEND_PORT)),
            _env("DYN_HTTP_PORT", str(FRONTEND_PORT)),
            _env("DYN_NAMESPACE_PREFIX", dynamo_ns),
        ],
    }


#: worker liveness failureThreshold: legacy workers restart after one failed check
LEGACY_LIVENESS_FAILURES: Final = 1
#: ... runtimes with IncreasedWorkerFailureThreshold after three (#13512)
TOLERANT_LIVENESS_FAILURES: Final = 3


def _system_probes(liveness_failures: int = LEGACY_LIVENESS_FAILURES) -> dict[str, Any]:
    return {
        "livenessProbe": _http_probe(
            "/live",
            "system",
            periodSeconds=5,
            timeoutSeconds=4,
            failureThreshold=liveness_failures,
        ),
        "readinessProbe": _http_probe(
            "/health", "system", periodSeconds=10, timeoutSeconds=4, failureThreshold=3
        ),
        "startupProbe": _http_probe(
            "/live", "system", periodSeconds=10, timeoutSeconds=5, failureThreshold=720
        ),
    }


def worker_container(worker_hash: str | None, runtime: Version | None = None) -> dict[str, Any]:
    """The worker defaults (``component_worker.go``) for the component's runtime version
    (None: unresolved, the legacy profile)."""
    canary = gates.CANARY_HEALTH_CHECKS.enabled(runtime)
    tolerant = gates.INCREASED_WORKER_FAILURE_THRESHOLD.enabled(runtime)
    env = [
        _env("DYN_SYSTEM_ENABLED", "true"),
        _env("DYN_SYSTEM_USE_ENDPOINT_HEALTH_STATUS", '["generate"]'),
        _env("DYN_SYSTEM_PORT", str(SYSTEM_PORT)),
        _env("DYN_HEALTH_CHECK_ENABLED", "true" if canary else "false"),
        _env("NIXL_TELEMETRY_ENABLE", "n"),
        _env("NIXL_TELEMETRY_EXPORTER", "prometheus"),
        _env("NIXL_TELEMETRY_PROMETHEUS_PORT", str(NIXL_PORT)),
        _env("DYN_FORWARDPASS_METRIC_PORT", str(FORWARDPASS_METRIC_PORT)),
    ]
    if worker_hash:
        env.append(_env("DYN_NAMESPACE_WORKER_SUFFIX", worker_hash))
    return {
        "command": ["/bin/sh", "-c"],
        "ports": [_port("system", SYSTEM_PORT), _port("nixl", NIXL_PORT)],
        **_system_probes(TOLERANT_LIVENESS_FAILURES if tolerant else LEGACY_LIVENESS_FAILURES),
        "env": env,
    }


def planner_container() -> dict[str, Any]:
    return {
        "command": ["/bin/sh", "-c"],
        "ports": [_port("metrics", PLANNER_METRICS_PORT), _port("system", SYSTEM_PORT)],
        **_system_probes(),
        "env": [
            _env("PLANNER_PROMETHEUS_PORT", str(PLANNER_METRICS_PORT)),
            _env("DYN_SYSTEM_PORT", str(SYSTEM_PORT)),
        ],
    }


def epp_container(pool_name: str, pool_namespace: str, dynamo_ns: str) -> dict[str, Any]:
    """``EPPDefaults.GetBaseContainer`` for the Go EPP (``internal/dynamo/component_epp.go``
    @ 2a6da14c8): double-dash flags, and the env of ERRATA 1 (no ``NVIDIA_VISIBLE_DEVICES``).
    The 1.5 line (#11355) mounts the ``hf-cache`` emptyDir on the Rust EPP only, so this
    legacy contract mounts the config file alone (``expand/epp.py``)."""
    return {
        "command": [],
        "args": [
            "--pool-name",
            pool_name,
            "--pool-namespace",
            pool_namespace,
            "--pool-group",
            INFERENCE_POOL_GROUP,
            "-v",
            "4",
            "--zap-encoder",
            "json",
            "--grpc-port",
            str(EPP_GRPC_PORT),
            "--grpc-health-port",
            str(EPP_GRPC_HEALTH_PORT),
            "--config-file",
            f"{EPP_CONFIG_DIR}/{EPP_CONFIG_KEY}",
        ],
        "ports": [
            _port("grpc", EPP_GRPC_PORT),
            _port("grpc-health", EPP_GRPC_HEALTH_PORT),
            _port("metrics", SYSTEM_PORT),
        ],
        "livenessProbe": _grpc_probe(initialDelaySeconds=5, periodSeconds=10),
        "readinessProbe": _grpc_probe(initialDelaySeconds=5, periodSeconds=10),
        "startupProbe": _grpc_probe(periodSeconds=10, failureThreshold=180),
        "env": [
            _env("USE_STREAMING", "true"),
            _env("RUST_LOG", "info"),
            _env("DYN_ENFORCE_DISAGG", "false"),
            _env("DYN_NAMESPACE_PREFIX", dynamo_ns),
        ],
        "volumeMounts": [
            {"name": EPP_CONFIG_VOLUME, "mountPath": EPP_CONFIG_DIR, "readOnly": True},
        ],
    }


def epp_volumes(config_map: str, key: str) -> list[dict[str, Any]]:
    return [
        {
            "name": EPP_CONFIG_VOLUME,
            "configMap": {"name": config_map, "items": [{"key": key, "path": EPP_CONFIG_KEY}]},
        },
    ]


def type_container(
    component_type: str,
    *,
    dynamo_ns: str,
    worker_hash: str | None,
    pool_name: str,
    pool_namespace: str,
    runtime: Version | None = None,
) -> dict[str, Any]:
    """Per-type defaults of the main container (command, args, ports, probes, env);
    ``runtime``: the component's resolved runtime version (None: the legacy profile)."""
    if component_type == naming.FRONTEND:
        return frontend_container(dynamo_ns)
    if naming.is_worker(component_type):
        return worker_container(worker_hash, runtime)
    if component_type == naming.PLANNER:
        return planner_container()
    if component_type == naming.EPP:
        return epp_container(pool_name, pool_namespace, dynamo_ns)
    return {"command": ["/bin/sh", "-c"], "env": []}


def service_port(component_type: str) -> dict[str, Any]:
    if component_type == naming.FRONTEND:
        return {"name": "http", "port": FRONTEND_PORT, "targetPort": "http", "protocol": "TCP"}
    if component_type == naming.EPP:
        return {
            "name": "grpc",
            "port": EPP_GRPC_PORT,
            "targetPort": EPP_GRPC_PORT,
            "protocol": "TCP",
            "appProtocol": "http2",
        }
    return {"name": "system", "port": SYSTEM_PORT, "targetPort": "system", "protocol": "TCP"}
