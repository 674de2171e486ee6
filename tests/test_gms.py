"""GPU Memory Service (GMS) and failover: the facts recorded in docs/reference-behaviour.md
("GPU Memory Service and failover"), read from the operator at the 1.1 baseline
(``zinuga/dynamo@62d17a12``: ``internal/dra/dra.go``, ``internal/gms/gms.go``,
``internal/dynamo/failover.go``, ``failover_vllm.go``, ``failover_test.go``,
``internal/webhook/validation/shared.go``)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
from support.hubforms import form_of
from support.rendering import renderer

from dyn_gitops.errors import RenderError

Obj = dict[str, Any]

IMAGE = "nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.1.0"
CLAIM = "intrapod-shared-gpu"
# ERRATA 2 / internal/gms/gms.go @ 2a6da14c8: the intra-pod control volume (the 1.1-era
# fork pin used gms-shared at /shared), and a server sidecar without a startup probe
SOCKET_ENV = {"name": "GMS_SOCKET_DIR", "value": "/gms-intrapod-control"}
SOCKET_MOUNT = {"name": "gms-intrapod-control", "mountPath": "/gms-intrapod-control"}
GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
DISCOVERY_MODE = "nvidia.com/dynamo-kube-discovery-mode"
GMS_SERVER = {
    "name": "gms-server",
    "image": IMAGE,
    "command": ["python3", "-m", "gpu_memory_service.cli.server"],
    "env": [SOCKET_ENV],
    "resources": {"claims": [{"name": CLAIM}]},
    "restartPolicy": "Always",
    "volumeMounts": [SOCKET_MOUNT],
}


def worker(
    gpu: str = "1", *, failover: bool = False, args: list[str] | None = None, **extra: Any
) -> Obj:
    svc: Obj = {
        "componentType": "worker",
        "replicas": 1,
        "resources": {"limits": {"gpu": gpu}, "requests": {"custom": {"ephemeral-storage": "2Gi"}}},
        "gpuMemoryService": {"enabled": True},
        "extraPodSpec": {
            "mainContainer": {
                "image": IMAGE,
                "command": ["python3", "-m", "dynamo.vllm"],
                "args": args
                if args is not None
                else ["--model", "Qwen/Qwen3-0.6B", "--load-format", "gms"],
            }
        },
    }
    if failover:
        svc["failover"] = {"enabled": True}
    svc.update(extra)
    return svc


def graph(
    services: dict[str, Obj],
    *,
    name: str = "gms",
    container_discovery: bool = False,
    api: str = "nvidia.com/v1alpha1",
) -> Obj:
    meta: Obj = {"name": name, "namespace": "demo"}
    if container_discovery:
        meta["annotations"] = {DISCOVERY_MODE: "container"}
    return {
        "apiVersion": api,
        "kind": "DynamoGraphDeployment",
        "metadata": meta,
        "spec": {"services": services},
    }


render = renderer()


def problems(tmp_path: Path, doc: Obj, **settings: Any) -> list[str]:
    """Every problem as ``field: message``."""
    with pytest.raises(RenderError) as info:
        render(tmp_path, doc, **settings)
    return [f"{p.field}: {p.message}" for p in info.value.problems]


def worker_pod(objs: list[Obj], service: str = "W") -> Obj:
    found = [
        o
        for o in objs
        if o["kind"] == "Deployment"
        and o["metadata"]["labels"]["nvidia.com/dynamo-component"] == service
    ]
    assert len(found) == 1
    spec: Obj = found[0]["spec"]["template"]["spec"]
    return spec


def templates(objs: list[Obj]) -> list[Obj]:
    return [o for o in objs if o["kind"] == "ResourceClaimTemplate"]


def env(c: Obj) -> dict[str, Any]:
    names = [e["name"] for e in c.get("env") or []]
    assert len(names) == len(set(names)), f"duplicate env: {names}"
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in c.get("env") or []}


# --------------------------------------------------------------------------- GMS rewrite
def test_gms_replaces_the_gpu_with_a_shared_claim_and_adds_the_server_sidecar(
    tmp_path: Path,
) -> None:
    objs = render(tmp_path, graph({"W": worker("2")}), dra=True)
    pod = worker_pod(objs)
    main = pod["containers"][0]
    assert [c["name"] for c in pod["containers"]] == ["main"]
    # dra.ApplyClaim: nvidia.com/gpu gone (the emptied limits disappear), claim added
    assert main["resources"] == {
        "requests": {"ephemeral-storage": "2Gi"},
        "claims": [{"name": CLAIM}],
    }
    assert pod["tolerations"] == [GPU_TOLERATION]
    assert pod["resourceClaims"] == [{"name": CLAIM, "resourceClaimTemplateName": "gms-w-gpu"}]
    # gms.EnsureServerSidecar: socket volume, mount and env (appended), native sidecar
    assert pod["volumes"][-1] == {"name": "gms-intrapod-control", "emptyDir": {}}
    assert main["volumeMounts"][-1] == SOCKET_MOUNT
    assert main["env"][-1] == SOCKET_ENV
    assert pod["initContainers"] == [GMS_SERVER]
    # unchanged by GMS: ports, probes, the system env
    assert [p["name"] for p in main["ports"]] == ["system", "nixl"]
    assert main["livenessProbe"]["httpGet"]["port"] == "system"
    assert env(main)["DYN_SYSTEM_PORT"] == "9090"


def test_resource_claim_template_shape(tmp_path: Path) -> None:
    objs = render(tmp_path, graph({"W": worker("2")}), dra=True)
    assert templates(objs) == [
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaimTemplate",
            "metadata": {
                "name": "gms-w-gpu",
                "namespace": "demo",
                "annotations": {
                    "dyn-gitops.io/renderer-version": templates(objs)[0]["metadata"]["annotations"][
                        "dyn-gitops.io/renderer-version"
                    ],
                    "dyn-gitops.io/source-dgd": "demo/gms",
                    "dyn-gitops.io/source-path": "dgd.yaml",
                },
            },
            # Go's empty template ObjectMeta (dra.GenerateResourceClaimTemplate @ 2a6da14c8)
            "spec": {
                "metadata": {},
                "spec": {
                    "devices": {
                        "requests": [
                            {
                                "name": "gpus",
                                "exactly": {
                                    "deviceClassName": "gpu.nvidia.com",
                                    "allocationMode": "ExactCount",
                                    "count": 2,
                                },
                            }
                        ]
                    }
                },
            },
        }
    ]


def test_claim_template_name_device_class_and_requests_gpu(tmp_path: Path) -> None:
    """Name lower-cases the service key; deviceClassName comes from gpuMemoryService;
    without limits.gpu the count is requests.gpu (webhook and ExtractGPUParams)."""
    svc = worker(gpuMemoryService={"enabled": True, "deviceClassName": "gpu.example.com"})
    svc["resources"] = {"requests": {"gpu": "4"}}
    objs = render(tmp_path, graph({"VllmWorker": svc}), dra=True)
    (rct,) = templates(objs)
    assert rct["metadata"]["name"] == "gms-vllmworker-gpu"
    assert rct["spec"]["spec"]["devices"]["requests"][0]["exactly"] == {
        "deviceClassName": "gpu.example.com",
        "allocationMode": "ExactCount",
        "count": 4,
    }
    pod = worker_pod(objs, "VllmWorker")
    assert pod["resourceClaims"][0]["resourceClaimTemplateName"] == "gms-vllmworker-gpu"
    assert pod["containers"][0]["resources"] == {"claims": [{"name": CLAIM}]}


def test_only_gms_services_get_a_template(tmp_path: Path) -> None:
    plain = copy.deepcopy(worker())
    del plain["gpuMemoryService"]
    objs = render(
        tmp_path,
        graph(
            {
                "W": worker(),
                "Plain": plain,
                "Frontend": {
                    "componentType": "frontend",
                    "extraPodSpec": {"mainContainer": {"image": IMAGE}},
                },
            }
        ),
        dra=True,
    )
    assert [t["metadata"]["name"] for t in templates(objs)] == ["gms-w-gpu"]
    plain_pod = worker_pod(objs, "Plain")
    assert plain_pod["containers"][0]["resources"]["limits"] == {"nvidia.com/gpu": "1"}
    assert "resourceClaims" not in plain_pod and "initContainers" not in plain_pod
    # DRA on but no GMS anywhere: no template at all
    assert templates(render(tmp_path, graph({"Plain": plain}), dra=True)) == []


def test_user_pod_fields_come_first(tmp_path: Path) -> None:
    """The operator appends: user tolerations, claims and init containers stay first."""
    svc = worker()
    svc["extraPodSpec"].update(
        {
            "tolerations": [{"key": "dedicated", "operator": "Exists"}],
            "initContainers": [{"name": "warmup", "image": IMAGE}],
            "resourceClaims": [{"name": "nic", "resourceClaimTemplateName": "rdma"}],
        }
    )
    pod = worker_pod(render(tmp_path, graph({"W": svc}), dra=True))
    assert pod["tolerations"] == [{"key": "dedicated", "operator": "Exists"}, GPU_TOLERATION]
    assert [c["name"] for c in pod["initContainers"]] == ["warmup", "gms-server"]
    assert [c["name"] for c in pod["resourceClaims"]] == ["nic", CLAIM]


def test_existing_shared_claim_skips_apply_claim(tmp_path: Path) -> None:
    """ApplyClaim is idempotent on the pod claim name: nothing of it is applied again
    (the GPU limit stays), but the GMS server sidecar is still added."""
    svc = worker()
    svc["extraPodSpec"]["resourceClaims"] = [{"name": CLAIM, "resourceClaimTemplateName": "mine"}]
    pod = worker_pod(render(tmp_path, graph({"W": svc}), dra=True))
    assert pod["resourceClaims"] == [{"name": CLAIM, "resourceClaimTemplateName": "mine"}]
    assert "tolerations" not in pod
    assert pod["containers"][0]["resources"]["limits"] == {"nvidia.com/gpu": "1"}
    assert pod["initContainers"] == [GMS_SERVER]


def beta_gms_graph(args: list[str] | None = None) -> Obj:
    """A v1beta1 DGD of one vLLM worker with GMS whose only GPUs (2) are container
    ``main``'s limit."""
    main: Obj = {"name": "main", "image": IMAGE, "command": ["python3", "-m", "dynamo.vllm"]}
    if args is not None:
        main["args"] = args
    main["resources"] = {"limits": {"nvidia.com/gpu": "2"}}
    component = {
        "name": "W",
        "type": "worker",
        "replicas": 1,
        "experimental": {"gpuMemoryService": {}},
        "podTemplate": {"spec": {"containers": [main]}},
    }
    return {
        "apiVersion": "nvidia.com/v1beta1",
        "kind": "DynamoGraphDeployment",
        "metadata": {"name": "gms", "namespace": "demo"},
        "spec": {"components": [component]},
    }


