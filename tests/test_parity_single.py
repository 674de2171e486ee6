"""Single-node parity with the Dynamo operator's own output (issue 13): each test asserts one
behaviour ported from the operator at upstream commit ``2a6da14c8`` (the code that made
``../shared/conformance/operator-output``) and names its source."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from support.rendering import renderer

Obj = dict[str, Any]

IMAGE = "nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.1.0"
SETTINGS = {"discovery_backend": "kubernetes", "planner_rbac": True, "namespace": "default"}


def dgd(services: dict[str, Obj], name: str = "g", **spec: Any) -> Obj:
    return {
        "apiVersion": "nvidia.com/v1alpha1",
        "kind": "DynamoGraphDeployment",
        "metadata": {"name": name},
        "spec": {"services": services, **spec},
    }


def frontend(**extra: Any) -> Obj:
    return {
        "componentType": "frontend",
        "replicas": 1,
        "extraPodSpec": {"mainContainer": {"image": IMAGE}},
        **extra,
    }


def worker(**extra: Any) -> Obj:
    return {
        "componentType": "worker",
        "replicas": 1,
        "extraPodSpec": {
            "mainContainer": {
                "image": IMAGE,
                "command": ["python3", "-m", "dynamo.vllm"],
                "args": ["--model", "Qwen/Qwen3-0.6B"],
            }
        },
        **extra,
    }


render = renderer(sort_keys=True, **SETTINGS)


def find(objs: list[Obj], kind: str, name: str) -> Obj:
    found = [o for o in objs if o["kind"] == kind and o["metadata"]["name"] == name]
    assert len(found) == 1, (kind, name, [(o["kind"], o["metadata"]["name"]) for o in objs])
    return found[0]


def by_kind(objs: list[Obj], kind: str, contains: str) -> Obj:
    found = [o for o in objs if o["kind"] == kind and contains in o["metadata"]["name"]]
    assert len(found) == 1, (kind, contains)
    return found[0]


def main_container(deployment: Obj) -> Obj:
    containers = deployment["spec"]["template"]["spec"]["containers"]
    return next(c for c in containers if c["name"] == "main")


def ann(meta: Obj) -> dict[str, str]:
    """The annotations the operator would write (ours, ``dyn-gitops.io/``, left out)."""
    return {k: v for k, v in (meta.get("annotations") or {}).items() if "dyn-gitops.io/" not in k}


def env_of(container: Obj) -> dict[str, Any]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container.get("env") or []}


# --- RBAC ---------------------------------------------------------------------------------


def test_discovery_rbac_labelled_with_service_account_name(tmp_path: Path) -> None:
    """``internal/discovery/resource.go`` @ 2a6da14c8 and ERRATA 5: the discovery
    ServiceAccount, Role and RoleBinding share ``app.kubernetes.io/name`` = the SA's name
    and carry no graph label."""
    objs = render(tmp_path, dgd({"Frontend": frontend()}))
    sa = "g-k8s-service-discovery"
    for kind, name in (
        ("ServiceAccount", sa),
        ("Role", f"{sa}-role"),
        ("RoleBinding", f"{sa}-binding"),
    ):
        assert find(objs, kind, name)["metadata"]["labels"] == {
            "app.kubernetes.io/component": "rbac",
            "app.kubernetes.io/managed-by": "dynamo-operator",
            "app.kubernetes.io/name": sa,
        }


def test_discovery_rbac_label_capped_at_63_characters(tmp_path: Path) -> None:
    """#11709 (``getK8sDiscoveryLabelValue``, ``internal/discovery/resource.go`` @
    2a6da14c8): a ServiceAccount name over 63 characters is cut to 54, ``-`` and the first
    8 hex characters of its SHA-256."""
    import hashlib

    name = "a" * 50
    objs = render(tmp_path, dgd({"Frontend": frontend()}, name=name))
    sa = f"{name}-k8s-service-discovery"
    expected = f"{sa[:54]}-{hashlib.sha256(sa.encode()).hexdigest()[:8]}"
    assert len(expected) == 63
    for kind, obj in (("ServiceAccount", sa), ("Role", f"{sa}-role")):
        assert find(objs, kind, obj)["metadata"]["labels"]["app.kubernetes.io/name"] == expected


def test_planner_role_binding_labelled_with_service_account_name(tmp_path: Path) -> None:
    """``internal/rbac/manager.go`` @ 2a6da14c8 (``EnsureServiceAccountWithRBAC``) and
    ERRATA 5: the planner RoleBinding's ``app.kubernetes.io/name`` is the SA's name."""
    objs = render(tmp_path, dgd({"Frontend": frontend()}))
    rb = find(objs, "RoleBinding", "planner-serviceaccount-binding")
    assert rb["metadata"]["labels"]["app.kubernetes.io/name"] == "planner-serviceaccount"


# --- containers -----------------------------------------------------------------------------


def test_main_container_always_has_resources(tmp_path: Path) -> None:
    """Go encodes the container's ``resources`` struct even when empty: ``resources: {}``
    on every main container (``GenerateBasePodSpec``, operator-output @ 2a6da14c8)."""
    objs = render(tmp_path, dgd({"Frontend": frontend()}))
    assert main_container(find(objs, "Deployment", "g-frontend"))["resources"] == {}


def test_empty_env_value_is_omitted(tmp_path: Path) -> None:
    """``corev1.EnvVar.value`` is ``omitempty``: a component without a type gets
    ``DYN_COMPONENT`` with no value (operator-output @ 2a6da14c8, the autoscaling
    scaling-adapter snippet)."""
    svc = frontend()
    del svc["componentType"]
    objs = render(tmp_path, dgd({"Frontend": svc}))
    env = main_container(find(objs, "Deployment", "g-frontend"))["env"]
    assert {"name": "DYN_COMPONENT"} in env


# --- component types and labels -------------------------------------------------------------


def test_prefill_decode_workers_render_as_their_v1beta1_type(tmp_path: Path) -> None:
    """``sharedComponentTypeToHub`` (``api/v1alpha1/shared_spec_conversion.go`` @ 2a6da14c8)
    promotes ``worker`` + ``subComponentType: decode`` to type ``decode``; the DCD renderer
    (``dynamocomponentdeployment_renderer.go``) writes it into ``DYN_COMPONENT``, the pod's
    component-type label and the Service selector, and ``GetDCDKubeLabels``
    (``v1beta1_helpers.go``) puts ``sub-component-type`` on the Deployment and Service."""
    objs = render(tmp_path, dgd({"decode": worker(subComponentType="decode")}))
    dep = by_kind(objs, "Deployment", "g-decode")
    assert dep["metadata"]["labels"]["nvidia.com/dynamo-sub-component-type"] == "decode"
    pod_labels = dep["spec"]["template"]["metadata"]["labels"]
    assert pod_labels["nvidia.com/dynamo-component-type"] == "decode"
    assert pod_labels["nvidia.com/dynamo-sub-component-type"] == "decode"
    assert env_of(main_container(dep))["DYN_COMPONENT"] == "decode"
    svc = by_kind(objs, "Service", "g-decode")
    assert svc["metadata"]["labels"]["nvidia.com/dynamo-sub-component-type"] == "decode"
    assert svc["spec"]["selector"]["nvidia.com/dynamo-component-type"] == "decode"


def test_other_sub_component_type_keeps_worker_type(tmp_path: Path) -> None:
    """Only ``prefill``/``decode`` are promoted
    (``sharedSubComponentTypePromotesToHubComponentType`` @ 2a6da14c8); another
    subComponentType stays a ``worker`` with the label kept."""
    objs = render(tmp_path, dgd({"w": worker(subComponentType="encode")}))
    dep = by_kind(objs, "Deployment", "g-w")
    assert dep["spec"]["template"]["metadata"]["labels"]["nvidia.com/dynamo-component-type"] == (
        "worker"
    )
    assert dep["metadata"]["labels"]["nvidia.com/dynamo-sub-component-type"] == "encode"
    assert env_of(main_container(dep))["DYN_COMPONENT"] == "worker"


def test_workers_of_an_epp_graph_get_the_worker_component_class(tmp_path: Path) -> None:
    """``generateSingleDCD`` (``internal/dynamo/graph.go`` @ 2a6da14c8): in a graph with an
    EPP, worker DCDs and pods carry ``nvidia.com/dynamo-component-class: worker``, which the
    InferencePool selects (``epp/inference_pool.go``)."""
    epp = {
        "componentType": "epp",
        "replicas": 1,
        "eppConfig": {"config": {"plugins": [{"type": "x"}], "schedulingProfiles": []}},
        "extraPodSpec": {"mainContainer": {"image": IMAGE}},
    }
    objs = render(tmp_path, dgd({"Frontend": frontend(), "Epp": epp, "w": worker()}))
    dep = by_kind(objs, "Deployment", "g-w")
    assert dep["metadata"]["labels"]["nvidia.com/dynamo-component-class"] == "worker"
    pod_labels = dep["spec"]["template"]["metadata"]["labels"]
    assert pod_labels["nvidia.com/dynamo-component-class"] == "worker"
    assert (
        by_kind(objs, "Service", "g-w")["metadata"]["labels"]["nvidia.com/dynamo-component-class"]
        == "worker"
    )
    assert find(objs, "InferencePool", "g-pool")["spec"]["selector"]["matchLabels"] == {
        "nvidia.com/dynamo-component-class": "worker",
        "nvidia.com/dynamo-namespace": "default-g",
    }
    front = find(objs, "Deployment", "g-frontend")
    assert "nvidia.com/dynamo-component-class" not in front["metadata"]["labels"]


def test_no_component_class_without_epp(tmp_path: Path) -> None:
    """``generateSingleDCD`` @ 2a6da14c8: the class label needs an EPP in the graph."""
    objs = render(tmp_path, dgd({"w": worker()}))
    dep = by_kind(objs, "Deployment", "g-w")
    assert "nvidia.com/dynamo-component-class" not in dep["metadata"]["labels"]


def test_alpha_dynamo_namespace_in_pod_labels_and_selector_only(tmp_path: Path) -> None:
    """``GetDCDDynamoNamespace`` (``internal/dynamo/v1beta1_helpers.go`` @ 2a6da14c8): a
    v1alpha1 service's ``dynamoNamespace`` survives conversion and labels the pods and the
    Service selector; the object labels and ``DYN_NAMESPACE`` keep ``<ns>-<dgd>``
    (operator-output: trtllm disagg_planner)."""
    objs = render(tmp_path, dgd({"Frontend": frontend(dynamoNamespace="mine")}))
    dep = find(objs, "Deployment", "g-frontend")
    assert dep["metadata"]["labels"]["nvidia.com/dynamo-namespace"] == "default-g"
    assert dep["spec"]["template"]["metadata"]["labels"]["nvidia.com/dynamo-namespace"] == "mine"
    assert env_of(main_container(dep))["DYN_NAMESPACE"] == "default-g"
    svc = find(objs, "Service", "g-frontend")
    assert svc["metadata"]["labels"]["nvidia.com/dynamo-namespace"] == "default-g"
    assert svc["spec"]["selector"]["nvidia.com/dynamo-namespace"] == "mine"


def test_pod_template_annotations_equal_the_deployments(tmp_path: Path) -> None:
    """``GetDCDKubeAnnotations`` (``v1beta1_helpers.go`` @ 2a6da14c8) gives both the
    Deployment's and its pod template's annotations: the propagated DGD metadata
    annotations reach the pods (operator-output: vllm agg_failover)."""
    doc = dgd({"Frontend": frontend()})
    doc["metadata"]["annotations"] = {"nvidia.com/dynamo-kube-discovery-mode": "container"}
    objs = render(tmp_path, doc)
    dep = find(objs, "Deployment", "g-frontend")
    expected = {"nvidia.com/dynamo-kube-discovery-mode": "container"}
    assert ann(dep["metadata"]) == expected
    assert ann(dep["spec"]["template"]["metadata"]) == expected


def test_dgd_metadata_is_low_priority_under_pod_template_metadata(tmp_path: Path) -> None:
    """``propagateDGDSpecMetadata`` / ``mergeLowPriorityMetadata`` and ``GetDCDKubeLabels``
    (``graph.go``, ``v1beta1_helpers.go``): DGD ``spec.annotations``/``labels`` fill the pod
    template only where ``extraPodMetadata`` and (1.5, #14855) the v1alpha1 service's own
    ``annotations``/``labels`` have no value (at 2a6da14c8 the DGD's beat the service's);
    the ``extraPodMetadata`` labels reach the Deployment's labels."""
    svc = frontend(
        annotations={"a": "service", "b": "service"},
        labels={"l": "service", "m": "service"},
        extraPodMetadata={"annotations": {"b": "pod"}, "labels": {"m": "pod"}},
    )
    doc = dgd({"Frontend": svc}, annotations={"a": "dgd", "b": "dgd"}, labels={"l": "dgd"})
    objs = render(tmp_path, doc)
    dep = find(objs, "Deployment", "g-frontend")
    assert ann(dep["metadata"]) == {"a": "service", "b": "pod"}
    assert ann(dep["spec"]["template"]["metadata"]) == {"a": "service", "b": "pod"}
    assert {k: dep["metadata"]["labels"][k] for k in ("l", "m")} == {"l": "service", "m": "pod"}


# --- EPP ------------------------------------------------------------------------------------


def _epp_graph(tmp_path: Path) -> list[Obj]:
    epp = {
        "componentType": "epp",
        "replicas": 1,
        "eppConfig": {
            "config": {
                "plugins": [{"type": "picker"}, {"name": "f", "type": "filter"}],
                "schedulingProfiles": [
                    {
                        "name": "p",
                        "plugins": [{"pluginRef": "f"}, {"pluginRef": "picker", "weight": 1}],
                    }
                ],
            }
        },
        "extraPodSpec": {"mainContainer": {"image": IMAGE}},
    }
    return render(tmp_path, dgd({"Epp": epp, "w": worker()}))


def test_epp_container_defaults(tmp_path: Path) -> None:
    """``EPPDefaults.GetBaseContainer`` (``internal/dynamo/component_epp.go`` @ 2a6da14c8)
    and ERRATA 1: double-dash flags; ``USE_STREAMING``, ``RUST_LOG=info``,
    ``DYN_ENFORCE_DISAGG=false``, ``DYN_NAMESPACE_PREFIX``; no ``NVIDIA_VISIBLE_DEVICES``."""
    main = main_container(find(_epp_graph(tmp_path), "Deployment", "g-epp"))
    assert main["args"][:6] == [
        "--pool-name",
        "g-pool",
        "--pool-namespace",
        "default",
        "--pool-group",
        "inference.networking.k8s.io",
    ]
    assert "--config-file" in main["args"] and "-v" in main["args"]
    env = env_of(main)
    assert env["USE_STREAMING"] == "true"
    assert env["RUST_LOG"] == "info"
    assert env["DYN_ENFORCE_DISAGG"] == "false"
    assert env["DYN_NAMESPACE_PREFIX"] == "default-g"
    assert "NVIDIA_VISIBLE_DEVICES" not in env


def test_epp_istio_opt_out(tmp_path: Path) -> None:
    """``generateSingleDCD`` (``graph.go`` @ 2a6da14c8): EPP pod templates get
    ``sidecar.istio.io/inject: "false"``, which reaches the Deployment and Service."""
    objs = _epp_graph(tmp_path)
    dep = find(objs, "Deployment", "g-epp")
    for meta in (dep["metadata"], dep["spec"]["template"]["metadata"]):
        assert meta["annotations"]["sidecar.istio.io/inject"] == "false"
    assert ann(find(objs, "Service", "g-epp")["metadata"]) == {"sidecar.istio.io/inject": "false"}


def test_epp_config_through_the_go_struct(tmp_path: Path) -> None:
    """``marshalEndpointPickerConfig`` (``internal/dynamo/epp/config.go`` @ 2a6da14c8) with
    gateway-api-inference-extension v1.2.0's struct: a plugin's ``name`` and ``parameters``
    and a profile plugin's ``weight`` are not ``omitempty``; strings are double-quoted."""
    cm = find(_epp_graph(tmp_path), "ConfigMap", "g-epp-config")
    text = cm["data"]["epp-config-dynamo.yaml"]
    assert '- name: ""\n  parameters: null\n  type: picker\n' in text
    body = yaml.safe_load(text)
    assert body["schedulingProfiles"][0]["plugins"] == [
        {"pluginRef": "f", "weight": None},
        {"pluginRef": "picker", "weight": 1},
    ]


def test_frontend_sidecar_without_shared_memory_mount(tmp_path: Path) -> None:
    """``GenerateBasePodSpec`` (``graph.go`` @ 2a6da14c8) hands the frontend sidecar the main
    container's mounts taken before shared memory is added."""
    svc = worker(frontendSidecar={"image": IMAGE})
    objs = render(tmp_path, dgd({"w": svc}))
    containers = by_kind(objs, "Deployment", "g-w")["spec"]["template"]["spec"]["containers"]
    sidecar = next(c for c in containers if c["name"] == "sidecar-frontend")
    assert "volumeMounts" not in sidecar
    assert sidecar["resources"] == {}


# --- GMS, failover, DRA ---------------------------------------------------------------------


def _gms_worker(tmp_path: Path, failover: bool = False) -> list[Obj]:
    svc = worker(
        resources={"limits": {"gpu": "1"}},
        gpuMemoryService={"enabled": True},
        **({"failover": {"enabled": True}} if failover else {}),
    )
    doc = dgd({"w": svc})
    if failover:
        doc["metadata"]["annotations"] = {"nvidia.com/dynamo-kube-discovery-mode": "container"}
    return render(tmp_path, doc, dra=True)


def test_gms_intrapod_control_volume(tmp_path: Path) -> None:
    """ERRATA 2 and ``internal/gms/gms.go`` @ 2a6da14c8: the socket volume is
    ``gms-intrapod-control`` at ``/gms-intrapod-control``; the server sidecar has no
    startup probe."""
    pod = by_kind(_gms_worker(tmp_path), "Deployment", "g-w")["spec"]["template"]["spec"]
    assert {"name": "gms-intrapod-control", "emptyDir": {}} in pod["volumes"]
    main = pod["containers"][0]
    assert {"name": "gms-intrapod-control", "mountPath": "/gms-intrapod-control"} in main[
        "volumeMounts"
    ]
    assert env_of(main)["GMS_SOCKET_DIR"] == "/gms-intrapod-control"
    server = pod["initContainers"][0]
    assert server["name"] == "gms-server"
    assert "startupProbe" not in server


def test_failover_engines_get_their_own_forward_pass_port(tmp_path: Path) -> None:
    """``buildEngineContainer`` (``internal/dynamo/failover.go`` @ 2a6da14c8): the base
    ``DYN_FORWARDPASS_METRIC_PORT`` is dropped and each engine appends 20380 + its id;
    the lock file lives in the intra-pod control directory."""
    pod = by_kind(_gms_worker(tmp_path, True), "Deployment", "g-w")["spec"]["template"]["spec"]
    for engine_id, engine in enumerate(pod["containers"][:2]):
        names = [e["name"] for e in engine["env"]]
        assert names.count("DYN_FORWARDPASS_METRIC_PORT") == 1
        env = env_of(engine)
        assert env["DYN_FORWARDPASS_METRIC_PORT"] == str(20380 + engine_id)
        assert names.index("DYN_FORWARDPASS_METRIC_PORT") == names.index("DYN_SYSTEM_ENABLED") + 1
        assert env["FAILOVER_LOCK_PATH"] == "/gms-intrapod-control/failover.lock"


def test_resource_claim_template_has_empty_template_metadata(tmp_path: Path) -> None:
    """``dra.GenerateResourceClaimTemplate`` @ 2a6da14c8: Go encodes the template's empty
    ObjectMeta as ``spec.metadata: {}``."""
    rct = find(_gms_worker(tmp_path), "ResourceClaimTemplate", "g-w-gpu")
    assert rct["spec"]["metadata"] == {}


# --- model Service --------------------------------------------------------------------------


def test_model_service_omits_false_publish_not_ready_addresses(tmp_path: Path) -> None:
    """``internal/dynamo/model_service.go`` @ 2a6da14c8: ``publishNotReadyAddresses: false``
    is Go's omitted zero value."""
    objs = render(tmp_path, dgd({"w": worker(modelRef={"name": "Qwen/Qwen3-0.6B"})}))
    svc = next(
        o for o in objs if o["kind"] == "Service" and "dynamo-model" in o["metadata"]["name"]
    )
    assert "publishNotReadyAddresses" not in svc["spec"]
    assert svc["spec"]["clusterIP"] == "None"


def test_frontend_sidecar_container_name_is_main_in_container_mode(tmp_path: Path) -> None:
    """``mergeFrontendSidecarDefaults`` builds the sidecar from the frontend's common
    container, whose ``CONTAINER_NAME`` is the constant ``main`` (``getCommonContainer``,
    ``internal/dynamo/component_common.go`` @ 2a6da14c8; #9366: only in container mode)."""
    doc = dgd({"w": worker(frontendSidecar={"image": IMAGE})})
    doc["metadata"]["annotations"] = {"nvidia.com/dynamo-kube-discovery-mode": "container"}
    containers = by_kind(render(tmp_path, doc), "Deployment", "g-w")["spec"]["template"]["spec"][
        "containers"
    ]
    for c in containers:
        assert env_of(c)["CONTAINER_NAME"] == "main"
        assert env_of(c)["DYN_KUBE_DISCOVERY_MODE"] == "container"
    plain = render(tmp_path, dgd({"w": worker(frontendSidecar={"image": IMAGE})}))
    for c in by_kind(plain, "Deployment", "g-w")["spec"]["template"]["spec"]["containers"]:
        assert "CONTAINER_NAME" not in env_of(c)


# --- merge precedence of the v1beta1 conversion -------------------------------------------


def test_env_precedence_main_container_over_service_over_graph(tmp_path: Path) -> None:
    """``mergeExtraPodSpecMainContainer`` (``api/v1alpha1/shared_spec_conversion.go`` @
    2a6da14c8) merges the mainContainer env over the service ``envs``, and
    ``applyDGDTemplateDefaults`` (``internal/dynamo/graph.go``) puts the graph ``envs``
    under both: defaults < graph < service < mainContainer."""
    svc = worker(envs=[{"name": "A", "value": "service"}, {"name": "B", "value": "service"}])
    svc["extraPodSpec"]["mainContainer"]["env"] = [{"name": "A", "value": "main"}]
    doc = dgd(
        {"w": svc},
        envs=[
            {"name": "A", "value": "graph"},
            {"name": "B", "value": "graph"},
            {"name": "C", "value": "graph"},
            {"name": "DYN_SYSTEM_PORT", "value": "9999"},
        ],
    )
    env = env_of(main_container(by_kind(render(tmp_path, doc), "Deployment", "g-w")))
    assert (env["A"], env["B"], env["C"], env["DYN_SYSTEM_PORT"]) == (
        "main",
        "service",
        "graph",
        "9999",
    )


def test_main_container_resources_beat_service_resources(tmp_path: Path) -> None:
    """The same conversion mergo-merges the mainContainer over the dedicated fields
    (``buildSharedPodTemplateFromAlpha`` @ 2a6da14c8): its resources win key by key."""
    svc = worker(resources={"requests": {"cpu": "8", "memory": "1Gi"}, "limits": {"gpu": "1"}})
    svc["extraPodSpec"]["mainContainer"]["resources"] = {"requests": {"cpu": "4"}}
    main = main_container(by_kind(render(tmp_path, dgd({"w": svc})), "Deployment", "g-w"))
    assert main["resources"] == {
        "requests": {"cpu": "4", "memory": "1Gi"},
        "limits": {"nvidia.com/gpu": "1"},
    }


def test_main_container_probe_replaces_the_default(tmp_path: Path) -> None:
    """``mergeContainerByName`` (``internal/dynamo/graph.go`` @ 2a6da14c8): a converted
    main-container probe replaces the default wholesale; a service-level probe and a
    mainContainer probe are merged first (the mainContainer's fields win)."""
    probe = {"httpGet": {"path": "/ready", "port": 9090}, "periodSeconds": 7}
    svc = worker(livenessProbe={"httpGet": {"path": "/live", "port": 9090}, "timeoutSeconds": 9})
    svc["extraPodSpec"]["mainContainer"]["readinessProbe"] = probe
    svc["extraPodSpec"]["mainContainer"]["livenessProbe"] = {"periodSeconds": 3}
    main = main_container(by_kind(render(tmp_path, dgd({"w": svc})), "Deployment", "g-w"))
    assert main["readinessProbe"] == probe
    assert main["livenessProbe"] == {
        "httpGet": {"path": "/live", "port": 9090},
        "timeoutSeconds": 9,
        "periodSeconds": 3,
    }


def test_ingress_named_after_the_normalized_component_name(tmp_path: Path) -> None:
    """``generateIngress`` (``internal/controller/dynamocomponentdeployment_controller.go``
    @ 2a6da14c8) names the Ingress ``NormalizeKubeResourceName(dcd name)``: dots become
    dashes, as for the Service it points at."""
    svc = frontend(ingress={"enabled": True, "host": "h", "ingressControllerClassName": "nginx"})
    objs = render(tmp_path, dgd({"Front.End": svc}, name="my.graph"))
    ingress = next(o for o in objs if o["kind"] == "Ingress")
    assert ingress["metadata"]["name"] == "my-graph-front-end"
    backend = ingress["spec"]["rules"][0]["http"]["paths"][0]["backend"]["service"]
    assert backend["name"] == "my-graph-front-end"


def test_main_container_comes_before_user_sidecars(tmp_path: Path) -> None:
    """ERRATA 6 says user sidecars come first and ``main`` last; the reference operator
    does the opposite: ``GenerateBasePodSpec`` (``internal/dynamo/graph.go`` @ 2a6da14c8)
    builds ``append([]Container{main}, sidecars...)`` after merging the pod template, and
    the v1alpha1 conversion (``buildSharedPodTemplateFromAlpha``) also puts ``main`` first.
    The 1.5 code is the target (docs/reference-behaviour.md, "Errata")."""
    svc = worker()
    svc["extraPodSpec"]["containers"] = [{"name": "log-shipper", "image": "busybox:1.36"}]
    objs = render(tmp_path, dgd({"Frontend": frontend(), "w": svc}))
    dep = by_kind(objs, "Deployment", "-w-")
    names = [c["name"] for c in dep["spec"]["template"]["spec"]["containers"]]
    assert names == ["main", "log-shipper"]
