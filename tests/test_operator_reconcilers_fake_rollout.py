"""RolloutReconciler on the fake API server (the real-server scenarios:
test_operator_rollout.py): managed workers sized, a new worker generation surged in and the
old one drained within max-surge / max-unavailable (25 % / 25 % by default), old
generations deleted once drained, a failed generation freezing both sides, a Git revert, a
removed worker service, Recreate."""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
from dyn_gitops_operator.reconcilers.rollout import RolloutReconciler
from dyn_gitops_operator.resources import DEPLOYMENTS, LWS
from support.fakecluster import FakeCluster
from support.graphs import WORKER, rollout_step, worker_name
from support.graphs import rollout_graph as graph
from support.rendering import render

Obj = dict[str, Any]


@dataclass
class Kcm:
    """Deployment controller stand-in: a new pod needs one step to become available, a
    scaled-down pod is gone at once (the worst case for availability)."""

    stuck: set[str] = field(default_factory=set)
    failed: set[str] = field(default_factory=set)

    def policy(self, dep: Obj) -> Obj:
        return rollout_step(dep, stuck=self.stuck, failed=self.failed)


def effective(dep: Obj) -> tuple[int, int]:
    spec = dep["spec"]["replicas"]
    return spec, min(spec, int((dep.get("status") or {}).get("availableReplicas") or 0))


State = dict[str, tuple[int, int]]


def drive(
    c: FakeCluster,
    kcm: Kcm,
    *,
    desired: int,
    surge: int,
    unavailable: int,
    until: Callable[[dict[str, Obj]], bool],
    steps: int = 60,
) -> list[State]:
    """Controller passes and kcm steps in turn until ``until``; every state in the budget."""
    seen: list[State] = []
    for _ in range(steps):
        c.converge("roll")
        deps = c.deployments(WORKER)
        state = {n: effective(d) for n, d in deps.items()}
        if not seen or state != seen[-1]:
            seen.append(state)
            assert sum(s for s, _ in state.values()) <= desired + surge, state
            assert sum(a for _, a in state.values()) >= desired - unavailable, state
        if until(deps):
            return seen
        c.kcm_step(kcm.policy)
    raise AssertionError(f"rollout did not finish: {seen[-3:]}")


def settled(c: FakeCluster, objs: list[Obj], kcm: Kcm) -> None:
    """First generation applied, sized, every pod ready, the graph successful."""
    c.apply(objs)
    for _ in range(10):
        c.converge("roll")
        if not c.kcm_step(kcm.policy):
            break
    c.converge("roll")
    assert c.status("roll")["state"] == "successful"


@pytest.mark.parametrize(
    ("desired", "surge_ann", "unav_ann", "surge", "unav", "first"),
    [
        (4, None, None, 1, 1, {"old": 3, "new": 1}),  # defaults: 25 % / 25 %
        (3, "2", "0", 2, 0, {"old": 3, "new": 2}),  # never below desired, two at a time
    ],
)
def test_rollout_respects_budget_and_removes_old_generation(
    desired: int,
    surge_ann: str | None,
    unav_ann: str | None,
    surge: int,
    unav: int,
    first: dict[str, int],
) -> None:
    c, kcm = FakeCluster(), Kcm()
    objs = render([graph("img:1", desired, surge_ann, unav_ann)], c.ns)
    old = worker_name(objs)
    settled(c, objs, kcm)
    assert c.replicas(old) == desired

    second = render([graph("img:2", desired, surge_ann, unav_ann)], c.ns)
    new = worker_name(second)
    assert new != old
    c.advance(10)
    c.apply(second)
    c.reconcile("roll")
    # the first step of the budget arithmetic (the new generation was created at 1)
    assert {"old": c.replicas(old), "new": c.replicas(new)} == first
    c.converge("roll")
    st = c.status("roll")
    assert (st["state"], st["rollingUpdate"]["phase"]) == ("pending", "InProgress")
    assert st["rollingUpdate"]["startTime"] == "2025-06-01T00:00:10Z"
    cond = next(x for x in st["conditions"] if x["type"] == "Ready")
    assert (cond["status"], cond["reason"]) == ("False", "rolling_update_in_progress")
    # mergeWorkerComponentStatuses (dgd_worker_rollout_reconciler.go @ 2a6da14c8): both
    # generations listed, routing still on the old generation's runtime namespace
    mid = st["components"][WORKER]
    assert mid["componentNames"] == sorted([old, new])
    assert mid["runtimeNamespace"].endswith("-" + old.rsplit("-", 1)[1])
    new_status = c.kube.get(DEPLOYMENTS, c.ns, new).get("status") or {}
    assert mid["updatedReplicas"] == new_status.get("updatedReplicas", 0)  # the new one only

    c.advance(10)
    seen = drive(
        c, kcm, desired=desired, surge=surge, unavailable=unav, until=lambda deps: old not in deps
    )
    old_sizes = [s[old][0] for s in seen if old in s]
    assert len(set(old_sizes)) > 2 and old_sizes == sorted(old_sizes, reverse=True)

    c.advance(10)
    c.kcm_step(kcm.policy)
    c.converge("roll")
    st = c.status("roll")
    assert (st["state"], st["rollingUpdate"]) == (
        "successful",
        {
            "phase": "Completed",
            "startTime": "2025-06-01T00:00:10Z",
            "endTime": "2025-06-01T00:00:20Z",
            "updatedComponents": [WORKER],
        },
    )
    assert st["components"][WORKER]["componentNames"] == [new]
    assert st["components"][WORKER]["runtimeNamespace"].endswith("-" + new.rsplit("-", 1)[1])
    assert c.replicas(new) == desired


