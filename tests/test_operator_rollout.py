"""Managed rolling update of worker generations against the real kube-apiserver.

Git changes the worker spec -> the renderer names a new worker generation -> GitOps applies
it beside the old one (old generations are never pruned by GitOps). The test plays
kube-controller-manager: new pods become available one per step, pods of a scaled-down
generation disappear at once (the worst case for availability). Every state observed is
checked against max-surge / max-unavailable.
"""

from __future__ import annotations

import copy
import time
from dataclasses import dataclass
from typing import Any

import pytest
from dyn_gitops_operator import FIELD_MANAGER
from dyn_gitops_operator.kube import DEPLOYMENTS, DGDS, Kube
from dyn_gitops_operator.testing import (
    DeploymentSimulator,
    gitops_apply,
    running,
    settings_for_tests,
    wait_for,
)
from support.graphs import WORKER, rollout_step, worker_name
from support.graphs import rollout_graph as graph
from support.rendering import render

pytestmark = pytest.mark.realk8s


def workers(k: Kube, ns: str) -> dict[str, dict[str, Any]]:
    items, _ = k.list(DEPLOYMENTS, ns, label_selector="nvidia.com/dynamo-component=" + WORKER)
    return {d["metadata"]["name"]: d for d in items}


@dataclass
class Kcm:
    """Deployment controller stand-in: new pods need one step each to become available."""

    sim: DeploymentSimulator
    stuck: set[str]
    failed: set[str]

    def policy(self, dep: dict[str, Any]) -> dict[str, Any] | None:
        return rollout_step(dep, stuck=self.stuck, failed=self.failed)


def effective(dep: dict[str, Any]) -> tuple[int, int]:
    """(spec, pods that are surely available): a scale-down may kill available pods first."""
    spec = dep["spec"]["replicas"]
    avail = int((dep.get("status") or {}).get("availableReplicas") or 0)
    return spec, min(spec, avail)


def drive(
    k: Kube,
    ns: str,
    kcm: Kcm,
    *,
    desired: int,
    surge: int,
    unavailable: int,
    until: Any,
    timeout: float = 40,
) -> list[dict[str, tuple[int, int]]]:
    """Alternate kcm steps and observations until ``until(workers)``; check every state."""
    seen: list[dict[str, tuple[int, int]]] = []
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        deps = workers(k, ns)
        state = {n: effective(d) for n, d in deps.items()}
        if not seen or state != seen[-1]:
            seen.append(state)
            total_spec = sum(s for s, _ in state.values())
            total_avail = sum(a for _, a in state.values())
            assert total_spec <= desired + surge, f"max surge exceeded: {state}"
            assert total_avail >= desired - unavailable, f"max unavailable exceeded: {state}"
        if until(deps):
            return seen
        kcm.sim.step()
        time.sleep(0.05)
    raise AssertionError(f"rollout did not finish: {seen[-3:]}")


def ready_all(k: Kube, ns: str, sim: DeploymentSimulator) -> None:
    for name in [*workers(k, ns), "roll-frontend"]:
        sim.set_status(name)


@pytest.mark.parametrize(
    ("desired", "surge_ann", "unav_ann", "surge", "unav"),
    [
        (4, None, None, 1, 1),  # defaults: 25% / 25%
        (3, "2", "0", 2, 0),  # never below desired, two at a time
    ],
)
def test_rollout_respects_budget_and_removes_old_generation(
    k: Kube,
    namespace: str,
    desired: int,
    surge_ann: str | None,
    unav_ann: str | None,
    surge: int,
    unav: int,
) -> None:
    first = render([graph("img:1", desired, surge_ann, unav_ann)], namespace)
    old = worker_name(first)
    gitops_apply(k, first)
    sim = DeploymentSimulator(k, namespace)
    kcm = Kcm(sim, set(), set())
    sim.policy = kcm.policy
    with running(settings_for_tests(namespace), k):
        wait_for(
            lambda: workers(k, namespace)[old]["spec"]["replicas"] == desired,
            what="first generation sized",
        )
        ready_all(k, namespace, sim)
        wait_for(
            lambda: k.get(DGDS, namespace, "roll").get("status", {}).get("state") == "successful",
            what="graph ready before the update",
        )

        second = render([graph("img:2", desired, surge_ann, unav_ann)], namespace)
        new = worker_name(second)
        assert new != old
        gitops_apply(k, second)
        st = wait_for(
            lambda: (
                (s := k.get(DGDS, namespace, "roll")["status"])
                .get("rollingUpdate", {})
                .get("phase")
                in ("Pending", "InProgress")
                and s
            ),
            what="rollout reported",
        )
        assert st["state"] == "pending"
        seen = drive(
            k,
            namespace,
            kcm,
            desired=desired,
            surge=surge,
            unavailable=unav,
            until=lambda deps: old not in deps,
        )
        # the drain was gradual: the old generation went through intermediate sizes
        old_sizes = [s[old][0] for s in seen if old in s]
        assert len(set(old_sizes)) > 2, old_sizes
        assert old_sizes == sorted(old_sizes, reverse=True)

        sim.step()
        st = wait_for(
            lambda: (
                (s := k.get(DGDS, namespace, "roll")["status"])
                .get("rollingUpdate", {})
                .get("phase")
                == "Completed"
                and s["state"] == "successful"
                and s
            ),
            what="rollout completed",
        )
        ru = st["rollingUpdate"]
        assert ru["updatedComponents"] == [WORKER] and ru["startTime"] <= ru["endTime"]
        assert st["components"][WORKER]["componentNames"] == [new]
        assert workers(k, namespace)[new]["spec"]["replicas"] == desired


