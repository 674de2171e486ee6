"""The Kubernetes objects around the pod spec (``spec/dynamo-objects.md`` sections 5 and 9)."""

from __future__ import annotations

from typing import Any

import yaml

from .. import keys, naming
from ..models.preserved import PVC, Ingress
from ..yamlout import go_reads_as_non_string
from . import defaults
from .context import ComponentContext

Obj = dict[str, Any]


def meta(
    name: str,
    namespace: str | None,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
) -> dict[str, Any]:
    m: dict[str, Any] = {"name": name}
    if namespace is not None:
        m["namespace"] = namespace
    if labels:
        m["labels"] = dict(sorted(labels.items()))
    if annotations:
        m["annotations"] = dict(sorted(annotations.items()))
    return m


def _rbac_labels(name: str) -> dict[str, str]:
    return {
        keys.LABEL_APP_MANAGED_BY: "dynamo-operator",
        keys.LABEL_APP_COMPONENT: "rbac",
        keys.LABEL_APP_NAME: name,
    }


def service_account(name: str, namespace: str) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": meta(name, namespace, _rbac_labels(name)),
    }


def cluster_role_binding_for_sa(sa: str, namespace: str, cluster_role: str) -> Obj:
    """RoleBinding of ``sa`` to a ClusterRole (planner / EPP); labelled with the
    ServiceAccount's name (``internal/rbac/manager.go`` @ 2a6da14c8, ERRATA 5)."""
    name = f"{sa}-binding"
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": meta(name, namespace, _rbac_labels(sa)),
        "subjects": [{"kind": "ServiceAccount", "name": sa, "namespace": namespace}],
        "roleRef": {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "ClusterRole",
            "name": cluster_role,
        },
    }


def discovery_rbac(dgd_name: str, namespace: str) -> list[Obj]:
    """The discovery ServiceAccount, Role and RoleBinding: all three labelled with the
    ServiceAccount's name capped at 63 characters, no graph label
    (``internal/discovery/resource.go`` @ 2a6da14c8, #11709, ERRATA 5)."""
    sa = naming.discovery_service_account(dgd_name)
    role, binding = f"{sa}-role", f"{sa}-binding"
    labels = _rbac_labels(naming.label_value_63(sa))
    return [
        {
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": meta(sa, namespace, labels),
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": meta(role, namespace, labels),
            "rules": [
                {
                    "apiGroups": [""],
                    "resources": ["endpoints", "pods"],
                    "verbs": ["get", "list", "watch"],
                },
                {
                    "apiGroups": ["discovery.k8s.io"],
                    "resources": ["endpointslices"],
                    "verbs": ["get", "list", "watch"],
                },
                {
                    "apiGroups": ["nvidia.com"],
                    "resources": ["dynamoworkermetadatas"],
                    "verbs": ["create", "get", "list", "watch", "update", "patch", "delete"],
                },
            ],
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": meta(binding, namespace, labels),
            "subjects": [{"kind": "ServiceAccount", "name": sa, "namespace": namespace}],
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": role},
        },
    ]


def pvc(p: PVC, namespace: str) -> Obj:
    spec: dict[str, Any] = {
        "accessModes": [p.volumeAccessMode],
        "resources": {"requests": {"storage": p.size}},
    }
    if p.storageClass:
        spec["storageClassName"] = p.storageClass
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": meta(str(p.name), namespace),
        "spec": spec,
    }


def component_service(
    ctx: ComponentContext,
    labels: dict[str, str],
    annotations: dict[str, str],
    leader_only: bool = False,
) -> Obj:
    selector = {
        keys.LABEL_COMPONENT_TYPE: ctx.component_type,
        keys.LABEL_DYNAMO_NAMESPACE: ctx.preserved.dynamo_namespace or ctx.dynamo_ns,
        keys.LABEL_COMPONENT: ctx.service,
    }
    if leader_only:  # multinode: only the leader serves
        selector[keys.LABEL_ROLE] = "leader"
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": meta(naming.normalize(ctx.name), ctx.namespace, labels, annotations),
        "spec": {
            "selector": dict(sorted(selector.items())),
            "ports": [defaults.service_port(ctx.component_type)],
        },
    }