def test_failed_generation_keeps_the_old_one_serving_and_git_revert_rolls_back() -> None:
    c, kcm = FakeCluster(), Kcm()
    first = render([graph("img:1", 4)], c.ns)
    old = worker_name(first)
    settled(c, first, kcm)
    second = render([graph("img:broken", 4)], c.ns)
    new = worker_name(second)
    kcm.stuck.add(new)  # its pods never become ready ...
    c.apply(second)
    drive(
        c,
        kcm,
        desired=4,
        surge=1,
        unavailable=1,
        until=lambda deps: new in deps and deps[old]["spec"]["replicas"] < 4,
    )
    kcm.failed.add(new)  # ... and the Deployment controller gives up
    c.kcm_step(kcm.policy)
    c.converge("roll")
    st = c.status("roll")
    assert (st["state"], st["rollingUpdate"]["phase"]) == ("failed", "Failed")
    cond = st["conditions"][0]
    assert cond["reason"] == "rolling_update_failed"
    assert new in cond["message"] and "ProgressDeadlineExceeded" in cond["message"]
    frozen = {n: d["spec"]["replicas"] for n, d in c.deployments(WORKER).items()}
    for _ in range(5):  # nothing moves any more, the old generation keeps serving
        c.kcm_step(kcm.policy)
        c.converge("roll")
        deps = c.deployments(WORKER)
        assert {n: d["spec"]["replicas"] for n, d in deps.items()} == frozen
        assert effective(deps[old])[1] >= 3

    c.apply(copy.deepcopy(first))  # Git reverts: the broken generation is drained, deleted
    drive(
        c,
        kcm,
        desired=4,
        surge=1,
        unavailable=1,
        until=lambda deps: new not in deps and deps[old]["spec"]["replicas"] == 4,
    )
    c.kcm_step(kcm.policy)
    c.converge("roll")
    st = c.status("roll")
    assert (st["state"], st["rollingUpdate"]["phase"]) == ("successful", "Completed")


def test_worker_service_removed_from_git_is_drained_and_deleted() -> None:
    c, kcm = FakeCluster(), Kcm()
    with_extra = graph("img:1", 2)
    with_extra["spec"]["services"]["Extra"] = copy.deepcopy(
        with_extra["spec"]["services"][WORKER]
    ) | {"replicas": 1}
    first = render([with_extra], c.ns)
    extra = next(
        o["metadata"]["name"]
        for o in first
        if o["kind"] == "Deployment" and o["metadata"]["name"].startswith("roll-extra-")
    )
    settled(c, first, kcm)
    second = render([graph("img:1", 2)], c.ns)
    c.apply(second)  # Extra removed from Git (GitOps does not prune managed workers)
    c.reconcile("roll")
    assert c.replicas(extra) == 0  # drained first (its pods still run) ...
    c.converge("roll")
    assert extra in c.deployments()
    c.kcm_step(kcm.policy)
    c.converge("roll")
    assert extra not in c.deployments()  # ... deleted once drained
    for _ in range(20):  # (the worker hash covers every worker: the worker rolls too)
        st = c.status("roll")
        if st["state"] == "successful" and st["rollingUpdate"]["phase"] == "Completed":
            break
        c.kcm_step(kcm.policy)
        c.converge("roll")
    assert set(st["components"]) == {"Frontend", WORKER}
    assert set(c.deployments()) == {"roll-frontend", worker_name(second)}
    assert st["rollingUpdate"]["updatedComponents"] == [WORKER]


