"""The Grove path (setting grove): one PodCliqueSet per DGD, cliques and scaling groups,
Grove addressing for multinode services, the name-length rule, and the Services and
Ingresses the DGD controller creates on that path.

Go tests ported (``spec/dynamo-pod-spec.md`` section 10): TestGenerateGrovePodCliqueSet
(single node, multinode sglang, multinode vllm), TestGetCliqueStartupDependencies /
TestGenerateGrovePodCliqueSet_StartsAfterDependencies, ..._ComponentMinAvailable,
..._SingleNodeForceScalingGroup, the PCSNameForDGD table test and
TestGenerateBasePodSpec_TRTLLMSSHMountUsesSecretVolume (Grove form).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from support.rendering import AS_APPLIED, renderer

from dyn_gitops import keys, naming
from dyn_gitops.errors import RenderError

Obj = dict[str, Any]
LEADER_HOST = "$(GROVE_PCSG_NAME)-$(GROVE_PCSG_INDEX)-worker-ldr-0.$(GROVE_HEADLESS_SERVICE)"
NODE_RANK = "$((GROVE_PCLQ_POD_INDEX + 1))"


def dgd(
    name: str,
    services: dict[str, Obj],
    *,
    namespace: str = "test-namespace",
    annotations: dict[str, str] | None = None,
    api: str = "nvidia.com/v1alpha1",
    **spec: Any,
) -> Obj:
    meta: Obj = {"name": name, "namespace": namespace}
    if annotations:
        meta["annotations"] = annotations
    return {
        "apiVersion": api,
        "kind": "DynamoGraphDeployment",
        "metadata": meta,
        "spec": {**spec, "services": services},
    }


render = renderer(grove=True, **AS_APPLIED)  # no webhooks


def render_error(tmp_path: Path, doc: Obj, **settings: Any) -> str:
    with pytest.raises(RenderError) as info:
        render(tmp_path, doc, **settings)
    return "\n".join(str(p) for p in info.value.problems)


def pcs(objs: list[Obj]) -> Obj:
    found = [o for o in objs if o["kind"] == "PodCliqueSet"]
    assert len(found) == 1, [o["kind"] for o in objs]
    return found[0]


def cliques(objs: list[Obj]) -> dict[str, Obj]:
    return {c["name"]: c for c in pcs(objs)["spec"]["template"]["cliques"]}


def main(clique: Obj) -> Obj:
    c: Obj = clique["spec"]["podSpec"]["containers"][0]
    assert c["name"] == "main"
    return c


def env(container: Obj) -> dict[str, Any]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container.get("env") or []}


def worker(
    nodes: int,
    command: list[str],
    args: list[str],
    gpus: str = "2",
    replicas: int = 1,
    **extra: Any,
) -> Obj:
    return {
        "componentType": "worker",
        "replicas": replicas,
        "multinode": {"nodeCount": nodes},
        "resources": {"limits": {"gpu": gpus}},
        "extraPodSpec": {
            "mainContainer": {"image": "worker-image", "command": command, "args": args}
        },
        **extra,
    }


FRONTEND = {
    "componentType": "frontend",
    "replicas": 1,
    "extraPodSpec": {"mainContainer": {"image": "frontend-image"}},
}


# ------------------------------------------------------- TestGenerateGrovePodCliqueSet
def _single_node_graph() -> Obj:
    return dgd(
        "test-dynamo-graph-deployment",
        {
            "Frontend": {
                "componentType": "frontend",
                "subComponentType": "test-sub-component",
                "extraPodMetadata": {
                    "annotations": {"nvidia.com/annotation1": "annotation1"},
                    "labels": {"nvidia.com/label1": "label1"},
                },
                "replicas": 1,
                "livenessProbe": {"httpGet": {"path": "/health", "port": 8080}},
                "extraPodSpec": {
                    "terminationGracePeriodSeconds": 10,
                    "imagePullSecrets": [{"name": "frontend-secret"}],
                    "mainContainer": {"image": "frontend-image"},
                },
            },
            "Planner": {
                "componentType": "planner",
                "replicas": 2,
                "volumeMounts": [{"name": "dynamo-pvc", "mountPoint": "/planner"}],
                "extraPodSpec": {"mainContainer": {"image": "planner-image"}},
            },
        },
        envs=[{"name": "DYNAMO_POD_GANG_SET_REPLICAS", "value": "1"}],
    )


def test_single_node_pod_clique_set(tmp_path: Path) -> None:
    objs = render(tmp_path, _single_node_graph())
    p = pcs(objs)
    assert p["metadata"]["name"] == "test-dynamo-graph-deployment"
    assert p["spec"]["replicas"] == 1
    template = p["spec"]["template"]
    assert template["cliqueStartupType"] == "CliqueStartupTypeAnyOrder"
    assert template["headlessServiceConfig"] == {"publishNotReadyAddresses": True}
    assert template["terminationDelay"] == "15m0s"
    assert "podCliqueScalingGroups" not in template
    cl = cliques(objs)
    assert sorted(cl) == ["frontend", "planner"]
    fe, pl = cl["frontend"], cl["planner"]
    assert (fe["spec"]["roleName"], fe["spec"]["replicas"], fe["spec"]["minAvailable"]) == (
        "frontend",
        1,
        1,
    )
    assert (pl["spec"]["roleName"], pl["spec"]["replicas"], pl["spec"]["minAvailable"]) == (
        "planner",
        2,
        1,
    )
    # no DCDs, no Deployments on this path
    assert not [o for o in objs if o["kind"] in ("Deployment", "DynamoComponentDeployment")]

    labels = fe["labels"]
    assert labels[keys.LABEL_SELECTOR] == "test-dynamo-graph-deployment-frontend"
    assert labels[keys.LABEL_COMPONENT] == "Frontend"
    assert labels[keys.LABEL_COMPONENT_TYPE] == "frontend"
    assert labels[keys.LABEL_SUB_COMPONENT_TYPE] == "test-sub-component"
    assert labels[keys.LABEL_DYNAMO_NAMESPACE] == "test-namespace-test-dynamo-graph-deployment"
    assert labels[keys.LABEL_METRICS_ENABLED] == "true"
    assert labels["nvidia.com/label1"] == "label1"
    assert fe["annotations"] == {
        "nvidia.com/annotation1": "annotation1",
        keys.ANN_DISCOVERY_BACKEND: "kubernetes",
    }

    spec = fe["spec"]["podSpec"]
    assert spec["terminationGracePeriodSeconds"] == 10  # extraPodSpec wins
    assert spec["imagePullSecrets"] == [{"name": "frontend-secret"}]
    assert spec["securityContext"] == {"fsGroup": 1000}
    assert spec["serviceAccountName"] == "test-dynamo-graph-deployment-k8s-service-discovery"
    c = main(fe)
    assert c["livenessProbe"] == {"httpGet": {"path": "/health", "port": 8080}}
    assert c["readinessProbe"]["httpGet"]["path"] == "/health"  # default kept
    assert env(c)["DYNAMO_POD_GANG_SET_REPLICAS"] == "1"
    assert "DYN_NAMESPACE_WORKER_SUFFIX" not in env(c)

    pspec = pl["spec"]["podSpec"]
    assert pspec["serviceAccountName"] == naming.PLANNER_SERVICE_ACCOUNT
    assert {"name": "dynamo-pvc", "persistentVolumeClaim": {"claimName": "dynamo-pvc"}} in pspec[
        "volumes"
    ]
    assert {"name": "shared-memory", "emptyDir": {"medium": "Memory", "sizeLimit": "8Gi"}} in pspec[
        "volumes"
    ]
    assert main(pl)["startupProbe"]["failureThreshold"] == 720


def test_clique_pod_spec_is_the_component_path_pod_spec(tmp_path: Path) -> None:
    # one pod-spec builder for both paths: only the service account fallback differs, and
    # a clique's containers spell an empty resources as Go encodes it (the API server
    # gives a Deployment the same; dgd/grove golden output @ 2a6da14c8)
    graph = _single_node_graph()
    grove_objs = render(tmp_path, graph)
    comp = render(tmp_path, graph, grove=False)
    for service, clique in cliques(grove_objs).items():
        dep = next(
            o
            for o in comp
            if o["kind"] == "Deployment"
            and o["metadata"]["name"].startswith(f"test-dynamo-graph-deployment-{service}")
        )
        pod = dep["spec"]["template"]["spec"]
        go_encoded = {
            **pod,
            "containers": [{**c, "resources": c.get("resources") or {}} for c in pod["containers"]],
        }
        assert clique["spec"]["podSpec"] == go_encoded, service


def test_multinode_sglang(tmp_path: Path) -> None:
    # Go: TestGenerateGrovePodCliqueSet "multinode sglang"
    objs = render(
        tmp_path,
        dgd(
            "sglang",
            {
                "Frontend": FRONTEND,
                "worker": worker(
                    3,
                    ["python3", "-m", "dynamo.sglang"],
                    ["--custom-flag", "custom-value"],
                    replicas=5,
                ),
            },
        ),
    )
    cl = cliques(objs)
    assert sorted(cl) == ["frontend", "worker-ldr", "worker-wkr"]
    ldr, wkr = cl["worker-ldr"], cl["worker-wkr"]
    assert (ldr["spec"]["replicas"], ldr["spec"]["minAvailable"]) == (1, 1)
    assert (wkr["spec"]["replicas"], wkr["spec"]["minAvailable"]) == (2, 2)
    assert main(ldr)["command"] == ["python3", "-m", "dynamo.sglang"]
    assert main(ldr)["args"] == [
        "--custom-flag",
        "custom-value",
        "--dist-init-addr",
        f"{LEADER_HOST}:29500",
        "--nnodes",
        "3",
        "--node-rank",
        "0",
    ]
    # the worker's rank is shell arithmetic: the command is wrapped in sh -c
    assert main(wkr)["command"] == ["sh", "-c"]
    assert main(wkr)["args"] == [
        f"exec python3 -m dynamo.sglang --custom-flag custom-value --dist-init-addr "
        f"{LEADER_HOST}:29500 --nnodes 3 --node-rank {NODE_RANK}"
    ]
    assert {"livenessProbe", "readinessProbe", "startupProbe"} <= set(main(ldr))
    assert not {"livenessProbe", "readinessProbe", "startupProbe"} & set(main(wkr))
    groups = pcs(objs)["spec"]["template"]["podCliqueScalingGroups"]
    assert groups == [
        {
            "name": "worker",
            "cliqueNames": ["worker-ldr", "worker-wkr"],
            "replicas": 5,
            "minAvailable": 1,
        }
    ]
    assert pcs(objs)["spec"]["template"]["cliqueStartupType"] == "CliqueStartupTypeAnyOrder"
    # leader and worker cliques carry the same component labels: one Service selects both
    assert ldr["labels"] == wkr["labels"]
    assert ldr["labels"][keys.LABEL_SELECTOR] == "sglang-worker"


def test_multinode_vllm_ray(tmp_path: Path) -> None:
    # Go: TestGenerateGrovePodCliqueSet "multinode vllm": TP 4 > 2 GPUs, no origin
    # annotation -> Ray
    objs = render(
        tmp_path,
        dgd(
            "vllm",
            {
                "worker": worker(
                    2, ["python3"], ["-m", "dynamo.vllm", "--tensor-parallel-size", "4"]
                )
            },
        ),
    )
    cl = cliques(objs)
    assert main(cl["worker-ldr"])["command"] == ["/bin/sh", "-c"]
    assert main(cl["worker-ldr"])["args"] == [
        "ray start --head --port=6379 && python3 -m dynamo.vllm --tensor-parallel-size 4 "
        "--distributed-executor-backend ray"
    ]
    assert main(cl["worker-wkr"])["args"] == [f"ray start --address={LEADER_HOST}:6379 --block"]
    assert "initContainers" not in cl["worker-wkr"]["spec"]["podSpec"]


def test_multinode_vllm_mp_waits_for_the_grove_leader(tmp_path: Path) -> None:
    objs = render(
        tmp_path,
        dgd(
            "vllm",
            {
                "worker": worker(
                    2, ["python3", "-m", "dynamo.vllm"], ["--tensor-parallel-size", "4"]
                )
            },
            annotations={keys.ANN_VLLM_EXECUTOR_BACKEND: "mp"},
        ),
    )
    cl = cliques(objs)
    assert main(cl["worker-ldr"])["args"][-10:] == [
        "--distributed-executor-backend",
        "mp",
        "--nnodes",
        "2",
        "--master-addr",
        LEADER_HOST,
        "--master-port",
        "29500",
        "--node-rank",
        "0",
    ]
    wkr = cl["worker-wkr"]
    assert main(wkr)["command"] == ["sh", "-c"]
    assert main(wkr)["args"][0].endswith(f"--node-rank {NODE_RANK} --headless")
    init = wkr["spec"]["podSpec"]["initContainers"][0]
    assert init["name"] == "wait-for-leader-mp"
    # sh expands ${VAR}: kubelet only expands $(VAR) in command/args, not inside a string
    assert init["command"][:2] == ["sh", "-c"] and "args" not in init
    assert (
        'LEADER_HOST="${GROVE_PCSG_NAME}-${GROVE_PCSG_INDEX}-worker-ldr-0.'
        '${GROVE_HEADLESS_SERVICE}"'
    ) in init["command"][2]
    assert any(
        o["kind"] == "ConfigMap" and o["metadata"]["name"] == "vllm-wait-leader-script"
        for o in objs
    )


def test_multinode_trtllm_starts_leader_after_workers(tmp_path: Path) -> None:
    # Go: TestGetCliqueStartupDependencies / ..._StartsAfterDependencies and the SSH secret
    # volume (TestGenerateBasePodSpec_TRTLLMSSHMountUsesSecretVolume)
    objs = render(
        tmp_path,
        dgd(
            "trt",
            {
                "worker": worker(
                    3, ["python3", "-m", "dynamo.trtllm"], ["--model-path", "m"], gpus="4"
                )
            },
        ),
    )
    template = pcs(objs)["spec"]["template"]
    assert template["cliqueStartupType"] == "CliqueStartupTypeExplicit"
    cl = cliques(objs)
    assert cl["worker-ldr"]["spec"]["startsAfter"] == ["worker-wkr"]
    assert "startsAfter" not in cl["worker-wkr"]["spec"]
    args = main(cl["worker-ldr"])["args"][0]
    base = "$(GROVE_PCSG_NAME)-$(GROVE_PCSG_INDEX)-worker"
    assert (
        f"-n 12 -H {base}-ldr-0.$(GROVE_HEADLESS_SERVICE),"
        f"{base}-wkr-0.$(GROVE_HEADLESS_SERVICE),{base}-wkr-1.$(GROVE_HEADLESS_SERVICE) "
    ) in args
    assert "getent hosts" not in args  # Grove publishes not-ready addresses: no DNS wait
    for clique in cl.values():
        assert {
            "name": "mpi-run-ssh-secret",
            "secret": {"secretName": "mpi-run-ssh-secret", "defaultMode": 0o644},
        } in clique["spec"]["podSpec"]["volumes"]
        assert {"name": "mpi-run-ssh-secret", "mountPath": "/ssh-pk", "readOnly": True} in main(
            clique
        )["volumeMounts"]


@pytest.mark.parametrize("backend", ["vllm", "sglang"])
def test_multinode_vllm_and_sglang_have_no_startup_order(tmp_path: Path, backend: str) -> None:
    objs = render(
        tmp_path,
        dgd("g", {"worker": worker(2, ["python3", "-m", f"dynamo.{backend}"], ["--tp", "1"])}),
    )
    assert pcs(objs)["spec"]["template"]["cliqueStartupType"] == "CliqueStartupTypeAnyOrder"
    assert not any("startsAfter" in c["spec"] for c in cliques(objs).values())


def test_component_min_available(tmp_path: Path) -> None:
    """#10532 (5d3bb78df, v1.3.0): component minAvailable on Grove, defaulted to 1
    (buildCliqueForRole / buildGroveScalingGroupConfig in graph.go @ 2a6da14c8)."""
    # Go: TestGenerateGrovePodCliqueSet_ComponentMinAvailable
    objs = render(
        tmp_path,
        dgd(
            "g",
            {
                "Frontend": {**FRONTEND, "replicas": 4, "minAvailable": 2},
                "worker": worker(
                    3, ["python3", "-m", "dynamo.sglang"], ["--tp", "6"], replicas=3, minAvailable=2
                ),
            },
        ),
    )
    cl = cliques(objs)
    assert (cl["frontend"]["spec"]["replicas"], cl["frontend"]["spec"]["minAvailable"]) == (4, 2)
    # multinode cliques need every pod; the service's minAvailable goes to the group
    assert cl["worker-wkr"]["spec"]["minAvailable"] == 2 == cl["worker-wkr"]["spec"]["replicas"]
    group = pcs(objs)["spec"]["template"]["podCliqueScalingGroups"][0]
    assert (group["replicas"], group["minAvailable"]) == (3, 2)


def force_scaling_group_dgd(replicas: int, command: list[str]) -> Obj:
    """A v1beta1 DGD of one single-node worker forced into a Grove scaling group
    (``experimental.grove.forceScalingGroup`` exists in v1beta1 only)."""
    main = {"name": "main", "image": "img", "command": command}
    component = {
        "name": "Worker",
        "type": "worker",
        "replicas": replicas,
        "experimental": {"grove": {"forceScalingGroup": True}},
        "podTemplate": {"spec": {"containers": [main]}},
    }
    return {
        "apiVersion": "nvidia.com/v1beta1",
        "kind": "DynamoGraphDeployment",
        "metadata": {"name": "fsg", "namespace": "ns"},
        "spec": {"components": [component]},
    }


def test_single_node_force_scaling_group(tmp_path: Path) -> None:
    """#11772 (5c59b3e61, v1.5.0): experimental.grove.forceScalingGroup renders a
    single-node component as a PodCliqueScalingGroup (expandSingleNodeScalingGroupRoles in
    graph.go @ 2a6da14c8)."""
    # Go: TestGenerateGrovePodCliqueSet_SingleNodeForceScalingGroup (v1beta1 only)
    doc = force_scaling_group_dgd(3, ["python3", "-m", "dynamo.vllm"])
    objs = render(tmp_path, doc)
    cl = cliques(objs)
    assert (cl["worker"]["spec"]["replicas"], cl["worker"]["spec"]["minAvailable"]) == (1, 1)
    assert pcs(objs)["spec"]["template"]["podCliqueScalingGroups"] == [
        {"name": "worker", "cliqueNames": ["worker"], "replicas": 3, "minAvailable": 1}
    ]
    # off the Grove path it is refused, as the webhook does
    message = render_error(tmp_path, doc, grove=False)
    assert "spec.components[0].experimental.grove.forceScalingGroup" in message
    assert "only on the Grove path" in message


# ------------------------------------------------------------------------ PCSNameForDGD
@pytest.mark.parametrize(
    ("dgd_name", "budgets", "want"),
    [
        ("short", [len("frontend")], "short"),
        # the section-10 example: multinode prefill/decode leave 45 - (7 + 11) = 27 characters
        (
            "deepseek-v32-fp4-trtllm-dgd",
            [
                naming.grove_clique_budget("prefill", True),
                naming.grove_clique_budget("decode", True),
                naming.grove_clique_budget("Frontend", False),
            ],
            "deepseek-v32-fp4-trtllm-dgd",
        ),
        ("deepseek-v32-fp4-trtllm-dgd-x", [naming.grove_clique_budget("prefill", True)], None),
        ("a" * 60, [45], None),  # clamped to the 8-character minimum
    ],
)
def test_pcs_name_for_dgd(dgd_name: str, budgets: list[int], want: str | None) -> None:
    got = naming.pcs_name(dgd_name, budgets)
    if want is not None:
        assert got == want
        return
    budget = max(45 - max(budgets), 8)
    assert len(got) == budget
    assert got.startswith(dgd_name[: budget - 5] + "-")
    suffix = got.rsplit("-", 1)[1]
    assert len(suffix) == 4 and int(suffix, 16) >= 0
    assert got == naming.pcs_name(dgd_name, budgets)  # deterministic


def test_fnv1a_suffix_matches_go() -> None:
    # hash/fnv New32a over the bytes; FNV-1a test vectors
    assert naming._fnv1a32(b"") == 0x811C9DC5
    assert naming._fnv1a32(b"a") == 0xE40C292C
    assert naming._fnv1a32(b"foobar") == 0xBF9CF968


def test_long_dgd_name_gets_a_truncated_pcs(tmp_path: Path) -> None:
    """#8563 (cce641360, v1.2.0): PCSNameForDGD cuts a DGD name to the 45-character Grove
    budget plus an FNV suffix (graph.go @ 2a6da14c8)."""
    name = "a-very-long-dynamo-graph-deployment-name-x"  # 42 characters
    objs = render(
        tmp_path,
        dgd(name, {"decode": worker(2, ["python3", "-m", "dynamo.sglang"], ["--tp", "4"])}),
    )
    pcs_name = pcs(objs)["metadata"]["name"]
    assert len(pcs_name) == 45 - len("decode") - len("decode-ldr")
    assert pcs_name != name
    # everything else keeps the DGD name
    assert cliques(objs)["decode-ldr"]["labels"][keys.LABEL_GRAPH_NAME] == name


def test_service_name_too_long_for_grove_is_an_error(tmp_path: Path) -> None:
    long = "s" * 20  # 20 + 24 = 44 budget: only 8 characters would be left for the PCS
    doc = dgd("graph", {long: worker(2, ["python3", "-m", "dynamo.sglang"], ["--tp", "4"])})
    message = render_error(tmp_path, doc)
    assert f"spec.services.{long}" in message and "too long for Grove" in message
    # the annotation opts the DGD out of Grove and out of the check
    doc["metadata"]["annotations"] = {keys.ANN_ENABLE_GROVE: "false"}
    assert render(tmp_path, doc, lws=True)


# -------------------------------------------------------- objects around the cliques
def test_grove_services_and_ingress(tmp_path: Path) -> None:
    doc = dgd(
        "g.v1",
        {
            "Frontend": {**FRONTEND, "labels": {"team": "a"}, "annotations": {"note": "x"}},
            "worker": worker(2, ["python3", "-m", "dynamo.sglang"], ["--tp", "4"]),
        },
        labels={"org": "o"},
    )
    objs = render(tmp_path, doc, ingress_class="nginx")
    services = {o["metadata"]["name"]: o for o in objs if o["kind"] == "Service"}
    assert sorted(services) == ["g-v1-frontend", "g-v1-worker"]
    fe = services["g-v1-frontend"]
    # user labels + discovery labels and the user's annotations, no system labels
    assert fe["metadata"]["labels"] == {
        "org": "o",
        "team": "a",
        keys.LABEL_DISCOVERY_BACKEND: "kubernetes",
        keys.LABEL_DISCOVERY_ENABLED: "true",
    }
    assert user_annotations(fe) == {"note": "x"}
    assert fe["spec"]["selector"] == {
        keys.LABEL_COMPONENT: "Frontend",
        keys.LABEL_COMPONENT_TYPE: "frontend",
        keys.LABEL_DYNAMO_NAMESPACE: "test-namespace-g-v1",
    }
    # a multinode Service selects leader and workers alike (no role selector)
    assert "role" not in services["g-v1-worker"]["spec"]["selector"]
    ingress = next(o for o in objs if o["kind"] == "Ingress")
    # GenerateComponentIngress normalizes the name on every path (graph.go @ 2a6da14c8)
    assert ingress["metadata"]["name"] == "g-v1-frontend"
    backend = ingress["spec"]["rules"][0]["http"]["paths"][0]["backend"]["service"]
    assert backend["name"] == "g-v1-frontend"
    # the PodCliqueSet copies the DGD's spec labels and names its DGD (its own name may be
    # cut: #8563, GenerateGrovePodCliqueSet @ 2a6da14c8)
    assert {
        k: v
        for k, v in pcs(objs)["metadata"]["labels"].items()
        if not k.startswith(keys.OUR_PREFIX)
    } == {"org": "o", keys.LABEL_GRAPH_NAME: "g.v1"}


def user_annotations(obj: Obj) -> dict[str, str]:
    ann = obj["metadata"].get("annotations") or {}
    return {k: v for k, v in ann.items() if not k.startswith(keys.OUR_PREFIX)}


def test_grove_service_carries_the_component_resource_labels_and_annotations(
    tmp_path: Path,
) -> None:
    """``dgd_grove_stable_resources_reconciler.go`` ``reconcileComponentService`` @ 2a6da14c8
    builds each component Service from ``GetDGDComponentResourceLabels`` /
    ``...Annotations`` (``graph.go``): the DGD's ``spec.labels``/``spec.annotations``, a
    v1alpha1 service's own, then the pod template's, in that order; on a worker the pod
    template carries the worker hash (``applyGroveWorkerHashSuffix``,
    ``dgd_grove_workload_renderer.go``), so the worker's Service is labelled with it
    (``operator-output-grove``: 56 Services). Not on a frontend."""
    doc = dgd(
        "g",
        {
            "Frontend": FRONTEND,
            "decode": {
                "componentType": "worker",
                "labels": {"team": "svc", "tier": "svc"},
                "annotations": {"a": "svc", "b": "svc"},
                "extraPodMetadata": {
                    "labels": {"tier": "pod"},
                    "annotations": {"prometheus.io/port": "9400", "b": "pod"},
                },
                "extraPodSpec": {
                    "mainContainer": {"image": "i", "command": ["python3", "-m", "dynamo.vllm"]}
                },
            },
        },
        labels={"org": "o", "team": "dgd"},
    )
    doc["spec"]["annotations"] = {"a": "dgd", "c": "dgd"}
    objs = render(tmp_path, doc)
    services = {o["metadata"]["name"]: o for o in objs if o["kind"] == "Service"}
    decode = services["g-decode"]
    whash = cliques(objs)["decode"]["labels"][keys.LABEL_WORKER_HASH]
    assert decode["metadata"]["labels"] == {
        "org": "o",
        "team": "svc",
        "tier": "pod",
        keys.LABEL_WORKER_HASH: whash,
        keys.LABEL_DISCOVERY_BACKEND: "kubernetes",
        keys.LABEL_DISCOVERY_ENABLED: "true",
    }
    assert user_annotations(decode) == {
        "a": "svc",
        "b": "pod",
        "c": "dgd",
        "prometheus.io/port": "9400",
    }
    frontend = services["g-frontend"]
    assert keys.LABEL_WORKER_HASH not in frontend["metadata"]["labels"]
    assert user_annotations(frontend) == {"a": "dgd", "c": "dgd"}


def test_grove_clique_system_labels_are_reapplied_over_the_users(tmp_path: Path) -> None:
    """``generateLabels`` (``graph.go`` @ 2a6da14c8) re-applies every system label after the
    user's (selector, graph name, component, type, component class, sub-component type,
    Dynamo namespace, worker hash); a worker of a graph with an EPP is labelled
    ``nvidia.com/dynamo-component-class: worker`` (the InferencePool selects it)."""
    user = {
        keys.LABEL_SELECTOR: "x",
        keys.LABEL_COMPONENT: "x",
        keys.LABEL_COMPONENT_CLASS: "x",
        keys.LABEL_DYNAMO_NAMESPACE: "x",
        "mine": "kept",
    }
    decode = {
        "componentType": "worker",
        "extraPodMetadata": {"labels": user},
        "extraPodSpec": {
            "mainContainer": {"image": "i", "command": ["python3", "-m", "dynamo.vllm"]}
        },
    }
    epp = {"componentType": "epp", "eppConfig": {"config": {}}}
    objs = render(tmp_path, dgd("g", {"Frontend": FRONTEND, "decode": decode, "epp": epp}))
    labels = cliques(objs)["decode"]["labels"]
    assert labels[keys.LABEL_SELECTOR] == "g-decode"
    assert labels[keys.LABEL_COMPONENT] == "decode"
    assert labels[keys.LABEL_COMPONENT_CLASS] == naming.COMPONENT_CLASS_WORKER
    assert labels[keys.LABEL_DYNAMO_NAMESPACE] == "test-namespace-g"
    assert labels["mine"] == "kept"
    assert keys.LABEL_COMPONENT_CLASS not in cliques(objs)["frontend"]["labels"]


def test_enable_grove_false_keeps_the_component_path(tmp_path: Path) -> None:
    doc = dgd("g", {"Frontend": FRONTEND}, annotations={keys.ANN_ENABLE_GROVE: "False"})
    objs = render(tmp_path, doc)
    assert not [o for o in objs if o["kind"] == "PodCliqueSet"]
    assert [o["metadata"]["name"] for o in objs if o["kind"] == "Deployment"] == ["g-frontend"]


def test_grove_workers_get_the_worker_hash_suffix(tmp_path: Path) -> None:
    """#12769 (05f14653a, v1.5.0; dgd/grove golden output @ 2a6da14c8): a worker clique is
    labelled with the worker hash and its Dynamo namespace suffixed with it, as on the
    component path; the names stay the component's (Grove rolls the pods itself)."""
    doc = dgd(
        "g",
        {
            "Frontend": FRONTEND,
            "decode": {
                "componentType": "worker",
                "extraPodSpec": {
                    "mainContainer": {"image": "i", "command": ["python3", "-m", "dynamo.vllm"]}
                },
            },
        },
    )
    objs = render(tmp_path, doc)
    clique = cliques(objs)["decode"]
    comp = render(tmp_path, doc, grove=False)
    whash = next(
        o for o in comp if o["kind"] == "Deployment" and "decode" in o["metadata"]["name"]
    )["metadata"]["labels"][keys.LABEL_WORKER_HASH]
    assert clique["labels"][keys.LABEL_WORKER_HASH] == whash  # the same hash as the DCD path
    assert env(main(clique))["DYN_NAMESPACE_WORKER_SUFFIX"] == whash
    assert clique["labels"][keys.LABEL_SELECTOR] == "g-decode"
    assert pcs(objs)["metadata"]["name"] == "g"
    # not on a frontend
    frontend = cliques(objs)["frontend"]
    assert keys.LABEL_WORKER_HASH not in frontend["labels"]
    assert "DYN_NAMESPACE_WORKER_SUFFIX" not in env(main(frontend))


