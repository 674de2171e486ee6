"""``spec.restart`` against the real kube-apiserver: Sequential waits for each service to be
ready before stamping the next, Parallel stamps all at once; both report status.restart."""

from __future__ import annotations

import copy
import time
from typing import Any

import pytest
from dyn_gitops_operator import FIELD_MANAGER
from dyn_gitops_operator.kube import DEPLOYMENTS, DGDS, Kube
from dyn_gitops_operator.testing import (
    GITOPS_MANAGER,
    DeploymentSimulator,
    gitops_apply,
    running,
    settings_for_tests,
    wait_for,
)
from support.graphs import restart_graph as graph
from support.rendering import render

pytestmark = pytest.mark.realk8s
RESTART_AT = "nvidia.com/restartAt"


def stamps(k: Kube, ns: str) -> dict[str, tuple[str | None, int]]:
    """component -> (restartAt, generation)."""
    out = {}
    for d in k.list(DEPLOYMENTS, ns)[0]:
        ann = d["spec"]["template"]["metadata"].get("annotations") or {}
        out[d["metadata"]["labels"]["nvidia.com/dynamo-component"]] = (
            ann.get(RESTART_AT),
            d["metadata"]["generation"],
        )
    return out


def workers_sized(k: Kube, ns: str) -> bool:
    """The controller has looked at the graph (the workers want 1, the default replicas)."""
    return bool(k.get(DGDS, ns, "rs").get("status", {}).get("components"))


def restart_status(k: Kube, ns: str) -> dict[str, Any]:
    return dict(k.get(DGDS, ns, "rs").get("status", {}).get("restart") or {})


def names_by_component(k: Kube, ns: str) -> dict[str, str]:
    return {
        d["metadata"]["labels"]["nvidia.com/dynamo-component"]: d["metadata"]["name"]
        for d in k.list(DEPLOYMENTS, ns)[0]
    }


def settle(k: Kube, ns: str, sim: DeploymentSimulator) -> None:
    """Every Deployment ready and the graph successful."""
    for name in names_by_component(k, ns).values():
        sim.set_status(name)
    wait_for(
        lambda: k.get(DGDS, ns, "rs").get("status", {}).get("state") == "successful",
        what="graph ready",
    )


def test_sequential_restart_waits_for_each_service(k: Kube, namespace: str) -> None:
    objs = render([graph()], namespace)
    gitops_apply(k, objs)
    sim = DeploymentSimulator(k, namespace)
    with running(settings_for_tests(namespace), k):
        wait_for(lambda: workers_sized(k, namespace), what="workers sized")
        settle(k, namespace, sim)
        before = stamps(k, namespace)
        deps = names_by_component(k, namespace)

        order = ["prefill", "decode", "Frontend"]
        restart = {"id": "r1", "strategy": {"type": "Sequential", "order": order}}
        gitops_apply(
            k,
            [
                o
                for o in render([graph(restart)], namespace)
                if o["kind"] == "DynamoGraphDeployment"
            ],
        )
        for i, service in enumerate(order):
            wait_for(
                lambda s=service: stamps(k, namespace)[s][0] == "r1", what=f"{service} stamped"
            )
            st = wait_for(
                lambda s=service: (
                    (r := restart_status(k, namespace)).get("inProgress") == [s] and r
                ),
                what=f"{service} in progress",
            )
            assert (st["observedID"], st["phase"]) == ("r1", "Restarting")
            time.sleep(0.5)  # the next one must wait for this one to be ready again
            now = stamps(k, namespace)
            for later in order[i + 1 :]:
                assert now[later][0] is None, f"{later} stamped before {service} was ready"
            sim.set_status(deps[service])
        st = wait_for(
            lambda: (r := restart_status(k, namespace)).get("phase") == "Completed" and r,
            what="restart completed",
        )
        assert st == {"observedID": "r1", "phase": "Completed"}
        after = stamps(k, namespace)
        # each pod template changed exactly once: nothing stamped twice
        assert {c: g - before[c][1] for c, (_, g) in after.items()} == dict.fromkeys(order, 1)

        # GitOps re-syncing the Deployments keeps the controller's annotation
        gitops_apply(k, render([graph(restart)], namespace))
        assert all(a == "r1" for a, _ in stamps(k, namespace).values())
    dep = k.get(DEPLOYMENTS, namespace, deps["Frontend"])
    mf = {
        m["manager"]: m["fieldsV1"]
        for m in dep["metadata"]["managedFields"]
        if not m.get("subresource")
    }
    assert mf[FIELD_MANAGER] == {
        "f:spec": {"f:template": {"f:metadata": {"f:annotations": {f"f:{RESTART_AT}": {}}}}}
    }
    assert "f:containers" in mf[GITOPS_MANAGER]["f:spec"]["f:template"]["f:spec"]


def test_parallel_restart_stamps_everything_at_once(k: Kube, namespace: str) -> None:
    objs = render([graph()], namespace)
    gitops_apply(k, objs)
    sim = DeploymentSimulator(k, namespace)
    with running(settings_for_tests(namespace), k):
        wait_for(lambda: workers_sized(k, namespace), what="workers sized")
        settle(k, namespace, sim)
        deps = names_by_component(k, namespace)
        dgd = copy.deepcopy(graph({"id": "r2", "strategy": {"type": "Parallel"}}))
        gitops_apply(
            k, [o for o in render([dgd], namespace) if o["kind"] == "DynamoGraphDeployment"]
        )
        wait_for(
            lambda: restart_status(k, namespace).get("phase") == "Restarting",
            what="restart started",
        )
        assert all(a == "r2" for a, _ in stamps(k, namespace).values())
        st = wait_for(
            lambda: (
                (r := restart_status(k, namespace)).get("inProgress")
                == ["Frontend", "decode", "prefill"]
                and r
            ),
            what="all in progress",
        )
        assert st["observedID"] == "r2"
        sim.set_status(deps["decode"])
        sim.set_status(deps["Frontend"])
        wait_for(
            lambda: restart_status(k, namespace).get("inProgress") == ["prefill"],
            what="only prefill left",
        )
        sim.set_status(deps["prefill"])
        wait_for(
            lambda: restart_status(k, namespace) == {"observedID": "r2", "phase": "Completed"},
            what="completed",
        )
        # the same id again is not a new restart; removing spec.restart keeps the stamps
        gen = {c: g for c, (_, g) in stamps(k, namespace).items()}
        gitops_apply(
            k, [o for o in render([graph()], namespace) if o["kind"] == "DynamoGraphDeployment"]
        )
        time.sleep(1)
        assert restart_status(k, namespace) == {"observedID": "r2", "phase": "Completed"}
        assert stamps(k, namespace) == {c: ("r2", g) for c, g in gen.items()}