def test_failed_generation_keeps_the_old_one_serving_and_git_revert_rolls_back(
    k: Kube, namespace: str
) -> None:
    desired, surge, unav = 4, 1, 1
    first = render([graph("img:1", desired)], namespace)
    old = worker_name(first)
    gitops_apply(k, first)
    sim = DeploymentSimulator(k, namespace)
    kcm = Kcm(sim, set(), set())
    sim.policy = kcm.policy
    with running(settings_for_tests(namespace), k):
        wait_for(
            lambda: workers(k, namespace)[old]["spec"]["replicas"] == desired,
            what="first generation sized",
        )
        ready_all(k, namespace, sim)
        second = render([graph("img:broken", desired)], namespace)
        new = worker_name(second)
        kcm.stuck.add(new)  # its pods never become ready ...
        gitops_apply(k, second)
        drive(
            k,
            namespace,
            kcm,
            desired=desired,
            surge=surge,
            unavailable=unav,
            until=lambda deps: (
                new in deps
                and deps[new]["spec"]["replicas"] >= 1
                and deps[old]["spec"]["replicas"] < desired
            ),
            timeout=20,
        )
        kcm.failed.add(new)  # ... and the Deployment controller gives up
        st = wait_for(
            lambda: (
                kcm.sim.step() >= 0
                and (s := k.get(DGDS, namespace, "roll")["status"])["state"] == "failed"
                and s
            ),
            what="failure reported",
        )
        assert st["rollingUpdate"]["phase"] == "Failed"
        cond = st["conditions"][0]
        assert cond["reason"] == "rolling_update_failed"
        assert new in cond["message"] and "ProgressDeadlineExceeded" in cond["message"]
        frozen = {n: d["spec"]["replicas"] for n, d in workers(k, namespace).items()}
        for _ in range(10):  # nothing moves any more, the old generation keeps serving
            kcm.sim.step()
            time.sleep(0.1)
            deps = workers(k, namespace)
            assert {n: d["spec"]["replicas"] for n, d in deps.items()} == frozen
            assert effective(deps[old])[1] >= desired - unav

        # Git reverts the worker change: the old generation is current again, the broken
        # one is drained and deleted
        gitops_apply(k, copy.deepcopy(first))
        drive(
            k,
            namespace,
            kcm,
            desired=desired,
            surge=surge,
            unavailable=unav,
            until=lambda deps: new not in deps and deps[old]["spec"]["replicas"] == desired,
        )
        ready_all(k, namespace, sim)
        st = wait_for(
            lambda: (s := k.get(DGDS, namespace, "roll")["status"])["state"] == "successful" and s,
            what="recovered",
        )
        assert st["rollingUpdate"]["phase"] == "Completed"
    mf = {m["manager"] for m in k.get(DEPLOYMENTS, namespace, old)["metadata"]["managedFields"]}
    assert FIELD_MANAGER in mf