def default_ingress(ctx: ComponentContext) -> Ingress | None:
    """The operator's default ingress for frontends without one (from the render settings)."""
    s = ctx.settings
    if not (s.ingress_class or s.istio_gateway):
        return None
    return Ingress(
        enabled=True,
        host=ctx.dgd_name,
        useVirtualService=bool(s.istio_gateway),
        virtualServiceGateway=s.istio_gateway or None,
        ingressControllerClassName=s.ingress_class or None,
        tls={"secretName": s.ingress_tls_secret} if s.ingress_tls_secret else None,
        hostSuffix=s.ingress_host_suffix or None,
    )


def ingress_objects(ctx: ComponentContext, ingress: Ingress) -> list[Obj]:
    if not ingress.enabled:
        return []
    host = (
        f"{ingress.hostPrefix or ''}{ingress.host or ''}."
        f"{ingress.hostSuffix or defaults.DEFAULT_INGRESS_HOST_SUFFIX}"
    )
    # Ingress, VirtualService and their backend are named after the normalized DCD name
    # (generateIngress / generateVirtualService, dynamocomponentdeployment_controller.go @
    # 2a6da14c8)
    backend = naming.normalize(ctx.name)
    out: list[Obj] = []
    if ingress.ingressControllerClassName:
        out.append(_ingress(ctx, ingress, host, backend))
    if ctx.settings.istio_gateway and ingress.useVirtualService and ingress.virtualServiceGateway:
        out.append(_virtual_service(ctx, ingress.virtualServiceGateway, host, backend))
    return out


def _ingress(ctx: ComponentContext, ingress: Ingress, host: str, backend: str) -> Obj:
    service = {"name": backend, "port": {"number": defaults.FRONTEND_PORT}}
    path = {"path": "/", "pathType": "Prefix", "backend": {"service": service}}
    spec: dict[str, Any] = {
        "ingressClassName": ingress.ingressControllerClassName,
        "rules": [{"host": host, "http": {"paths": [path]}}],
    }
    if ingress.tls and ingress.tls.secretName:
        spec["tls"] = [{"hosts": [host], "secretName": ingress.tls.secretName}]
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "Ingress",
        "metadata": meta(backend, ctx.namespace),
        "spec": spec,
    }


def _virtual_service(ctx: ComponentContext, gateway: str, host: str, backend: str) -> Obj:
    destination = {"host": backend, "port": {"number": defaults.FRONTEND_PORT}}
    return {
        "apiVersion": "networking.istio.io/v1beta1",
        "kind": "VirtualService",
        "metadata": meta(backend, ctx.namespace),
        "spec": {
            "hosts": [host],
            "gateways": [gateway],
            "http": [
                {"match": [{"uri": {"prefix": "/"}}], "route": [{"destination": destination}]}
            ],
        },
    }


def model_service(model_name: str, namespace: str) -> Obj:
    h = naming.model_hash(model_name)
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": meta(
            naming.model_service_name(model_name),
            namespace,
            {keys.LABEL_BASE_MODEL_HASH: h, keys.LABEL_MANAGED_BY_DYNAMO: "dynamo-operator"},
            {keys.ANN_BASE_MODEL: model_name},
        ),
        "spec": {
            # publishNotReadyAddresses false is Go's omitted zero (model_service.go @ 2a6da14c8)
            "clusterIP": "None",
            "selector": {keys.LABEL_BASE_MODEL_HASH: h},
            "ports": [
                {
                    "name": "system",
                    "port": defaults.SYSTEM_PORT,
                    "targetPort": defaults.SYSTEM_PORT,
                    "protocol": "TCP",
                }
            ],
        },
    }


def scaling_adapter(dgd_name: str, namespace: str, service: str, replicas: int | None) -> Obj:
    return {
        "apiVersion": "nvidia.com/v1alpha1",
        "kind": "DynamoGraphDeploymentScalingAdapter",
        "metadata": meta(
            naming.base_name(dgd_name, service),
            namespace,
            {keys.LABEL_GRAPH_NAME: dgd_name, keys.LABEL_COMPONENT: service},
            # Git seeds spec.replicas (the CRD requires it); HPA / KEDA / the Planner own it
            # once created: Flux creates the adapter and never re-applies it (Argo CD:
            # ignoreDifferences, docs/argocd.md section 4)
            {keys.ANN_FLUX_SSA: keys.FLUX_SSA_IF_NOT_PRESENT},
        ),
        "spec": {
            "replicas": 1 if replicas is None else replicas,
            "dgdRef": {"name": dgd_name, "serviceName": service},
        },
    }