def test_grove_labels_metrics_from_the_dgd_annotation_only(tmp_path: Path) -> None:
    # Grove reads nvidia.com/enable-metrics on the DGD, not a service's annotation
    doc = dgd("g", {"a": {**FRONTEND, "annotations": {keys.ANN_ENABLE_METRICS: "false"}}})
    assert cliques(render(tmp_path, doc))["a"]["labels"][keys.LABEL_METRICS_ENABLED] == "true"
    doc["metadata"]["annotations"] = {keys.ANN_ENABLE_METRICS: "false"}
    assert keys.LABEL_METRICS_ENABLED not in cliques(render(tmp_path, doc))["a"]["labels"]


def test_kai_scheduler(tmp_path: Path) -> None:
    doc = dgd(
        "g",
        {
            "a": FRONTEND,
            "b": {
                **FRONTEND,
                "extraPodSpec": {"schedulerName": "my-scheduler", "mainContainer": {"image": "i"}},
            },
        },
        annotations={keys.ANN_KAI_QUEUE: " team-queue "},
    )
    cl = cliques(render(tmp_path, doc, kai_scheduler=True))
    assert cl["a"]["spec"]["podSpec"]["schedulerName"] == "kai-scheduler"
    assert cl["a"]["labels"][keys.LABEL_KAI_QUEUE] == "team-queue"
    assert cl["b"]["spec"]["podSpec"]["schedulerName"] == "my-scheduler"  # the user's choice
    cl = cliques(render(tmp_path, doc))
    assert "schedulerName" not in cl["a"]["spec"]["podSpec"]
    assert keys.LABEL_KAI_QUEUE not in cl["a"]["labels"]


