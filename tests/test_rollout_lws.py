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


def roll(k: Kube, ns: str, until: Any, timeout: float = 120) -> list[State]:
    """LWS steps until ``until(state)``; every distinct state observed, in order."""
    seen: list[State] = []
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        state = lws_step(k, ns)
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


@pytest.mark.xfail(
    strict=False,
    raises=AssertionError,
    reason="known gap (open): after the v1beta1 view, the new LeaderWorkerSet was seen with a "
    "ready group while the old one still had 2; not resolved",
)
def test_leaderworkerset_recreate_drains_first(cluster_k: Kube, cluster_namespace: str) -> None:
    """``nvidia.com/deployment-strategy: Recreate`` on the service: the new set stays at 0
    groups until the old one is at 0 and reports none."""
    k, ns = cluster_k, cluster_namespace
    ann = {"nvidia.com/deployment-strategy": "Recreate"}
    first = render([multinode("img:1", 2, **ann)], ns, lws=True)
    second = render([multinode("img:2", 2, **ann)], ns, lws=True)
    old, new = lws_name(first), lws_name(second)
    with running(settings_for_tests(ns), k):
        gitops_apply(k, first, kinds=KINDS)
        roll(k, ns, lambda s: s.get(old) == (2, 2) and state_of(k, ns) == "successful")
        gitops_apply(k, second, kinds=KINDS)
        seen = roll(k, ns, lambda s: list(s) == [new] and s[new] == (2, 2))
        for state in seen:
            if state.get(old, (0, 0))[1] > 0:
                assert state.get(new, (0, 0))[1] == 0, seen  # no new group while old ones run
        assert any(state.get(old) == (0, 0) for state in seen), seen  # drained, then deleted
