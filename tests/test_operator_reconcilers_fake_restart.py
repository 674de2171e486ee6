"""RestartReconciler on the fake API server (the real-server scenarios:
test_operator_restart.py, test_operator_grove.py and the rollout test of a superseded
restart): Sequential stamps ``nvidia.com/restartAt`` service by service, each once the one
before is ready again; Parallel stamps all at once; both report ``status.restart``. On the
Grove path the stamps go into the PodCliqueSet's clique annotations, only when ``cliques``
is a map list."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml
from dyn_gitops_operator import FIELD_MANAGER, grove
from dyn_gitops_operator.fakekube import PCS_ATOMIC_LIST
from dyn_gitops_operator.reconcilers.restart import RestartReconciler
from dyn_gitops_operator.resources import PCSGS, PODCLIQUES, PODCLIQUESETS
from dyn_gitops_operator.testing import GITOPS_MANAGER
from support.fakecluster import GROVE_KINDS, FakeCluster
from support.graphs import restart_graph as graph
from support.rendering import render

Obj = dict[str, Any]
RESTART_AT = "nvidia.com/restartAt"
GROVE_SAMPLE = Path(__file__).resolve().parent.parent / "samples" / "grove-multinode" / "input"


def stamps(c: FakeCluster) -> dict[str, tuple[str | None, int]]:
    """component -> (restartAt, generation)."""
    return {
        d["metadata"]["labels"]["nvidia.com/dynamo-component"]: (
            (d["spec"]["template"]["metadata"].get("annotations") or {}).get(RESTART_AT),
            d["metadata"]["generation"],
        )
        for d in c.deployments().values()
    }


def names(c: FakeCluster) -> dict[str, str]:
    return {
        d["metadata"]["labels"]["nvidia.com/dynamo-component"]: n
        for n, d in c.deployments().items()
    }


def restart_status(c: FakeCluster, dgd: str = "rs") -> Obj:
    return dict(c.status(dgd).get("restart") or {})


def dgd_only(objs: list[Obj]) -> list[Obj]:
    return [o for o in objs if o["kind"] == "DynamoGraphDeployment"]


@pytest.fixture
def c() -> FakeCluster:
    """The graph applied, sized, every Deployment ready, the graph successful."""
    c = FakeCluster()
    c.apply(render([graph()], c.ns))
    c.converge("rs")
    for name in names(c).values():
        c.set_status(name)
    c.converge("rs")
    assert c.status("rs")["state"] == "successful"
    return c


def test_sequential_restart_waits_for_each_service(c: FakeCluster) -> None:
    before, deps = stamps(c), names(c)
    order = ["prefill", "decode", "Frontend"]
    restart = {"id": "r1", "strategy": {"type": "Sequential", "order": order}}
    c.apply(dgd_only(render([graph(restart)], c.ns)))
    for i, service in enumerate(order):
        c.converge("rs")
        assert stamps(c)[service][0] == "r1"
        assert restart_status(c) == {
            "observedID": "r1",
            "phase": "Restarting",
            "inProgress": [service],
        }
        c.converge("rs")  # not ready yet: the next one waits
        for later in order[i + 1 :]:
            assert stamps(c)[later][0] is None, f"{later} stamped before {service}"
        c.set_status(deps[service])
    c.converge("rs")
    assert restart_status(c) == {"observedID": "r1", "phase": "Completed"}
    # each pod template changed exactly once: nothing stamped twice
    assert {s: g - before[s][1] for s, (_, g) in stamps(c).items()} == dict.fromkeys(order, 1)
    # GitOps re-syncing the Deployments keeps the controller's annotation
    c.apply(render([graph(restart)], c.ns))
    assert all(a == "r1" for a, _ in stamps(c).values())
    dep = c.deployment(deps["Frontend"])
    mf = {
        m["manager"]: m["fieldsV1"]
        for m in dep["metadata"]["managedFields"]
        if not m.get("subresource")
    }
    assert mf[FIELD_MANAGER] == {
        "f:spec": {"f:template": {"f:metadata": {"f:annotations": {f"f:{RESTART_AT}": {}}}}}
    }
    assert "f:containers" in mf[GITOPS_MANAGER]["f:spec"]["f:template"]["f:spec"]


def test_parallel_restart_stamps_everything_at_once(c: FakeCluster) -> None:
    deps = names(c)
    c.apply(dgd_only(render([graph({"id": "r2", "strategy": {"type": "Parallel"}})], c.ns)))
    c.converge("rs")
    assert all(a == "r2" for a, _ in stamps(c).values())
    assert restart_status(c) == {
        "observedID": "r2",
        "phase": "Restarting",
        "inProgress": ["Frontend", "decode", "prefill"],
    }
    c.set_status(deps["decode"])
    c.set_status(deps["Frontend"])
    c.converge("rs")
    assert restart_status(c)["inProgress"] == ["prefill"]
    c.set_status(deps["prefill"])
    c.converge("rs")
    assert restart_status(c) == {"observedID": "r2", "phase": "Completed"}
    # the same id again is no new restart; removing spec.restart keeps stamps and status
    gen = {s: g for s, (_, g) in stamps(c).items()}
    c.apply(dgd_only(render([graph()], c.ns)))
    c.converge("rs")
    assert restart_status(c) == {"observedID": "r2", "phase": "Completed"}
    assert stamps(c) == {s: ("r2", g) for s, g in gen.items()}


def test_the_decision_is_read_back_from_the_deployments(c: FakeCluster) -> None:
    """Progress comes from the live stamps, not from the status we wrote: a controller
    that lost its status (a restart of it, a status reset) stamps nothing twice."""
    restart = {
        "id": "r3",
        "strategy": {"type": "Sequential", "order": ["decode", "prefill", "Frontend"]},
    }
    c.apply(dgd_only(render([graph(restart)], c.ns)))
    c.converge("rs")
    c.set_status(names(c)["decode"])
    plan = c.plan("rs", RestartReconciler())  # a fresh reconciler, no memory
    assert {n: i.restart_at for n, i in plan.intents.items() if i.changed()} == {
        names(c)["prefill"]: "r3"
    }
    assert plan.restart == {"observedID": "r3", "phase": "Restarting", "inProgress": ["prefill"]}


def test_restart_id_written_at_create_counts_as_observed() -> None:
    """#10955 82ce03df2 (v1.3, api/v1beta1/dynamographdeployment_types.go): Dynamo refuses
    spec.restart on create, so an id a DGD is created with is already observed: nothing is
    stamped; changing the id later restarts as usual."""
    c = FakeCluster()
    c.apply(render([graph({"id": "r0", "strategy": {"type": "Parallel"}})], c.ns))
    c.converge("rs")
    assert all(a is None for a, _ in stamps(c).values())
    assert restart_status(c) == {"observedID": "r0", "phase": "Completed"}
    c.apply(dgd_only(render([graph({"id": "r1", "strategy": {"type": "Parallel"}})], c.ns)))
    c.converge("rs")
    assert all(a == "r1" for a, _ in stamps(c).values())
    assert restart_status(c)["phase"] == "Restarting"


def test_restart_requested_during_a_rollout_is_superseded() -> None:
    c = FakeCluster()
    c.apply(render([graph()], c.ns))
    c.converge("rs")
    for name in names(c).values():
        c.set_status(name)
    rolled = graph({"id": "during-rollout"})
    rolled["spec"]["services"]["decode"]["extraPodSpec"]["mainContainer"]["image"] = "img:2"
    c.apply(render([rolled], c.ns))  # a new worker generation and a restart at once
    c.converge("rs")
    assert c.status("rs")["rollingUpdate"]["phase"] == "InProgress"
    assert restart_status(c) == {"observedID": "during-rollout", "phase": "Superseded"}
    assert all(a is None for a, _ in stamps(c).values())


# ------------------------------------------------------------------ the Grove path
PCLQ, PCSG = "vllm-agg-0-frontend", "vllm-agg-0-vllmdecodeworker"
CLIQUES = ("frontend", "vllmdecodeworker-ldr", "vllmdecodeworker-wkr")


def with_restart(restart_id: str | None, **strategy: Any) -> list[Obj]:
    docs = [d for d in yaml.safe_load_all((GROVE_SAMPLE / "vllm-agg.yaml").read_text()) if d]
    if restart_id is not None:
        docs[0]["spec"]["restart"] = {
            "id": restart_id,
            **({"strategy": strategy} if strategy else {}),
        }
    return docs


def pcs_stamps(c: FakeCluster) -> dict[str, str | None]:
    return grove.restart_values(c.kube.get(PODCLIQUESETS, c.ns, "vllm-agg"))


def grove_graph(c: FakeCluster) -> None:
    """vllm-agg on Grove, no restart; Grove's children created and ready, PCS observed."""
    objs = render(with_restart(None), c.ns, grove=True)
    c.apply(objs, kinds=GROVE_KINDS)
    (pcs,) = [o for o in objs if o["kind"] == "PodCliqueSet"]
    for name, res in c.grove_create(pcs).items():
        c.grove_status(res, name)
    c.pcs_observed("vllm-agg")
    c.converge("vllm-agg")
    assert c.status("vllm-agg")["state"] == "successful"