def test_termination_delay_update_strategy_topology(tmp_path: Path) -> None:
    doc = dgd(
        "g",
        {"a": {**FRONTEND, "topologyConstraint": {"packDomain": "rack"}}},
        annotations={keys.ANN_GROVE_UPDATE_STRATEGY: "OnDelete"},
        priorityClassName="high",
        topologyConstraint={"topologyProfile": "p", "packDomain": "zone"},
    )
    p = pcs(render(tmp_path, doc, grove_termination_delay="4h"))
    assert p["spec"]["updateStrategy"] == {"type": "OnDelete"}
    t = p["spec"]["template"]
    assert t["terminationDelay"] == "4h0m0s"
    assert t["priorityClassName"] == "high"
    # Grove alpha.11 form (#11405): the PCS names the topology, a clique inherits it
    assert t["topologyConstraint"] == {"topologyName": "p", "pack": {"required": "zone"}}
    assert t["cliques"][0]["topologyConstraint"] == {"pack": {"required": "rack"}}
    doc["metadata"]["annotations"] = {keys.ANN_GROVE_UPDATE_STRATEGY: "Sometimes"}
    assert "must be one of RollingRecreate, OnDelete" in render_error(tmp_path, doc)


def test_restart_annotation_is_left_to_the_controller(tmp_path: Path) -> None:
    doc = dgd("g", {"a": {**FRONTEND, "annotations": {keys.ANN_RESTART_AT: "2026-01-01"}}})
    assert keys.ANN_RESTART_AT not in (cliques(render(tmp_path, doc))["a"].get("annotations") or {})


