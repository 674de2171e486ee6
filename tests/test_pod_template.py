"""How a component's pod template reaches its pods (issue 28): the frontend sidecar a
v1beta1 component names keeps its name and place, and the pod fields get the defaults the
API server gives the stored DGD from the CRD's schema before the operator copies them.
Each test names its upstream source at ``2a6da14c8`` (the code that made
``../shared/conformance/operator-output``)."""

from __future__ import annotations

from typing import Any

import pytest
from support.rendering import AS_APPLIED, render

Obj = dict[str, Any]
IMAGE = "nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.5.1"
WORKER_CMD: Obj = {"image": IMAGE, "command": ["python3", "-m", "dynamo.vllm"]}
SETTINGS: Obj = {**AS_APPLIED, "namespace": "ns", "emit_source": False}


def beta(*components: Obj, **spec: Any) -> Obj:
    return {
        "apiVersion": "nvidia.com/v1beta1",
        "kind": "DynamoGraphDeployment",
        "metadata": {"name": "g"},
        "spec": {"components": list(components), **spec},
    }


def alpha(services: dict[str, Obj], **spec: Any) -> Obj:
    return {
        "apiVersion": "nvidia.com/v1alpha1",
        "kind": "DynamoGraphDeployment",
        "metadata": {"name": "g"},
        "spec": {"services": services, **spec},
    }


def beta_worker(*containers: Obj, **extra: Any) -> Obj:
    return {
        "name": "decode",
        "type": "decode",
        "replicas": 1,
        "podTemplate": {"spec": {"containers": [{"name": "main", **WORKER_CMD}, *containers]}},
        **extra,
    }


def pod_of(objs: list[Obj], name: str) -> Obj:
    """The pod spec of the Deployment of component ``name`` (a worker's has a hash suffix)."""
    (dep,) = [
        o
        for o in objs
        if o["kind"] == "Deployment" and o["metadata"]["name"].startswith(f"g-{name}")
    ]
    pod: Obj = dep["spec"]["template"]["spec"]
    return pod


def names(pod: Obj, group: str = "containers") -> list[str]:
    return [c["name"] for c in pod.get(group) or []]


# ------------------------------------------------------------------ the frontend sidecar
def test_a_v1beta1_frontend_sidecar_keeps_its_name_and_place() -> None:
    """``GenerateBasePodSpec`` / ``mergeFrontendSidecarDefaults``
    (``internal/dynamo/graph.go`` @ 2a6da14c8): the pod is container ``main`` then the
    podTemplate's other containers in their order, and the container ``frontendSidecar``
    names is merged over the frontend's defaults where it is, under its own name
    (``base.Name = sidecarName``), which ``kubectl logs -c`` and dashboards use."""
    fe = {"name": "router", "image": IMAGE, "args": ["--router-mode", "kv"]}
    helper = {"name": "helper", "image": "busybox:1"}
    pod = pod_of(
        render(beta(beta_worker(fe, helper, frontendSidecar="router")), **SETTINGS), "decode"
    )
    assert names(pod) == ["main", "router", "helper"]
    router = pod["containers"][1]
    env = {e["name"]: e.get("value") for e in router["env"]}
    # it is the frontend: the frontend's command, port and env, the user's image and args
    assert router["command"] == ["python3"] and router["args"] == ["--router-mode", "kv"]
    assert env["DYN_COMPONENT"] == "frontend" and router["image"] == IMAGE
    assert [p["name"] for p in router["ports"]] == ["http"]
    assert pod["containers"][2] == helper