def test_v1beta1_experimental_gms_renders_like_v1alpha1(tmp_path: Path) -> None:
    beta = beta_gms_graph(["--model", "Qwen/Qwen3-0.6B", "--load-format", "gms"])
    objs = render(tmp_path, beta, dra=True, emit_source=False)
    (rct,) = templates(objs)
    assert rct["spec"]["spec"]["devices"]["requests"][0]["exactly"]["count"] == 2
    assert worker_pod(objs)["initContainers"][0]["name"] == "gms-server"


# ------------------------------------------------------------------------------ failover
def test_failover_clones_main_into_two_engines(tmp_path: Path) -> None:
    svc = worker("2", failover=True)
    svc["extraPodSpec"]["containers"] = [{"name": "sidecar", "image": IMAGE}]
    objs = render(tmp_path, graph({"W": svc}, container_discovery=True), dra=True)
    pod = worker_pod(objs)
    assert [c["name"] for c in pod["containers"]] == ["engine-0", "engine-1", "sidecar"]
    assert pod["initContainers"] == [GMS_SERVER]
    for i in (0, 1):
        engine = pod["containers"][i]
        e = env(engine)
        assert engine["ports"] == [
            {"name": f"system-{i}", "containerPort": 9090 + i, "protocol": "TCP"}
        ]
        for probe in ("livenessProbe", "readinessProbe", "startupProbe"):
            assert engine[probe]["httpGet"]["port"] == f"system-{i}"
        assert e["ENGINE_ID"] == str(i)
        assert e["CONTAINER_NAME"] == f"engine-{i}"
        assert e["FAILOVER_LOCK_PATH"] == "/gms-intrapod-control/failover.lock"
        assert e["DYN_SYSTEM_STARTING_HEALTH_STATUS"] == "notready"
        assert e["DYN_SYSTEM_PORT"] == str(9090 + i)
        assert e["DYN_SYSTEM_ENABLED"] == "true"
        assert e["DYN_VLLM_GMS_SHADOW_MODE"] == "true"
        assert e["VLLM_NIXL_SIDE_CHANNEL_PORT"] == str(5600 + i)
        assert e["DYN_VLLM_KV_EVENT_PORT"] == str(20080 + i)
        assert e["GMS_SOCKET_DIR"] == "/gms-intrapod-control"
        assert e["DYN_KUBE_DISCOVERY_MODE"] == "container"
        assert "DYN_SYSTEM_USE_ENDPOINT_HEALTH_STATUS" not in e
        assert "DYN_HEALTH_CHECK_ENABLED" not in e
        assert "NNODES" not in e
        assert engine["resources"]["claims"] == [{"name": CLAIM}]
        assert SOCKET_MOUNT in engine["volumeMounts"]
        # failover env is appended after the main container's (sorted) env, in this order
        # (failover.go @ 2a6da14c8: each engine's own DYN_FORWARDPASS_METRIC_PORT last)
        assert [x["name"] for x in engine["env"]][-11:] == [
            "GMS_SOCKET_DIR",
            "ENGINE_ID",
            "CONTAINER_NAME",
            "FAILOVER_LOCK_PATH",
            "DYN_SYSTEM_STARTING_HEALTH_STATUS",
            "DYN_SYSTEM_PORT",
            "DYN_SYSTEM_ENABLED",
            "DYN_FORWARDPASS_METRIC_PORT",
            "DYN_VLLM_GMS_SHADOW_MODE",
            "VLLM_NIXL_SIDE_CHANNEL_PORT",
            "DYN_VLLM_KV_EVENT_PORT",
        ]
    # engine-1 gets its own torch.distributed store: --master-port 29500 + 100
    assert pod["containers"][0]["args"] == ["--model", "Qwen/Qwen3-0.6B", "--load-format", "gms"]
    assert pod["containers"][1]["args"][-2:] == ["--master-port", "29600"]
    assert pod["containers"][2] == {"name": "sidecar", "image": IMAGE}