def test_grove_sequential_restart_follows_order_and_grove_readiness() -> None:
    c = FakeCluster()
    grove_graph(c)
    restarted = render(
        with_restart("r1", type="Sequential", order=["VllmDecodeWorker", "Frontend"]),
        c.ns,
        grove=True,
    )
    c.apply(restarted, kinds=GROVE_KINDS)
    c.converge("vllm-agg")
    assert restart_status(c, "vllm-agg") == {
        "observedID": "r1",
        "phase": "Restarting",
        "inProgress": ["VllmDecodeWorker"],
    }
    assert pcs_stamps(c) == {
        "frontend": None,
        "vllmdecodeworker-ldr": "r1",
        "vllmdecodeworker-wkr": "r1",
    }
    # the PCSG still reports ready, but Grove has not observed the stamped PCS
    c.converge("vllm-agg")
    assert pcs_stamps(c)["frontend"] is None
    c.grove_status(PCSGS, PCSG, availableReplicas=0, updatedReplicas=0)
    c.pcs_observed("vllm-agg")
    c.converge("vllm-agg")
    assert pcs_stamps(c)["frontend"] is None  # observed, but the PCSG is rolling
    c.grove_status(PCSGS, PCSG)
    c.converge("vllm-agg")
    assert restart_status(c, "vllm-agg")["inProgress"] == ["Frontend"]
    assert pcs_stamps(c) == dict.fromkeys(CLIQUES, "r1")
    c.grove_status(PODCLIQUES, PCLQ)
    c.pcs_observed("vllm-agg")
    c.converge("vllm-agg")
    assert restart_status(c, "vllm-agg") == {"observedID": "r1", "phase": "Completed"}
    # a GitOps re-apply keeps the stamps; we own each clique's restartAt key, nothing else
    c.apply(restarted, kinds=GROVE_KINDS)
    live = c.kube.get(PODCLIQUESETS, c.ns, "vllm-agg")
    assert grove.restart_values(live) == dict.fromkeys(CLIQUES, "r1")
    (ours,) = [m for m in live["metadata"]["managedFields"] if m["manager"] == FIELD_MANAGER]
    entry = {".": {}, "f:annotations": {f"f:{RESTART_AT}": {}}, "f:name": {}}
    assert ours["fieldsV1"] == {
        "f:spec": {"f:template": {"f:cliques": {f'k:{{"name":"{n}"}}': entry for n in CLIQUES}}}
    }