def test_grove_update_strategy_annotation(tmp_path: Path) -> None:
    """#11085 (8d92187fc, v1.4.0): nvidia.com/grove-update-strategy -> PCS
    spec.updateStrategy (groveUpdateStrategyFromAnnotations in graph.go @ 2a6da14c8); the
    annotation wins over the setting grove-safe-rollout, whatever its value."""
    for safe in (True, False):
        for value in ("RollingRecreate", "OnDelete"):
            doc = dgd("g", {"a": FRONTEND}, annotations={keys.ANN_GROVE_UPDATE_STRATEGY: value})
            objs = render(tmp_path, doc, grove_safe_rollout=safe)
            assert pcs(objs)["spec"]["updateStrategy"] == {"type": value}
            assert source(objs)["metadata"]["annotations"][keys.ANN_GROVE_RENDERED_STRATEGY] == (
                value
            )
    # the operator's rendering (setting off): no updateStrategy, Grove's RollingRecreate
    objs = render(tmp_path, dgd("g", {"a": FRONTEND}), grove_safe_rollout=False)
    assert "updateStrategy" not in pcs(objs)["spec"]
    assert keys.ANN_GROVE_RENDERED_STRATEGY not in source(objs)["metadata"]["annotations"]
    doc = dgd("g", {"a": FRONTEND}, annotations={keys.ANN_GROVE_UPDATE_STRATEGY: "Coherent"})
    assert "must be one of RollingRecreate, OnDelete" in render_error(tmp_path, doc)