def test_a_container_named_sidecar_frontend_beside_the_named_sidecar_is_admitted() -> None:
    """``shared_v1beta1.go`` @ 2a6da14c8 checks only that ``frontendSidecar`` names a
    podTemplate container; nothing adds a ``sidecar-frontend`` container to a v1beta1
    component (only the v1alpha1 conversion, ``appendFrontendSidecar`` in
    ``api/v1alpha1/shared_spec_conversion.go``), so another container of that name is a
    plain sidecar, rendered as written."""
    other = {"name": "sidecar-frontend", "image": "busybox:1"}
    fe = {"name": "router", "image": IMAGE}
    objs = render(beta(beta_worker(other, fe, frontendSidecar="router")), **SETTINGS)
    pod = pod_of(objs, "decode")
    assert names(pod) == ["main", "sidecar-frontend", "router"]
    assert pod["containers"][1] == other


def test_a_v1alpha1_frontend_sidecar_is_the_converted_sidecar_frontend_last() -> None:
    """The v1alpha1 path, unchanged: the conversion appends a container named
    ``sidecar-frontend`` after ``extraPodSpec.containers`` and names it
    (``appendFrontendSidecar``, ``setFrontendSidecarReferenceToHub``,
    ``api/v1alpha1/shared_spec_conversion.go`` @ 2a6da14c8); the operator-output of
    ``examples/backends/vllm/deploy/gaie/agg.yaml`` has it so."""
    worker = {
        "componentType": "worker",
        "subComponentType": "decode",
        "replicas": 1,
        "frontendSidecar": {"image": IMAGE, "args": ["--router-mode", "direct"]},
        "extraPodSpec": {
            "mainContainer": WORKER_CMD,
            "containers": [{"name": "helper", "image": "busybox:1"}],
        },
    }
    pod = pod_of(render(alpha({"decode": worker}), **SETTINGS), "decode")
    assert names(pod) == ["main", "helper", "sidecar-frontend"]
    assert pod["containers"][2]["args"] == ["--router-mode", "direct"]


# ------------------------------------------------------------ the CRD schema's defaults
#: the defaults the DGD CRD's schema gives pod fields (controller-gen from the core types'
#: +default markers: ``deploy/operator/config/crd/bases/nvidia.com_dynamographdeployments.yaml``
#: @ 2a6da14c8), on what a user writes without them
PORT: Obj = {"name": "metrics", "containerPort": 9400}
GRPC_PROBE: Obj = {"grpc": {"port": 9400}}
FILE_ENV: Obj = {
    "name": "TOKEN",
    "valueFrom": {"fileKeyRef": {"volumeName": "cfg", "path": "env", "key": "TOKEN"}},
}
AZURE: Obj = {"name": "disk", "azureDisk": {"diskName": "d", "diskURI": "uri"}}


def extra_container() -> Obj:
    return {
        "name": "exporter",
        "image": "exporter:1",
        "ports": [dict(PORT)],
        "readinessProbe": dict(GRPC_PROBE),
        "env": [dict(FILE_ENV)],
    }


def assert_defaulted(pod: Obj) -> None:
    (exporter,) = [c for c in pod["containers"] if c["name"] == "exporter"]
    assert exporter["ports"] == [{**PORT, "protocol": "TCP"}]
    assert exporter["readinessProbe"] == {"grpc": {"port": 9400, "service": ""}}
    assert exporter["env"][0]["valueFrom"]["fileKeyRef"]["optional"] is False
    (init,) = pod["initContainers"]
    assert init["ports"] == [{**PORT, "protocol": "TCP"}]
    (disk,) = [v for v in pod["volumes"] if v["name"] == "disk"]
    assert disk["azureDisk"] == {
        "diskName": "d",
        "diskURI": "uri",
        "fsType": "ext4",
        "readOnly": False,
    }


def test_a_v1beta1_pod_template_gets_the_crd_schema_defaults() -> None:
    """The API server applies the CRD's ``default:`` values to the stored DGD (structural
    defaulting, list items included) before the operator copies ``podTemplate.spec``'s
    containers, init containers and volumes into the pod (``GenerateBasePodSpec``,
    ``internal/dynamo/graph.go`` @ 2a6da14c8). The schema's defaults inside
    ``podTemplate``: ``nvidia.com_dynamographdeployments.yaml`` @ 2a6da14c8."""
    init = {"name": "warmup", "image": "busybox:1", "ports": [dict(PORT)]}
    component = beta_worker(extra_container())
    component["podTemplate"]["spec"].update(initContainers=[init], volumes=[dict(AZURE)])
    assert_defaulted(pod_of(render(beta(component), **SETTINGS), "decode"))