@pytest.mark.parametrize(
    ("args", "engine1_args"),
    [
        (["--master-port", "29700"], ["--master-port", "29800"]),
        (["--model m --master-port 29700 --x"], ["--model m --master-port 29800 --x"]),
    ],
)
def test_failover_staggers_an_existing_master_port(
    tmp_path: Path, args: list[str], engine1_args: list[str]
) -> None:
    pod = worker_pod(
        render(
            tmp_path,
            graph({"W": worker(failover=True, args=args)}, container_discovery=True),
            dra=True,
        )
    )
    assert pod["containers"][0]["args"] == args
    assert pod["containers"][1]["args"] == engine1_args


def test_failover_is_in_the_worker_hash(tmp_path: Path) -> None:
    def name(doc: Obj) -> str:
        (dep,) = [o for o in render(tmp_path, doc, dra=True) if o["kind"] == "Deployment"]
        return str(dep["metadata"]["name"])

    assert name(graph({"W": worker()}, container_discovery=True)) != name(
        graph({"W": worker(failover=True)}, container_discovery=True)
    )


# -------------------------------------------------------------------------------- errors
def test_gms_without_dra_is_an_error(tmp_path: Path) -> None:
    found = problems(tmp_path, graph({"W": worker()}))
    assert len(found) == 1
    assert found[0].startswith("spec.services.W.gpuMemoryService: ")
    assert "set the setting dra to true" in found[0]