def test_restart_requested_during_a_rollout_is_superseded(k: Kube, namespace: str) -> None:
    first = render([graph("img:1", 2)], namespace)
    gitops_apply(k, first)
    sim = DeploymentSimulator(k, namespace)
    kcm = Kcm(sim, set(), set())
    sim.policy = kcm.policy
    with running(settings_for_tests(namespace), k):
        wait_for(
            lambda: workers(k, namespace)[worker_name(first)]["spec"]["replicas"] == 2, what="sized"
        )
        ready_all(k, namespace, sim)
        second = render([graph("img:2", 2)], namespace)
        kcm.stuck.add(worker_name(second))  # the rollout stays in progress
        gitops_apply(k, second)
        wait_for(
            lambda: (
                k.get(DGDS, namespace, "roll")["status"].get("rollingUpdate", {}).get("phase")
                == "InProgress"
            ),
            what="rollout in progress",
        )
        restart = graph("img:2", 2)
        restart["spec"]["restart"] = {"id": "during-rollout"}
        gitops_apply(
            k, [o for o in render([restart], namespace) if o["kind"] == "DynamoGraphDeployment"]
        )
        wait_for(
            lambda: (
                k.get(DGDS, namespace, "roll")["status"].get("restart")
                == {"observedID": "during-rollout", "phase": "Superseded"}
            ),
            what="superseded",
        )
        for dep in k.list(DEPLOYMENTS, namespace)[0]:
            ann = dep["spec"]["template"]["metadata"].get("annotations") or {}
            assert "nvidia.com/restartAt" not in ann, dep["metadata"]["name"]


def test_worker_service_removed_from_git_is_drained_and_deleted(k: Kube, namespace: str) -> None:
    with_extra = graph("img:1", 2)
    with_extra["spec"]["services"]["Extra"] = copy.deepcopy(
        with_extra["spec"]["services"][WORKER]
    ) | {"replicas": 1}
    first = render([with_extra], namespace)
    gitops_apply(k, first)
    extra = next(
        o["metadata"]["name"]
        for o in first
        if o["kind"] == "Deployment" and o["metadata"]["name"].startswith("roll-extra-")
    )
    sim = DeploymentSimulator(k, namespace)
    sim.start(0.1)
    try:
        with running(settings_for_tests(namespace), k):
            wait_for(
                lambda: (
                    k.get(DGDS, namespace, "roll").get("status", {}).get("state") == "successful"
                ),
                what="ready with Extra",
            )
            second = render([graph("img:1", 2)], namespace)  # Extra removed from Git
            gitops_apply(k, second)
            wait_for(
                lambda: (
                    extra not in {d["metadata"]["name"] for d in k.list(DEPLOYMENTS, namespace)[0]}
                ),
                timeout=30,
                what="Extra drained and deleted",
            )
            st = wait_for(
                lambda: (
                    (s := k.get(DGDS, namespace, "roll")["status"])
                    .get("rollingUpdate", {})
                    .get("phase")
                    == "Completed"
                    and s["state"] == "successful"
                    and s
                ),
                what="completed",
            )
            assert set(st["components"]) == {"Frontend", WORKER}
            names = {d["metadata"]["name"] for d in k.list(DEPLOYMENTS, namespace)[0]}
            assert names == {"roll-frontend", worker_name(second)}
    finally:
        sim.stop()


def test_managed_workers_are_owned_by_their_dgd(k: Kube, namespace: str) -> None:
    """A DGD removed from Git takes its Prune=false workers with it: the controller makes
    the live DGD their owner (Kubernetes' garbage collector then deletes them with it; the
    test control plane runs no garbage collector, so the reference itself is checked).
    A re-sync keeps it; a graph whose DGD is not in the cluster owns nothing."""
    objs = render([graph("img:1", 2)], namespace)
    gitops_apply(k, objs)
    worker = worker_name(objs)
    with running(settings_for_tests(namespace), k):
        uid = k.get(DGDS, namespace, "roll")["metadata"]["uid"]
        want = [
            {
                "apiVersion": "nvidia.com/v1beta1",
                "kind": "DynamoGraphDeployment",
                "name": "roll",
                "uid": uid,
            }
        ]
        wait_for(
            lambda: (
                k.get(DEPLOYMENTS, namespace, worker)["metadata"].get("ownerReferences") == want
            ),
            what="owner reference",
        )
        gitops_apply(k, objs)  # an Argo CD / Flux re-sync
        time.sleep(0.5)
        assert k.get(DEPLOYMENTS, namespace, worker)["metadata"]["ownerReferences"] == want
        assert (
            "ownerReferences" not in k.get(DEPLOYMENTS, namespace, "roll-frontend")["metadata"]
        )  # not Prune=false: the GitOps tool prunes it

        no_dgd = render(
            [graph("img:1", 2) | {"metadata": {"name": "bare"}}], namespace, emit_source=False
        )
        gitops_apply(k, no_dgd)
        bare = next(
            o["metadata"]["name"]
            for o in no_dgd
            if o["kind"] == "Deployment" and "vllmdecodeworker" in o["metadata"]["name"]
        )
        wait_for(
            lambda: k.get(DEPLOYMENTS, namespace, bare)["spec"].get("replicas") == 2,
            what="the DGD-less worker is sized",
        )
        assert "ownerReferences" not in k.get(DEPLOYMENTS, namespace, bare)["metadata"]