def test_a_v1alpha1_extra_pod_spec_gets_the_crd_schema_defaults() -> None:
    """The same for a v1alpha1 DGD: its ``extraPodSpec`` converts into ``podTemplate``
    (``buildSharedPodTemplateFromAlpha``, ``api/v1alpha1/shared_spec_conversion.go`` @
    2a6da14c8), defaulted by either version's schema (the same core types); the
    conformance oracle defaulted each v1alpha1 input with the CRD's schema
    (``conformance/operator-output/README.md``)."""
    init = {"name": "warmup", "image": "busybox:1", "ports": [dict(PORT)]}
    worker = {
        "componentType": "worker",
        "subComponentType": "decode",
        "replicas": 1,
        "extraPodSpec": {
            "mainContainer": WORKER_CMD,
            "containers": [extra_container()],
            "initContainers": [init],
            "volumes": [dict(AZURE)],
        },
    }
    assert_defaulted(pod_of(render(alpha({"decode": worker}), **SETTINGS), "decode"))


@pytest.mark.parametrize("version", ["v1alpha1", "v1beta1"])
def test_the_graph_env_and_container_main_get_the_crd_schema_defaults(version: str) -> None:
    """The graph ``env`` (v1alpha1 ``envs``) and container ``main``'s own fields are
    defaulted too before ``GenerateBasePodSpec`` merges them into container ``main``: a
    ``fileKeyRef`` gets ``optional: false``, a gRPC probe ``service: ""`` (the schema @
    2a6da14c8)."""
    main = {"name": "main", **WORKER_CMD, "livenessProbe": dict(GRPC_PROBE)}
    if version == "v1beta1":
        component = beta_worker()
        component["podTemplate"]["spec"]["containers"] = [main]
        doc = beta(component, env=[dict(FILE_ENV)])
    else:
        worker = {
            "componentType": "worker",
            "subComponentType": "decode",
            "replicas": 1,
            "extraPodSpec": {"mainContainer": {k: v for k, v in main.items() if k != "name"}},
        }
        doc = alpha({"decode": worker}, envs=[dict(FILE_ENV)])
    (container,) = pod_of(render(doc, **SETTINGS), "decode")["containers"]
    (token,) = [e for e in container["env"] if e["name"] == "TOKEN"]
    assert token["valueFrom"]["fileKeyRef"]["optional"] is False
    assert container["livenessProbe"] == {"grpc": {"port": 9400, "service": ""}}


def test_schema_defaulting_is_structural_and_pure() -> None:
    """As the API server's structural defaulting (``apiextensions-apiserver``
    ``structuraldefaulting``): an absent field or a null (pruned first: no defaulted field
    is nullable) gets the default, a value written is kept, list items and map values are
    reached; the input is left untouched."""
    from dyn_gitops.models import schemadefaults

    node = {
        "properties": {
            "ports": {"items": {"defaults": {"protocol": "TCP"}}},
            "byName": {"additionalProperties": {"defaults": {"optional": False}}},
        }
    }
    written = {
        "ports": [{"containerPort": 1}, {"containerPort": 2, "protocol": None}, "odd"],
        "byName": {"a": {}, "b": {"optional": True}},
        "other": {"protocol": None},
    }
    before = repr(written)
    assert schemadefaults.applied(written, node) == {
        "ports": [
            {"containerPort": 1, "protocol": "TCP"},
            {"containerPort": 2, "protocol": "TCP"},
            "odd",
        ],
        "byName": {"a": {"optional": False}, "b": {"optional": True}},
        "other": {"protocol": None},
    }
    assert repr(written) == before
    udp = {"containers": [{"name": "c", "ports": [{"containerPort": 1, "protocol": "UDP"}]}]}
    component = {"name": "w", "podTemplate": {"spec": udp}}
    assert schemadefaults.component(component) == component