@pytest.mark.parametrize(
    ("svc", "annotate", "field", "words"),
    [
        # webhook (validation/shared.go): GMS only on workers, with GPUs, intraPod
        ({**worker(), "componentType": "frontend"}, False, "gpuMemoryService", "only for worker"),
        (
            {**worker(), "resources": {"limits": {"cpu": "1"}}},
            False,
            "gpuMemoryService",
            "GPU count >= 1",
        ),
        ({**worker("0")}, False, "gpuMemoryService", "GPU count >= 1"),
        (
            {**worker(), "gpuMemoryService": {"enabled": True, "mode": "interPod"}},
            False,
            "gpuMemoryService.mode",
            "interPod",
        ),
        # failover needs GMS, matching modes, and (DGD) per-container discovery
        (
            {**worker(), "gpuMemoryService": {"enabled": False}, "failover": {"enabled": True}},
            True,
            "failover",
            "requires gpuMemoryService",
        ),
        (
            {**worker(failover=True), "failover": {"enabled": True, "mode": "interPod"}},
            True,
            "failover.mode",
            "must match",
        ),
        (worker(failover=True), False, "metadata.annotations", DISCOVERY_MODE),
        # buildFailoverPod: vLLM only
        (
            {
                **worker(failover=True),
                "extraPodSpec": {
                    "mainContainer": {"image": IMAGE, "command": ["python3", "-m", "dynamo.sglang"]}
                },
            },
            True,
            "failover",
            "only for vLLM",
        ),
        # intra-pod failover on a LeaderWorkerSet: checkMainContainer refuses the templates
        # (GMS alone on a multinode service renders: tests/test_gms_multinode.py)
        (
            {**worker(failover=True), "multinode": {"nodeCount": 2}},
            True,
            "failover",
            "setting grove true",
        ),
    ],
)
def test_refused_combinations(
    tmp_path: Path, svc: Obj, annotate: bool, field: str, words: str
) -> None:
    found = problems(tmp_path, graph({"W": svc}, container_discovery=annotate), dra=True, lws=True)
    path = field if field.startswith("metadata") else f"spec.services.W.{field}"
    assert any(f.startswith(f"{path}: ") and words in f for f in found), found