def source(objs: list[Obj]) -> Obj:
    """The emitted source DGD."""
    found = [o for o in objs if o["kind"] == "DynamoGraphDeployment"]
    assert len(found) == 1, [o["kind"] for o in objs]
    return found[0]


SINGLE_WORKER = {
    "componentType": "worker",
    "replicas": 1,
    "resources": {"limits": {"gpu": "1"}},
    "extraPodSpec": {"mainContainer": {"image": "worker-image"}},
}


def strategy_of(objs: list[Obj]) -> str | None:
    """The PodCliqueSet's update strategy, checked against the stamp the controller reads."""
    rendered = (pcs(objs)["spec"].get("updateStrategy") or {}).get("type")
    emitted = [o for o in objs if o["kind"] == "DynamoGraphDeployment"]
    for o in emitted:
        assert (o["metadata"].get("annotations") or {}).get(
            keys.ANN_GROVE_RENDERED_STRATEGY
        ) == rendered
    return rendered


def test_grove_safe_rollout_renders_on_delete_by_default(tmp_path: Path) -> None:
    """A deliberate difference from the operator (docs/reference-behaviour.md): with the
    companion controller present (setting managed-replicas, on by default) and the DGD
    emitted, a PodCliqueSet without scaling groups whose DGD does not choose a strategy
    gets ``updateStrategy: OnDelete`` (setting grove-safe-rollout, on by default), and the
    emitted DGD says so in ``dyn-gitops.io/grove-update-strategy`` (what the controller
    reads): the controller replaces the cliques' pods with a surge (docs/operator.md,
    *Grove OnDelete*), where Grove's RollingRecreate deletes a one-replica clique's only
    pod first (ai-dynamo/dynamo#13622). The DGD's own annotations are not touched."""
    doc = dgd("g", {"Frontend": FRONTEND, "worker": SINGLE_WORKER})
    objs = render(tmp_path, doc)
    assert pcs(objs)["spec"]["updateStrategy"] == {"type": "OnDelete"}
    assert strategy_of(objs) == "OnDelete"
    assert keys.ANN_GROVE_UPDATE_STRATEGY not in source(objs)["metadata"]["annotations"]
    # the same through every spelling of the setting (plugin env, dyn-gitops.yaml, flag)
    assert strategy_of(render(tmp_path, doc, grove_safe_rollout="true")) == "OnDelete"
    # the annotation wins (test_grove_update_strategy_annotation: both values, both settings)
    ann = {keys.ANN_GROVE_UPDATE_STRATEGY: "RollingRecreate"}
    assert strategy_of(render(tmp_path, dgd("g", doc["spec"]["services"], annotations=ann))) == (
        "RollingRecreate"
    )