#: the fields Go's ``EndpointPickerConfig`` (gateway-api-inference-extension v1.2.0, the
#: operator's) keeps of a plugin and of a scheduling-profile entry, with their zero values:
#: none is ``omitempty``, so an absent one is written as ``""`` / ``null``
_EPP_PLUGIN_FIELDS: dict[str, Any] = {"name": "", "type": "", "parameters": None}
_EPP_PROFILE_PLUGIN_FIELDS: dict[str, Any] = {"pluginRef": "", "weight": None}


def _go_epp_config(config: dict[str, Any]) -> dict[str, Any]:
    """The inline config after the operator's round trip through its Go struct
    (``marshalEndpointPickerConfig``, ``internal/dynamo/epp/config.go`` @ 2a6da14c8)."""

    def entry(item: Any, fields: dict[str, Any]) -> Any:
        if not isinstance(item, dict):
            return item
        return {k: item.get(k, zero) for k, zero in fields.items()}

    out = dict(config)
    if isinstance(out.get("plugins"), list):
        out["plugins"] = [entry(p, _EPP_PLUGIN_FIELDS) for p in out["plugins"]]
    if isinstance(out.get("schedulingProfiles"), list):
        profiles = []
        for profile in out["schedulingProfiles"]:
            if isinstance(profile, dict) and isinstance(profile.get("plugins"), list):
                profile = {
                    **profile,
                    "plugins": [entry(p, _EPP_PROFILE_PLUGIN_FIELDS) for p in profile["plugins"]],
                }
            profiles.append(profile)
        out["schedulingProfiles"] = profiles
    return out


class _GoYamlDumper(yaml.SafeDumper):
    """sigs.k8s.io/yaml's style: a string that needs quoting (by PyYAML's rules or Go's)
    is double-quoted."""

    def choose_scalar_style(self) -> str:
        style = str(super().choose_scalar_style())
        return '"' if style == "'" else style


def _represent_go_str(dumper: _GoYamlDumper, value: str) -> yaml.ScalarNode:
    style = '"' if go_reads_as_non_string(value) else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_GoYamlDumper.add_representer(str, _represent_go_str)


def epp_config_map(dgd_name: str, namespace: str, service: str, config: dict[str, Any]) -> Obj:
    body = {
        "apiVersion": "inference.networking.x-k8s.io/v1alpha1",
        "kind": "EndpointPickerConfig",
        **_go_epp_config(config),
    }
    # the operator writes it with sigs.k8s.io/yaml (through JSON): keys sorted
    text = yaml.dump(body, Dumper=_GoYamlDumper, sort_keys=True, default_flow_style=False)
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": meta(
            naming.epp_configmap_name(dgd_name), namespace, _epp_labels(dgd_name, service)
        ),
        "data": {defaults.EPP_CONFIG_KEY: text},
    }


def _epp_labels(dgd_name: str, service: str) -> dict[str, str]:
    return {
        keys.LABEL_GRAPH_NAME: dgd_name,
        keys.LABEL_COMPONENT: service,
        keys.LABEL_COMPONENT_TYPE: naming.EPP,
    }


def inference_pool(dgd_name: str, namespace: str, service: str, dynamo_ns: str) -> Obj:
    return {
        "apiVersion": "inference.networking.k8s.io/v1",
        "kind": "InferencePool",
        "metadata": meta(
            naming.inference_pool_name(dgd_name), namespace, _epp_labels(dgd_name, service)
        ),
        "spec": {
            "targetPorts": [{"number": defaults.FRONTEND_PORT}],
            # the workers' component class, not type (``epp/inference_pool.go`` @ 2a6da14c8)
            "selector": {
                "matchLabels": {
                    keys.LABEL_COMPONENT_CLASS: naming.COMPONENT_CLASS_WORKER,
                    keys.LABEL_DYNAMO_NAMESPACE: dynamo_ns,
                }
            },
            "endpointPickerRef": {
                "kind": "Service",
                "name": naming.base_name(dgd_name, service),
                "port": {"number": defaults.EPP_GRPC_PORT},
            },
        },
    }
