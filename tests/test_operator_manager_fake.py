"""The whole controller (Manager: informers with watches, leader election, the scope lease,
workers) on the fake API server: the KubeApi protocol is all it needs, and the fake's
watch drives it like the real one does. Seconds, not minutes: no etcd, no apiserver."""

from __future__ import annotations

import threading
from pathlib import Path

from dyn_gitops_operator.fakekube import FakeKube
from dyn_gitops_operator.resources import DEPLOYMENTS, DGDS, LEASES, PCSGS, PODCLIQUES
from dyn_gitops_operator.settings import SCOPE_LEASE_HANDOVER_ANNOTATION, SCOPE_LEASE_NAME
from dyn_gitops_operator.testing import (
    GITOPS_MANAGER,
    KCM_MANAGER,
    KINDS,
    as_served,
    deployment_status,
    running,
    settings_for_tests,
    wait_for,
)
from support.rendering import render

SAMPLES = Path(__file__).resolve().parent.parent / "samples"


def test_the_controller_converges_on_the_fake_server() -> None:
    kube = FakeKube()
    gitops, kcm = kube.as_manager(GITOPS_MANAGER), kube.as_manager(KCM_MANAGER)
    for obj in render(SAMPLES / "vllm-agg" / "input", "ns"):
        if obj["kind"] in ("Deployment", "DynamoGraphDeployment"):
            gitops.apply(KINDS[obj["kind"]], as_served(obj))
    stop = threading.Event()

    def controller_manager() -> None:  # every Deployment rolls out at once
        while not stop.wait(0.05):
            for dep in kube.list(DEPLOYMENTS, "ns")[0]:
                status = deployment_status(dep)
                if dep.get("status") != status:
                    kcm.update(DEPLOYMENTS, {**dep, "status": status}, subresource="status")

    sim = threading.Thread(target=controller_manager, daemon=True)
    sim.start()
    try:
        with running(settings_for_tests("ns"), kube) as m:
            wait_for(
                lambda: (
                    kube.get(DGDS, "ns", "vllm-agg").get("status", {}).get("state") == "successful"
                ),
                what="converged",
            )
            assert m.healthy() and m.ready()
            leases = {lease["metadata"]["name"] for lease in kube.list(LEASES, "ns")[0]}
            assert leases == {SCOPE_LEASE_NAME, "dyn-gitops-controller"}
            # a spec change arrives through the DGD watch
            gitops.patch(DGDS, "ns", "vllm-agg", {"spec": {"env": [{"name": "A", "value": "1"}]}})
            wait_for(
                lambda: kube.get(DGDS, "ns", "vllm-agg")["status"]["observedGeneration"] == 2,
                what="observedGeneration follows",
            )
    finally:
        stop.set()
        sim.join(5)
    # a clean stop marks the scope lease for hand-over (kept live) and releases leadership
    (scope,) = [x for x in kube.list(LEASES, "ns")[0] if x["metadata"]["name"] == SCOPE_LEASE_NAME]
    assert scope["metadata"]["annotations"][SCOPE_LEASE_HANDOVER_ANNOTATION] == "true"


def test_optional_apis_that_are_not_served_are_not_watched() -> None:
    kube = FakeKube(
        served=[DEPLOYMENTS, DGDS, KINDS["DynamoGraphDeploymentScalingAdapter"], LEASES]
    )
    with running(settings_for_tests("ns"), kube) as m:
        assert m.lws is None and m.podcliques is None and m.pcsgs is None
        assert m.healthy() and m.ready()
    assert PODCLIQUES not in kube.server.served and PCSGS not in kube.server.served


def test_apis_served_later_are_watched_without_a_restart() -> None:
    """Grove's PodCliques and the DynamoModel API appear after the controller started (their
    CRDs installed later): at the next re-check their informers join the caches, and the
    DynamoModel loop's workers start beside the running graph workers."""
    from dyn_gitops_operator.optional import ApiState
    from dyn_gitops_operator.resources import DYNAMO_MODELS, PODS, SERVICES

    kube = FakeKube()
    kube.server.served |= {PODS, SERVICES}  # what the DynamoModel loop watches besides
    later = {PODCLIQUES, DYNAMO_MODELS}
    kube.server.served -= later
    with running(settings_for_tests("ns", optional_api_recheck=0.1), kube) as m:
        assert m.podcliques is None and m.models is None
        assert m.optional.state(PODCLIQUES) is ApiState.NOT_SERVED and m.ready()
        kube.server.served |= later
        wait_for(lambda: m.podcliques is not None and m.models is not None, what="watched")
        wait_for(
            lambda: any(t.name.startswith("worker1-") for t in threading.enumerate()),
            what="the DynamoModel workers",
        )
        wait_for(m.ready, what="ready with the new caches")
        assert all(inf.alive() for inf in m.models.informers)
