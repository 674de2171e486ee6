"""Managed rolling update of worker generations on the realistic cluster.

Git changes the worker spec -> the renderer names a new worker generation -> GitOps applies
it beside the old one (old generations are never pruned by GitOps). Real
kube-controller-manager, scheduler and KWOK run the Deployments; the worker pods are held
Pending by a scheduling gate and the test releases one per step, so new pods become
available one at a time; pods of a scaled-down generation are deleted at once (KWOK). Every
state observed is checked against max-surge / max-unavailable.
"""

from __future__ import annotations

import copy
import time
from dataclasses import dataclass, field
from typing import Any

import pytest
from dyn_gitops_operator import FIELD_MANAGER
from dyn_gitops_operator.kube import DEPLOYMENTS, DGDS, Kube
from dyn_gitops_operator.testing import (
    gitops_apply,
    running,
    settings_for_tests,
    wait_for,
)
from support.cluster import hold, pods, release
from support.graphs import WORKER, worker_name
from support.graphs import rollout_graph as graph
from support.rendering import render

pytestmark = pytest.mark.realk8s


def workers(k: Kube, ns: str) -> dict[str, dict[str, Any]]:
    items, _ = k.list(DEPLOYMENTS, ns, label_selector="nvidia.com/dynamo-component=" + WORKER)
    return {d["metadata"]["name"]: d for d in items}


