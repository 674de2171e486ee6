"""Multinode worker rollouts (one natively scaled LeaderWorkerSet per generation) on the
realistic cluster with the real LeaderWorkerSet controller (``lws_controller``: the
``sigs.k8s.io/lws`` manager and its webhooks): it makes each set's StatefulSets and pods,
the scheduler places them, KWOK makes them Ready, and it writes the sets' status. Every
state is recorded exactly (``support.statehistory``: watches, each change read back at its
resourceVersion), so no state between two polls is missed."""

from __future__ import annotations

from typing import Any

import pytest
from dyn_gitops_operator import FIELD_MANAGER
from dyn_gitops_operator.kube import DGDS, Kube
from dyn_gitops_operator.testing import gitops_apply, running, settings_for_tests, wait_for
from support.graphs import WORKER
from support.graphs import rollout_graph as graph
from support.rendering import render
from support.statehistory import Items, StateHistory

pytestmark = [pytest.mark.realk8s, pytest.mark.usefixtures("lws_controller")]

KINDS = ("Deployment", "DynamoGraphDeployment", "LeaderWorkerSet")
RESTART_AT = "nvidia.com/restartAt"
LWS_API = ("leaderworkerset.x-k8s.io", "v1", "leaderworkersets")
#: the label the LeaderWorkerSet controller puts on every pod of a set
SET_LABEL = "leaderworkerset.sigs.k8s.io/name"
WORKER_SETS = f"nvidia.com/dynamo-component={WORKER}"
State = dict[str, tuple[int, ...]]


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


def state_of(k: Kube, ns: str) -> str:
    return str((k.get(DGDS, ns, "roll").get("status") or {}).get("state"))


def listers(api: Any, ns: str, *kinds: str) -> dict[str, Any]:
    """List calls (namespace bound) for :class:`StateHistory`: the worker sets, their pods,
    the Deployments, the DGDs."""
    from kubernetes import client

    custom, core, apps = client.CustomObjectsApi(api), client.CoreV1Api(api), client.AppsV1Api(api)
    calls = {
        "sets": lambda **kw: custom.list_namespaced_custom_object(
            *LWS_API[:2], ns, LWS_API[2], label_selector=WORKER_SETS, **kw
        ),
        "pods": lambda **kw: core.list_namespaced_pod(ns, label_selector=SET_LABEL, **kw),
        "deployments": lambda **kw: apps.list_namespaced_deployment(ns, **kw),
        "dgds": lambda **kw: custom.list_namespaced_custom_object(
            DGDS.group, DGDS.version, ns, DGDS.plural, **kw
        ),
    }
    return {kind: calls[kind] for kind in kinds}


def sized(lws: dict[str, Any]) -> bool:
    """The companion controller applied the set's ``spec.replicas`` (before its first pass
    on a new set, the replicas are the API default: docs/operator.md, "The window")."""
    return any(
        f.get("manager") == FIELD_MANAGER
        and "f:replicas" in ((f.get("fieldsV1") or {}).get("f:spec") or {})
        for f in lws["metadata"].get("managedFields") or []
    )


def sets(items: Items) -> dict[str, tuple[int, int, bool]]:
    """{set: (spec groups, ready groups as its status reports them, sized by us)}"""
    return {
        o["metadata"]["name"]: (
            int(o["spec"].get("replicas", 1)),
            int((o.get("status") or {}).get("readyReplicas") or 0),
            sized(o),
        )
        for o in items["sets"]
    }


def window(seen: list[State], old: str, new: str) -> int:
    """Where the window ends (docs/operator.md, "The window"): GitOps creates the new set
    without ``spec.replicas``, so at the API default of one group, which the LWS controller
    starts at once; until the companion controller acts (the old set still at its size, the
    new one at 1 and not sized by it) the states are GitOps', not the rollout's."""
    size = seen[0][old][0]
    end = 1
    while end < len(seen) and seen[end].get(old, (None,))[0] == size:
        state = seen[end].get(new)
        if state is not None and (state[0] != 1 or state[-1]):  # the controller's own step
            break
        end += 1
    return end


def is_ready(pod: dict[str, Any]) -> bool:
    conds = (pod.get("status") or {}).get("conditions") or []
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conds)


