"""Multinode worker rollouts (one natively scaled LeaderWorkerSet per generation) against the
real API server of the realistic cluster: the frontend's pods are real; no LeaderWorkerSet
controller runs here, so the test writes each set's status (one group becomes ready per
step, removed groups are gone at once: the worst case for availability)."""

from __future__ import annotations

import contextlib
import time
from typing import Any

import pytest
from dyn_gitops_operator.errors import ConflictError
from dyn_gitops_operator.kube import DGDS, LWS, Kube
from dyn_gitops_operator.testing import gitops_apply, running, settings_for_tests, wait_for
from support.graphs import WORKER
from support.graphs import rollout_graph as graph
from support.rendering import render

pytestmark = pytest.mark.realk8s

KINDS = ("Deployment", "DynamoGraphDeployment", "LeaderWorkerSet")
RESTART_AT = "nvidia.com/restartAt"
State = dict[str, tuple[int, int]]


def multinode(image: str, desired: int, **annotations: str) -> dict[str, Any]:
    dgd = graph(image, desired)
    worker = dgd["spec"]["services"][WORKER]
    worker["multinode"] = {"nodeCount": 2}
    worker["extraPodSpec"]["mainContainer"]["args"] = ["--model", "m"]
    if annotations:
        worker["annotations"] = annotations
    return dgd


def lws_name(objs: list[dict[str, Any]]) -> str:
    (name,) = [o["metadata"]["name"] for o in objs if o["kind"] == "LeaderWorkerSet"]
    return name


def lws_step(k: Kube, ns: str) -> State:
    """The LeaderWorkerSet controller stand-in; returns {name: (spec, ready groups)}."""
    out = {}
    for lws in k.list(LWS, ns, label_selector=f"nvidia.com/dynamo-component={WORKER}")[0]:
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
            with contextlib.suppress(ConflictError):  # the controller resized it: next step
                k.request(
                    "PUT", LWS.path(ns, lws["metadata"]["name"]), None, {**lws, "status": status}
                )
        out[lws["metadata"]["name"]] = (spec, ready)
    return out


def state_of(k: Kube, ns: str) -> str:
    return str((k.get(DGDS, ns, "roll").get("status") or {}).get("state"))


def roll(
    k: Kube, ns: str, until: Any, timeout: float = 120, step: Any = None
) -> list[dict[str, Any]]:
    """LWS steps (``step()``, default :func:`lws_step`) until ``until(state)``; every
    distinct state observed, in order."""
    seen: list[dict[str, Any]] = []
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        state = step() if step is not None else lws_step(k, ns)
        if not seen or state != seen[-1]:
            seen.append(state)
        if until(state):
            return seen
        time.sleep(0.3)  # the controller's pass in between
    raise AssertionError(f"rollout did not finish: {seen[-3:]}")


@pytest.mark.parametrize(
    ("annotations", "surge", "unavailable"),
    [
        ({}, 1, 1),  # 25 % / 25 % of 4
        ({"nvidia.com/deployment-rolling-update-max-surge": "0"}, 0, 1),
    ],
)
def test_leaderworkerset_generations_are_sized_and_rolled_within_the_budget(
    cluster_k: Kube,
    cluster_namespace: str,
    annotations: dict[str, str],
    surge: int,
    unavailable: int,
) -> None:
    k, ns = cluster_k, cluster_namespace
    first = render([multinode("img:1", 4, **annotations)], ns, lws=True)
    second = render([multinode("img:2", 4, **annotations)], ns, lws=True)
    old, new = lws_name(first), lws_name(second)
    with running(settings_for_tests(ns), k):
        gitops_apply(k, first, kinds=KINDS)
        roll(k, ns, lambda s: s.get(old) == (4, 4) and state_of(k, ns) == "successful")
        gitops_apply(k, second, kinds=KINDS)
        seen = roll(k, ns, lambda s: list(s) == [new] and s[new] == (4, 4))
        for state in seen[1:]:
            assert sum(spec for spec, _ in state.values()) <= 4 + surge, seen
            assert sum(min(spec, r) for spec, r in state.values()) >= 4 - unavailable, seen
        sizes = [s[old][0] for s in seen if old in s]
        assert sizes == sorted(sizes, reverse=True) and len(set(sizes)) > 2, sizes
        wait_for(lambda: state_of(k, ns) == "successful", 60, "successful on the new set")


