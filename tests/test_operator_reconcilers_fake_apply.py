"""ApplyReconciler on the fake API server: the one writer of Deployments sends every
changed intent as a server-side apply carrying all controller-owned fields and the
resourceVersion decided on, the other reconcilers' writes with it, then the deletions with
uid / resourceVersion preconditions."""

from __future__ import annotations

from pathlib import Path

import pytest
from dyn_gitops_operator import FIELD_MANAGER
from dyn_gitops_operator.errors import ConflictError
from dyn_gitops_operator.plan import Plan, Write
from dyn_gitops_operator.reconcilers.apply import ApplyReconciler
from dyn_gitops_operator.resources import DEPLOYMENTS, DGDSAS
from support.fakecluster import FakeCluster
from support.rendering import render

SAMPLES = Path(__file__).resolve().parent.parent / "samples"
FRONTEND = "vllm-agg-frontend"


def ours(dep: dict[str, object]) -> object:
    meta = dep["metadata"]
    assert isinstance(meta, dict)
    return next(
        (
            m["fieldsV1"]
            for m in meta.get("managedFields") or []
            if m["manager"] == FIELD_MANAGER and m["operation"] == "Apply"
        ),
        None,
    )


@pytest.fixture
def c() -> FakeCluster:
    c = FakeCluster()
    c.apply(render(SAMPLES / "vllm-agg" / "input", c.ns))
    return c


def worker(c: FakeCluster) -> str:
    return next(n for n in c.deployments() if n.startswith("vllm-agg-vllmdecodeworker-"))


def test_changed_intents_are_applied_with_our_field_manager(c: FakeCluster) -> None:
    graph, plan = c.snapshot("vllm-agg"), Plan()
    deps = {d["metadata"]["name"]: d for d in graph.deployments}
    plan.set_replicas(deps[worker(c)], 3)
    plan.set_restart(deps[FRONTEND], "r1")
    ApplyReconciler().reconcile(graph, plan, c.loop.ctx)
    assert c.replicas(worker(c)) == 3
    assert ours(c.deployment(worker(c))) == {"f:spec": {"f:replicas": {}}}
    front = c.deployment(FRONTEND)
    assert front["spec"]["template"]["metadata"]["annotations"]["nvidia.com/restartAt"] == "r1"
    assert ours(front) == {
        "f:spec": {"f:template": {"f:metadata": {"f:annotations": {"f:nvidia.com/restartAt": {}}}}}
    }
    assert plan.requeue_after == 0.0 and plan.wrote_deployments
    # the cache already holds our writes (the next snapshot sees them)
    cached = c.caches.deployments.store.get((c.ns, worker(c)))
    assert cached is not None
    assert (
        cached["metadata"]["resourceVersion"]
        == c.deployment(worker(c))["metadata"]["resourceVersion"]
    )


def test_unchanged_intents_are_not_written(c: FakeCluster) -> None:
    graph, plan = c.snapshot("vllm-agg"), Plan()
    plan.set_replicas(
        next(d for d in graph.deployments if d["metadata"]["name"] == FRONTEND), 1
    )  # what it has
    before = c.writes()
    ApplyReconciler().reconcile(graph, plan, c.loop.ctx)
    assert c.writes() == before
    assert not plan.wrote_deployments and plan.requeue_after is None


def test_every_owned_field_is_carried_into_the_next_apply(c: FakeCluster) -> None:
    """Server-side apply drops a field its manager stops sending: a later apply that only
    changes the replicas must still carry the restart stamp and the owner reference."""
    c.converge("vllm-agg")  # sized and owned by the DGD
    graph, plan = c.snapshot("vllm-agg"), Plan()
    plan.set_restart(next(d for d in graph.deployments if d["metadata"]["name"] == worker(c)), "r1")
    ApplyReconciler().reconcile(graph, plan, c.loop.ctx)
    graph, plan = c.snapshot("vllm-agg"), Plan()
    plan.set_replicas(next(d for d in graph.deployments if d["metadata"]["name"] == worker(c)), 5)
    ApplyReconciler().reconcile(graph, plan, c.loop.ctx)
    dep = c.deployment(worker(c))
    assert dep["spec"]["replicas"] == 5
    assert dep["spec"]["template"]["metadata"]["annotations"]["nvidia.com/restartAt"] == "r1"
    assert [r["name"] for r in dep["metadata"]["ownerReferences"]] == ["vllm-agg"]


