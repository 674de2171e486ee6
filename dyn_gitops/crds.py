"""CustomResourceDefinitions for the Dynamo kinds we read and write, generated from our own
pydantic models (so the schema the API server enforces is the one the renderer checks).

The JSON schema pydantic produces is turned into a Kubernetes *structural* schema: refs
inlined, ``Optional`` as ``nullable``, free-form values as
``x-kubernetes-preserve-unknown-fields``, quantities as ``x-kubernetes-int-or-string``.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from .models import v1alpha1, v1beta1

_DROP = {"title", "description", "default", "additionalProperties"}


def _structural(node: Any, defs: dict[str, Any]) -> dict[str, Any]:
    if not isinstance(node, dict):
        return {"x-kubernetes-preserve-unknown-fields": True}
    if "$ref" in node:
        return _structural(defs[node["$ref"].rsplit("/", 1)[-1]], defs)
    if "anyOf" in node:
        options = [o for o in node["anyOf"] if o.get("type") != "null"]
        nullable = len(options) < len(node["anyOf"])
        one: dict[str, Any] = (
            _structural(options[0], defs)
            if len(options) == 1
            else {"x-kubernetes-preserve-unknown-fields": True}
        )
        if nullable:
            one["nullable"] = True
        # list semantics for server-side apply (x-kubernetes-list-type ...) set on the field
        one.update({k: v for k, v in node.items() if k.startswith("x-kubernetes-list-")})
        return one
    if node.get("x-kubernetes-int-or-string"):
        return {
            "x-kubernetes-int-or-string": True,
            "anyOf": [{"type": "integer"}, {"type": "string"}],
        }
    if "const" in node:
        return {"type": "string", "enum": [node["const"]]}
    kind = node.get("type")
    out: dict[str, Any] = {
        k: v
        for k, v in node.items()
        if k not in _DROP and k not in ("properties", "items", "$defs", "required", "type")
    }
    if kind is None:
        return {"x-kubernetes-preserve-unknown-fields": True}
    out["type"] = kind
    if kind == "object":
        if "properties" in node:
            out["properties"] = {k: _structural(v, defs) for k, v in node["properties"].items()}
            if node.get("required"):
                out["required"] = list(node["required"])
        else:
            extra = node.get("additionalProperties")
            if isinstance(extra, dict) and extra:
                out["additionalProperties"] = _structural(extra, defs)
            else:
                out["x-kubernetes-preserve-unknown-fields"] = True
    elif kind == "array":
        out["items"] = _structural(node.get("items", {}), defs)
    return out


def _spec_schema(model: type[BaseModel]) -> dict[str, Any]:
    full = model.model_json_schema()
    defs = full.get("$defs", {})
    return _structural(full["properties"]["spec"], defs)


def _status_schema(model: type[BaseModel] | None) -> dict[str, Any]:
    if model is None:
        return {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
    full = model.model_json_schema()
    return _structural(full, full.get("$defs", {}))


def _subresources(scale: bool) -> dict[str, Any]:
    """``status``, and ``scale`` for a kind the HPA or KEDA may scale."""
    subresources: dict[str, Any] = {"status": {}}
    if scale:
        subresources["scale"] = {
            "specReplicasPath": ".spec.replicas",
            "statusReplicasPath": ".status.replicas",
            "labelSelectorPath": ".status.selector",
        }
    return subresources


def _object_schema(model: type[BaseModel], status: type[BaseModel] | None) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {
            "apiVersion": {"type": "string"},
            "kind": {"type": "string"},
            "metadata": {"type": "object"},
            "spec": _spec_schema(model),
            "status": _status_schema(status),
        },
        "required": ["spec"],
    }


def _names(kind: str, plural: str, short: str) -> dict[str, Any]:
    return {
        "kind": kind,
        "listKind": f"{kind}List",
        "plural": plural,
        "singular": kind.lower(),
        "shortNames": [short],
    }


def _crd(
    kind: str,
    plural: str,
    short: str,
    model: type[BaseModel],
    *,
    columns: list[dict[str, Any]],
    scale: bool = False,
    version: str = v1alpha1.VERSION,
    status: type[BaseModel] | None = None,
) -> dict[str, Any]:
    """The CRD of ``kind``, serving one version (``model``'s), which is its storage version:
    without a conversion webhook the API server can serve two versions of different
    schemas only by relabelling objects, losing what the other schema does not have."""
    served = {
        "name": version,
        "served": True,
        "storage": True,
        "schema": {"openAPIV3Schema": _object_schema(model, status)},
        "subresources": _subresources(scale),
        "additionalPrinterColumns": columns,
    }
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {
            "name": f"{plural}.{v1alpha1.GROUP}",
            "annotations": {"helm.sh/resource-policy": "keep"},
        },
        "spec": {
            "group": v1alpha1.GROUP,
            "names": _names(kind, plural, short),
            "scope": "Namespaced",
            "versions": [served],
        },
    }


def _age() -> dict[str, Any]:
    return {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}


def _column(name: str, jsonpath: str, kind: str = "string") -> dict[str, Any]:
    return {"name": name, "type": kind, "jsonPath": jsonpath}


#: what ``crds`` serves for DGD and DCD: ``v1beta1`` (Dynamo 1.5's storage version, what
#: dyn-gitops emits by default), or ``v1alpha1`` (for the setting source-api-version v1alpha1)
DGD_VERSIONS = ("v1beta1", "v1alpha1")


def _graph_crds(version: str) -> list[dict[str, Any]]:
    """DGD and DCD, served in ``version``."""
    beta = version == "v1beta1"
    return [
        _crd(
            "DynamoGraphDeployment",
            "dynamographdeployments",
            "dgd",
            v1beta1.DynamoGraphDeployment if beta else v1alpha1.DynamoGraphDeployment,
            version=version,
            columns=[
                _column("Ready", '.status.conditions[?(@.type=="Ready")].status'),
                _column("Backend", ".spec.backendFramework"),
                _age(),
            ],
        ),
        _crd(
            "DynamoComponentDeployment",
            "dynamocomponentdeployments",
            "dcd",
            v1beta1.DynamoComponentDeployment if beta else v1alpha1.DynamoComponentDeployment,
            version=version,
            columns=[_column("Backend", ".spec.backendFramework"), _age()],
        ),
    ]


def _v1alpha1_only_crds() -> list[dict[str, Any]]:
    """The scaling adapter and DynamoModel, served in v1alpha1 whatever the DGD's version."""
    return [
        _crd(
            "DynamoGraphDeploymentScalingAdapter",
            "dynamographdeploymentscalingadapters",
            "dgdsa",
            v1alpha1.DynamoGraphDeploymentScalingAdapter,
            scale=True,
            columns=[
                _column("DGD", ".spec.dgdRef.name"),
                _column("Service", ".spec.dgdRef.serviceName"),
                _column("Replicas", ".status.replicas", "integer"),
                _age(),
            ],
        ),
        _crd(
            "DynamoModel",
            "dynamomodels",
            "dm",
            v1alpha1.DynamoModel,
            status=v1alpha1.DynamoModelStatus,
            columns=[
                _column("BaseModel", ".spec.baseModelName"),
                _column("Type", ".spec.modelType"),
                _column("Ready", ".status.readyEndpoints", "integer"),
                _column("Total", ".status.totalEndpoints", "integer"),
                _age(),
            ],
        ),
    ]


def crds(dgd_version: str = "v1beta1") -> list[dict[str, Any]]:
    """Our CRDs; DGD and DCD served (and stored) in ``dgd_version`` only."""
    if dgd_version not in DGD_VERSIONS:
        raise ValueError(f"dgd_version must be one of {DGD_VERSIONS}, not {dgd_version!r}")
    return _graph_crds(dgd_version) + _v1alpha1_only_crds()


def json_schemas(dgd_version: str = "v1beta1") -> dict[str, dict[str, Any]]:
    """Each served version's schema as a standalone JSON schema, keyed by the path
    kubeconform's ``-schema-location '<dir>/{{ .Group }}/{{ .ResourceKind }}_{{
    .ResourceAPIVersion }}.json'`` asks for (the CRDs-catalog layout)."""
    out: dict[str, dict[str, Any]] = {}
    for crd in crds(dgd_version):
        spec = crd["spec"]
        for version in spec["versions"]:
            if not version.get("served"):
                continue
            schema = dict(version["schema"]["openAPIV3Schema"])
            path = f"{spec['group']}/{spec['names']['kind'].lower()}_{version['name']}.json"
            out[path] = schema
    return out
