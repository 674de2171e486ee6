"""The Dynamo operator's own Go tests, ported to our renderer (single-node component path).

Each test names the Go test it ports (``deploy/operator/internal/dynamo/graph_test.go`` at
``006b6e10`` unless noted, and ``component_*_test.go``). The Go tests call internal
functions (``GenerateDynamoComponentsDeployments``, ``GenerateBasePodSpec``, ...); here the
same input is written as a ``nvidia.com/v1alpha1`` DynamoGraphDeployment, rendered with
our pipeline, and the same facts are checked on the Deployment and its pod template.

Baseline (``dyn_gitops/expand/podspec.py``): the Dynamo 1.1 line with v1alpha1-era merge
semantics, runtime-version gates off. Where a Go expectation is v1beta1-era behaviour that
differs from that baseline, the test asserts the baseline and says so.

Operator-config inputs map to render settings: ``Infrastructure.NATSAddress`` ->
``nats_address`` and so on; ``Discovery.Backend`` -> ``discovery_backend`` (ours defaults
to the Helm chart's ``kubernetes``; the Go tests often leave it empty, which the operator
treats as ``kubernetes`` for the env var but not for the discovery ServiceAccount).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from support.graph_cases import (
    L_COMPONENT,
    deployments,
    dgd,
    env,
    main,
    pod,
    render,
    render_error,
)
from support.hubforms import form_of

from dyn_gitops.expand.graph import resolve_backends
from dyn_gitops.expand.podspec import detect_backend
from dyn_gitops.merge import merge_envs

Obj = dict[str, Any]

# label / annotation keys (commonconsts in the Go tests)
L_NAMESPACE = "nvidia.com/dynamo-namespace"
L_GRAPH = "nvidia.com/dynamo-graph-deployment-name"
L_TYPE = "nvidia.com/dynamo-component-type"
L_SUBTYPE = "nvidia.com/dynamo-sub-component-type"
L_SELECTOR = "nvidia.com/selector"
L_METRICS = "nvidia.com/metrics-enabled"
L_WORKER_HASH = "nvidia.com/dynamo-worker-hash"
L_DISCOVERY_BACKEND = "nvidia.com/dynamo-discovery-backend"
A_ENABLE_METRICS = "nvidia.com/enable-metrics"
A_DISCOVERY_BACKEND = "nvidia.com/dynamo-discovery-backend"

PLANNER_SA = "planner-serviceaccount"
SHM_VOLUME = {"name": "shared-memory", "emptyDir": {"medium": "Memory", "sizeLimit": "8Gi"}}
SHM_MOUNT = {"name": "shared-memory", "mountPath": "/dev/shm"}


# ------------------------------------------------------------------------------- helpers
def pod_labels(dep: Obj) -> dict[str, str]:
    labels: dict[str, str] = dep["spec"]["template"]["metadata"]["labels"]
    return labels


def field_ref(path: str) -> dict[str, Any]:
    return {"valueFrom": {"fieldRef": {"fieldPath": path}}}


def dynamo_labels(labels: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in labels.items() if k.startswith("nvidia.com/")}


def volume_names(dep: Obj) -> list[str]:
    return [v["name"] for v in pod(dep).get("volumes") or []]


# ------------------------------------------------- TestGenerateDynamoComponentsDeployments
TEST_DGD = "test-dynamographdeployment"
TEST_DYN_NS = "default-test-dynamographdeployment"
REQUESTS_1 = {"cpu": "1", "memory": "1Gi", "gpu": "0", "custom": {}}


def _two_services(dynamo_namespace: str | None, *, sub_type: str | None = None) -> dict[str, Obj]:
    svc1: Obj = {"componentType": "frontend", "replicas": 3, "resources": {"requests": REQUESTS_1}}
    svc2: Obj = {"replicas": 3, "resources": {"requests": REQUESTS_1}}
    if sub_type:
        svc1["subComponentType"] = sub_type
    if dynamo_namespace is not None:
        svc1["dynamoNamespace"] = dynamo_namespace
        svc2["dynamoNamespace"] = dynamo_namespace
    return {"service1": svc1, "service2": svc2}


@pytest.mark.parametrize(
    ("case", "dynamo_namespace", "sub_type"),
    [
        # "Test GenerateDynamoComponentsDeployments" (deprecated dynamoNamespace "default" ignored)
        ("basic", "default", "test-sub-component"),
        # "... with default dynamo namespace"
        ("default dynamo namespace", None, None),
        # "... with frontend component"
        ("frontend component", None, None),
    ],
)
def test_generate_dynamo_components_deployments_names_and_labels(
    tmp_path: Path, case: str, dynamo_namespace: str | None, sub_type: str | None
) -> None:
    # Go: TestGenerateDynamoComponentsDeployments (basic / default dynamo namespace / frontend)
    objs = render(tmp_path, dgd(TEST_DGD, _two_services(dynamo_namespace, sub_type=sub_type)))
    deps = deployments(objs)
    assert set(deps) == {"service1", "service2"}
    for svc in ("service1", "service2"):
        dep = deps[svc]
        assert dep["metadata"]["name"] == f"{TEST_DGD}-{svc}"
        assert dep["metadata"]["namespace"] == "default"
        # DCD labels = the three system labels (no service/DGD labels in the input), and
        # the sub-component type GetDCDKubeLabels restores (v1beta1_helpers.go @ 2a6da14c8)
        expected = {L_COMPONENT: svc, L_NAMESPACE: TEST_DYN_NS, L_GRAPH: TEST_DGD}
        if sub_type and svc == "service1":
            expected["nvidia.com/dynamo-sub-component-type"] = sub_type
        assert dynamo_labels(dep["metadata"]["labels"]) == expected
        assert dep["spec"]["replicas"] == 3
        # the deprecated dynamoNamespace never reaches the env; since v1beta1 conversion it
        # labels the pods (GetDCDDynamoNamespace, v1beta1_helpers.go @ 2a6da14c8)
        assert env(main(dep))["DYN_NAMESPACE"] == TEST_DYN_NS
        assert pod_labels(dep)[L_NAMESPACE] == (dynamo_namespace or TEST_DYN_NS)
        assert main(dep)["resources"] == {
            "requests": {"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": "0"}
        }
    assert env(main(deps["service1"]))["DYN_COMPONENT"] == "frontend"
    assert pod_labels(deps["service1"])[L_TYPE] == "frontend"
    # service2 has no componentType: no component-type label (and no DYN_COMPONENT value)
    assert L_TYPE not in pod_labels(deps["service2"])
    if sub_type:
        # v1alpha1 baseline: the subComponentType is kept and becomes a pod label
        assert pod_labels(deps["service1"])[L_SUBTYPE] == sub_type
    else:
        assert L_SUBTYPE not in pod_labels(deps["service1"])


def test_generate_dynamo_components_deployments_main_container_command_and_args(
    tmp_path: Path,
) -> None:
    # Go: TestGenerateDynamoComponentsDeployments
    #     "... with ExtraPodSpec.MainContainer Command and Args"
    services = _two_services(f"{TEST_DYN_NS}-44136fa3")
    services["service1"]["extraPodSpec"] = {
        "mainContainer": {"command": ["sh", "-c"], "args": ["echo hello world", "sleep 99999"]}
    }
    doc = dgd(
        TEST_DGD,
        services,
        backendFramework="sglang",
        envs=[{"name": "TEST_ENV", "value": "test-value"}],
    )
    deps = deployments(render(tmp_path, doc))
    c1 = main(deps["service1"])
    assert c1["command"] == ["sh", "-c"]
    assert c1["args"] == ["echo hello world", "sleep 99999"]
    for svc in ("service1", "service2"):
        e = env(main(deps[svc]))
        assert e["TEST_ENV"] == "test-value"  # DGD envs merged into every service
        assert e["DYN_NAMESPACE"] == TEST_DYN_NS  # the stale "-44136fa3" value is ignored
        assert deps[svc]["metadata"]["labels"][L_NAMESPACE] == TEST_DYN_NS


def test_generate_dynamo_components_deployments_discovery_and_metrics_annotations(
    tmp_path: Path,
) -> None:
    # Go: TestGenerateDynamoComponentsDeployments
    #     "... with Discover Backend and Metrics Annotatitions"
    # The Go input uses discovery backend "test" (the Go function does not validate it); the
    # point of the case is that DGD metadata annotations reach the component, so a valid
    # value is used here. (dyn-gitops rejects values other than kubernetes/etcd.)
    services = {"service1": _two_services(f"{TEST_DYN_NS}-44136fa3")["service1"]}
    doc = dgd(
        TEST_DGD,
        services,
        backendFramework="sglang",
        annotations={A_ENABLE_METRICS: "false", A_DISCOVERY_BACKEND: "etcd"},
    )
    deps = deployments(render(tmp_path, doc))
    dep = deps["service1"]
    ann = dep["metadata"]["annotations"]
    assert ann[A_ENABLE_METRICS] == "false"
    assert ann[A_DISCOVERY_BACKEND] == "etcd"
    # their effect on the pod: no metrics label, no k8s discovery env/labels
    assert L_METRICS not in pod_labels(dep)
    assert "DYN_DISCOVERY_BACKEND" not in env(main(dep))
    assert L_DISCOVERY_BACKEND not in pod_labels(dep)


# ------------------------------------------------------------ legacy DYN_DEPLOYMENT_CONFIG
# Go parses this JSON into structs tagged `workers`, `resources`, `cpu`, `memory`, `gpu`;
# encoding/json matches keys to tags case-insensitively, so the capitalised keys the
# Go tests use ("Workers", "Resources", "CPU", ...) take effect.
DYN_CONFIG_IN = (
    '{"service1":{"port":8080,"ServiceArgs":{"Workers":2, '
    '"Resources":{"CPU":"2", "Memory":"2Gi", "GPU":"2"}}}}'
)


def test_generate_dynamo_components_deployments_dyn_deployment_config(tmp_path: Path) -> None:
    # Go: TestGenerateDynamoComponentsDeployments
    #     "... with config from DYN_DEPLOYMENT_CONFIG env var" (spec dynamo-pod-spec.md 3.3)
    doc = dgd(
        TEST_DGD,
        _two_services(None),
        envs=[{"name": "DYN_DEPLOYMENT_CONFIG", "value": DYN_CONFIG_IN}],
    )
    deps = deployments(render(tmp_path, doc))
    front, other = deps["service1"], deps["service2"]
    # the frontend's entry gets port 8000 (Go json.Marshal: sorted keys, no spaces)
    assert env(main(front))["DYN_DEPLOYMENT_CONFIG"] == (
        '{"service1":{"ServiceArgs":{"Resources":{"CPU":"2","GPU":"2","Memory":"2Gi"},'
        '"Workers":2},"port":8000}}'
    )
    # ServiceArgs.Resources are written to requests and limits; set replicas beat Workers
    assert main(front)["resources"] == {
        "requests": {"cpu": "2", "memory": "2Gi", "nvidia.com/gpu": "2"},
        "limits": {"cpu": "2", "memory": "2Gi", "nvidia.com/gpu": "2"},
    }
    assert front["spec"]["replicas"] == 3
    # service2 has no entry: untouched
    assert env(main(other))["DYN_DEPLOYMENT_CONFIG"] == DYN_CONFIG_IN
    assert main(other)["resources"] == {
        "requests": {"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": "0"}
    }
    assert other["spec"]["replicas"] == 3


@pytest.mark.parametrize(
    ("replicas", "want"),
    [
        (None, 2),  # "dyn config workers used when component replicas omitted"
        (3, 3),  # "component replicas override dyn config workers"
    ],
)
def test_generate_dynamo_components_deployments_uses_dyn_deployment_workers(
    tmp_path: Path, replicas: int | None, want: int
) -> None:
    # Go: TestGenerateDynamoComponentsDeployments_UsesDynDeploymentWorkers
    # (the Go input is v1beta1; the same graph written as v1alpha1)
    svc: Obj = {"componentType": "frontend"}
    if replicas is not None:
        svc["replicas"] = replicas
    doc = dgd(
        "test-dgd",
        {"service1": svc},
        envs=[
            {"name": "DYN_DEPLOYMENT_CONFIG", "value": '{"service1":{"ServiceArgs":{"workers":2}}}'}
        ],
    )
    assert deployments(render(tmp_path, doc))["service1"]["spec"]["replicas"] == want


def test_update_dyn_deployment_config_main_component(tmp_path: Path) -> None:
    # Go: Test_updateDynDeploymentConfig "main component" and "not main component"
    cfg = '{"Frontend":{"port":8080},"Planner":{"environment":"kubernetes"}}'
    doc = dgd(
        "test-dgd",
        {
            "Frontend": {
                "componentType": "frontend",
                "envs": [
                    {"name": "OTHER", "value": "value"},
                    {"name": "DYN_DEPLOYMENT_CONFIG", "value": cfg},
                ],
            },
            "Other": {"envs": [{"name": "DYN_DEPLOYMENT_CONFIG", "value": cfg}]},
        },
    )
    deps = deployments(render(tmp_path, doc))
    assert env(main(deps["Frontend"]))["DYN_DEPLOYMENT_CONFIG"] == (
        '{"Frontend":{"port":8000},"Planner":{"environment":"kubernetes"}}'
    )
    assert env(main(deps["Other"]))["DYN_DEPLOYMENT_CONFIG"] == cfg  # not a frontend


def test_override_with_dyn_deployment_config_subset_of_resources(tmp_path: Path) -> None:
    # Go: Test_overrideWithDynDeploymentConfig "override subset of resources"
    cfg = (
        '{"Frontend":{"port":8080,"ServiceArgs":{"Workers":3, "Resources":{"GPU":"2"}}},'
        '"Planner":{"environment":"kubernetes"}}'
    )
    doc = dgd(
        "test-dgd",
        {
            "Frontend": {
                "componentType": "frontend",
                "resources": {"requests": {"cpu": "1", "memory": "1Gi", "gpu": "1"}},
                "envs": [{"name": "DYN_DEPLOYMENT_CONFIG", "value": cfg}],
            }
        },
    )
    dep = deployments(render(tmp_path, doc))["Frontend"]
    assert dep["spec"]["replicas"] == 3  # replicas unset: ServiceArgs.Workers
    assert main(dep)["resources"] == {
        "requests": {"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": "2"},
        "limits": {"nvidia.com/gpu": "2"},
    }


# ---------------------------------------------- Test_GetDynamoComponentDeploymentsGlobalNamespace
def test_get_dynamo_component_deployments_global_namespace(tmp_path: Path) -> None:
    # Go: Test_GetDynamoComponentDeploymentsGlobalNamespace
    doc = dgd(
        TEST_DGD,
        {
            "service1": {"componentType": "frontend", "globalDynamoNamespace": True, "replicas": 3},
            "service2": {"componentType": "worker", "replicas": 3},
        },
        backendFramework="sglang",
    )
    deps = deployments(render(tmp_path, doc))
    assert len(deps) == 2
    assert deps["service1"]["metadata"]["labels"][L_NAMESPACE] == "dynamo"
    assert env(main(deps["service1"]))["DYN_NAMESPACE"] == "dynamo"
    assert deps["service2"]["metadata"]["labels"][L_NAMESPACE] == TEST_DYN_NS
    assert env(main(deps["service2"]))["DYN_NAMESPACE"] == TEST_DYN_NS


# ------------------------------------------------------------- TestGenerateComponentContext
@pytest.mark.parametrize(
    ("case", "svc", "dgd_name", "namespace", "discovery", "want_ns"),
    [
        (
            "namespace-scoped operator: computes correct dynamo namespace",
            {"componentType": "planner", "dynamoNamespace": "old-incorrect-value"},
            "my-deployment",
            "my-namespace",
            "kubernetes",
            "my-namespace-my-deployment",
        ),
        (
            "deprecated dynamoNamespace field is ignored",
            {"componentType": "frontend", "dynamoNamespace": "vllm-disagg"},
            "vllm-disagg",
            "djangoz",
            "kubernetes",
            "djangoz-vllm-disagg",
        ),
        # Go uses numberOfNodes 2 here; multinode is out of scope, the namespace rule is not
        (
            "GlobalDynamoNamespace takes precedence",
            {
                "componentType": "worker",
                "globalDynamoNamespace": True,
                "dynamoNamespace": "should-be-ignored",
            },
            "shared-frontend",
            "production",
            "etcd",
            "dynamo",
        ),
        (
            "nil dynamoNamespace field still computes correctly",
            {"componentType": "planner"},
            "test-dgd",
            "default",
            "kubernetes",
            "default-test-dgd",
        ),
        # Go uses numberOfNodes 4 here (see above)
        (
            "different namespace and DGD name combinations",
            {"componentType": "frontend"},
            "llama-70b-prod",
            "ml-inference",
            "etcd",
            "ml-inference-llama-70b-prod",
        ),
    ],
)
def test_generate_component_context(
    tmp_path: Path, case: str, svc: Obj, dgd_name: str, namespace: str, discovery: str, want_ns: str
) -> None:
    # Go: TestGenerateComponentContext
    doc = dgd(dgd_name, {"svc": svc}, namespace=namespace)
    dep = deployments(render(tmp_path, doc, discovery_backend=discovery))["svc"]
    e = env(main(dep))
    assert e["DYN_NAMESPACE"] == want_ns
    assert e["DYN_COMPONENT"] == svc["componentType"]
    assert e["DYN_PARENT_DGD_K8S_NAME"] == dgd_name
    assert e["DYN_PARENT_DGD_K8S_NAMESPACE"] == namespace
    # the deprecated field labels the pods (GetDCDDynamoNamespace, v1beta1_helpers.go @
    # 2a6da14c8), not the env
    assert pod_labels(dep)[L_NAMESPACE] == svc.get("dynamoNamespace", want_ns)
    if discovery == "etcd":
        assert "DYN_DISCOVERY_BACKEND" not in e
    else:
        assert e["DYN_DISCOVERY_BACKEND"] == "kubernetes"


# ------------------------------------------------------------------------- Test_mergeEnvs
@pytest.mark.parametrize(
    ("common", "specific", "want"),
    [
        ([], [{"name": "FOO", "value": "BAR"}], [{"name": "FOO", "value": "BAR"}]),  # no_common
        ([{"name": "FOO", "value": "BAR"}], [], [{"name": "FOO", "value": "BAR"}]),  # no_specific
        (
            [{"name": "FOO", "value": "BAR"}],
            [{"name": "BAZ", "value": "QUX"}],
            [{"name": "BAZ", "value": "QUX"}, {"name": "FOO", "value": "BAR"}],
        ),  # common_and_specific
        (
            [{"name": "FOO", "value": "BAR"}],
            [{"name": "FOO", "value": "QUX"}],
            [{"name": "FOO", "value": "QUX"}],
        ),  # common_and_specific_envs_with_same_name
    ],
)
def test_merge_envs(common: list[Obj], specific: list[Obj], want: list[Obj]) -> None:
    # Go: Test_mergeEnvs (MergeEnvs(common, specific); the Go test sorts the result by name)
    assert merge_envs(common, specific) == want


# ------------------------------------------------------------------ TestAddStandardEnvVars_NATS
@pytest.mark.parametrize(
    "nats",
    [
        "",  # "default configuration omits NATS_SERVER"
        "nats://dynamo-nats.dynamo-system.svc.cluster.local:4222",  # "bundled NATS ..."
        "nats://external-nats:4222",  # "external NATS injects NATS_SERVER"
    ],
)
def test_add_standard_env_vars_nats(tmp_path: Path, nats: str) -> None:
    # Go: TestAddStandardEnvVars_NATS (operator config infrastructure.natsAddress)
    doc = dgd("test-dgd", {"Frontend": {"componentType": "frontend"}})
    e = env(main(deployments(render(tmp_path, doc, nats_address=nats))["Frontend"]))
    if nats:
        assert e["NATS_SERVER"] == nats
    else:
        assert "NATS_SERVER" not in e


# --------------------------------------------------------------- TestGenerateBasePodSpec_Frontend
@pytest.mark.parametrize(
    ("case", "svc", "want_args", "want_port"),
    [
        ("frontend with default command", {}, ["-m", "dynamo.frontend"], "8000"),
        (
            "frontend with overriding env var",
            {"envs": [{"name": "DYN_HTTP_PORT", "value": "3000"}]},
            ["-m", "dynamo.frontend"],
            "3000",
        ),
        (
            "frontend with materialized appended args",
            {
                "extraPodSpec": {
                    "mainContainer": {
                        "name": "main",
                        "command": ["python3"],
                        "args": ["-m", "dynamo.frontend", "--router-mode", "kv"],
                    }
                }
            },
            ["-m", "dynamo.frontend", "--router-mode", "kv"],
            "8000",
        ),
    ],
)
def test_generate_base_pod_spec_frontend(
    tmp_path: Path, case: str, svc: Obj, want_args: list[str], want_port: str
) -> None:
    # Go: TestGenerateBasePodSpec_Frontend
    doc = dgd(
        "test-deployment",
        {"Frontend": {"componentType": "frontend", **svc}},
        backendFramework="vllm",
    )
    c = main(deployments(render(tmp_path, doc))["Frontend"])
    assert c["command"] == ["python3"]
    assert c["args"] == want_args
    assert env(c)["DYN_HTTP_PORT"] == want_port


# -------------------------------------------------- TestGenerateBasePodSpec_PlannerServiceAccount
def test_generate_base_pod_spec_planner_service_account(tmp_path: Path) -> None:
    # Go: TestGenerateBasePodSpec_PlannerServiceAccount
    doc = dgd(
        "test-deployment",
        {"planner": {"componentType": "planner"}, "worker": {"componentType": "worker"}},
        backendFramework="sglang",
    )
    deps = deployments(render(tmp_path, doc, discovery_backend="etcd"))
    assert pod(deps["planner"])["serviceAccountName"] == PLANNER_SA
    # Go: "" for the worker (empty operator config, so no k8s-discovery SA). On the component
    # path an empty SA falls back to "default" (dynamo-objects.md 5.4), which we write out.
    assert pod(deps["worker"])["serviceAccountName"] == "default"
    # the planner SA is forced even over a user value (component path)
    doc["spec"]["services"]["planner"]["extraPodSpec"] = {"serviceAccountName": "mine"}
    deps = deployments(render(tmp_path, doc))
    assert pod(deps["planner"])["serviceAccountName"] == PLANNER_SA
    assert pod(deps["worker"])["serviceAccountName"] != PLANNER_SA


# ---------------------------------------------------------- TestGenerateBasePodSpec_VolumeMounts
@pytest.mark.parametrize(
    ("case", "svc", "want_pvcs", "want_mounts", "want_init"),
    [
        (
            "valid volumeMounts",
            {"volumeMounts": [{"name": "test-pvc", "mountPoint": "/data"}]},
            ["test-pvc"],
            [{"name": "test-pvc", "mountPath": "/data"}, SHM_MOUNT],
            None,
        ),
        (
            "volumeMounts compose with extra main container mounts",
            {
                "volumeMounts": [{"name": "test-pvc", "mountPoint": "/data"}],
                "extraPodSpec": {
                    "initContainers": [
                        {
                            "name": "init",
                            "volumeMounts": [{"name": "test-pvc", "mountPath": "/data"}],
                        }
                    ],
                    "volumes": [{"name": "config", "configMap": {"name": "config"}}],
                    "mainContainer": {"volumeMounts": [{"name": "config", "mountPath": "/config"}]},
                },
            },
            ["test-pvc"],
            [
                {"name": "config", "mountPath": "/config"},
                {"name": "test-pvc", "mountPath": "/data"},
                SHM_MOUNT,
            ],
            [{"name": "test-pvc", "mountPath": "/data"}],
        ),
        (
            "multiple volumeMounts",
            {
                "volumeMounts": [
                    {"name": "pvc1", "mountPoint": "/data1"},
                    {"name": "pvc2", "mountPoint": "/data2"},
                ]
            },
            ["pvc1", "pvc2"],
            [
                {"name": "pvc1", "mountPath": "/data1"},
                {"name": "pvc2", "mountPath": "/data2"},
                SHM_MOUNT,
            ],
            None,
        ),
    ],
)
def test_generate_base_pod_spec_volume_mounts(
    tmp_path: Path,
    case: str,
    svc: Obj,
    want_pvcs: list[str],
    want_mounts: list[Obj],
    want_init: list[Obj] | None,
) -> None:
    # Go: TestGenerateBasePodSpec_VolumeMounts; order mainContainer -> volumeMounts -> shm
    doc = dgd(
        "test-deployment",
        {"frontend": {"componentType": "frontend", **svc}},
        backendFramework="vllm",
    )
    dep = deployments(render(tmp_path, doc))["frontend"]
    vols = {v["name"]: v for v in pod(dep)["volumes"]}
    for name in want_pvcs:
        assert vols[name]["persistentVolumeClaim"] == {"claimName": name}
    assert main(dep)["volumeMounts"] == want_mounts
    if want_init is not None:
        assert pod(dep)["initContainers"][0]["volumeMounts"] == want_init


@pytest.mark.parametrize(
    ("case", "mount", "field"),
    [
        ("empty volumeMount name", {"name": "", "mountPoint": "/data"}, "name"),
        ("empty volumeMount mountPoint", {"name": "test-pvc", "mountPoint": ""}, "mountPoint"),
    ],
)
def test_generate_base_pod_spec_volume_mount_errors(
    tmp_path: Path, case: str, mount: Obj, field: str
) -> None:
    # Go: TestGenerateBasePodSpec_VolumeMounts (the two expectError cases)
    doc = dgd(
        "test-deployment", {"frontend": {"componentType": "frontend", "volumeMounts": [mount]}}
    )
    err = render_error(tmp_path, doc)
    assert any(
        p.field == f"spec.services.frontend.volumeMounts[0].{field}" for p in err.problems
    ), str(err)


# -------------------------------------------------------- TestGenerateBasePodSpec_ResourceClaims
def test_generate_base_pod_spec_resource_claims(tmp_path: Path) -> None:
    # Go: TestGenerateBasePodSpec_ResourceClaims "component with resource claims"
    doc = dgd(
        "test-deployment",
        {
            "worker": {
                "componentType": "worker",
                "resources": {
                    "requests": {"cpu": "130", "memory": "800Gi"},
                    "limits": {"cpu": "130", "memory": "800Gi", "gpu": "4"},
                    "claims": [{"name": "compute-domain-channel"}],
                },
                "extraPodSpec": {
                    "resourceClaims": [
                        {
                            "name": "compute-domain-channel",
                            "resourceClaimTemplateName": "trtllm-test-compute-domain-channel",
                        }
                    ],
                    "volumes": [
                        {
                            "name": "model-storage",
                            "persistentVolumeClaim": {"claimName": "dynamo-pvc"},
                        }
                    ],
                    "mainContainer": {
                        "image": "rohanv672/dynamo:v0.5.1-trtllm",
                        "command": ["/bin/sh", "-c"],
                        "args": [
                            "python3 -m dynamo.trtllm --model-path /data/deepseek-r1 "
                            "--served-model-name deepseek-ai/DeepSeek-R1 "
                            "--extra-engine-args /data/engine_configs/wide_ep_agg.yaml"
                        ],
                        "volumeMounts": [{"name": "model-storage", "mountPath": "/data"}],
                    },
                },
            }
        },
        backendFramework="trtllm",
    )
    dep = deployments(render(tmp_path, doc))["worker"]
    res = main(dep)["resources"]
    assert res["claims"] == [{"name": "compute-domain-channel"}]
    assert res["requests"] == {"cpu": "130", "memory": "800Gi"}
    assert res["limits"]["nvidia.com/gpu"] == "4"
    assert pod(dep)["resourceClaims"] == [
        {
            "name": "compute-domain-channel",
            "resourceClaimTemplateName": "trtllm-test-compute-domain-channel",
        }
    ]
    assert pod(dep)["volumes"] == [
        {"name": "model-storage", "persistentVolumeClaim": {"claimName": "dynamo-pvc"}},
        SHM_VOLUME,
    ]


def test_generate_base_pod_spec_multiple_resource_claims(tmp_path: Path) -> None:
    # Go: TestGenerateBasePodSpec_ResourceClaims "component with multiple resource claims"
    claims = [{"name": "compute-domain-channel"}, {"name": "network-domain-channel"}]
    pod_claims = [
        {"name": "compute-domain-channel", "resourceClaimTemplateName": "compute-template"},
        {"name": "network-domain-channel", "resourceClaimTemplateName": "network-template"},
    ]
    doc = dgd(
        "test-deployment",
        {
            "worker": {
                "componentType": "worker",
                "resources": {"claims": claims},
                "extraPodSpec": {
                    "resourceClaims": pod_claims,
                    "mainContainer": {
                        "image": "test-image",
                        "command": ["python3"],
                        "args": ["-m", "dynamo.worker"],
                    },
                },
            }
        },
        backendFramework="trtllm",
    )
    dep = deployments(render(tmp_path, doc))["worker"]
    assert main(dep)["resources"]["claims"] == claims
    assert pod(dep)["resourceClaims"] == pod_claims


def test_generate_base_pod_spec_without_resource_claims(tmp_path: Path) -> None:
    # Go: TestGenerateBasePodSpec_ResourceClaims "component without resource claims"
    doc = dgd(
        "test-deployment",
        {
            "frontend": {
                "componentType": "frontend",
                "resources": {"requests": {"cpu": "1", "memory": "1Gi"}},
            }
        },
    )
    dep = deployments(render(tmp_path, doc))["frontend"]
    assert "claims" not in main(dep)["resources"]
    assert "resourceClaims" not in pod(dep)


# ------------------------------------------------------- TestAppendMissingPVCVolumesForMounts*
def test_append_missing_pvc_volumes_for_mounts_adds_missing_pvcs(tmp_path: Path) -> None:
    # Go: TestAppendMissingPVCVolumesForMountsAddsMissingPVCs
    # v1beta1-era behaviour: a PVC volume is synthesized for every main-container mount with no
    # volume ("model-cache"), and volumes are reordered by mount order (cache, model-cache,
    # config). The v1alpha1 baseline does neither (dynamo-pod-spec.md 5.12: extraPodSpec
    # volumes in their order, then volumeMounts PVCs, then shared-memory). What both eras
    # share is asserted; whether "model-cache" is synthesized is deliberately left open.
    doc = dgd(
        "test-dgd",
        {
            "frontend": {
                "componentType": "frontend",
                "extraPodSpec": {
                    "volumes": [
                        {"name": "config", "configMap": {}},
                        {"name": "cache", "persistentVolumeClaim": {"claimName": "cache-pvc"}},
                    ],
                    "mainContainer": {
                        "volumeMounts": [
                            {"name": "cache", "mountPath": "/cache"},
                            {"name": "model-cache", "mountPath": "/models"},
                        ]
                    },
                },
            }
        },
    )
    dep = deployments(render(tmp_path, doc))["frontend"]
    vols = pod(dep)["volumes"]
    assert [v["name"] for v in vols if v["name"] != "model-cache"] == [
        "config",
        "cache",
        "shared-memory",
    ]  # baseline order (Go: cache, model-cache, config)
    by_name = {v["name"]: v for v in vols}
    assert by_name["cache"]["persistentVolumeClaim"] == {"claimName": "cache-pvc"}
    assert by_name["config"] == {"name": "config", "configMap": {}}
    if "model-cache" in by_name:
        assert by_name["model-cache"]["persistentVolumeClaim"] == {"claimName": "model-cache"}
    assert main(dep)["volumeMounts"][:2] == [
        {"name": "cache", "mountPath": "/cache"},
        {"name": "model-cache", "mountPath": "/models"},
    ]


def test_append_missing_pvc_volumes_for_mounts_keeps_repeated_mounts_unique(tmp_path: Path) -> None:
    # Go: TestAppendMissingPVCVolumesForMountsKeepsRepeatedVolumeMountsUnique
    mounts = [
        {"name": "shared-model", "mountPath": "/model-store", "subPath": "models/glm"},
        {"name": "shared-model", "mountPath": "/cache/sglang", "subPath": "cache/sglang/glm"},
    ]
    doc = dgd(
        "test-dgd",
        {
            "frontend": {
                "componentType": "frontend",
                "extraPodSpec": {
                    "volumes": [
                        {
                            "name": "shared-model",
                            "persistentVolumeClaim": {"claimName": "model-cache-pvc"},
                        }
                    ],
                    "mainContainer": {"volumeMounts": mounts},
                },
            }
        },
    )
    dep = deployments(render(tmp_path, doc))["frontend"]
    assert pod(dep)["volumes"] == [
        {"name": "shared-model", "persistentVolumeClaim": {"claimName": "model-cache-pvc"}},
        SHM_VOLUME,
    ]
    assert main(dep)["volumeMounts"] == [*mounts, SHM_MOUNT]


# --------------------------------------------------------- TestBackendDetectionSkipsNonWorkers
@pytest.mark.parametrize("component_type", ["frontend", "planner"])  # "lpx": out of scope
def test_backend_detection_skips_non_workers(tmp_path: Path, component_type: str) -> None:
    # Go: TestBackendDetectionSkipsNonWorkers (component_*_test.go): an ambiguous command and
    # an explicit backend are both ignored for non-workers
    doc = dgd(
        "test-dgd",
        {
            "svc": {
                "componentType": component_type,
                "extraPodSpec": {
                    "mainContainer": {"args": ["python -m dynamo.vllm; python -m dynamo.sglang"]}
                },
            }
        },
        backendFramework="trtllm",
    )
    _, per_service = resolve_backends(form_of(doc))
    assert per_service["svc"] == "noop"
    assert "svc" in deployments(render(tmp_path, doc))  # renders without error


# ------------------------------------- TestGenerateGrovePodCliqueSet single-node pod specs
GROVE_DGD = "test-dynamo-graph-deployment"
GROVE_NS = "test-namespace"
GROVE_DYN_NS = f"{GROVE_NS}-{GROVE_DGD}"
INFRA = {
    "nats_address": "nats-address",
    "etcd_address": "etcd-address",
    "model_express_url": "model-express-url",
    "prometheus_endpoint": "http://localhost:9090",
}
USER_LIVENESS = {"httpGet": {"path": "/health", "port": 8080}}
USER_READINESS = {"httpGet": {"path": "/ready", "port": 8080}}


def _single_node_graph() -> Obj:
    return dgd(
        GROVE_DGD,
        namespace=GROVE_NS,
        envs=[{"name": "DYNAMO_POD_GANG_SET_REPLICAS", "value": "1"}],
        services={
            "Frontend": {
                "componentType": "frontend",
                "subComponentType": "test-sub-component",
                "extraPodMetadata": {
                    "annotations": {
                        "nvidia.com/annotation1": "annotation1",
                        "nvidia.com/annotation2": "annotation2",
                    },
                    "labels": {"nvidia.com/label1": "label1", "nvidia.com/label2": "label2"},
                },
                "replicas": 1,
                "resources": {
                    "requests": {"cpu": "1", "memory": "1Gi"},
                    "limits": {"cpu": "1", "memory": "1Gi", "gpu": "1"},
                },
                "envs": [{"name": "FRONTEND_ENV_1", "value": "1"}],
                "envFromSecret": "frontend-secret",
                "livenessProbe": USER_LIVENESS,
                "readinessProbe": USER_READINESS,
                "extraPodSpec": {
                    "terminationGracePeriodSeconds": 10,
                    "imagePullSecrets": [{"name": "frontend-secret"}],
                    "mainContainer": {
                        "command": ["/bin/sh", "-c", "echo $FRONTEND_ENV_1"],
                        "args": ["--frontend-env-1", "1"],
                        "image": "frontend-image",
                    },
                },
            },
            "Planner": {
                "replicas": 2,
                "componentType": "planner",
                "resources": {
                    "requests": {"cpu": "2", "memory": "2Gi"},
                    "limits": {"cpu": "2", "memory": "2Gi", "gpu": "2"},
                },
                "envs": [{"name": "PLANNER_ENV_1", "value": "2"}],
                "volumeMounts": [{"name": "dynamo-pvc", "mountPoint": "/planner"}],
                "envFromSecret": "planner-secret",
                "livenessProbe": USER_LIVENESS,
                "readinessProbe": USER_READINESS,
                "extraPodSpec": {
                    "mainContainer": {
                        "command": ["/bin/sh", "-c", "echo $PLANNER_ENV_1"],
                        "args": ["--planner-env-1", "1"],
                        "image": "planner-image",
                    }
                },
            },
        },
    )


def _common_env(component: str) -> dict[str, Any]:
    return {
        "DYNAMO_POD_GANG_SET_REPLICAS": "1",
        "NATS_SERVER": "nats-address",
        "ETCD_ENDPOINTS": "etcd-address",
        "MODEL_EXPRESS_URL": "model-express-url",
        "PROMETHEUS_ENDPOINT": "http://localhost:9090",
        "DYN_NAMESPACE": GROVE_DYN_NS,
        "DYN_COMPONENT": component,
        "DYN_DISCOVERY_BACKEND": "kubernetes",
        "DYN_PARENT_DGD_K8S_NAME": GROVE_DGD,
        "DYN_PARENT_DGD_K8S_NAMESPACE": GROVE_NS,
        "POD_NAME": field_ref("metadata.name"),
        "POD_NAMESPACE": field_ref("metadata.namespace"),
        "POD_UID": field_ref("metadata.uid"),
    }


def test_single_node_frontend_pod_spec(tmp_path: Path) -> None:
    # Go: TestGenerateGrovePodCliqueSet "test_generate_grove_pod_clique_set_single_node",
    # clique "frontend": its pod spec is GenerateBasePodSpec's, shared with the component path
    dep = deployments(render(tmp_path, _single_node_graph(), **INFRA))["Frontend"]
    assert dep["metadata"]["name"] == f"{GROVE_DGD}-frontend"
    assert dep["spec"]["replicas"] == 1
    labels = pod_labels(dep)
    assert labels[L_SELECTOR] == f"{GROVE_DGD}-frontend"
    assert labels[L_COMPONENT] == "Frontend"
    assert labels[L_METRICS] == "true"
    assert labels[L_TYPE] == "frontend"
    assert labels[L_SUBTYPE] == "test-sub-component"
    assert labels[L_GRAPH] == GROVE_DGD
    assert labels[L_NAMESPACE] == GROVE_DYN_NS
    assert labels["nvidia.com/label1"] == "label1"
    assert labels["nvidia.com/label2"] == "label2"
    assert dep["spec"]["template"]["metadata"]["annotations"] == {
        "nvidia.com/annotation1": "annotation1",
        "nvidia.com/annotation2": "annotation2",
    }

    spec = pod(dep)
    assert spec["volumes"] == [SHM_VOLUME]
    assert spec["terminationGracePeriodSeconds"] == 10  # from extraPodSpec
    assert spec["securityContext"] == {"fsGroup": 1000}
    assert spec["imagePullSecrets"] == [{"name": "frontend-secret"}]
    assert spec["restartPolicy"] == "Always"
    # (no serviceAccountName assertion: the Go test's operator config leaves discovery.backend
    # empty, so no k8s-discovery SA there; ours defaults to the Helm value "kubernetes")
    assert len(spec["containers"]) == 1
    c = main(dep)
    assert c["image"] == "frontend-image"
    assert c["command"] == ["/bin/sh", "-c", "echo $FRONTEND_ENV_1"]
    assert c["args"] == ["--frontend-env-1", "1"]
    assert c["envFrom"] == [{"secretRef": {"name": "frontend-secret"}}]
    assert c["livenessProbe"] == USER_LIVENESS  # user probes replace the defaults
    assert c["readinessProbe"] == USER_READINESS
    assert "startupProbe" not in c
    assert env(c) == {
        **_common_env("frontend"),
        "FRONTEND_ENV_1": "1",
        "DYN_HTTP_PORT": "8000",
        "DYNAMO_PORT": "8000",
        "DYN_NAMESPACE_PREFIX": GROVE_DYN_NS,
    }
    assert c["resources"] == {
        "requests": {"cpu": "1", "memory": "1Gi"},
        "limits": {"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": "1"},
    }
    assert c["volumeMounts"] == [SHM_MOUNT]
    assert c["ports"] == [{"name": "http", "containerPort": 8000, "protocol": "TCP"}]


def test_single_node_planner_pod_spec(tmp_path: Path) -> None:
    # Go: TestGenerateGrovePodCliqueSet "test_generate_grove_pod_clique_set_single_node",
    # clique "planner"
    dep = deployments(render(tmp_path, _single_node_graph(), **INFRA))["Planner"]
    assert dep["metadata"]["name"] == f"{GROVE_DGD}-planner"
    assert dep["spec"]["replicas"] == 2
    labels = pod_labels(dep)
    assert labels[L_SELECTOR] == f"{GROVE_DGD}-planner"
    assert labels[L_COMPONENT] == "Planner"
    assert labels[L_METRICS] == "true"
    assert labels[L_TYPE] == "planner"
    assert labels[L_GRAPH] == GROVE_DGD
    assert labels[L_NAMESPACE] == GROVE_DYN_NS
    assert not dep["spec"]["template"]["metadata"].get("annotations")

    spec = pod(dep)
    assert spec["volumes"] == [
        {"name": "dynamo-pvc", "persistentVolumeClaim": {"claimName": "dynamo-pvc"}},
        SHM_VOLUME,
    ]
    assert spec["serviceAccountName"] == PLANNER_SA
    assert spec["terminationGracePeriodSeconds"] == 60
    assert spec["securityContext"] == {"fsGroup": 1000}
    assert spec["restartPolicy"] == "Always"
    assert "imagePullSecrets" not in spec
    c = main(dep)
    assert c["image"] == "planner-image"
    assert c["command"] == ["/bin/sh", "-c", "echo $PLANNER_ENV_1"]
    assert c["args"] == ["--planner-env-1", "1"]
    assert c["ports"] == [
        {"name": "metrics", "containerPort": 9085, "protocol": "TCP"},
        {"name": "system", "containerPort": 9090, "protocol": "TCP"},
    ]
    assert c["envFrom"] == [{"secretRef": {"name": "planner-secret"}}]
    assert c["livenessProbe"] == USER_LIVENESS
    assert c["readinessProbe"] == USER_READINESS
    # no user startup probe: the planner default stays
    assert c["startupProbe"] == {
        "httpGet": {"path": "/live", "port": "system"},
        "periodSeconds": 10,
        "timeoutSeconds": 5,
        "failureThreshold": 720,
    }
    assert env(c) == {
        **_common_env("planner"),
        "PLANNER_ENV_1": "2",
        "DYN_SYSTEM_PORT": "9090",
        "PLANNER_PROMETHEUS_PORT": "9085",
    }
    assert c["resources"] == {
        "requests": {"cpu": "2", "memory": "2Gi"},
        "limits": {"cpu": "2", "memory": "2Gi", "nvidia.com/gpu": "2"},
    }
    assert c["volumeMounts"] == [{"name": "dynamo-pvc", "mountPath": "/planner"}, SHM_MOUNT]


# ------------------------------------- labels/annotations precedence (component-path form)
def test_labels_and_annotations_precedence(tmp_path: Path) -> None:
    # Go: TestGenerateLabelsAndAnnotations_UsePreservedAlphaDGDServiceMetadata. The Go test
    # checks Grove clique metadata after v1beta1 conversion; on the component path the same
    # v1alpha1 fields land on the Deployment (dynamo-objects.md 5.2/5.4): DGD spec < service <
    # extraPodMetadata for annotations, service labels kept, subComponentType as a pod label.
    doc = dgd(
        "test-dgd",
        {
            "worker": {
                "componentType": "worker",
                "subComponentType": "legacy-sub",
                "annotations": {"legacy-annotation": "kept"},
                "labels": {"legacy-label": "kept"},
                "extraPodMetadata": {
                    "annotations": {"pod-template-annotation": "from-pod-template"}
                },
            }
        },
        backendFramework="vllm",
    )
    doc["spec"]["annotations"] = {
        "dgd-annotation": "from-dgd",
        "legacy-annotation": "from-dgd",
        "pod-template-annotation": "from-dgd",
    }
    dep = deployments(render(tmp_path, doc))["worker"]
    assert dep["metadata"]["labels"]["legacy-label"] == "kept"
    assert pod_labels(dep)["legacy-label"] == "kept"
    assert pod_labels(dep)[L_SUBTYPE] == "legacy-sub"
    assert pod_labels(dep)[L_TYPE] == "worker"  # v1alpha1 baseline: not promoted to prefill
    ann = dep["metadata"]["annotations"]
    assert ann["dgd-annotation"] == "from-dgd"
    # component path, 1.5 (#14855, propagateDGDSpecMetadata): the service's preserved
    # v1alpha1 annotations beat the DGD's, as on the Grove path (at 2a6da14c8 the DGD's were
    # merged into the pod template first and won; tests/test_alpha_service_metadata.py)
    assert ann["legacy-annotation"] == "kept"
    assert ann["pod-template-annotation"] == "from-pod-template"
    pod_ann = dep["spec"]["template"]["metadata"]["annotations"]
    assert {k: pod_ann[k] for k in ("dgd-annotation", "legacy-annotation")} == {
        "dgd-annotation": "from-dgd",
        "legacy-annotation": "kept",
    }


def test_system_labels_not_overridable(tmp_path: Path) -> None:
    # Go: TestGenerateLabels_ReassertsRestoreIdentityLabelsAfterMetadataMerge and the label
    # part of TestTopologyLabelMetadataFromConvertedAlphaDGD (its kvTransferPolicy is not
    # supported here and left out). Component path: the pod's system labels are re-applied
    # after extraPodMetadata.labels (dynamo-pod-spec.md 6.1 step 4, 5, 7). Differences from
    # the Grove-based Go expectation: the selector is the DCD name (with the worker hash), and
    # the worker-hash label is the computed hash, not the user's value.
    wrong = {
        L_SELECTOR: "wrong",
        L_COMPONENT: "wrong",
        L_NAMESPACE: "wrong",
        L_TYPE: "planner",
        L_GRAPH: "wrong",
        L_WORKER_HASH: "wrong",
    }
    doc = dgd(
        "test-dgd",
        {
            "Worker": {
                "componentType": "worker",
                "labels": {**wrong, L_TYPE: "frontend"},
                "extraPodMetadata": {"labels": wrong},
            }
        },
        backendFramework="vllm",
    )
    doc["spec"]["labels"] = {L_GRAPH: "wrong-from-dgd-spec", L_COMPONENT: "wrong-from-dgd-spec"}
    objs = render(tmp_path, doc)
    dep = deployments(objs)["Worker"]
    name = dep["metadata"]["name"]
    whash = name.rsplit("-", 1)[1]
    assert name == f"test-dgd-worker-{whash}"
    for labels in (dep["metadata"]["labels"], pod_labels(dep)):
        assert labels[L_GRAPH] == "test-dgd"
        assert labels[L_COMPONENT] == "Worker"
        assert labels[L_NAMESPACE] == "default-test-dgd"
        assert labels[L_WORKER_HASH] == whash
    labels = pod_labels(dep)
    assert labels[L_SELECTOR] == name
    assert labels[L_TYPE] == "worker"
    # the Service selects on these labels: it must still match the pods
    svc = next(o for o in objs if o["kind"] == "Service" and o["metadata"]["name"] == name)
    assert all(labels[k] == v for k, v in svc["spec"]["selector"].items())


# ================================ extra ports (same files, single-node component path) ====
def test_frontend_defaults_get_base_container(tmp_path: Path) -> None:
    # Go: TestFrontendDefaults_GetBaseContainer (component_frontend_test.go)
    doc = dgd("name", {"Frontend": {"componentType": "frontend"}}, namespace="namespace")
    c = main(deployments(render(tmp_path, doc))["Frontend"])
    assert c["command"] == ["python3"]
    assert c["args"] == ["-m", "dynamo.frontend"]
    assert c["ports"] == [{"name": "http", "containerPort": 8000, "protocol": "TCP"}]
    assert c["livenessProbe"] == {
        "httpGet": {"path": "/live", "port": "http"},
        "initialDelaySeconds": 15,
        "periodSeconds": 10,
        "timeoutSeconds": 1,
        "failureThreshold": 3,
    }
    assert c["readinessProbe"] == {
        "httpGet": {"path": "/health", "port": "http"},
        "initialDelaySeconds": 10,
        "periodSeconds": 10,
        "timeoutSeconds": 3,
        "failureThreshold": 3,
    }
    assert "startupProbe" not in c  # runtime >= 1.6.0 gate: off in the baseline
    dyn_ns = "namespace-name"
    assert env(c) == {
        "DYN_NAMESPACE": dyn_ns,
        "DYN_COMPONENT": "frontend",
        "DYN_PARENT_DGD_K8S_NAME": "name",
        "DYN_PARENT_DGD_K8S_NAMESPACE": "namespace",
        "POD_NAME": field_ref("metadata.name"),
        "POD_NAMESPACE": field_ref("metadata.namespace"),
        "POD_UID": field_ref("metadata.uid"),
        "DYN_DISCOVERY_BACKEND": "kubernetes",
        "DYNAMO_PORT": "8000",
        "DYN_HTTP_PORT": "8000",
        "DYN_NAMESPACE_PREFIX": dyn_ns,
    }


def test_planner_defaults_get_base_container(tmp_path: Path) -> None:
    # Go: TestPlannerDefaults_GetBaseContainer (component_planner_test.go)
    doc = dgd("name", {"Planner": {"componentType": "planner"}}, namespace="namespace")
    c = main(deployments(render(tmp_path, doc))["Planner"])
    assert c["command"] == ["/bin/sh", "-c"]
    assert "args" not in c
    assert c["ports"] == [
        {"name": "metrics", "containerPort": 9085, "protocol": "TCP"},
        {"name": "system", "containerPort": 9090, "protocol": "TCP"},
    ]
    assert c["livenessProbe"] == {
        "httpGet": {"path": "/live", "port": "system"},
        "periodSeconds": 5,
        "timeoutSeconds": 4,
        "failureThreshold": 1,
    }
    assert c["readinessProbe"] == {
        "httpGet": {"path": "/health", "port": "system"},
        "periodSeconds": 10,
        "timeoutSeconds": 4,
        "failureThreshold": 3,
    }
    assert c["startupProbe"] == {
        "httpGet": {"path": "/live", "port": "system"},
        "periodSeconds": 10,
        "timeoutSeconds": 5,
        "failureThreshold": 720,
    }
    assert env(c) == {
        "DYN_NAMESPACE": "namespace-name",
        "DYN_COMPONENT": "planner",
        "DYN_PARENT_DGD_K8S_NAME": "name",
        "DYN_PARENT_DGD_K8S_NAMESPACE": "namespace",
        "POD_NAME": field_ref("metadata.name"),
        "POD_NAMESPACE": field_ref("metadata.namespace"),
        "POD_UID": field_ref("metadata.uid"),
        "DYN_DISCOVERY_BACKEND": "kubernetes",
        "PLANNER_PROMETHEUS_PORT": "9085",
        "DYN_SYSTEM_PORT": "9090",
    }


@pytest.mark.parametrize(
    ("image", "canary", "failures"),
    [
        (None, "false", 1),  # "unknown legacy runtime": health checks off, liveness failure 1
        ("test-image:1.3.0", "false", 1),  # "older runtime"
        ("test-image:1.4.9", "false", 1),  # "older runtime" (the 1.5 release's case)
        ("test-image:1.5.0", "true", 3),  # "minimum supported runtime"
        ("test-image:2.0.0", "true", 3),  # "newer runtime"
    ],
)
def test_worker_defaults_canary_health_check_version_gate(
    tmp_path: Path, image: str | None, canary: str, failures: int
) -> None:
    # Go: TestWorkerDefaultsCanaryHealthCheckVersionGate (component_worker_test.go of the 1.5
    # release line, #11083 / #13512: CanaryHealthChecks and IncreasedWorkerFailureThreshold
    # from runtime 1.5.0; an earlier revision had the canary gate at 1.4.0, unread at
    # 2a6da14c8). Rendered as applied (no image is no admission error there).
    svc: Obj = {"componentType": "worker"}
    if image:
        svc["extraPodSpec"] = {"mainContainer": {"image": image}}
    c = main(
        deployments(render(tmp_path, dgd("test-dgd", {"worker": svc}, backendFramework="vllm")))[
            "worker"
        ]
    )
    assert env(c)["DYN_HEALTH_CHECK_ENABLED"] == canary
    assert c["livenessProbe"]["failureThreshold"] == failures


def test_generate_base_pod_spec_worker(tmp_path: Path) -> None:
    # Go: TestGenerateBasePodSpec_Worker. Image tag 1.5.0 turns on the runtime gates
    # (DYN_HEALTH_CHECK_ENABLED=true, liveness failureThreshold 3; #11083, #13512), as there.
    # Difference from the Go golden, by design: the Go test calls GenerateBasePodSpec
    # without a worker-hash label, so it has no DYN_NAMESPACE_WORKER_SUFFIX; the component
    # path always has one for workers (dynamo-pod-spec.md 8.1).
    doc = dgd(
        "test-deployment",
        {
            "worker": {
                "componentType": "worker",
                "dynamoNamespace": "default-test-deployment",
                "envs": [{"name": "ANOTHER_COMPONENTENV", "value": "true"}],
                "extraPodSpec": {
                    "mainContainer": {
                        "image": "test-image:1.5.0",
                        "command": ["python3"],
                        "args": ["-m", "dynamo.worker"],
                        "env": [{"name": "ANOTHER_CONTAINER_ENV", "value": "true"}],
                    }
                },
            }
        },
        backendFramework="sglang",
    )
    dep = deployments(render(tmp_path, doc))["worker"]
    whash = pod_labels(dep)[L_WORKER_HASH]
    spec = pod(dep)
    assert spec["restartPolicy"] == "Always"
    assert spec["terminationGracePeriodSeconds"] == 60
    assert spec["securityContext"] == {"fsGroup": 1000}
    assert spec["volumes"] == [SHM_VOLUME]
    c = main(dep)
    assert c["image"] == "test-image:1.5.0"
    assert c["command"] == ["python3"]
    assert c["args"] == ["-m", "dynamo.worker"]
    assert env(c) == {
        "ANOTHER_COMPONENTENV": "true",
        "ANOTHER_CONTAINER_ENV": "true",
        "DYN_COMPONENT": "worker",
        "DYN_DISCOVERY_BACKEND": "kubernetes",
        "DYN_FORWARDPASS_METRIC_PORT": "20380",
        "DYN_HEALTH_CHECK_ENABLED": "true",  # runtime >= 1.5.0 gate
        "DYN_NAMESPACE": "default-test-deployment",
        "DYN_NAMESPACE_WORKER_SUFFIX": whash,  # component path only
        "DYN_PARENT_DGD_K8S_NAME": "test-deployment",
        "DYN_PARENT_DGD_K8S_NAMESPACE": "default",
        "DYN_SYSTEM_ENABLED": "true",
        "DYN_SYSTEM_PORT": "9090",
        "DYN_SYSTEM_USE_ENDPOINT_HEALTH_STATUS": '["generate"]',
        "NIXL_TELEMETRY_ENABLE": "n",
        "NIXL_TELEMETRY_EXPORTER": "prometheus",
        "NIXL_TELEMETRY_PROMETHEUS_PORT": "19090",
        "POD_NAME": field_ref("metadata.name"),
        "POD_NAMESPACE": field_ref("metadata.namespace"),
        "POD_UID": field_ref("metadata.uid"),
    }
    assert c["volumeMounts"] == [SHM_MOUNT]
    assert c["livenessProbe"] == {
        "httpGet": {"path": "/live", "port": "system"},
        "periodSeconds": 5,
        "timeoutSeconds": 4,
        "failureThreshold": 3,
    }  # runtime >= 1.5.0 gate (#13512)
    assert c["readinessProbe"] == {
        "httpGet": {"path": "/health", "port": "system"},
        "periodSeconds": 10,
        "timeoutSeconds": 4,
        "failureThreshold": 3,
    }
    assert c["startupProbe"] == {
        "httpGet": {"path": "/live", "port": "system"},
        "periodSeconds": 10,
        "timeoutSeconds": 5,
        "failureThreshold": 720,
    }
    assert c["ports"] == [
        {"name": "system", "containerPort": 9090, "protocol": "TCP"},
        {"name": "nixl", "containerPort": 19090, "protocol": "TCP"},
    ]


@pytest.mark.parametrize(
    ("case", "user", "want"),
    [
        (
            "no security context provided - should apply fsGroup default only",
            None,
            {"fsGroup": 1000},
        ),
        (
            "full security context override - should use user values",
            {"runAsNonRoot": True, "runAsUser": 5000, "runAsGroup": 5000, "fsGroup": 5000},
            {"runAsNonRoot": True, "runAsUser": 5000, "runAsGroup": 5000, "fsGroup": 5000},
        ),
        (
            "partial security context override - user gets full control",
            {"runAsUser": 2000, "runAsGroup": 3000},
            {"runAsUser": 2000, "runAsGroup": 3000},
        ),
        ("only fsGroup override - user gets full control", {"fsGroup": 7000}, {"fsGroup": 7000}),
        (
            "fsGroup 2000 example - exactly what user requested",
            {"fsGroup": 2000},
            {"fsGroup": 2000},
        ),
        (
            "OpenShift-style namespace range - should use user values",
            {
                "runAsNonRoot": True,
                "runAsUser": 1000700001,
                "runAsGroup": 1000700001,
                "fsGroup": 1000700001,
            },
            {
                "runAsNonRoot": True,
                "runAsUser": 1000700001,
                "runAsGroup": 1000700001,
                "fsGroup": 1000700001,
            },
        ),
    ],
)
def test_generate_base_pod_spec_security_context(
    tmp_path: Path, case: str, user: Obj | None, want: Obj
) -> None:
    # Go: TestGenerateBasePodSpec_SecurityContext
    svc: Obj = {"componentType": "frontend"}
    if user is not None:
        svc["extraPodSpec"] = {"securityContext": user}
    dep = deployments(render(tmp_path, dgd("test-deployment", {"frontend": svc})))["frontend"]
    assert pod(dep)["securityContext"] == want


@pytest.mark.parametrize(
    ("case", "annotation", "setting", "want"),
    [
        (
            "Kubernetes discovery backend should set env var to kubernetes",
            "kubernetes",
            "etcd",
            "kubernetes",
        ),  # Go config empty; the annotation decides
        (
            "Kubernetes discovery from controller config should set env var to kubernetes",
            None,
            "kubernetes",
            "kubernetes",
        ),
        ("Etcd discovery backend annotation should not set env var", "etcd", "kubernetes", None),
        ("Etcd discovery from controller config should not set env var", None, "etcd", None),
        # Go: annotation "" and config "" -> kubernetes. Our setting cannot be empty, so the
        # default ("kubernetes") stands in for the empty operator config.
        ("Empty discovery backend defaults to kubernetes", "", "kubernetes", "kubernetes"),
        ("Discovery backend not set defaults to kubernetes", None, "kubernetes", "kubernetes"),
    ],
)
def test_generate_base_pod_spec_discover_backend(
    tmp_path: Path, case: str, annotation: str | None, setting: str, want: str | None
) -> None:
    # Go: TestGenerateBasePodSpec_DiscoverBackend (component annotations = service annotations).
    # The admission webhook does not validate this annotation (dynamo-runtime.md 7.1); an
    # empty value means "use the operator default".
    svc: Obj = {}  # the Go component has no componentType
    if annotation is not None:
        svc["annotations"] = {A_DISCOVERY_BACKEND: annotation}
    doc = dgd("test-deployment", {"svc": svc}, backendFramework="sglang")
    e = env(main(deployments(render(tmp_path, doc, discovery_backend=setting))["svc"]))
    if want is None:
        assert "DYN_DISCOVERY_BACKEND" not in e
    else:
        assert e["DYN_DISCOVERY_BACKEND"] == want


@pytest.mark.parametrize(
    ("case", "backend", "mount", "want_path"),
    [
        ("useAsCompilationCache with custom mount point", "vllm", "/custom/cache", "/custom/cache"),
        (
            "useAsCompilationCache with default mount point for VLLM",
            "vllm",
            None,
            "/root/.cache/vllm",
        ),
        (
            "useAsCompilationCache without mount point for SGLang - should error",
            "sglang",
            None,
            None,
        ),
        (
            "useAsCompilationCache with explicit mount point for SGLang - should work",
            "sglang",
            "/custom/sglang/cache",
            "/custom/sglang/cache",
        ),
        (
            "useAsCompilationCache without mount point for TensorRT-LLM - should error",
            "trtllm",
            None,
            None,
        ),
        (
            "useAsCompilationCache with explicit mount point for TensorRT-LLM - should work",
            "trtllm",
            "/custom/trtllm/cache",
            "/custom/trtllm/cache",
        ),
    ],
)
def test_generate_base_pod_spec_compilation_cache(
    tmp_path: Path, case: str, backend: str, mount: str | None, want_path: str | None
) -> None:
    # Go: TestGenerateBasePodSpec_UseAsCompilationCache_BackendSupport. The Go test passes the
    # backend to GenerateBasePodSpec for a frontend; through a DGD only workers get a backend
    # (non-workers are always noop), so a worker carries the case here.
    vm: Obj = {"name": "cache-pvc", "useAsCompilationCache": True}
    if mount:
        vm["mountPoint"] = mount
    doc = dgd(
        "test-deployment",
        {"worker": {"componentType": "worker", "volumeMounts": [vm]}},
        backendFramework=backend,
    )
    if want_path is None:
        err = render_error(tmp_path, doc)
        assert any("volumeMounts[0]" in p.field for p in err.problems), str(err)
        return
    dep = deployments(render(tmp_path, doc))["worker"]
    assert {"name": "cache-pvc", "persistentVolumeClaim": {"claimName": "cache-pvc"}} in (
        pod(dep)["volumes"]
    )
    cache_mounts = [m for m in main(dep)["volumeMounts"] if m["name"] == "cache-pvc"]
    assert cache_mounts == [{"name": "cache-pvc", "mountPath": want_path}]  # exactly once
    if backend == "vllm":
        assert env(main(dep))["VLLM_CACHE_ROOT"] == want_path


@pytest.mark.parametrize(
    ("command", "args", "expected"),
    [
        (["/bin/sh", "-c"], ["python -m dynamo.vllm.worker --model test"], "vllm"),
        (["/bin/sh", "-c"], ["python -m dynamo.sglang --model test"], "sglang"),
        (["/bin/sh", "-c"], ["python -m dynamo.trtllm.worker --model test"], "trtllm"),
        ([], ["echo start && python -m dynamo.vllm.worker --model test | tee /tmp/log"], "vllm"),
        ([], ["python3.11 -m dynamo.sglang"], "sglang"),
        (["/bin/sh", "-c"], ["echo hello world"], None),
    ],
)
def test_detect_backend_framework_from_args(
    command: list[str], args: list[str], expected: str | None
) -> None:
    # Go: TestDetectBackendFrameworkFromArgs (None = BackendFrameworkNoop)
    assert detect_backend({"command": command, "args": args}) == expected


def test_detect_backend_framework_from_args_multiple(tmp_path: Path) -> None:
    # Go: TestDetectBackendFrameworkFromArgs "multiple backends detected" (an error)
    doc = dgd(
        "test-dgd",
        {
            "worker": {
                "componentType": "worker",
                "extraPodSpec": {
                    "mainContainer": {
                        "args": ["python -m dynamo.vllm.worker && python -m dynamo.sglang"]
                    }
                },
            }
        },
    )
    render_error(tmp_path, doc)


@pytest.mark.parametrize(
    ("case", "args", "explicit", "expected"),
    [
        ("worker with VLLM detection", ["python -m dynamo.vllm.worker --model test"], None, "vllm"),
        ("worker with explicit framework only", None, "sglang", "sglang"),
        ("worker with detected matching explicit", ["python -m dynamo.sglang"], "sglang", "sglang"),
        ("worker with no detection, no explicit - returns noop", None, None, "noop"),
        (
            "worker with detection failure, no explicit - returns noop",
            ["echo hello world"],
            None,
            "noop",
        ),
    ],
)
def test_determine_backend_framework(
    case: str, args: list[str] | None, explicit: str | None, expected: str
) -> None:
    # Go: TestDetermineBackendFramework / TestGetBackendFrameworkFromComponent
    svc: Obj = {"componentType": "worker"}
    if args is not None:
        svc["extraPodSpec"] = {"mainContainer": {"args": args}}
    spec: Obj = {"backendFramework": explicit} if explicit else {}
    doc = dgd("test-dgd", {"worker": svc}, **spec)
    _, per_service = resolve_backends(form_of(doc))
    assert per_service["worker"] == expected


def test_determine_backend_framework_mismatch(tmp_path: Path) -> None:
    # Go: TestDetermineBackendFramework "worker with detected conflicting explicit"
    doc = dgd(
        "test-dgd",
        {
            "worker": {
                "componentType": "worker",
                "extraPodSpec": {"mainContainer": {"args": ["python -m dynamo.vllm.worker"]}},
            }
        },
        backendFramework="sglang",
    )
    err = render_error(tmp_path, doc)
    assert any("sglang" in p.message and "vllm" in p.message for p in err.problems), str(err)


@pytest.mark.parametrize(
    ("case", "backend", "args", "contains", "not_contains"),
    [
        (
            "SGLang single node worker",
            "sglang",
            ["python3 -m dynamo.sglang"],
            ["python3", "-m", "dynamo.sglang"],
            ["dist-init-addr", "nnodes", "tp-size"],
        ),
        (
            "VLLM single node worker",
            "vllm",
            ["python3", "-m", "dynamo.vllm"],
            ["python3", "-m", "dynamo.vllm"],
            ["ray start"],
        ),
        (
            "VLLM worker single node",
            "vllm",
            ["python3", "-m", "dynamo.vllm", "--disaggregation-mode", "prefill"],
            ["python3", "-m", "dynamo.vllm", "--disaggregation-mode", "prefill"],
            ["ray start"],
        ),
    ],
)
def test_generate_pod_spec_for_component_single_node(
    tmp_path: Path,
    case: str,
    backend: str,
    args: list[str],
    contains: list[str],
    not_contains: list[str],
) -> None:
    # Go: TestGeneratePodSpecForComponent_SGLang / _VLLM (the RoleMain, 1-node cases)
    doc = dgd(
        "test-deployment",
        {"worker": {"componentType": "worker", "extraPodSpec": {"mainContainer": {"args": args}}}},
        backendFramework=backend,
    )
    c = main(deployments(render(tmp_path, doc))["worker"])
    line = " ".join([*c.get("command", []), *c.get("args", [])])
    assert c["args"] == args  # single node: no flag injection
    for s in contains:
        assert s in line
    for s in not_contains:
        assert s not in line


def test_generate_pod_spec_for_component_user_command_override(tmp_path: Path) -> None:
    # Go: TestGeneratePodSpecForComponent_SGLang "SGLang with user command override"
    doc = dgd(
        "test-deployment",
        {
            "worker": {
                "componentType": "worker",
                "extraPodSpec": {"mainContainer": {"command": ["custom", "command"]}},
            }
        },
        backendFramework="sglang",
    )
    c = main(deployments(render(tmp_path, doc))["worker"])
    assert c["command"] == ["custom", "command"]
    assert "args" not in c


def test_generate_pod_spec_for_component_unsupported_backend(tmp_path: Path) -> None:
    # Go: TestGeneratePodSpecForComponent_UnsupportedBackend "unknown backend" (the CRD
    # already limits backendFramework to sglang/vllm/trtllm)
    doc = dgd(
        "test-deployment", {"worker": {"componentType": "worker"}}, backendFramework="unknown"
    )
    err = render_error(tmp_path, doc)
    assert any(p.field == "spec.backendFramework" for p in err.problems), str(err)