@pytest.mark.parametrize(
    "case",
    ["multinode", "force-scaling-group", "setting-off", "managed-replicas-off", "no-source"],
)
def test_grove_safe_rollout_keeps_the_operators_strategy(tmp_path: Path, case: str) -> None:
    """Where the controller would not replace every pod, the render stays the operator's
    (no ``updateStrategy``: Grove's RollingRecreate): a multinode service (its
    PodCliqueScalingGroup's scale-in removes the highest replica index, not an outdated
    one, so under OnDelete its pods would keep the old template until deleted) or a
    single-node one in a scaling group (``forceScalingGroup``), since Grove's strategy is
    one value for the whole PodCliqueSet; the setting off; managed-replicas off (no
    companion controller assumed); the source DGD not emitted (emit-source off, or
    nvidia-objects omit: the controller finds a PodCliqueSet only through its DGD)."""
    services: dict[str, Obj] = {"Frontend": FRONTEND, "worker": SINGLE_WORKER}
    settings: dict[str, Any] = {}
    if case == "multinode":
        services["prefill"] = worker(2, ["python3"], ["-m", "dynamo.sglang"])
    elif case == "setting-off":
        settings["grove_safe_rollout"] = False
    elif case == "managed-replicas-off":
        settings["managed_replicas"] = False
    doc = dgd("g", services)
    if case == "force-scaling-group":  # v1beta1 only
        doc = force_scaling_group_dgd(1, ["python3"])
    if case == "no-source":
        for off in ({"emit_source": False}, {"nvidia_objects": "omit"}):
            objs = render(tmp_path, doc, **off)
            assert not [o for o in objs if o["kind"] == "DynamoGraphDeployment"]
            assert "updateStrategy" not in pcs(objs)["spec"]
        return
    objs = render(tmp_path, doc, **settings)
    assert "updateStrategy" not in pcs(objs)["spec"]
    assert strategy_of(objs) is None
    # the same graph with the setting on and everything else the default: OnDelete
    if case in ("setting-off", "managed-replicas-off"):
        assert strategy_of(render(tmp_path, doc)) == "OnDelete"