def test_grove_parallel_restart_then_sequential_keeps_the_others() -> None:
    c = FakeCluster()
    grove_graph(c)
    c.apply(render(with_restart("p1", type="Parallel"), c.ns, grove=True), kinds=GROVE_KINDS)
    generation = c.kube.get(PODCLIQUESETS, c.ns, "vllm-agg")["metadata"]["generation"]
    c.converge("vllm-agg")
    assert restart_status(c, "vllm-agg") == {
        "observedID": "p1",
        "phase": "Restarting",
        "inProgress": ["Frontend", "VllmDecodeWorker"],
    }
    assert pcs_stamps(c) == dict.fromkeys(CLIQUES, "p1")
    pcs = c.kube.get(PODCLIQUESETS, c.ns, "vllm-agg")
    assert pcs["metadata"]["generation"] == generation + 1  # one write for every clique
    c.grove_status(PODCLIQUES, PCLQ, readyReplicas=0)
    c.pcs_observed("vllm-agg")
    c.converge("vllm-agg")
    assert restart_status(c, "vllm-agg")["inProgress"] == ["Frontend"]
    c.grove_status(PODCLIQUES, PCLQ)
    c.converge("vllm-agg")
    assert restart_status(c, "vllm-agg") == {"observedID": "p1", "phase": "Completed"}
    c.apply(render(with_restart("s2"), c.ns, grove=True), kinds=GROVE_KINDS)
    c.converge("vllm-agg")
    assert restart_status(c, "vllm-agg")["inProgress"] == ["Frontend"]
    assert pcs_stamps(c) == {
        "frontend": "s2",
        "vllmdecodeworker-ldr": "p1",
        "vllmdecodeworker-wkr": "p1",
    }