def test_a_decision_from_a_stale_cache_conflicts(c: FakeCluster) -> None:
    graph, plan = c.snapshot("vllm-agg"), Plan()
    plan.set_replicas(next(d for d in graph.deployments if d["metadata"]["name"] == FRONTEND), 4)
    c.set_status(FRONTEND)  # the Deployment changes after the snapshot
    with pytest.raises(ConflictError):
        ApplyReconciler().reconcile(graph, plan, c.loop.ctx)
    assert c.replicas(FRONTEND) == 1


def test_parallel_writes_all_run_before_the_failure_is_raised(c: FakeCluster) -> None:
    graph, plan = c.snapshot("vllm-agg"), Plan()
    deps = {d["metadata"]["name"]: d for d in graph.deployments}
    plan.set_replicas(deps[FRONTEND], 4)
    plan.set_replicas(deps[worker(c)], 3)
    c.set_status(FRONTEND)
    with pytest.raises(ConflictError):
        ApplyReconciler().reconcile(graph, plan, c.loop.ctx)
    assert (c.replicas(FRONTEND), c.replicas(worker(c))) == (1, 3)


def test_other_reconcilers_writes_go_out_with_the_pass() -> None:
    c = FakeCluster()
    c.apply(render(SAMPLES / "scaling-adapter" / "input", c.ns))
    graph, plan = c.snapshot("sglang-disagg"), Plan()
    adapter = graph.adapters["decode"]
    plan.writes.append(
        Write(
            DGDSAS,
            {
                "apiVersion": DGDSAS.api_version,
                "kind": DGDSAS.kind,
                "metadata": {
                    "name": "sglang-disagg-decode",
                    "namespace": c.ns,
                    "resourceVersion": adapter["metadata"]["resourceVersion"],
                },
                "status": {"replicas": 2},
            },
            subresource="status",
        )
    )
    plan.writes.append(
        Write(
            DGDSAS,
            {
                "metadata": {"name": "sglang-disagg-frontend", "namespace": c.ns},
                "spec": {"replicas": 3},
            },
            subresource="scale",
            merge=True,
        )
    )
    ApplyReconciler().reconcile(graph, plan, c.loop.ctx)
    assert c.adapter("sglang-disagg-decode")["status"] == {"replicas": 2}
    assert c.adapter("sglang-disagg-frontend")["spec"]["replicas"] == 3
    assert not plan.wrote_deployments  # no Deployment was written


def test_deletions_carry_preconditions(c: FakeCluster) -> None:
    graph = c.snapshot("vllm-agg")
    old = next(d for d in graph.deployments if d["metadata"]["name"] == worker(c))
    name = worker(c)
    # the GitOps tool deleted and re-created it meanwhile: another object, not deleted
    c.gitops.delete(DEPLOYMENTS, c.ns, name)
    c.apply(
        [o for o in render(SAMPLES / "vllm-agg" / "input", c.ns) if o["metadata"]["name"] == name]
    )
    plan = Plan(deletions=[old])
    with pytest.raises(ConflictError):
        ApplyReconciler().reconcile(graph, plan, c.loop.ctx)
    assert name in c.deployments()
    # the current one is deleted; one already gone is fine
    graph = c.snapshot("vllm-agg")
    current = next(d for d in graph.deployments if d["metadata"]["name"] == name)
    ApplyReconciler().reconcile(graph, Plan(deletions=[current]), c.loop.ctx)
    assert name not in c.deployments()
    ApplyReconciler().reconcile(graph, Plan(deletions=[current]), c.loop.ctx)


def test_a_deployment_being_deleted_is_not_written(c: FakeCluster) -> None:
    graph, plan = c.snapshot("vllm-agg"), Plan()
    dep = next(d for d in graph.deployments if d["metadata"]["name"] == FRONTEND)
    dep = {**dep, "metadata": {**dep["metadata"], "deletionTimestamp": "2025-01-01T00:00:00Z"}}
    plan.set_replicas(dep, 4)
    before = c.writes()
    ApplyReconciler().reconcile(graph, plan, c.loop.ctx)
    assert c.writes() == before