def test_volcano_scheduler(tmp_path: Path) -> None:
    """#8225 (ac5e2a96e, v1.4.0): with the Volcano integration (operator config
    volcanoScheduler.enabled, setting volcano-scheduler) cliques use schedulerName volcano
    unless the user chose another, and nvidia.com/volcano-queue becomes the PodCliqueSet
    annotation scheduling.grove.io/volcano-queue (injectVolcanoSchedulerIfEnabled,
    injectVolcanoQueueAnnotation in grove.go @ 2a6da14c8)."""
    doc = dgd(
        "g",
        {
            "a": FRONTEND,
            "b": {
                **FRONTEND,
                "extraPodSpec": {"schedulerName": "my-scheduler", "mainContainer": {"image": "i"}},
            },
        },
        annotations={keys.ANN_VOLCANO_QUEUE: " team-queue "},
    )
    objs = render(tmp_path, doc, volcano_scheduler=True)
    cl = cliques(objs)
    assert cl["a"]["spec"]["podSpec"]["schedulerName"] == "volcano"
    assert cl["b"]["spec"]["podSpec"]["schedulerName"] == "my-scheduler"
    assert pcs(objs)["metadata"]["annotations"][keys.ANN_GROVE_VOLCANO_QUEUE] == "team-queue"
    assert keys.LABEL_KAI_QUEUE not in cl["a"]["labels"]
    # off: neither
    objs = render(tmp_path, doc)
    assert "schedulerName" not in cliques(objs)["a"]["spec"]["podSpec"]
    assert keys.ANN_GROVE_VOLCANO_QUEUE not in (pcs(objs)["metadata"].get("annotations") or {})
    # no queue annotation: no PCS annotation, the scheduler still
    doc["metadata"].pop("annotations")
    objs = render(tmp_path, doc, volcano_scheduler=True)
    assert keys.ANN_GROVE_VOLCANO_QUEUE not in (pcs(objs)["metadata"].get("annotations") or {})
    assert cliques(objs)["a"]["spec"]["podSpec"]["schedulerName"] == "volcano"
    # not together with Kai (resolveGroveSchedulerQueue)
    message = render_error(tmp_path, doc, volcano_scheduler=True, kai_scheduler=True)
    assert "cannot both be enabled" in message


