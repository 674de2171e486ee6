"""DGD status aggregation against the real kube-apiserver: healthy, progressing, degraded.

The rendered sample is applied as Argo CD would (server-side apply, its own manager); the
controller runs in-process. On the realistic cluster (``cluster_k``: kube-controller-manager,
scheduler, KWOK) Deployment status comes from real ReplicaSets and pods; held pods (a
scheduling gate), a failed pod or an unschedulable template produce the not-ready states.
LeaderWorkerSets are the real LeaderWorkerSet controller's (``lws_controller``).
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
from dyn_gitops_operator.graph import HashCache, compute_worker_hash
from dyn_gitops_operator.kube import DEPLOYMENTS, DGDS, Kube
from dyn_gitops_operator.testing import (
    gitops_apply,
    running,
    settings_for_tests,
    wait_for,
)
from support.cluster import fail_pod, gated, hold, is_ready, pods, release
from support.rendering import render

pytestmark = pytest.mark.realk8s
SAMPLES = Path(__file__).resolve().parent.parent / "samples"


def status_of(k: Kube, ns: str, name: str) -> dict[str, Any]:
    return dict(k.get(DGDS, ns, name).get("status") or {})


def ready_cond(status: dict[str, Any]) -> dict[str, Any]:
    return next(c for c in status.get("conditions") or [] if c["type"] == "Ready")


def test_status_progressing_healthy_degraded(cluster_k: Kube, cluster_namespace: str) -> None:
    k, namespace, api = cluster_k, cluster_namespace, cluster_k.api
    # every pod is held Pending until the test releases it: nothing rolled out yet
    objs = hold(render(SAMPLES / "vllm-agg" / "input", namespace))
    gitops_apply(k, objs)
    with running(settings_for_tests(namespace), k):
        # nothing rolled out yet: pending, every Deployment named in the message
        st = wait_for(
            lambda: (s := status_of(k, namespace, "vllm-agg")).get("state") and s,
            what="a first status",
        )
        assert st["state"] == "pending"
        cond = ready_cond(st)
        assert (cond["status"], cond["reason"]) == ("False", "some_resources_are_not_ready")
        assert cond["message"].startswith("Resources not ready: vllm-agg-frontend: ")
        assert "vllm-agg-vllmdecodeworker-" in cond["message"]

        # the controller sized the managed worker from the desired-replicas annotation
        deps = {d["metadata"]["name"]: d for d in k.list(DEPLOYMENTS, namespace)[0]}
        worker = next(n for n in deps if n.startswith("vllm-agg-vllmdecodeworker-"))
        wait_for(
            lambda: k.get(DEPLOYMENTS, namespace, worker)["spec"]["replicas"] == 2,
            what="worker scaled to 2",
        )

        # healthy: the pods are released, scheduled, and KWOK makes them Ready
        st = wait_for(
            lambda: (
                release(api, namespace) is not None
                and (s := status_of(k, namespace, "vllm-agg"))["state"] == "successful"
                and s
            ),
            timeout=90,
            what="successful",
        )
        cond = ready_cond(st)
        assert (cond["status"], cond["reason"], cond["message"]) == (
            "True",
            "all_resources_are_ready",
            "All resources are ready",
        )
        dgd = k.get(DGDS, namespace, "vllm-agg")
        assert st["observedGeneration"] == dgd["metadata"]["generation"]
        # ComponentReplicaStatus (api/v1beta1/common.go @ 2a6da14c8): no v1alpha1
        # componentName; the worker's runtime namespace names its generation
        assert "services" not in st
        assert st["components"]["VllmDecodeWorker"] == {
            "componentKind": "Deployment",
            "componentNames": [worker],
            "runtimeNamespace": f"{namespace}-vllm-agg-{worker.rsplit('-', 1)[1]}",
            "replicas": 2,
            "readyReplicas": 2,
            "availableReplicas": 2,
            "updatedReplicas": 2,
        }
        assert st["components"]["Frontend"]["replicas"] == 1

        # progressing: a worker pod fails; its replacement is held Pending
        victim = next(p for p in pods(api, namespace) if p.metadata.name.startswith(worker))
        assert is_ready(victim)
        fail_pod(api, namespace, victim.metadata.name)
        # (until kcm has created the replacement the worker reads "1/2 updated")
        st = wait_for(
            lambda: (
                (s := status_of(k, namespace, "vllm-agg"))["state"] == "pending"
                and ready_cond(s)["message"] == f"Resources not ready: {worker}: 1/2 available"
                and s
            ),
            timeout=60,
            what="pending again, 1/2 available",
        )
        assert st["components"]["VllmDecodeWorker"]["availableReplicas"] == 1
        wait_for(lambda: len(gated(api, namespace)) == 1, 60, "the replacement, held")
        wait_for(
            lambda: (
                release(api, namespace) is not None
                and status_of(k, namespace, "vllm-agg")["state"] == "successful"
            ),
            timeout=90,
            what="worker pod replaced",
        )

        # degraded: a frontend change whose pods cannot be scheduled (and are held); the
        # Deployment controller gives up after its progress deadline (shortened by an admin)
        admin = Kube(api, field_manager="cluster-admin")
        admin.request(
            "PATCH",
            DEPLOYMENTS.path(namespace, "vllm-agg-frontend"),
            [("fieldManager", "cluster-admin")],
            {"spec": {"progressDeadlineSeconds": 2}},
            "application/merge-patch+json",
        )
        frontend = copy.deepcopy(
            next(
                o
                for o in objs
                if o["kind"] == "Deployment" and o["metadata"]["name"] == "vllm-agg-frontend"
            )
        )
        frontend["spec"]["template"]["spec"]["nodeSelector"] = {"dyn-gitops.test/pool": "none"}
        gitops_apply(k, [frontend])
        st = wait_for(
            lambda: (s := status_of(k, namespace, "vllm-agg"))["state"] == "failed" and s,
            timeout=90,
            what="failed",
        )
        cond = ready_cond(st)
        assert cond["reason"] == "some_resources_failed"
        assert cond["message"].startswith(
            "Resources failed: vllm-agg-frontend: ProgressDeadlineExceeded"
        )

        # recovery (Git reverts the frontend), and observedGeneration follows a spec change
        gitops_apply(
            k,
            [
                o
                for o in objs
                if o["metadata"]["name"] == "vllm-agg-frontend" and o["kind"] == "Deployment"
            ],
        )
        wait_for(
            lambda: status_of(k, namespace, "vllm-agg")["state"] == "successful",
            timeout=90,
            what="recovered",
        )
        k.request(
            "PATCH",
            DGDS.path(namespace, "vllm-agg"),
            None,
            {"metadata": {"labels": {"x": "y"}}, "spec": {"env": [{"name": "A", "value": "1"}]}},
            "application/merge-patch+json",
        )
        gen = k.get(DGDS, namespace, "vllm-agg")["metadata"]["generation"]
        wait_for(
            lambda: status_of(k, namespace, "vllm-agg")["observedGeneration"] == gen,
            what="observedGeneration follows the spec",
        )


def test_missing_deployment_is_reported(k: Kube, namespace: str) -> None:
    objs = render(SAMPLES / "vllm-agg" / "input", namespace)
    gitops_apply(k, [o for o in objs if o["metadata"]["name"] != "vllm-agg-frontend"])
    with running(settings_for_tests(namespace), k):
        st = wait_for(
            lambda: (s := status_of(k, namespace, "vllm-agg")).get("state") and s, what="a status"
        )
        assert st["state"] == "pending"
        assert "vllm-agg-frontend: Deployment not found" in ready_cond(st)["message"]
        assert "Frontend" not in st["components"]


@pytest.mark.parametrize(
    "sample", sorted(p.name for p in SAMPLES.iterdir() if (p / "input").is_dir())
)
def test_worker_hash_matches_the_renderer_after_a_round_trip(
    k: Kube, namespace: str, sample: str
) -> None:
    """The controller's worker hash of the *live* v1beta1 DGD names the rendered generation:
    recomputed from the stored object (a v1beta1 source as written; a v1alpha1 one
    converted as the operator stores it, its service labels and annotations kept in the
    conversion annotation, api/v1alpha1/dynamographdeployment_conversion.go @ 2a6da14c8)."""
    objs = render(SAMPLES / sample / "input", namespace, source_api_version="as-written")
    dgds = [o for o in objs if o["kind"] == "DynamoGraphDeployment"]
    gitops_apply(k, dgds)
    for dgd in dgds:
        name = dgd["metadata"]["name"]
        live = k.get(DGDS, namespace, name)
        labels = [o["metadata"].get("labels") or {} for o in objs]
        rendered = {
            lb.get("nvidia.com/dynamo-worker-hash")
            for lb in labels  # any workload
            if lb.get("nvidia.com/dynamo-graph-deployment-name") == name
        } - {None}
        # the stamp the renderer leaves on the DGD, and the controller's own computation
        assert rendered == ({HashCache().get(live)} - {None}), name
        unstamped = copy.deepcopy(live)
        unstamped["metadata"]["annotations"].pop("dyn-gitops.io/worker-hash", None)
        assert live["apiVersion"] == "nvidia.com/v1beta1" and live["spec"]["components"]
        assert rendered == ({compute_worker_hash(unstamped)} - {None}), name


WORKER_HASH = "nvidia.com/dynamo-worker-hash"


@pytest.mark.usefixtures("lws_controller")
def test_multinode_services_report_their_leaderworkersets(
    cluster_k: Kube, cluster_kube: Any, cluster_namespace: str
) -> None:
    """One natively scaled LeaderWorkerSet per multinode service (#9612, v1.2): rendered
    with managed replicas, the controller sizes it (server-side apply of spec.replicas, as
    for a managed worker Deployment); the graph is ready when all its groups are. Real
    pods: the LeaderWorkerSet controller makes the groups, held Pending (a scheduling gate)
    until released, then placed by the scheduler and made Ready by KWOK."""
    from dyn_gitops_operator.kube import LWS

    k, api, namespace = cluster_k, cluster_kube, cluster_namespace

    objs = render(SAMPLES / "multinode-lws" / "input", namespace)
    mine = [
        o
        for o in objs
        if (o["metadata"].get("labels") or {}).get("nvidia.com/dynamo-graph-deployment-name")
        == "sglang-mn"
        or (o["kind"] == "DynamoGraphDeployment" and o["metadata"]["name"] == "sglang-mn")
    ]
    (name,) = [o["metadata"]["name"] for o in mine if o["kind"] == "LeaderWorkerSet"]
    mine = hold(mine, lambda n: n == name)
    gitops_apply(k, mine, kinds=("Deployment", "DynamoGraphDeployment", "LeaderWorkerSet"))
    with running(settings_for_tests(namespace), k) as m:
        assert m.lws is not None
        want = f"Resources not ready: {name}: 0/2 groups ready"
        st = wait_for(
            lambda: (
                (s := status_of(k, namespace, "sglang-mn")).get("conditions")
                and ready_cond(s)["message"] == want
                and s
            ),
            60,
            what="LWS sized, not ready",
        )
        assert st["state"] == "pending"
        lws = k.get(LWS, namespace, name)
        assert lws["spec"]["replicas"] == 2
        # released: the groups' 4 pods (8 GPUs each: every GPU of the cluster) become Ready
        st = wait_for(
            lambda: (
                release(api, namespace, f"leaderworkerset.sigs.k8s.io/name={name}") is not None
                and (s := status_of(k, namespace, "sglang-mn"))["state"] == "successful"
                and s
            ),
            120,
            what="successful",
            interval=0.2,
        )
        assert st["components"]["decode"] == {
            "componentKind": "LeaderWorkerSet",
            "componentNames": [name],
            "runtimeNamespace": f"{namespace}-sglang-mn-{lws['metadata']['labels'][WORKER_HASH]}",
            "replicas": 2,
            "readyReplicas": 2,
            "updatedReplicas": 2,
        }
    managers = {f["manager"] for f in k.get(LWS, namespace, name)["metadata"]["managedFields"]}
    assert "dyn-gitops-controller" in managers  # spec.replicas, nothing else