def test_recreate_drains_first_then_starts_the_new_generation() -> None:
    c, kcm = FakeCluster(), Kcm()
    first = render([graph("img:1", 2)], c.ns)
    old = worker_name(first)
    settled(c, first, kcm)
    second = render([graph("img:2", 2)], c.ns)
    new = worker_name(second)
    for o in second:
        if o["metadata"]["name"] == new:
            o["spec"]["strategy"] = {"type": "Recreate"}
    c.apply(second)
    c.converge("roll")
    assert (c.replicas(old), c.replicas(new)) == (0, 0)  # old pods still running
    c.kcm_step(kcm.policy)
    c.converge("roll")
    assert c.replicas(new) == 2  # nothing old runs any more
    drive(c, kcm, desired=2, surge=0, unavailable=2, until=lambda deps: old not in deps)


def test_one_worker_with_max_unavailable_one_is_never_left_without_a_serving_pod() -> None:
    # ai-dynamo/dynamo#13622's settings (maxUnavailable 1, maxSurge 0) on one replica: the
    # operator's arithmetic drains the old pod first; here one new pod surges instead
    c, kcm = FakeCluster(), Kcm()
    settled(c, render([graph("img:1", 1, "0", "1")], c.ns), kcm)
    second = render([graph("img:2", 1, "0", "1")], c.ns)
    new = worker_name(second)
    c.apply(second)
    seen = drive(c, kcm, desired=1, surge=1, unavailable=0, until=lambda deps: list(deps) == [new])
    assert max(sum(s for s, _ in st.values()) for st in seen) == 2  # the surge pod


def test_a_deployment_with_terminating_pods_is_not_drained() -> None:
    from dyn_gitops_operator.reconcilers.rollout import drained

    dep: Obj = {"metadata": {"generation": 2}, "spec": {"replicas": 0}}
    dep["status"] = {"observedGeneration": 2, "replicas": 0, "terminatingReplicas": 1}
    assert not drained(dep)  # status.replicas leaves terminating pods out
    dep["status"]["terminatingReplicas"] = 0
    assert drained(dep)


def test_the_decision_sizes_managed_workers_only() -> None:
    c = FakeCluster()
    c.apply(render([graph("img:1", 3)], c.ns))
    plan = c.plan("roll", RolloutReconciler())
    worker = next(n for n in c.deployments() if n.startswith("roll-vllmdecodeworker-"))
    assert {n: i.replicas for n, i in plan.intents.items()} == {worker: 3}
    assert plan.rolling_update is None and plan.rollout_state is None


# ------------------------------------------------------------------ multinode (LeaderWorkerSet)
def _multinode(image: str, desired: int) -> Obj:
    dgd = graph(image, desired)
    dgd["spec"]["services"][WORKER]["multinode"] = {"nodeCount": 2}
    dgd["spec"]["services"][WORKER]["extraPodSpec"]["mainContainer"]["args"] = ["--model", "m"]
    return dgd


def _lws_step(c: FakeCluster) -> dict[str, tuple[int, int]]:
    """The LeaderWorkerSet controller stand-in: a new group needs one step to become
    ready, a removed group is gone at once. Returns {name: (spec, ready)}."""
    out = {}
    for lws in c.kube.list(LWS, c.ns, label_selector=f"nvidia.com/dynamo-component={WORKER}")[0]:
        spec = int(lws["spec"].get("replicas", 1))
        prev = int((lws.get("status") or {}).get("readyReplicas") or 0)
        ready = min(spec, prev + 1)
        status = {
            "replicas": spec,
            "readyReplicas": ready,
            "updatedReplicas": spec,
            "conditions": [{"type": "Available", "status": "True" if ready >= spec else "False"}],
        }
        if status != lws.get("status"):
            c.kcm.update(LWS, {**lws, "status": status}, subresource="status")
        out[lws["metadata"]["name"]] = (spec, ready)
    return out