def test_the_emitted_source_dgd_stays_as_written() -> None:
    """The defaults are the API server's to give the stored DGD: the source DGD dyn-gitops
    emits carries none it was not written with, in v1beta1 as in v1alpha1 (setting
    source-api-version), where the v1beta1 spelling of a default (``mode: IntraPod``) is
    not the v1alpha1 one (``intraPod``, the v1alpha1 CRD schema @ 2a6da14c8)."""
    component = beta_worker(extra_container(), experimental={"gpuMemoryService": {}})
    main = component["podTemplate"]["spec"]["containers"][0]
    main["resources"] = {"limits": {"nvidia.com/gpu": "1"}}
    settings = {**SETTINGS, "emit_source": True, "dra": True}
    for version in ("v1beta1", "v1alpha1"):
        objs = render(beta(component), **settings, source_api_version=version)
        (dgd,) = [o for o in objs if o["kind"] == "DynamoGraphDeployment"]
        text = repr(dgd)
        assert "protocol" not in text and "IntraPod" not in text and "intraPod" not in text
        containers = pod_of(objs, "decode")["containers"]
        assert {**PORT, "protocol": "TCP"} in [p for c in containers for p in c.get("ports", [])]


@pytest.mark.parametrize("version", ["v1alpha1", "v1beta1"])
def test_a_standalone_dcd_gets_the_crd_schema_defaults(version: str) -> None:
    """A standalone DynamoComponentDeployment is defaulted by its own CRD, whose spec has a
    DGD component's defaults (``nvidia.com_dynamocomponentdeployments.yaml`` @ 2a6da14c8;
    ``tools/crddefaults/generate.py`` checks they are the same), before the DCD controller
    copies its pod template (``dynamocomponentdeployment_renderer.go`` @ 2a6da14c8)."""
    if version == "v1beta1":
        spec: Obj = beta_worker(extra_container())
        spec.pop("name")
    else:
        spec = {
            "componentType": "worker",
            "replicas": 1,
            "extraPodSpec": {"mainContainer": WORKER_CMD, "containers": [extra_container()]},
        }
    dcd = {
        "apiVersion": f"nvidia.com/{version}",
        "kind": "DynamoComponentDeployment",
        "metadata": {"name": "dcd"},
        "spec": {"backendFramework": "vllm", **spec},
    }
    objs = render(dcd, **{**SETTINGS, "managed_replicas": False})
    (dep,) = [o for o in objs if o["kind"] == "Deployment"]
    (exporter,) = [
        c for c in dep["spec"]["template"]["spec"]["containers"] if c["name"] == "exporter"
    ]
    assert exporter["ports"] == [{**PORT, "protocol": "TCP"}]


def test_a_default_the_operators_go_round_trip_loses_is_not_given() -> None:
    """The CRD also defaults ``name: ""`` on every ``LocalObjectReference`` (a
    ``configMapKeyRef``, ``imagePullSecrets``, ``eppConfig.configMapRef`` ...), but the
    operator decodes the stored DGD into Go types and encodes what it creates: an empty
    ``name`` (``json:"name,omitempty"``, ``k8s.io/api/core/v1``) never reaches a pod, so
    ``tools/crddefaults/generate.py`` leaves such zero defaults out (golayout's types)."""
    from dyn_gitops.models import schemadefaults

    env = {"name": "X", "valueFrom": {"configMapKeyRef": {"key": "k"}}}
    spec = {"containers": [{"name": "c", "env": [env]}], "imagePullSecrets": [{}]}
    component = {"name": "w", "podTemplate": {"spec": spec}, "eppConfig": {"configMapRef": {}}}
    assert schemadefaults.component(component) == component
