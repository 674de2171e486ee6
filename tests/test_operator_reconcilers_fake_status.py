"""StatusReconciler on the fake API server (the real-server scenarios:
test_operator_status.py): DGD state, the Ready condition and its reasons, per-service
replicas, observedGeneration; written only when something changed."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml
from dyn_gitops_operator import FIELD_MANAGER
from dyn_gitops_operator.plan import Plan
from dyn_gitops_operator.reconcilers.status import StatusReconciler
from dyn_gitops_operator.resources import DGDS, LWS
from support.fakecluster import FakeCluster
from support.rendering import render

SAMPLES = Path(__file__).resolve().parent.parent / "samples"


def ready_cond(status: dict[str, Any]) -> dict[str, Any]:
    return next(c for c in status.get("conditions") or [] if c["type"] == "Ready")


@pytest.fixture
def agg() -> tuple[FakeCluster, str]:
    """vllm-agg applied by GitOps and reconciled once: the managed worker is sized."""
    c = FakeCluster()
    c.apply(render(SAMPLES / "vllm-agg" / "input", c.ns))
    c.converge("vllm-agg")
    worker = next(n for n in c.deployments() if n.startswith("vllm-agg-vllmdecodeworker-"))
    return c, worker


def test_pending_healthy_degraded_recovered(agg: tuple[FakeCluster, str]) -> None:
    c, worker = agg
    st = c.status("vllm-agg")
    assert st["state"] == "pending"
    cond = ready_cond(st)
    assert (cond["status"], cond["reason"]) == ("False", "some_resources_are_not_ready")
    assert cond["message"] == (
        f"Resources not ready: vllm-agg-frontend: spec change not yet "
        f"observed; {worker}: spec change not yet observed"
    )
    assert c.replicas(worker) == 2  # sized from the desired-replicas annotation

    c.set_status("vllm-agg-frontend")
    c.set_status(worker)
    c.converge("vllm-agg")
    st = c.status("vllm-agg")
    cond = ready_cond(st)
    assert (st["state"], cond["status"], cond["reason"], cond["message"]) == (
        "successful",
        "True",
        "all_resources_are_ready",
        "All resources are ready",
    )
    assert (
        st["observedGeneration"]
        == cond["observedGeneration"]
        == c.dgd("vllm-agg")["metadata"]["generation"]
    )
    # ComponentReplicaStatus (api/v1beta1/common.go @ 2a6da14c8); a worker's runtime
    # namespace carries its generation (ComponentRuntimeNamespace, v1beta1_helpers.go)
    assert st["components"]["VllmDecodeWorker"] == {
        "componentKind": "Deployment",
        "componentNames": [worker],
        "runtimeNamespace": f"{c.ns}-vllm-agg-{worker.rsplit('-', 1)[1]}",
        "replicas": 2,
        "readyReplicas": 2,
        "availableReplicas": 2,
        "updatedReplicas": 2,
    }
    assert st["components"]["Frontend"]["replicas"] == 1
    assert st["components"]["Frontend"]["runtimeNamespace"] == f"{c.ns}-vllm-agg"
    assert "services" not in st  # the v1alpha1 name is gone from the v1beta1 status

    c.set_status(worker, available=1)
    c.converge("vllm-agg")
    st = c.status("vllm-agg")
    assert st["state"] == "pending"
    assert ready_cond(st)["message"] == f"Resources not ready: {worker}: 1/2 available"
    assert st["components"]["VllmDecodeWorker"]["availableReplicas"] == 1

    c.set_status(worker)
    c.set_status("vllm-agg-frontend", available=0, failed="ReplicaSet has timed out")
    c.converge("vllm-agg")
    st = c.status("vllm-agg")
    assert (st["state"], ready_cond(st)["reason"]) == ("failed", "some_resources_failed")
    assert ready_cond(st)["message"].startswith(
        "Resources failed: vllm-agg-frontend: ProgressDeadlineExceeded"
    )

    c.set_status("vllm-agg-frontend")
    c.converge("vllm-agg")
    assert c.status("vllm-agg")["state"] == "successful"
    c.gitops.patch(DGDS, c.ns, "vllm-agg", {"spec": {"env": [{"name": "A", "value": "1"}]}})
    c.converge("vllm-agg")
    assert c.status("vllm-agg")["observedGeneration"] == 2


def test_status_is_written_only_when_it_changes(agg: tuple[FakeCluster, str]) -> None:
    c, worker = agg
    c.set_status("vllm-agg-frontend")
    c.set_status(worker)
    c.converge("vllm-agg")
    assert ready_cond(c.status("vllm-agg"))["lastTransitionTime"] == "2025-06-01T00:00:00Z"
    before = c.writes()
    for _ in range(3):
        c.advance(60)
        c.reconcile("vllm-agg")
    assert c.writes() == before  # nothing changed: not even a new timestamp is written

    c.advance(60)  # 00:04: Ready turns False
    c.set_status(worker, available=1)
    c.converge("vllm-agg")
    assert ready_cond(c.status("vllm-agg"))["lastTransitionTime"] == "2025-06-01T00:04:00Z"
    c.advance(60)  # 00:05: still False, another message: the transition time stays
    c.set_status("vllm-agg-frontend", available=0)
    c.converge("vllm-agg")
    cond = ready_cond(c.status("vllm-agg"))
    assert "vllm-agg-frontend" in cond["message"]
    assert cond["lastTransitionTime"] == "2025-06-01T00:04:00Z"
    c.advance(60)  # 00:06: True again
    c.set_status("vllm-agg-frontend")
    c.set_status(worker)
    c.converge("vllm-agg")
    assert ready_cond(c.status("vllm-agg"))["lastTransitionTime"] == "2025-06-01T00:06:00Z"


def test_only_the_status_subresource_is_written(agg: tuple[FakeCluster, str]) -> None:
    c, _ = agg
    dgd = c.dgd("vllm-agg")
    ours = [m for m in dgd["metadata"]["managedFields"] if m["manager"] == FIELD_MANAGER]
    assert [(m["operation"], m.get("subresource")) for m in ours] == [("Apply", "status")]
    assert set(ours[0]["fieldsV1"]) == {"f:status"}
    assert dgd["metadata"]["generation"] == 1


def test_no_status_while_workloads_were_just_written() -> None:
    """A pass that wrote a Deployment reports only after reading it back (next pass)."""
    c = FakeCluster()
    c.apply(render(SAMPLES / "vllm-agg" / "input", c.ns))
    assert c.reconcile("vllm-agg") == 0.0  # sized the worker, asks for another look
    assert c.status("vllm-agg") == {}
    c.reconcile("vllm-agg")
    assert c.status("vllm-agg")["state"] == "pending"


def test_missing_deployment_is_reported() -> None:
    c = FakeCluster()
    c.apply(
        [
            o
            for o in render(SAMPLES / "vllm-agg" / "input", c.ns)
            if o["metadata"]["name"] != "vllm-agg-frontend"
        ]
    )
    c.converge("vllm-agg")
    st = c.status("vllm-agg")
    assert st["state"] == "pending"
    assert "vllm-agg-frontend: Deployment not found" in ready_cond(st)["message"]
    assert "Frontend" not in st["components"]


WORKER_HASH = "nvidia.com/dynamo-worker-hash"


def test_multinode_services_report_their_leaderworkersets() -> None:
    """One natively scaled LeaderWorkerSet per multinode service (#9612, v1.2;
    getLeaderWorkerSetReplicasStatus / IsLeaderWorkerSetReady @ 2a6da14c8). Rendered with
    managed replicas, the controller sizes it to the desired replicas, as it does a managed
    worker Deployment, and the graph is ready when all its groups are."""
    c = FakeCluster()
    objs = render(SAMPLES / "multinode-lws" / "input", c.ns)
    mine = [
        o
        for o in objs
        if (o["metadata"].get("labels") or {}).get("nvidia.com/dynamo-graph-deployment-name")
        == "sglang-mn"
        or (o["kind"] == "DynamoGraphDeployment" and o["metadata"]["name"] == "sglang-mn")
    ]
    c.apply(mine, kinds=("Deployment", "DynamoGraphDeployment", "LeaderWorkerSet"))
    (name,) = [o["metadata"]["name"] for o in mine if o["kind"] == "LeaderWorkerSet"]
    c.set_status("sglang-mn-frontend")
    c.converge("sglang-mn")
    lws = c.kube.get(LWS, c.ns, name)
    assert lws["spec"]["replicas"] == 2  # the DGD's replicas (desired-replicas annotation)
    assert FIELD_MANAGER in {m["manager"] for m in lws["metadata"]["managedFields"]}
    st = c.status("sglang-mn")
    assert st["state"] == "pending"
    assert ready_cond(st)["message"] == f"Resources not ready: {name}: 0/2 groups ready"
    c.kcm.update(
        LWS,
        {
            **lws,
            "status": {
                "replicas": 2,
                "readyReplicas": 2,
                "updatedReplicas": 2,
                "conditions": [{"type": "Available", "status": "True"}],
            },
        },
        subresource="status",
    )
    c.converge("sglang-mn")
    st = c.status("sglang-mn")
    assert st["state"] == "successful"
    assert st["components"]["decode"] == {
        "componentKind": "LeaderWorkerSet",
        "componentNames": [name],
        "runtimeNamespace": f"{c.ns}-sglang-mn-{lws['metadata']['labels'][WORKER_HASH]}",
        "replicas": 2,
        "readyReplicas": 2,
        "updatedReplicas": 2,
    }


def test_a_graph_without_its_dgd_gets_no_status(agg: tuple[FakeCluster, str]) -> None:
    c, _ = agg
    graph = copy.copy(c.snapshot("vllm-agg"))
    graph.dgd = None  # e.g. rendered with emit-source off
    before = c.writes()
    StatusReconciler().reconcile(graph, Plan(), c.loop.ctx)
    assert c.writes() == before


def _stamped(objs: list[dict[str, Any]], commit: str) -> list[dict[str, Any]]:
    """The objects as a renderer that knows the commit stamps them (finalize.py)."""
    out = copy.deepcopy(objs)
    for obj in out:
        obj["metadata"].setdefault("annotations", {})["dyn-gitops.io/source-commit"] = commit
    return out


def test_ready_only_once_the_dgds_commit_is_served() -> None:
    """observedGeneration gating (#3567, DGD "Successful" during a rollout): a DGD applied
    from a new commit whose workloads still come from the old one is not Ready for its
    new generation, although every workload it had reports ready; Ready once they follow."""
    c = FakeCluster()
    (source,) = yaml.safe_load_all((SAMPLES / "vllm-agg" / "input" / "vllm-agg.yaml").read_text())
    changed = copy.deepcopy(source)
    changed["spec"]["services"]["Frontend"]["envs"] = [{"name": "A", "value": "1"}]
    old, new = render([source], c.ns), render([changed], c.ns)
    c.apply(_stamped(old, "a" * 40))
    c.converge("vllm-agg")
    for name in c.deployments():
        c.set_status(name)
    c.converge("vllm-agg")
    assert c.status("vllm-agg")["state"] == "successful"

    # the GitOps tool applied the DGD of commit b (a frontend change) but no workload yet
    c.apply(_stamped([o for o in new if o["kind"] == "DynamoGraphDeployment"], "b" * 40))
    c.converge("vllm-agg")
    st = c.status("vllm-agg")
    cond = ready_cond(st)
    assert c.dgd("vllm-agg")["metadata"]["generation"] == 2
    assert st["observedGeneration"] == cond["observedGeneration"] == 2
    assert (st["state"], cond["status"], cond["reason"], cond["message"]) == (
        "pending",
        "False",
        "some_resources_are_not_ready",
        "Resources not ready: "
        "vllm-agg-frontend: rendered from commit aaaaaaaaaaaa, the DGD from bbbbbbbbbbbb; "
        f"{next(n for n in c.deployments() if n != 'vllm-agg-frontend')}: "
        "rendered from commit aaaaaaaaaaaa, the DGD from bbbbbbbbbbbb",
    )

    c.apply(_stamped([o for o in new if o["kind"] == "Deployment"], "b" * 40))
    c.converge("vllm-agg")
    assert ready_cond(c.status("vllm-agg"))["status"] == "False"  # the new spec not observed
    for name in c.deployments():
        c.set_status(name)
    c.converge("vllm-agg")
    assert ready_cond(c.status("vllm-agg"))["status"] == "True"


def test_other_conditions_on_the_dgd_are_kept(agg: tuple[FakeCluster, str]) -> None:
    """``conditions`` is a map list by type: the controller owns Ready only."""
    c, worker = agg
    dgd = c.dgd("vllm-agg")
    other = {"type": "TopologyLevelsAvailable", "status": "True", "reason": "r", "message": "m"}
    c.kube.update(
        DGDS,
        {**dgd, "status": {**dgd["status"], "conditions": [*dgd["status"]["conditions"], other]}},
        subresource="status",
    )
    c.set_status(worker)
    c.converge("vllm-agg")
    conds = c.status("vllm-agg")["conditions"]
    assert [x["type"] for x in conds] == ["Ready", "TopologyLevelsAvailable"]


def test_grove_ready_reasons_through_the_controller() -> None:
    """The 1.4+ Ready reasons on the Grove path (evaluateGroveComponents and
    observePodCliqueReadiness, internal/dynamo/grove.go @ 2a6da14c8): a capacity blocker,
    an unfinished update, pods scheduled but not ready, and disagreeing components."""
    from dyn_gitops_operator.resources import PODCLIQUES
    from support.fakecluster import GROVE_KINDS

    c = FakeCluster()
    objs = render(SAMPLES / "scaling-adapter" / "input", c.ns, grove=True)
    c.apply(objs, kinds=GROVE_KINDS)
    (pcs,) = [o for o in objs if o["kind"] == "PodCliqueSet"]
    created = c.grove_create(pcs)
    for name, res in created.items():
        c.grove_status(res, name)
    c.converge("sglang-disagg")
    assert c.status("sglang-disagg")["state"] == "successful"
    decode, prefill = "sglang-disagg-0-decode", "sglang-disagg-0-prefill"
    want = c.grove.get(PODCLIQUES, c.ns, decode)["spec"]["replicas"]

    def verdict() -> tuple[str, str, str]:
        c.converge("sglang-disagg")
        st = c.status("sglang-disagg")
        cond = ready_cond(st)
        return st["state"], cond["reason"], cond["message"]

    c.grove_status(PODCLIQUES, decode, scheduleGatedReplicas=1, readyReplicas=want - 1)
    assert verdict() == (
        "pending",
        "insufficient_capacity",
        "Resources not ready: sglang-disagg: decode: schedule-gated replicas: 1",
    )
    c.grove_status(PODCLIQUES, decode, updatedReplicas=0, readyReplicas=0)
    assert verdict()[:2] == ("pending", "updating")
    c.grove_status(PODCLIQUES, decode, readyReplicas=0)
    assert verdict() == (
        "pending",
        "pods_not_ready",
        f"Resources not ready: sglang-disagg: decode: scheduled but ready=0/{want}",
    )
    c.grove_status(PODCLIQUES, prefill, readyReplicas=0, scheduleGatedReplicas=1)
    assert verdict()[:2] == ("pending", "mixed_not_ready_reasons")
    st = c.status("sglang-disagg")
    assert st["components"]["decode"] == {
        "componentKind": "PodClique",
        "componentNames": [decode],
        "replicas": want,
        "updatedReplicas": want,
        "readyReplicas": 0,
        "scheduledReplicas": want,
    }
    for name, res in created.items():
        c.grove_status(res, name)
    assert verdict()[:2] == ("successful", "all_resources_are_ready")