def test_multinode_worker_generations_roll_like_deployments() -> None:
    """A managed multinode worker is one natively scaled LeaderWorkerSet per generation
    (#9612, v1.2): the controller sizes it to the desired replicas and, on a new worker
    hash, surges the new set and drains the old one within the 25 % / 25 % budget (the
    operator's rolling update of worker DCDs, whatever their workload), then deletes it."""
    c = FakeCluster()
    kinds = ("Deployment", "DynamoGraphDeployment", "LeaderWorkerSet")
    first = render([_multinode("img:1", 4)], c.ns, lws=True)
    (old,) = [o["metadata"]["name"] for o in first if o["kind"] == "LeaderWorkerSet"]
    c.apply(first, kinds=kinds)
    c.set_status("roll-frontend")
    for _ in range(10):
        c.converge("roll")
        _lws_step(c)
    c.converge("roll")
    assert c.kube.get(LWS, c.ns, old)["spec"]["replicas"] == 4
    assert c.status("roll")["state"] == "successful"

    second = render([_multinode("img:2", 4)], c.ns, lws=True)
    (new,) = [o["metadata"]["name"] for o in second if o["kind"] == "LeaderWorkerSet"]
    assert new != old and new.endswith("-0")
    c.apply(second, kinds=kinds)
    seen = []
    for _ in range(40):
        c.converge("roll")
        state = _lws_step(c)
        seen.append(state)
        assert sum(s for s, _ in state.values()) <= 4 + 1, state
        assert sum(r for _, r in state.values()) >= 4 - 1, state
        if old not in state:
            break
    assert old not in seen[-1] and seen[-1][new][0] == 4
    c.converge("roll")
    assert c.status("roll")["rollingUpdate"]["phase"] == "Completed"


def test_recreate_looks_again_at_an_old_leaderworkersets_pods() -> None:
    """Recreate with LeaderWorkerSets: the old set drained by its status (0 groups, none
    ready) while one of its pods is still there: the new set stays at 0, and the controller
    looks at the pods again after ``LWS_PODS_POLL``, since they are read, not watched, and
    their going changes nothing in the set's status (no terminating count). Without it a
    rollout stalls with both sets at 0 (seen with the real LWS controller,
    tests/test_rollout_lws.py::test_leaderworkerset_recreate_drains_first)."""
    from dyn_gitops_operator.fakekube import KindRules
    from dyn_gitops_operator.resources import PODS
    from dyn_gitops_operator.settings import LWS_PODS_POLL

    c = FakeCluster(rules={PODS: KindRules()})
    kinds = ("Deployment", "DynamoGraphDeployment", "LeaderWorkerSet")

    def recreate(image: str) -> list[Obj]:
        dgd = _multinode(image, 2)
        dgd["spec"]["services"][WORKER]["annotations"] = {
            "nvidia.com/deployment-strategy": "Recreate"
        }
        return render([dgd], c.ns, lws=True)

    first = recreate("img:1")
    (old,) = [o["metadata"]["name"] for o in first if o["kind"] == "LeaderWorkerSet"]
    c.apply(first, kinds=kinds)
    c.set_status("roll-frontend")
    for _ in range(10):
        c.converge("roll")
        _lws_step(c)
    labels = {
        "leaderworkerset.sigs.k8s.io/name": old,
        "nvidia.com/dynamo-component": WORKER,
        "nvidia.com/dynamo-graph-deployment-name": "roll",
    }
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"{old}-0", "labels": labels}}
    c.kcm.create(PODS, {**pod, "metadata": {**pod["metadata"], "namespace": c.ns}})
    second = recreate("img:2")
    (new,) = [o["metadata"]["name"] for o in second if o["kind"] == "LeaderWorkerSet"]
    c.apply(second, kinds=kinds)
    for _ in range(10):
        c.converge("roll")
        state = _lws_step(c)
        if state.get(old) == (0, 0):
            break
    assert state.get(old) == (0, 0), state
    requeue = c.reconcile("roll")
    assert c.kube.get(LWS, c.ns, new)["spec"]["replicas"] == 0  # a pod of the old one left
    assert requeue == LWS_PODS_POLL
    c.kcm.delete(PODS, c.ns, f"{old}-0")
    c.reconcile("roll")  # the look again, without any event
    assert c.kube.get(LWS, c.ns, new)["spec"]["replicas"] == 2
