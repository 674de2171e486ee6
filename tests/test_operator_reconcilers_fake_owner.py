"""OwnerReconciler on the fake API server (the real-server scenario:
test_operator_rollout.py::test_managed_workers_are_owned_by_their_dgd): the live DGD owns
its managed worker Deployments, nothing else; a GitOps re-sync keeps the reference."""

from __future__ import annotations

import copy
from pathlib import Path

from dyn_gitops_operator.plan import Plan
from dyn_gitops_operator.reconcilers.owner import OwnerReconciler
from dyn_gitops_operator.resources import DGDS
from support.fakecluster import FakeCluster
from support.rendering import render

SAMPLES = Path(__file__).resolve().parent.parent / "samples"


def test_managed_workers_are_owned_by_their_dgd() -> None:
    """The reference names the DGD's storage version, v1beta1, as the 1.5 operator's
    (controller-runtime writes the hub type it reconciles, api/v1beta1 @ 2a6da14c8)."""
    c = FakeCluster()
    objs = render(SAMPLES / "vllm-agg" / "input", c.ns)
    c.apply(objs)
    c.converge("vllm-agg")
    uid = c.dgd("vllm-agg")["metadata"]["uid"]
    want = [
        {
            "apiVersion": "nvidia.com/v1beta1",
            "kind": "DynamoGraphDeployment",
            "name": "vllm-agg",
            "uid": uid,
        }
    ]
    worker = next(n for n in c.deployments() if n.startswith("vllm-agg-vllmdecodeworker-"))
    assert c.deployment(worker)["metadata"]["ownerReferences"] == want
    assert "ownerReferences" not in c.deployment("vllm-agg-frontend")["metadata"]
    c.apply(objs)  # an Argo CD / Flux re-sync
    assert c.deployment(worker)["metadata"]["ownerReferences"] == want
    before = c.writes()
    c.converge("vllm-agg")
    assert c.writes() == before  # already owned: nothing to write


def test_the_decision_names_only_managed_live_workers() -> None:
    c = FakeCluster()
    c.apply(render(SAMPLES / "scaling-adapter" / "input", c.ns))
    plan = c.plan("sglang-disagg", OwnerReconciler())
    uid = c.dgd("sglang-disagg")["metadata"]["uid"]
    owned = {n: i.owner for n, i in plan.intents.items()}
    assert set(owned) == {n for n in c.deployments() if "-decode-" in n or "-prefill-" in n}
    assert {o["uid"] for o in owned.values() if o} == {uid}


def test_a_dgd_being_deleted_or_without_uid_owns_nothing() -> None:
    c = FakeCluster()
    c.apply(render(SAMPLES / "vllm-agg" / "input", c.ns))
    graph = c.snapshot("vllm-agg")
    assert graph.dgd is not None
    for meta in ({"deletionTimestamp": "2025-01-01T00:00:00Z"}, {"uid": None}):
        g = copy.copy(graph)
        g.dgd = {**graph.dgd, "metadata": {**graph.dgd["metadata"], **meta}}
        plan = Plan()
        OwnerReconciler().reconcile(g, plan, c.loop.ctx)
        assert plan.intents == {}


def test_a_graph_without_its_dgd_in_the_cluster_owns_nothing() -> None:
    c = FakeCluster()
    c.apply(render(SAMPLES / "vllm-agg" / "input", c.ns, emit_source=False))
    assert c.kube.list(DGDS, c.ns)[0] == []
    c.converge("vllm-agg")
    worker = next(n for n in c.deployments() if n.startswith("vllm-agg-vllmdecodeworker-"))
    assert c.replicas(worker) == 2  # still sized
    assert "ownerReferences" not in c.deployment(worker)["metadata"]