@pytest.mark.parametrize(
    ("annotations", "surge", "unavailable"),
    [
        ({}, 1, 1),  # 25 % / 25 % of 4
        ({"nvidia.com/deployment-rolling-update-max-surge": "0"}, 0, 1),
    ],
)
def test_leaderworkerset_generations_are_sized_and_rolled_within_the_budget(
    cluster_k: Kube,
    cluster_kube: Any,
    cluster_namespace: str,
    annotations: dict[str, str],
    surge: int,
    unavailable: int,
) -> None:
    """A new image: a new set, grown while the old one shrinks, one group at a time within
    max-surge / max-unavailable, as the sets' status counts ready groups."""
    k, api, ns = cluster_k, cluster_kube, cluster_namespace
    first = render([multinode("img:1", 4, **annotations)], ns, lws=True)
    second = render([multinode("img:2", 4, **annotations)], ns, lws=True)
    old, new = lws_name(first), lws_name(second)
    with running(settings_for_tests(ns), k):
        with StateHistory(api, listers(api, ns, "sets"), sets) as history:
            gitops_apply(k, first, kinds=KINDS)
            history.until(lambda s: s.get(old) == (4, 4, True), 120, "4 ready groups")
        wait_for(lambda: state_of(k, ns) == "successful", 60, "successful on the first set")
        with StateHistory(api, listers(api, ns, "sets"), sets) as history:
            gitops_apply(k, second, kinds=KINDS)
            seen = history.until(
                lambda s: list(s) == [new] and s[new] == (4, 4, True), 180, "rolled"
            )
        for state in seen[1:]:
            assert sum(min(spec, r) for spec, r, _ in state.values()) >= 4 - unavailable, seen
        for state in seen[window(seen, old, new) :]:  # the budget: from the controller's pass
            assert sum(spec for spec, _, _ in state.values()) <= 4 + surge, seen
        sizes = [s[old][0] for s in seen if old in s]
        assert sizes == sorted(sizes, reverse=True) and len(set(sizes)) > 2, sizes
        wait_for(lambda: state_of(k, ns) == "successful", 60, "successful on the new set")


def test_leaderworkerset_recreate_drains_first(
    cluster_k: Kube, cluster_kube: Any, cluster_namespace: str
) -> None:
    """``nvidia.com/deployment-strategy: Recreate`` on the service: the new set stays at 0
    groups until the old one is at 0, reports none and has no pod left (its status counts no
    terminating pods). A group is ready when the LWS controller says so (its pods placed by
    the scheduler and made Ready by KWOK). The new set is created by GitOps without
    replicas, i.e. at the API default of one group, until the controller's first pass on it
    sizes it to 0 (docs/operator.md: the window); the LWS controller can start that group
    before or even just after that pass (its leader StatefulSet created at 1), and KWOK can
    make it Ready beside the old groups until the LWS controller scales it away."""
    k, api, ns = cluster_k, cluster_kube, cluster_namespace
    ann = {"nvidia.com/deployment-strategy": "Recreate"}
    first = render([multinode("img:1", 2, **ann)], ns, lws=True)
    second = render([multinode("img:2", 2, **ann)], ns, lws=True)
    old, new = lws_name(first), lws_name(second)

    def view(items: Items) -> State:
        """{set: (spec groups, ready groups, pods (terminating ones included), sized by us)}"""
        pods: dict[str, int] = {}
        for p in items["pods"]:
            name = p["metadata"]["labels"][SET_LABEL]
            pods[name] = pods.get(name, 0) + 1
        return {n: (spec, r, pods.get(n, 0), ok) for n, (spec, r, ok) in sets(items).items()}

    with running(settings_for_tests(ns), k):
        with StateHistory(api, listers(api, ns, "sets", "pods"), view) as history:
            gitops_apply(k, first, kinds=KINDS)
            history.until(lambda s: s.get(old) == (2, 2, 4, True), 120, "2 groups of 2 ready pods")
        wait_for(lambda: state_of(k, ns) == "successful", 60, "successful on the first set")
        with StateHistory(api, listers(api, ns, "sets", "pods"), view) as history:
            gitops_apply(k, second, kinds=KINDS)
            seen = history.until(
                lambda s: list(s) == [new] and s[new] == (2, 2, 4, True), 180, "recreated"
            )
        none = (0, 0, 0, True)
        # no new group ready while old ones run, but the window's: the API default's group,
        # which the LWS controller may start before, or just after, our pass sized the set to
        # 0 (docs/operator.md, "The window"); a set we grew never has one while old ones run
        for state in seen:
            o, n = state.get(old, none), state.get(new, none)
            if o[1] > 0 and n[1] > 0:
                assert n[0] == 0 or not n[3], seen
        # the new set is sized only once the old one is at 0 and its pods are gone
        grown = next(i for i, s in enumerate(seen) if s.get(new, (0,))[0] == 2)
        assert all(s.get(old, none) == none for s in seen[grown:]), seen
        assert any(st.get(old, ()) == none for st in seen), seen  # drained, then deleted
        wait_for(lambda: state_of(k, ns) == "successful", 60, "successful on the new set")