def test_priority_class_name_only_on_grove(tmp_path: Path) -> None:
    """#10217 (4691c5cc2, v1.3.0): DGD spec.priorityClassName goes to the PodCliqueSet
    template; the validating webhook forbids it off the Grove pathway
    (webhook/validation/dynamographdeployment.go @ 2a6da14c8)."""
    doc = dgd("g", {"a": FRONTEND}, priorityClassName="high")
    assert pcs(render(tmp_path, doc))["spec"]["template"]["priorityClassName"] == "high"
    message = render_error(tmp_path, doc, grove=False)
    assert "spec.priorityClassName" in message and "requires the Grove pathway" in message
    doc["metadata"]["annotations"] = {keys.ANN_ENABLE_GROVE: "false"}
    assert "requires the Grove pathway" in render_error(tmp_path, doc)


def test_topology_constraint_alpha11_form(tmp_path: Path) -> None:
    """#11405 (b6fc32fea, v1.4.0): Grove alpha.11 TopologyConstraint{topologyName, pack:
    {required}} (specToGroveTopologyConstraint / toGroveTopologyConstraint in grove.go @
    2a6da14c8). With a deployment pack domain the components inherit the topology name;
    without one each constrained component names it; a multinode component's constraint
    is its scaling group's."""
    sglang = ["python3", "-m", "dynamo.sglang"]
    services = {
        "a": {**FRONTEND, "topologyConstraint": {"packDomain": "rack"}},
        "b": FRONTEND,
        "w": worker(2, sglang, ["--tp", "4"], topologyConstraint={"packDomain": "block"}),
    }
    p = pcs(render(tmp_path, dgd("g", services, topologyConstraint={"topologyProfile": "t"})))
    t = p["spec"]["template"]
    assert "topologyConstraint" not in t
    cl = {c["name"]: c for c in t["cliques"]}
    assert cl["a"]["topologyConstraint"] == {"topologyName": "t", "pack": {"required": "rack"}}
    assert "topologyConstraint" not in cl["b"]
    assert "topologyConstraint" not in cl["w-ldr"]
    assert t["podCliqueScalingGroups"][0]["topologyConstraint"] == {
        "topologyName": "t",
        "pack": {"required": "block"},
    }
    tc = {"topologyProfile": "t", "packDomain": "zone"}
    t = pcs(render(tmp_path, dgd("g", services, topologyConstraint=tc)))["spec"]["template"]
    assert t["topologyConstraint"] == {"topologyName": "t", "pack": {"required": "zone"}}
    assert {c["name"]: c for c in t["cliques"]}["a"]["topologyConstraint"] == {
        "pack": {"required": "rack"}
    }


def test_cliques_in_component_order(tmp_path: Path) -> None:
    """GenerateGrovePodCliqueSet @ 2a6da14c8 appends cliques and scaling groups per
    component, in the v1beta1 component list's order; a v1alpha1 DGD's services come
    sorted by name as bytes (dgdServiceNamesInEmissionOrder). The dgd/grove golden output
    lists frontend before decode-ldr and decode-wkr."""
    sglang = ["python3", "-m", "dynamo.sglang"]
    alpha = dgd("g", {"zeta": FRONTEND, "Alpha": FRONTEND, "mid": worker(2, sglang, [])})
    names = [c["name"] for c in pcs(render(tmp_path, alpha))["spec"]["template"]["cliques"]]
    assert names == ["alpha", "mid-ldr", "mid-wkr", "zeta"]

    def component(name: str, **extra: Any) -> Obj:
        container = {"name": "main", "image": "i", "command": sglang}
        return {
            "name": name,
            "type": "worker",
            "podTemplate": {"spec": {"containers": [container]}},
            **extra,
        }

    beta = {
        "apiVersion": "nvidia.com/v1beta1",
        "kind": "DynamoGraphDeployment",
        "metadata": {"name": "g", "namespace": "ns"},
        "spec": {
            "components": [
                component("zeta", multinode={"nodeCount": 2}),
                component("alpha", multinode={"nodeCount": 2}),
            ]
        },
    }
    t = pcs(render(tmp_path, beta))["spec"]["template"]
    assert [c["name"] for c in t["cliques"]] == ["zeta-ldr", "zeta-wkr", "alpha-ldr", "alpha-wkr"]
    assert [g["name"] for g in t["podCliqueScalingGroups"]] == ["zeta", "alpha"]


def test_component_scoped_topology(tmp_path: Path) -> None:
    """#12448 (26b83a991, v1.4.0): with no deployment pack domain, constraining only some
    components is valid; with no component constrained the deployment needs a pack domain
    (webhook/validation/dynamographdeployment.go @ 2a6da14c8)."""
    tc = {"topologyProfile": "t"}
    doc = dgd(
        "g",
        {"a": {**FRONTEND, "topologyConstraint": {"packDomain": "rack"}}, "b": FRONTEND},
        topologyConstraint=tc,
    )
    assert pcs(render(tmp_path, doc))
    doc = dgd("g", {"a": FRONTEND}, topologyConstraint=tc)
    message = render_error(tmp_path, doc)
    assert "spec.topologyConstraint.packDomain: is required when no service" in message