# ------------------------------------------------------- the GPU count (1.5 operator, v1beta1)
# The 1.5-line DGD controller counts a GMS component's GPUs on its v1beta1 form:
# reconcileGMSResourceClaimTemplates takes dra.ExtractGPUCountFromResourceRequirements(
# dynamo.GetMainContainerResources(component)) (deploy/operator/internal/controller/
# dynamographdeployment_controller.go, upstream main 00964723, read through the fork
# wxsms/dynamo); that function takes the first GPU resource name (sorted) of limits, else of
# requests, and refuses a fraction (internal/dra/dra.go, walkoss/dynamo@3d3d5e5e). The admission
# webhook reads the same (validateGPUMemoryServiceSpec: "requires
# podTemplate.spec.containers[main].resources.limits.nvidia.com/gpu >= 1").


def _main_gpu_worker(limits: Obj) -> Obj:
    svc = worker("1")
    svc["extraPodSpec"]["mainContainer"]["resources"] = {"limits": limits}
    return svc


def test_gpu_count_is_container_mains_where_mainContainer_sets_it(tmp_path: Path) -> None:
    """Parity fix: a v1alpha1 ``mainContainer.resources`` GPU is merged over
    ``resources.limits.gpu`` into container ``main`` by the conversion, and the 1.5 operator
    counts that (before: ``resources.limits.gpu`` alone, the 1.1 ``ExtractGPUParams``)."""
    alpha = graph({"W": _main_gpu_worker({"nvidia.com/gpu": "2"})})
    (rct,) = templates(render(tmp_path, alpha, dra=True))
    assert rct["spec"]["spec"]["devices"]["requests"][0]["exactly"]["count"] == 2
    # the v1beta1 twin: only container main says it
    beta = beta_gms_graph()
    (beta_rct,) = templates(render(tmp_path, beta, dra=True, emit_source=False))
    assert beta_rct["spec"]["spec"]["devices"]["requests"][0]["exactly"]["count"] == 2


@pytest.mark.parametrize(
    ("resources", "count"),
    [
        ({"limits": {"nvidia.com/gpu": "2"}}, 2),
        ({"limits": {"cpu": "1"}, "requests": {"nvidia.com/gpu": "3"}}, 3),  # limits, else requests
        ({"limits": {"nvidia.com/mig-1g.10gb": "1", "nvidia.com/gpu": "4"}}, 4),  # sorted first
        ({"limits": {"nvidia.com/mig-3g.20gb": "1"}}, 1),  # a MIG shape is a GPU name
        ({"limits": {"example.com/gpu": "2000m"}}, 2),  # */gpu, a whole quantity
        ({"limits": {"nvidia.com/gpu": "1500m"}}, 0),  # a fraction: the operator's error
        ({"limits": {"cpu": "1"}}, 0),
        ({}, 0),
    ],
)
def test_gpu_count_reads_the_v1beta1_container_main(resources: Obj, count: int) -> None:
    from dyn_gitops.expand import gms
    from dyn_gitops.models import v1beta1

    component = v1beta1.Component.model_validate(
        {
            "name": "W",
            "type": "worker",
            "experimental": {"gpuMemoryService": {}},
            "podTemplate": {"spec": {"containers": [{"name": "main", "resources": resources}]}},
        }
    )
    assert gms.gpu_count(component) == count
    assert (gms.resource_claim_template("g", "ns", component) is not None) == (count > 0)
    # the admission rule counts with the same function (dyn_gitops.gpus.count): it refuses
    # exactly the components the rendering could make no claim for
    from dyn_gitops import rules

    graph = form_of(
        {
            "apiVersion": v1beta1.API_VERSION,
            "kind": "DynamoGraphDeployment",
            "metadata": {"name": "g"},
            "spec": {"components": [component.model_dump(exclude_unset=True)]},
        }
    )
    refused = [p for p in rules.validate_graph(graph) if "GPU count" in p.message]
    assert bool(refused) == (count < 1)