def test_grove_service_removed_after_a_restart_loses_its_stamp() -> None:
    c = FakeCluster()
    grove_graph(c)
    c.apply(render(with_restart("p1", type="Parallel"), c.ns, grove=True), kinds=GROVE_KINDS)
    c.converge("vllm-agg")
    c.pcs_observed("vllm-agg")
    c.converge("vllm-agg")
    assert restart_status(c, "vllm-agg") == {"observedID": "p1", "phase": "Completed"}
    docs = with_restart("p1", type="Parallel")
    del docs[0]["spec"]["services"]["Frontend"]  # removed from Git
    c.apply(render(docs, c.ns, grove=True), kinds=GROVE_KINDS)
    # our stamp alone keeps the clique entry alive (name + annotation), until we let go
    assert pcs_stamps(c)["frontend"] == "p1"
    c.converge("vllm-agg")
    assert pcs_stamps(c) == {"vllmdecodeworker-ldr": "p1", "vllmdecodeworker-wkr": "p1"}
    assert grove.owned_restart_cliques(c.kube.get(PODCLIQUESETS, c.ns, "vllm-agg")) == {
        "vllmdecodeworker-ldr",
        "vllmdecodeworker-wkr",
    }


def test_grove_restart_refused_when_cliques_is_an_atomic_list(
    caplog: pytest.LogCaptureFixture,
) -> None:
    c = FakeCluster(rules={PODCLIQUESETS: PCS_ATOMIC_LIST})
    grove_graph(c)
    c.apply(render(with_restart("r1"), c.ns, grove=True), kinds=GROVE_KINDS)
    before = copy.deepcopy(c.kube.get(PODCLIQUESETS, c.ns, "vllm-agg"))
    c.converge("vllm-agg")
    c.converge("vllm-agg")
    st = restart_status(c, "vllm-agg")
    assert (st["observedID"], st["phase"]) == ("r1", "Failed")
    assert "not a map list keyed by name" in st["message"]
    assert c.kube.get(PODCLIQUESETS, c.ns, "vllm-agg") == before  # never written
    assert sum("cliques is not a map list" in r.getMessage() for r in caplog.records) == 1


def test_grove_pcs_not_synced_yet_is_pending() -> None:
    c = FakeCluster()
    created = render(with_restart(None), c.ns, grove=True)  # no restart at create (#10955)
    c.apply([o for o in created if o["kind"] != "PodCliqueSet"], kinds=GROVE_KINDS)
    docs = render(with_restart("r1"), c.ns, grove=True)
    c.apply([o for o in docs if o["kind"] != "PodCliqueSet"], kinds=GROVE_KINDS)
    plan = c.plan("vllm-agg", RestartReconciler())
    assert plan.restart == {"observedID": "r1", "phase": "Pending"}
    assert plan.requeue_after == 2.0