def held(objs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The rendered graph with its worker pods held until the test releases them."""
    return hold(objs, names=lambda n: n.startswith("roll-vllmdecodeworker-"))


@dataclass
class Kcm:
    """What the test lets the cluster do: one held worker pod becomes schedulable (then
    Ready) per step, none of a ``stuck`` generation."""

    api: Any
    namespace: str
    stuck: set[str] = field(default_factory=set)

    def step(self) -> int:
        def free(pod: str) -> bool:
            return not any(pod.startswith(gen + "-") for gen in self.stuck)

        return len(release(self.api, self.namespace, count=1, only=free))

    def give_up(self, k: Kube, deployment: str) -> None:
        """An admin shortens the progress deadline: kube-controller-manager then reports
        ProgressDeadlineExceeded for a rollout that made no progress."""
        k.request(
            "PATCH",
            DEPLOYMENTS.path(self.namespace, deployment),
            [("fieldManager", "cluster-admin")],
            {"spec": {"progressDeadlineSeconds": 1}},
            "application/merge-patch+json",
        )


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
    timeout: float = 120,
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
        kcm.step()
        time.sleep(0.2)
    raise AssertionError(f"rollout did not finish: {seen[-3:]}")


def ready_all(k: Kube, ns: str, kcm: Kcm) -> None:
    """Release every held worker pod until the graph is successful."""
    wait_for(
        lambda: (
            release(kcm.api, ns) is not None
            and k.get(DGDS, ns, "roll").get("status", {}).get("state") == "successful"
        ),
        timeout=90,
        what="graph ready",
    )


@pytest.mark.parametrize(
    ("desired", "surge_ann", "unav_ann", "surge", "unav"),
    [
        (4, None, None, 1, 1),  # defaults: 25% / 25%
        (3, "2", "0", 2, 0),  # never below desired, two at a time
    ],
)
def test_rollout_respects_budget_and_removes_old_generation(
    cluster_k: Kube,
    cluster_namespace: str,
    desired: int,
    surge_ann: str | None,
    unav_ann: str | None,
    surge: int,
    unav: int,
) -> None:
    k, namespace = cluster_k, cluster_namespace
    first = held(render([graph("img:1", desired, surge_ann, unav_ann)], namespace))
    old = worker_name(first)
    gitops_apply(k, first)
    kcm = Kcm(k.api, namespace)
    with running(settings_for_tests(namespace), k):
        wait_for(
            lambda: workers(k, namespace)[old]["spec"]["replicas"] == desired,
            what="first generation sized",
        )
        ready_all(k, namespace, kcm)

        second = held(render([graph("img:2", desired, surge_ann, unav_ann)], namespace))
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
        # the drain was gradual: the old generation was seen at a size between desired and 0
        # (polls under load can miss some of the intermediate sizes, not all: each waits for
        # the next pod that drive() makes ready)
        old_sizes = [s[old][0] for s in seen if old in s]
        assert any(0 < n < desired for n in old_sizes), old_sizes
        assert old_sizes == sorted(old_sizes, reverse=True)

        st = wait_for(
            lambda: (
                (s := k.get(DGDS, namespace, "roll")["status"])
                .get("rollingUpdate", {})
                .get("phase")
                == "Completed"
                and s["state"] == "successful"
                and s
            ),
            timeout=90,
            what="rollout completed",
        )
        ru = st["rollingUpdate"]
        assert ru["updatedComponents"] == [WORKER] and ru["startTime"] <= ru["endTime"]
        assert st["components"][WORKER]["componentNames"] == [new]
        assert workers(k, namespace)[new]["spec"]["replicas"] == desired


def test_failed_generation_keeps_the_old_one_serving_and_git_revert_rolls_back(
    cluster_k: Kube, cluster_namespace: str
) -> None:
    k, namespace = cluster_k, cluster_namespace
    desired, surge, unav = 4, 1, 1
    first = held(render([graph("img:1", desired)], namespace))
    old = worker_name(first)
    gitops_apply(k, first)
    kcm = Kcm(k.api, namespace)
    with running(settings_for_tests(namespace), k):
        wait_for(
            lambda: workers(k, namespace)[old]["spec"]["replicas"] == desired,
            what="first generation sized",
        )
        ready_all(k, namespace, kcm)
        second = held(render([graph("img:broken", desired)], namespace))
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
        )
        kcm.give_up(k, new)  # ... and the Deployment controller gives up
        st = wait_for(
            lambda: (
                kcm.step() >= 0
                and (s := k.get(DGDS, namespace, "roll")["status"])["state"] == "failed"
                and s
            ),
            timeout=90,
            what="failure reported",
        )
        assert st["rollingUpdate"]["phase"] == "Failed"
        cond = st["conditions"][0]
        assert cond["reason"] == "rolling_update_failed"
        assert new in cond["message"] and "ProgressDeadlineExceeded" in cond["message"]
        frozen = {n: d["spec"]["replicas"] for n, d in workers(k, namespace).items()}
        for _ in range(10):  # nothing moves any more, the old generation keeps serving
            kcm.step()
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
        ready_all(k, namespace, kcm)
        st = k.get(DGDS, namespace, "roll")["status"]
        assert st["rollingUpdate"]["phase"] == "Completed"
    mf = {m["manager"] for m in k.get(DEPLOYMENTS, namespace, old)["metadata"]["managedFields"]}
    assert FIELD_MANAGER in mf


def test_restart_requested_during_a_rollout_is_superseded(
    cluster_k: Kube, cluster_namespace: str
) -> None:
    k, namespace = cluster_k, cluster_namespace
    first = held(render([graph("img:1", 2)], namespace))
    gitops_apply(k, first)
    kcm = Kcm(k.api, namespace)
    with running(settings_for_tests(namespace), k):
        wait_for(
            lambda: workers(k, namespace)[worker_name(first)]["spec"]["replicas"] == 2, what="sized"
        )
        ready_all(k, namespace, kcm)
        second = held(render([graph("img:2", 2)], namespace))
        gitops_apply(k, second)  # its pods stay held: the rollout stays in progress
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
            timeout=60,
            what="superseded",
        )
        for dep in k.list(DEPLOYMENTS, namespace)[0]:
            ann = dep["spec"]["template"]["metadata"].get("annotations") or {}
            assert "nvidia.com/restartAt" not in ann, dep["metadata"]["name"]


def test_worker_service_removed_from_git_is_drained_and_deleted(
    cluster_k: Kube, cluster_namespace: str
) -> None:
    k, namespace = cluster_k, cluster_namespace
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
    with running(settings_for_tests(namespace), k):
        wait_for(
            lambda: k.get(DGDS, namespace, "roll").get("status", {}).get("state") == "successful",
            timeout=90,
            what="ready with Extra",
        )
        second = render([graph("img:1", 2)], namespace)  # Extra removed from Git
        gitops_apply(k, second)
        wait_for(
            lambda: extra not in {d["metadata"]["name"] for d in k.list(DEPLOYMENTS, namespace)[0]},
            timeout=90,
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
            timeout=60,
            what="completed",
        )
        assert set(st["components"]) == {"Frontend", WORKER}
        names = {d["metadata"]["name"] for d in k.list(DEPLOYMENTS, namespace)[0]}
        assert names == {"roll-frontend", worker_name(second)}


def test_managed_workers_are_owned_by_their_dgd(cluster_k: Kube, cluster_namespace: str) -> None:
    """A DGD removed from Git takes its Prune=false workers with it: the controller makes
    the live DGD their owner, and Kubernetes' garbage collector (kube-controller-manager on
    the realistic cluster) deletes them, pods included, once the DGD is deleted.
    A re-sync keeps it; a graph whose DGD is not in the cluster owns nothing."""
    k, namespace = cluster_k, cluster_namespace
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

        # the GitOps tool prunes the DGD: the garbage collector deletes its workers and pods
        k.request("DELETE", DGDS.path(namespace, "roll"), None, None)

        def collected() -> bool:
            names = {d["metadata"]["name"] for d in k.list(DEPLOYMENTS, namespace)[0]}
            return worker not in names and not pods(
                k.api,
                namespace,
                "nvidia.com/dynamo-graph-deployment-name=roll,nvidia.com/dynamo-component-type=worker",
            )

        wait_for(collected, timeout=90, what="the worker and its pods garbage-collected")
        assert k.get(DEPLOYMENTS, namespace, bare)["spec"]["replicas"] == 2  # not owned


def recreate_graph(image: str, desired: int) -> dict[str, Any]:
    """The rollout graph with ``nvidia.com/deployment-strategy: Recreate`` on its worker."""
    dgd = graph(image, desired)
    dgd["spec"]["services"][WORKER]["annotations"] = {"nvidia.com/deployment-strategy": "Recreate"}
    return dgd


def test_recreate_drains_the_old_generation_before_the_new_one_starts(
    cluster_k: Kube, cluster_kube: Any, cluster_namespace: str
) -> None:
    """ai-dynamo/dynamo#11909 on the realistic cluster: ``Recreate`` asks for a gap across
    worker generations. Every worker pod is followed through one pod watch: the old
    generation's pods are all gone (DELETED: terminating ones counted) before the first
    pod of the new generation serves; the new one is then sized to the desired count,
    nothing is orphaned, and the status says the rollout completed on the new generation.
    The new generation's pods are held: GitOps creates its Deployment at the API default
    of one replica, and a pod created before the controller sizes it to 0 (the documented
    window: seen here) is removed again without serving."""
    from support.podwatch import ReadyPods

    k, api, namespace = cluster_k, cluster_kube, cluster_namespace
    selector = "nvidia.com/dynamo-component=" + WORKER
    first = render([recreate_graph("img:1", 2)], namespace)
    second = held(render([recreate_graph("img:2", 2)], namespace))
    old, new = worker_name(first), worker_name(second)
    rendered = next(o for o in second if o["kind"] == "Deployment" and o["metadata"]["name"] == new)
    assert rendered["spec"]["strategy"] == {"type": "Recreate"}
    kcm = Kcm(api, namespace)

    def old_pods_left() -> bool:
        """Held pods are released only once this is False: the window pod (created before
        the controller sizes the new generation to 0) must not be released by the test."""
        return any(p.metadata.name.startswith(old + "-") for p in pods(api, namespace, selector))

    with running(settings_for_tests(namespace), k):
        gitops_apply(k, first)
        ready_all(k, namespace, kcm)
        with ReadyPods(api, namespace, selector) as watch:
            assert watch.count() == 2
            gitops_apply(k, second)
            wait_for(
                lambda: (
                    k.get(DGDS, namespace, "roll")["status"].get("rollingUpdate", {}).get("phase")
                    in ("Pending", "InProgress")
                ),
                60,
                "rollout reported",
            )
            wait_for(
                lambda: (
                    (old_pods_left() or release(api, namespace) is not None)
                    and old not in workers(k, namespace)
                ),
                120,
                "the new generation's pods released once the old pods are gone, the old "
                "generation deleted",
            )
            ready_all(k, namespace, kcm)
            wait_for(lambda: watch.count() == 2, 60, "the pod watch caught up")
            history, serving_from = list(watch.history), dict(watch.serving_from)
        # every old pod deleted (terminating ones included) before a new pod serves; a new
        # pod may be created in the window before the controller sizes the new generation
        # to 0 (docs/operator.md), held here, and removed again
        olds = [i for i, (_, n, _) in enumerate(history) if n.startswith(old + "-")]
        first_new = min(i for n, i in serving_from.items() if n.startswith(new + "-"))
        assert olds and max(olds) < first_new, history
        gone = {n for e, n, _ in history[:first_new] if e == "DELETED" and n.startswith(old)}
        assert len(gone) == 2, history
        assert pods(api, namespace, selector) and all(
            p.metadata.name.startswith(new + "-") for p in pods(api, namespace, selector)
        )
        st = wait_for(
            lambda: (
                (s := k.get(DGDS, namespace, "roll")["status"])["rollingUpdate"]["phase"]
                == "Completed"
                and s["state"] == "successful"
                and s
            ),
            60,
            "rollout completed",
        )
        assert st["rollingUpdate"]["updatedComponents"] == [WORKER]
        assert st["components"][WORKER]["componentNames"] == [new]
        assert st["components"][WORKER]["availableReplicas"] == 2
        assert list(workers(k, namespace)) == [new]  # nothing orphaned
        assert workers(k, namespace)[new]["spec"]["replicas"] == 2