def test_leaderworkerset_recreate_drains_first(
    cluster_k: Kube, cluster_kube: Any, cluster_namespace: str
) -> None:
    """``nvidia.com/deployment-strategy: Recreate`` on the service: the new set stays at 0
    groups until the old one is at 0, reports none and has no pod left (its status counts no
    terminating pods). Real pods through the LWS stand-in (``support.lws_standin``): a group
    is ready when its pods are, as placed by the scheduler and made Ready by KWOK. The new
    set is created by GitOps without replicas, i.e. at the API default of one group, until
    the controller's first pass on it sizes it to 0 (docs/operator.md: the window)."""
    from support.cluster import pods
    from support.lws_standin import LwsStandIn

    k, api, ns = cluster_k, cluster_kube, cluster_namespace
    ann = {"nvidia.com/deployment-strategy": "Recreate"}
    first = render([multinode("img:1", 2, **ann)], ns, lws=True)
    second = render([multinode("img:2", 2, **ann)], ns, lws=True)
    old, new = lws_name(first), lws_name(second)
    stand_in = LwsStandIn(k, api, ns, f"nvidia.com/dynamo-component={WORKER}")

    def live_pods(name: str) -> int:
        return len(pods(api, ns, f"leaderworkerset.sigs.k8s.io/name={name}"))

    def step() -> dict[str, tuple[int, int, int]]:
        state = stand_in.step()
        return {n: (*v, live_pods(n)) for n, v in state.items()}

    with running(settings_for_tests(ns), k):
        gitops_apply(k, first, kinds=KINDS)
        roll(
            k,
            ns,
            lambda s: s.get(old) == (2, 2, 4) and state_of(k, ns) == "successful",
            step=step,
        )
        gitops_apply(k, second, kinds=KINDS)
        seen = roll(k, ns, lambda s: list(s) == [new] and s[new][:2] == (2, 2), step=step)
        for state in seen:
            if state.get(old, (0, 0, 0))[1] > 0:
                assert state.get(new, (0, 0, 0))[1] == 0, seen  # no new group while old run
        # the new set is sized only once the old one is at 0 and its pods are gone
        grown = next(i for i, s in enumerate(seen) if s.get(new, (0,))[0] == 2)
        assert all(s.get(old, (0, 0, 0)) == (0, 0, 0) for s in seen[grown:]), seen
        assert any(st.get(old, ()) == (0, 0, 0) for st in seen), seen  # drained, then deleted
        wait_for(lambda: state_of(k, ns) == "successful", 60, "successful on the new set")


def test_leaderworkerset_is_restarted_in_order(
    cluster_k: Kube, cluster_kube: Any, cluster_namespace: str
) -> None:
    """``spec.restart`` Sequential, the multinode worker first, then the frontend: the
    controller stamps ``nvidia.com/restartAt`` in the set's leader and worker templates,
    and stamps the frontend only once every pod of every group carries the stamp and is
    Ready. The set's status cannot tell (no observedGeneration: right after the stamp, and
    between two groups, it reads all groups ready): the pods do. Real pods (the stand-in
    creates them, the scheduler places them, KWOK makes them Ready)."""
    from dyn_gitops_operator.kube import DEPLOYMENTS
    from support.lws_standin import LwsStandIn

    k, api, ns = cluster_k, cluster_kube, cluster_namespace
    objs = render([multinode("img:1", 2)], ns, lws=True)
    lws = lws_name(objs)
    stand_in = LwsStandIn(k, api, ns, f"nvidia.com/dynamo-component={WORKER}")

    def frontend_stamp() -> str | None:
        dep = k.get(DEPLOYMENTS, ns, "roll-frontend")
        return (dep["spec"]["template"]["metadata"].get("annotations") or {}).get(RESTART_AT)

    def lws_pods() -> list[tuple[str, str | None, bool]]:
        from support.cluster import is_ready, pods

        return sorted(
            (p.metadata.name, (p.metadata.annotations or {}).get(RESTART_AT), is_ready(p))
            for p in pods(api, ns, f"leaderworkerset.sigs.k8s.io/name={lws}")
            if not p.metadata.deletion_timestamp
        )

    def restart() -> dict[str, Any]:
        return dict((k.get(DGDS, ns, "roll").get("status") or {}).get("restart") or {})

    with running(settings_for_tests(ns), k):
        gitops_apply(k, objs, kinds=KINDS)
        wait_for(
            lambda: stand_in.step() == {lws: (2, 2)} and state_of(k, ns) == "successful",
            120,
            "2 groups of 2 ready pods, graph successful",
            interval=0.3,
        )
        dgd = multinode("img:1", 2)
        dgd["spec"]["restart"] = {
            "id": "r1",
            "strategy": {"type": "Sequential", "order": [WORKER, "Frontend"]},
        }
        gitops_apply(k, render([dgd], ns, lws=True), kinds=("DynamoGraphDeployment",))
        seen: list[tuple[Any, ...]] = []
        end = time.monotonic() + 120
        while time.monotonic() < end:
            stand_in.step()
            now = (frontend_stamp(), lws_pods(), restart().get("phase"))
            if not seen or now != seen[-1]:
                seen.append(now)
            if now[0] == "r1":
                break
            time.sleep(0.3)
        else:
            raise AssertionError(f"the frontend was never stamped: {seen[-3:]}")
        # every state before the frontend's stamp: the set was not fully restarted yet
        for stamp, _, _ in seen[:-1]:
            assert stamp is None
        stamped_at = seen[-1][1]
        assert len(stamped_at) == 4 and all(a == "r1" and r for _, a, r in stamped_at), seen
        # a state in which the status read "2/2 ready" with old pods existed on the way:
        assert any(
            any(a != "r1" for _, a, _ in pods) and len(pods) == 4 and all(r for _, _, r in pods)
            for _, pods, _ in seen
        ), seen
        assert any(p == "Restarting" for _, _, p in seen), seen
        live = k.get(LWS, ns, lws)["spec"]["leaderWorkerTemplate"]
        for tmpl in ("leaderTemplate", "workerTemplate"):
            assert live[tmpl]["metadata"]["annotations"][RESTART_AT] == "r1"
        wait_for(
            lambda: stand_in.step() is not None and restart().get("phase") == "Completed",
            90,
            "restart completed",
            interval=0.3,
        )
        assert restart() == {"observedID": "r1", "phase": "Completed"}