Restart = tuple[str | None, tuple[tuple[str, str | None, bool], ...], str | None]


def restart_view(lws: str) -> Any:
    """(frontend's stamp, the set's live pods (name, stamp, Ready), the DGD's restart phase)"""

    def view(items: Items) -> Restart:
        (front,) = [d for d in items["deployments"] if d["metadata"]["name"] == "roll-frontend"]
        stamp = (front["spec"]["template"]["metadata"].get("annotations") or {}).get(RESTART_AT)
        pods = tuple(
            sorted(
                (
                    p["metadata"]["name"],
                    (p["metadata"].get("annotations") or {}).get(RESTART_AT),
                    is_ready(p),
                )
                for p in items["pods"]
                if p["metadata"]["labels"][SET_LABEL] == lws
                and not p["metadata"].get("deletionTimestamp")
            )
        )
        (dgd,) = items["dgds"]
        return stamp, pods, ((dgd.get("status") or {}).get("restart") or {}).get("phase")

    return view


def test_leaderworkerset_is_restarted_in_order(
    cluster_k: Kube, cluster_kube: Any, cluster_namespace: str
) -> None:
    """``spec.restart`` Sequential, the multinode worker first, then the frontend: the
    controller stamps ``nvidia.com/restartAt`` in the set's leader and worker templates,
    and stamps the frontend only once every pod of every group carries the stamp and is
    Ready. The set's status cannot tell (no observedGeneration: right after the stamp, and
    between two groups, it reads all groups ready): the pods do. The LWS controller rolls
    the groups (its own rolling update), the scheduler places the pods, KWOK makes them
    Ready; every state is read at one resourceVersion, so the pods seen at the frontend's
    stamp are the pods at that instant."""
    from dyn_gitops_operator.kube import LWS

    k, api, ns = cluster_k, cluster_kube, cluster_namespace
    objs = render([multinode("img:1", 2)], ns, lws=True)
    lws = lws_name(objs)

    def restart() -> dict[str, Any]:
        return dict((k.get(DGDS, ns, "roll").get("status") or {}).get("restart") or {})

    with running(settings_for_tests(ns), k):
        with StateHistory(api, listers(api, ns, "sets"), sets) as history:
            gitops_apply(k, objs, kinds=KINDS)
            history.until(lambda s: s == {lws: (2, 2, True)}, 120, "2 groups of 2 ready pods")
        wait_for(lambda: state_of(k, ns) == "successful", 60, "graph successful")
        dgd = multinode("img:1", 2)
        dgd["spec"]["restart"] = {
            "id": "r1",
            "strategy": {"type": "Sequential", "order": [WORKER, "Frontend"]},
        }
        listed = listers(api, ns, "deployments", "pods", "dgds")
        with StateHistory(api, listed, restart_view(lws)) as restarts:
            gitops_apply(k, render([dgd], ns, lws=True), kinds=("DynamoGraphDeployment",))
            seen = restarts.until(lambda s: s[0] == "r1", 120, "the frontend stamped")
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
        wait_for(lambda: restart().get("phase") == "Completed", 90, "restart completed")
        assert restart() == {"observedID": "r1", "phase": "Completed"}
