"""vLLM elastic expert parallelism on a single pod: a Ray head before the engine, the pod IP
from the downward API, the admission rule that asks for an explicit command, and (Grove
path) the headless leader Service.

Upstream sources: #12943 865afbb14 (``internal/dynamo/backend_vllm.go``
``injectElasticEPRayLaunchFlags`` / ``IsElasticEPRayLaunch``, ``utils.go``
``shellQuotePOSIX``, ``webhook/validation/shared_helpers.go``
``validateElasticEPRequiresCommand``) and #13178 7d2c1483e (``internal/dynamo/graph.go``
``ElasticEPLeaderServiceName`` / ``GenerateElasticEPHeadlessService``,
``controller/dgd_grove_stable_resources_reconciler.go`` ``isSinglePodElasticEPLeader``),
all as of 2a6da14c8; the expected strings are those of ``backend_vllm_test.go`` and
``elastic_ep_service_test.go`` at that commit.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from support.rendering import AS_APPLIED, renderer

from dyn_gitops import naming
from dyn_gitops.errors import RenderError
from dyn_gitops.expand import elastic_ep

Obj = dict[str, Any]

HEAD = (
    'ray start --head --port=6379 --node-ip-address="$POD_IP" --block & i=0; until python3 '
    "-c \"import socket; s=socket.create_connection(('127.0.0.1',6379),timeout=1); "
    's.close()" 2>/dev/null; do i=$((i+1)); [ "$i" -ge 150 ] && { echo "ERROR: Ray head '
    'did not start within 300s" >&2; exit 1; }; sleep 2; done && '
)
POD_IP = {"fieldRef": {"fieldPath": "status.podIP"}}


def dgd(main: Obj, *, backend: str | None = "vllm", replicas: int | None = None) -> Obj:
    worker: Obj = {
        "componentType": "worker",
        "resources": {"limits": {"gpu": "1"}},
        "extraPodSpec": {"mainContainer": {"image": "nvcr.io/dynamo:1.5.1", **main}},
    }
    if replicas is not None:
        worker["replicas"] = replicas
    spec: Obj = {"services": {"VllmWorker": worker}}
    if backend:
        spec["backendFramework"] = backend
    return {
        "apiVersion": "nvidia.com/v1alpha1",
        "kind": "DynamoGraphDeployment",
        "metadata": {"name": "ee", "namespace": "ns"},
        "spec": spec,
    }


render = renderer(**AS_APPLIED)


def worker_container(objs: list[Obj]) -> Obj:
    for o in objs:
        if o["kind"] == "Deployment" and o["metadata"]["name"].startswith("ee-vllmworker"):
            c: Obj = o["spec"]["template"]["spec"]["containers"][0]
            return c
        if o["kind"] == "PodCliqueSet":
            for clique in o["spec"]["template"]["cliques"]:
                if clique["name"] == "vllmworker":
                    c = clique["spec"]["podSpec"]["containers"][0]
                    return c
    raise AssertionError("no worker container")


RAY_ARGS = ["--model", "test", "--data-parallel-backend", "ray", "--enable-elastic-ep"]
COMMAND = ["python3", "-m", "dynamo.vllm"]


@pytest.mark.parametrize(
    "args",
    [
        RAY_ARGS,
        ["--model", "test", "--data-parallel-backend=ray", "--enable-elastic-ep"],
        ["--model", "test", "-dpb", "ray", "--enable-elastic-ep"],
        ["--model", "test", "-dpb=ray", "--enable-elastic-ep"],
    ],
)
def test_single_pod_starts_a_ray_head_and_execs_the_engine(tmp_path: Path, args: list[str]) -> None:
    """backend_vllm.go UpdateContainer (RoleMain) @ 2a6da14c8, #12943: every spelling of
    the Ray DP backend; the engine is exec'd after a bounded wait for the head's port."""
    c = worker_container(render(tmp_path, dgd({"command": COMMAND, "args": args})))
    assert c["command"] == ["/bin/sh", "-c"]
    assert c["args"] == [HEAD + "exec python3 -m dynamo.vllm " + " ".join(args)]


def test_pod_ip_env_is_appended_after_the_merged_env(tmp_path: Path) -> None:
    """#12943: POD_IP and VLLM_DP_MASTER_IP from status.podIP, appended by the backend after
    the operator's and the user's env (before VLLM_CACHE_ROOT, which comes later)."""
    doc = dgd({"command": COMMAND, "args": RAY_ARGS})
    doc["spec"]["pvcs"] = [{"name": "cache"}]
    doc["spec"]["services"]["VllmWorker"]["volumeMounts"] = [
        {"name": "cache", "mountPoint": "/cache", "useAsCompilationCache": True}
    ]
    env = worker_container(render(tmp_path, doc))["env"]
    names = [e["name"] for e in env]
    assert names[-3:] == ["POD_IP", "VLLM_DP_MASTER_IP", "VLLM_CACHE_ROOT"]
    assert env[-3]["valueFrom"] == POD_IP and env[-2]["valueFrom"] == POD_IP


def test_arguments_are_posix_quoted(tmp_path: Path) -> None:
    """utils.go shellQuotePOSIX @ 2a6da14c8: safe tokens bare, others single-quoted with
    the '\\'' idiom, so every argv token survives sh -c."""
    args = [*RAY_ARGS, "--served-model-name", "it's a model", ""]
    c = worker_container(render(tmp_path, dgd({"command": COMMAND, "args": args})))
    tail = "--served-model-name 'it'\\''s a model' ''"
    assert c["args"][0].endswith("--enable-elastic-ep " + tail)


def test_elastic_flag_without_ray_backend_is_left_alone(tmp_path: Path) -> None:
    """IsElasticEPRayLaunch @ 2a6da14c8: --enable-elastic-ep on the default (mp) DP backend
    gets no Ray head and no pod-IP env."""
    args = ["--model", "test", "--data-parallel-backend", "mp", "--enable-elastic-ep"]
    c = worker_container(render(tmp_path, dgd({"command": COMMAND, "args": args})))
    assert c["command"] == COMMAND and c["args"] == args
    assert "POD_IP" not in {e["name"] for e in c["env"]}


def test_admission_requires_an_explicit_command(tmp_path: Path) -> None:
    """shared_helpers.go validateElasticEPRequiresCommand @ 2a6da14c8 (#12943): with
    backendFramework vllm and no main-container command, the DGD is refused."""
    doc = dgd({"args": ["python3 -m dynamo.vllm " + " ".join(RAY_ARGS)]})
    with pytest.raises(RenderError) as info:
        render(tmp_path, doc)
    text = "\n".join(str(p) for p in info.value.problems)
    assert "mainContainer.command" in text
    assert "requires an explicit container command" in text


def test_without_graph_backend_the_default_shell_command_is_wrapped(tmp_path: Path) -> None:
    """The rule reads spec.backendFramework only (#12943); the merged container then has
    the operator's /bin/sh -c, which the Ray head wraps (a detected vLLM worker)."""
    line = "python3 -m dynamo.vllm " + " ".join(RAY_ARGS)
    c = worker_container(render(tmp_path, dgd({"args": [line]}, backend=None)))
    assert c["args"] == [HEAD + "exec /bin/sh -c '" + line + "'"]


def test_component_path_has_no_leader_service(tmp_path: Path) -> None:
    """#13178: the headless leader Service is a Grove stable resource
    (dgd_grove_stable_resources_reconciler.go @ 2a6da14c8); the DCD path creates none."""
    objs = render(tmp_path, dgd({"command": COMMAND, "args": RAY_ARGS}))
    assert not [o for o in objs if o["metadata"]["name"].endswith("-ray")]


def test_grove_single_pod_leader_gets_a_headless_service(tmp_path: Path) -> None:
    """graph.go GenerateElasticEPHeadlessService @ 2a6da14c8 (#13178): headless, not-ready
    addresses published, the component selector, Ray GCS and system ports."""
    objs = render(tmp_path, dgd({"command": COMMAND, "args": RAY_ARGS}), grove=True)
    found = [
        o for o in objs if o["kind"] == "Service" and o["metadata"]["name"] == "ee-vllmworker-ray"
    ]
    assert len(found) == 1
    svc = found[0]
    assert svc["metadata"]["namespace"] == "ns"
    assert svc["spec"]["clusterIP"] == "None"
    assert svc["spec"]["publishNotReadyAddresses"] is True
    assert svc["spec"]["selector"] == {
        "nvidia.com/dynamo-component": "VllmWorker",
        "nvidia.com/dynamo-component-type": "worker",
        "nvidia.com/dynamo-namespace": "ns-ee",
    }
    assert svc["spec"]["ports"] == [
        {"name": "ray-gcs", "port": 6379, "targetPort": 6379, "protocol": "TCP"},
        {"name": "system", "port": 9090, "targetPort": "system", "protocol": "TCP"},
    ]
    c = worker_container(objs)
    assert c["args"][0].startswith(HEAD)


def test_grove_leader_service_only_for_one_replica(tmp_path: Path) -> None:
    """isSinglePodElasticEPLeader @ 2a6da14c8: with replicas > 1 every replica runs its own
    head, so one DNS name would span unrelated clusters: no Service (the Ray head stays)."""
    objs = render(tmp_path, dgd({"command": COMMAND, "args": RAY_ARGS}, replicas=2), grove=True)
    assert not [o for o in objs if o["metadata"]["name"].endswith("-ray")]
    assert worker_container(objs)["args"][0].startswith(HEAD)


def test_multinode_elastic_ep_is_refused(tmp_path: Path) -> None:
    """The multinode elastic-EP launch (updateVLLMMultinodeArgs @ 2a6da14c8) is not ported:
    a clear error instead of a single-pod Ray head on every node."""
    doc = dgd({"command": COMMAND, "args": RAY_ARGS})
    doc["spec"]["services"]["VllmWorker"]["multinode"] = {"nodeCount": 2}
    with pytest.raises(RenderError) as info:
        render(tmp_path, doc, lws=True)
    assert "on a multinode service is not yet supported" in str(info.value.problems[0])


@pytest.mark.parametrize(
    ("component", "want"),
    [
        ("my-dgd-worker", "my-dgd-worker-ray"),
        ("my-dgd-qwen3-0.6b", "my-dgd-qwen3-0-6b-ray"),
        ("a" * 59, "a" * 59 + "-ray"),
        (
            "a-very-long-dynamo-graph-deployment-name-with-a-long-component-name",
            "a-very-long-dynamo-graph-deployment-name-with-a-long-compo-502d",
        ),
    ],
)
def test_leader_service_name(component: str, want: str) -> None:
    """elastic_ep_service_test.go TestElasticEPLeaderServiceName @ 2a6da14c8 (#13178)."""
    assert naming.elastic_ep_leader_service(component) == want


def test_ray_launch_detection_scans_command_and_args() -> None:
    """IsElasticEPRayLaunch @ 2a6da14c8: flags found in command or args, joined or split."""
    assert elastic_ep.is_ray_launch({"command": [*COMMAND, *RAY_ARGS]})
    assert elastic_ep.is_ray_launch({"args": [" ".join(RAY_ARGS)]})
    assert not elastic_ep.is_ray_launch({"args": ["--enable-elastic-ep"]})
    assert not elastic_ep.is_ray_launch({"args": ["--data-parallel-backend", "ray"]})
