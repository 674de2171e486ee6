"""The Grove path against the real kube-apiserver: DGD status from PodCliques and
PodCliqueScalingGroups, scaling through their ``/scale`` subresource, restarts reported as
unsupported, and a cluster without the Grove CRDs.

The rendered sample (setting ``grove``) is applied as Argo CD would (DGD, PodCliqueSet,
adapters); no Grove runs, so the tests create the PodCliques / PCSGs Grove would create
(``grove_create``) and write their status (``grove_status``). Reasons are the Dynamo
operator's (``CheckPodCliqueReady`` / ``CheckPCSGReady``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from dyn_gitops_operator import FIELD_MANAGER, grove
from dyn_gitops_operator.kube import DEPLOYMENTS, DGDS, DGDSAS, PCSGS, PODCLIQUES, Kube
from dyn_gitops_operator.testing import (
    GROVE_MANAGER,
    PODCLIQUESETS,
    DeploymentSimulator,
    gitops_apply,
    grove_create,
    grove_status,
    render,
    running,
    settings_for_tests,
    wait_for,
)

pytestmark = pytest.mark.realk8s
SAMPLES = Path(__file__).resolve().parent.parent / "samples"
GROVE_SAMPLE = SAMPLES / "grove-multinode" / "input"
APPLIED = ("DynamoGraphDeployment", "DynamoGraphDeploymentScalingAdapter", "PodCliqueSet")


def graph_objects(objs: list[dict[str, Any]], dgd: str) -> list[dict[str, Any]]:
    """The DGD, its PodCliqueSet and its adapters (the sample renders two graphs)."""
    return [o for o in objs if o["metadata"]["name"] == dgd or
            (o["metadata"].get("annotations") or {}).get("dyn-gitops.io/source-dgd", "")
            .endswith(f"/{dgd}")]


def status_of(k: Kube, ns: str, name: str) -> dict[str, Any]:
    return dict(k.get(DGDS, ns, name).get("status") or {})


def ready_cond(status: dict[str, Any]) -> dict[str, Any]:
    return next(c for c in status.get("conditions") or [] if c["type"] == "Ready")


def message_is(k: Kube, ns: str, name: str, want: str) -> Any:
    st = status_of(k, ns, name)
    return st.get("conditions") and ready_cond(st)["message"] == want and st


def managers(obj: dict[str, Any]) -> set[tuple[str, str, str]]:
    """(manager, operation, subresource) of every managedFields entry."""
    return {(m["manager"], m["operation"], m.get("subresource", ""))
            for m in obj["metadata"].get("managedFields") or []}


def apply_graph(k: Kube, ns: str, dgd: str, sample: Path = GROVE_SAMPLE,
                **settings: Any) -> dict[str, Any]:
    """Render, apply as GitOps would; the PodCliqueSet."""
    mine = graph_objects(render(sample, ns, **settings), dgd)
    gitops_apply(k, mine, kinds=APPLIED)
    (pcs,) = [o for o in mine if o["kind"] == "PodCliqueSet"]
    return pcs


# ------------------------------------------------------------------------- readiness (pure)
def _comp(kind: str, spec: int, generation: int = 1, **status: int) -> grove.Component:
    res = PCSGS if kind == "pcsg" else PODCLIQUES
    return grove.Component(res, "g-0-svc", {"metadata": {"generation": generation},
                                            "spec": {"replicas": spec}, "status": status})


@pytest.mark.parametrize(("comp", "want"), [
    (grove.Component(PODCLIQUES, "g-0-svc", None), "resource not found"),
    (_comp("pclq", 2, readyReplicas=2, updatedReplicas=2, replicas=2),
     "observedGeneration is nil"),
    (_comp("pclq", 2, 3, observedGeneration=2, readyReplicas=2, updatedReplicas=2,
           replicas=2), "spec not yet processed: generation=3, observedGeneration=2"),
    (_comp("pclq", 0, observedGeneration=1), ""),  # desired 0 is ready, whatever runs
    (_comp("pclq", 2, observedGeneration=1, readyReplicas=1, updatedReplicas=2, replicas=2),
     "desired=2, ready=1"),
    (_comp("pcsg", 2, observedGeneration=1, availableReplicas=1, readyReplicas=2,
           updatedReplicas=2, replicas=2), "desired=2, available=1"),
    (_comp("pclq", 2, observedGeneration=1, readyReplicas=2, updatedReplicas=1, replicas=2),
     "desired=2, updated=1"),
    (_comp("pcsg", 2, observedGeneration=1, availableReplicas=2, updatedReplicas=2,
           replicas=3), "performing rolling update: desired=2, replicas=3"),
    (_comp("pcsg", 2, observedGeneration=1, availableReplicas=2, updatedReplicas=2,
           replicas=2), ""),
])
def test_readiness_reasons_are_the_operators(comp: grove.Component, want: str) -> None:
    assert grove.readiness(comp) == (not want, want)


# ------------------------------------------------------------------------- real API server
def test_status_from_podclique_and_pcsg(k: Kube, namespace: str) -> None:
    """vllm-agg: Frontend is a PodClique (replicas 2), the multinode worker a PCSG."""
    pcs = apply_graph(k, namespace, "vllm-agg")
    pclq, pcsg = "vllm-agg-0-frontend", "vllm-agg-0-vllmdecodeworker"
    with running(settings_for_tests(namespace), k) as m:
        assert m.podcliques is not None and m.pcsgs is not None
        # Grove has not created anything yet
        st = wait_for(lambda: message_is(
            k, namespace, "vllm-agg", "Resources not ready: vllm-agg: "
            f"podclique/{pclq}: resource not found; pcsg/{pcsg}: resource not found"),
            what="not found")
        assert st["state"] == "pending" and st["services"] == {}
        assert ready_cond(st)["reason"] == "some_resources_are_not_ready"

        # created, nothing observed yet
        assert grove_create(k, pcs) == {pclq: PODCLIQUES, pcsg: PCSGS}
        st = wait_for(lambda: message_is(
            k, namespace, "vllm-agg", "Resources not ready: vllm-agg: "
            f"podclique/{pclq}: observedGeneration is nil; "
            f"pcsg/{pcsg}: observedGeneration is nil"), what="not observed")
        assert st["services"]["Frontend"] == {
            "componentKind": "PodClique", "componentName": pclq, "componentNames": [pclq],
            "replicas": 0, "updatedReplicas": 0, "readyReplicas": 0}

        # pods coming up: one ready of two, no PCSG replica available
        grove_status(k, PODCLIQUES, namespace, pclq, readyReplicas=1)
        grove_status(k, PCSGS, namespace, pcsg, availableReplicas=0)
        wait_for(lambda: message_is(
            k, namespace, "vllm-agg", "Resources not ready: vllm-agg: "
            f"podclique/{pclq}: desired=2, ready=1; pcsg/{pcsg}: desired=1, available=0"),
            what="not ready")
        # updated and total replicas count too
        grove_status(k, PODCLIQUES, namespace, pclq, updatedReplicas=1)
        grove_status(k, PCSGS, namespace, pcsg, replicas=2)
        wait_for(lambda: message_is(
            k, namespace, "vllm-agg", "Resources not ready: vllm-agg: "
            f"podclique/{pclq}: desired=2, updated=1; "
            f"pcsg/{pcsg}: performing rolling update: desired=1, replicas=2"),
            what="not updated / rolling")

        # ready
        grove_status(k, PODCLIQUES, namespace, pclq)
        grove_status(k, PCSGS, namespace, pcsg)
        st = wait_for(lambda: (s := status_of(k, namespace, "vllm-agg"))["state"] ==
                      "successful" and s, what="successful")
        assert ready_cond(st) | {"lastTransitionTime": None} == {
            "type": "Ready", "status": "True", "reason": "all_resources_are_ready",
            "message": "All resources are ready", "lastTransitionTime": None,
            "observedGeneration": k.get(DGDS, namespace, "vllm-agg")["metadata"]["generation"]}
        assert st["services"] == {
            "Frontend": {"componentKind": "PodClique", "componentName": pclq,
                         "componentNames": [pclq], "replicas": 2, "updatedReplicas": 2,
                         "readyReplicas": 2},
            "VllmDecodeWorker": {"componentKind": "PodCliqueScalingGroup",
                                 "componentName": pcsg, "componentNames": [pcsg],
                                 "replicas": 1, "updatedReplicas": 1, "availableReplicas": 1}}
        assert "rollingUpdate" not in st and "restart" not in st

        # Grove takes a new PodCliqueSet template into the PodClique: generation 2, not
        # yet observed by Grove
        k.request("PATCH", PODCLIQUES.path(namespace, pclq), None,
                  {"spec": {"podSpec": {"terminationGracePeriodSeconds": 5}}},
                  "application/merge-patch+json")
        wait_for(lambda: message_is(
            k, namespace, "vllm-agg", "Resources not ready: vllm-agg: "
            f"podclique/{pclq}: spec not yet processed: generation=2, observedGeneration=1"),
            what="generation not observed")
        grove_status(k, PODCLIQUES, namespace, pclq)
        wait_for(lambda: status_of(k, namespace, "vllm-agg")["state"] == "successful",
                 what="successful again")

        # a deleted PodClique is missing again
        k.delete(PODCLIQUES, namespace, pclq)
        st = wait_for(lambda: message_is(
            k, namespace, "vllm-agg",
            f"Resources not ready: vllm-agg: podclique/{pclq}: resource not found"),
            what="deleted")
        assert set(st["services"]) == {"VllmDecodeWorker"}

    # never wrote the PodCliqueSet, the PCSG, or any Deployment
    assert FIELD_MANAGER not in {m for m, _, _ in managers(
        k.get(PODCLIQUESETS, namespace, "vllm-agg"))}
    assert FIELD_MANAGER not in {m for m, _, _ in managers(k.get(PCSGS, namespace, pcsg))}
    assert k.list(DEPLOYMENTS, namespace)[0] == []


def test_multinode_graph_counts_every_scaling_group(k: Kube, namespace: str) -> None:
    """trtllm-disagg-mn: prefill (2 replicas) and decode are PCSGs, the frontend a clique."""
    pcs = apply_graph(k, namespace, "trtllm-disagg-mn")
    created = grove_create(k, pcs)
    assert created == {"trtllm-disagg-mn-0-frontend": PODCLIQUES,
                       "trtllm-disagg-mn-0-decode": PCSGS, "trtllm-disagg-mn-0-prefill": PCSGS}
    for name, res in created.items():
        grove_status(k, res, namespace, name)
    grove_status(k, PCSGS, namespace, "trtllm-disagg-mn-0-prefill", availableReplicas=1)
    with running(settings_for_tests(namespace), k):
        st = wait_for(lambda: message_is(
            k, namespace, "trtllm-disagg-mn", "Resources not ready: trtllm-disagg-mn: "
            "pcsg/trtllm-disagg-mn-0-prefill: desired=2, available=1"), what="prefill")
        assert {s: v["componentKind"] for s, v in st["services"].items()} == {
            "Frontend": "PodClique", "prefill": "PodCliqueScalingGroup",
            "decode": "PodCliqueScalingGroup"}
        assert st["services"]["prefill"]["availableReplicas"] == 1
        grove_status(k, PCSGS, namespace, "trtllm-disagg-mn-0-prefill")
        wait_for(lambda: status_of(k, namespace, "trtllm-disagg-mn")["state"] == "successful",
                 what="successful")

        # Git scales the multinode decode service: its PCSG follows through /scale
        k.request("PATCH", DGDS.path(namespace, "trtllm-disagg-mn"), None,
                  {"spec": {"services": {"decode": {"replicas": 2}}}},
                  "application/merge-patch+json")
        pcsg = wait_for(lambda: (g := k.get(PCSGS, namespace, "trtllm-disagg-mn-0-decode"))
                        ["spec"]["replicas"] == 2 and g, what="decode PCSG scaled")
        assert (FIELD_MANAGER, "Update", "scale") in managers(pcsg)
        wait_for(lambda: message_is(
            k, namespace, "trtllm-disagg-mn", "Resources not ready: trtllm-disagg-mn: "
            "pcsg/trtllm-disagg-mn-0-decode: spec not yet processed: generation=2, "
            "observedGeneration=1"), what="decode scale not observed")
    assert FIELD_MANAGER not in {m for m, _, _ in managers(
        k.get(PODCLIQUESETS, namespace, "trtllm-disagg-mn"))}


def scale(k: Kube, ns: str, name: str, replicas: int) -> None:
    """What an HPA does to the adapter: a merge patch of its /scale subresource."""
    hpa = Kube(k.api, field_manager="horizontal-pod-autoscaler")
    hpa.request("PATCH", DGDSAS.path(ns, name, "scale"),
                [("fieldManager", "horizontal-pod-autoscaler")],
                {"spec": {"replicas": replicas}}, "application/merge-patch+json")


def spec_replicas(k: Kube, ns: str, name: str) -> int:
    return int(k.get(PODCLIQUES, ns, name)["spec"]["replicas"])


def test_scaling_adapter_scales_the_podclique_through_scale(k: Kube, namespace: str) -> None:
    """scaling-adapter on Grove: the adapter drives the PodClique's /scale; the PodCliqueSet
    (Git's) is never written; a service without an adapter follows the DGD's replicas."""
    pcs = apply_graph(k, namespace, "sglang-disagg", SAMPLES / "scaling-adapter" / "input",
                      grove=True)
    created = grove_create(k, pcs)
    assert set(created) == {f"sglang-disagg-0-{s}" for s in ("frontend", "decode", "prefill")}
    decode = "sglang-disagg-0-decode"
    for name, res in created.items():
        grove_status(k, res, namespace, name)
    with running(settings_for_tests(namespace), k):
        adapter = wait_for(lambda: (a := k.get(DGDSAS, namespace, "sglang-disagg-decode"))
                           .get("status", {}).get("replicas") == 2 and a, what="adapter")
        assert adapter["status"]["selector"] == (
            "nvidia.com/dynamo-component=decode,"
            "nvidia.com/dynamo-graph-deployment-name=sglang-disagg")
        wait_for(lambda: status_of(k, namespace, "sglang-disagg").get("state") ==
                 "successful", what="successful")

        scale(k, namespace, "sglang-disagg-decode", 4)
        wait_for(lambda: spec_replicas(k, namespace, decode) == 4, what="decode scaled to 4")
        live = k.get(PODCLIQUES, namespace, decode)
        assert (FIELD_MANAGER, "Update", "scale") in managers(live)
        assert live["metadata"]["generation"] == 2
        # Grove has not caught up: the DGD says so, the adapter already reports 4
        wait_for(lambda: message_is(
            k, namespace, "sglang-disagg", "Resources not ready: sglang-disagg: "
            f"podclique/{decode}: spec not yet processed: generation=2, "
            "observedGeneration=1"), what="scale not observed")
        assert k.request("GET", DGDSAS.path(namespace, "sglang-disagg-decode", "scale"))[
            "status"]["replicas"] == 4
        grove_status(k, PODCLIQUES, namespace, decode, readyReplicas=3)
        st = wait_for(lambda: message_is(
            k, namespace, "sglang-disagg", "Resources not ready: sglang-disagg: "
            f"podclique/{decode}: desired=4, ready=3"), what="3 of 4")
        assert st["services"]["decode"]["replicas"] == 4
        grove_status(k, PODCLIQUES, namespace, decode)
        wait_for(lambda: status_of(k, namespace, "sglang-disagg")["state"] == "successful",
                 what="successful at 4")

        # no adapter: Git's replicas reach the PodClique (Grove seeds them only at creation)
        k.request("PATCH", DGDS.path(namespace, "sglang-disagg"), None,
                  {"spec": {"services": {"prefill": {"replicas": 3}}}},
                  "application/merge-patch+json")
        wait_for(lambda: spec_replicas(k, namespace, "sglang-disagg-0-prefill") == 3,
                 what="prefill follows the DGD")
        assert spec_replicas(k, namespace, "sglang-disagg-0-frontend") == 1  # its adapter: 1
        assert spec_replicas(k, namespace, decode) == 4

    live_pcs = k.get(PODCLIQUESETS, namespace, "sglang-disagg")
    assert FIELD_MANAGER not in {m for m, _, _ in managers(live_pcs)}
    assert {c["name"]: c["spec"]["replicas"] for c in live_pcs["spec"]["template"]["cliques"]} \
        == {"decode": 2, "frontend": 1, "prefill": 1}  # as Git rendered it
    assert k.list(DEPLOYMENTS, namespace)[0] == []


def test_moving_to_grove_drains_the_old_workers_once_grove_is_ready(k: Kube,
                                                                     namespace: str) -> None:
    """A DGD re-rendered for Grove: its managed worker Deployment (Prune=false, so the GitOps
    tool keeps it) serves until the worker's PodClique is ready, then is drained and
    deleted; the frontend Deployment is the GitOps tool's to prune, not ours."""
    component = render(SAMPLES / "vllm-agg" / "input", namespace)
    gitops_apply(k, component)
    worker = next(o["metadata"]["name"] for o in component if o["kind"] == "Deployment"
                  and o["metadata"]["name"].startswith("vllm-agg-vllmdecodeworker-"))
    sim = DeploymentSimulator(k, namespace)
    sim.start(0.1)
    try:
        with running(settings_for_tests(namespace), k):
            wait_for(lambda: status_of(k, namespace, "vllm-agg").get("state") == "successful",
                     what="component path ready")
            serving = k.get(DEPLOYMENTS, namespace, worker)["spec"]["replicas"]
            assert serving >= 1
            pcs = apply_graph(k, namespace, "vllm-agg", SAMPLES / "vllm-agg" / "input",
                              grove=True)
            created = grove_create(k, pcs)
            wait_for(lambda: message_is(
                k, namespace, "vllm-agg", "Resources not ready: vllm-agg: "
                "podclique/vllm-agg-0-frontend: observedGeneration is nil; "
                "podclique/vllm-agg-0-vllmdecodeworker: observedGeneration is nil"),
                what="Grove status")
            time.sleep(1)  # a few reconcile passes: the old worker keeps serving meanwhile
            assert k.get(DEPLOYMENTS, namespace, worker)["spec"]["replicas"] == serving
            for name, res in created.items():
                grove_status(k, res, namespace, name)
            wait_for(lambda: worker not in {d["metadata"]["name"]
                                            for d in k.list(DEPLOYMENTS, namespace)[0]},
                     timeout=30, what="old worker drained and deleted")
            assert status_of(k, namespace, "vllm-agg")["state"] == "successful"
            # not ours to delete (no managed-replicas annotation): left to the GitOps tool
            assert k.get(DEPLOYMENTS, namespace, "vllm-agg-frontend")
    finally:
        sim.stop()


def test_stale_cache_scale_is_refused_not_applied(k: Kube, namespace: str) -> None:
    """The /scale patch carries the resourceVersion the decision read: a real 409."""
    from dyn_gitops_operator.errors import ConflictError

    pcs = apply_graph(k, namespace, "vllm-agg")
    grove_create(k, pcs)
    pclq = k.get(PODCLIQUES, namespace, "vllm-agg-0-frontend")
    comp = grove.Component(PODCLIQUES, "vllm-agg-0-frontend", grove.trim(pclq))
    grove_status(k, PODCLIQUES, namespace, "vllm-agg-0-frontend")  # newer than our read
    with pytest.raises(ConflictError):
        k.patch(PODCLIQUES, namespace, "vllm-agg-0-frontend", grove.scale_patch(comp, 5),
                subresource="scale")
    assert spec_replicas(k, namespace, "vllm-agg-0-frontend") == 2


def with_restart(restart_id: str) -> list[dict[str, Any]]:
    docs = [d for d in yaml.safe_load_all((GROVE_SAMPLE / "vllm-agg.yaml").read_text()) if d]
    docs[0]["spec"]["restart"] = {"id": restart_id}
    return docs


def test_restart_is_reported_unsupported(k: Kube, namespace: str,
                                         caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="dyn_gitops_operator.reconcilers.restart")
    settings = {"grove": True}
    objs = render(with_restart("r1"), namespace, **settings)
    gitops_apply(k, objs, kinds=APPLIED)
    (pcs,) = [o for o in objs if o["kind"] == "PodCliqueSet"]
    created = grove_create(k, pcs)

    def logged() -> list[logging.LogRecord]:
        return [r for r in caplog.records
                if r.getMessage() == "restart not supported on the Grove path"]

    with running(settings_for_tests(namespace), k):
        st = wait_for(lambda: (s := status_of(k, namespace, "vllm-agg")).get("restart") and s,
                      what="restart status")
        assert st["restart"] == {
            "observedID": "r1", "phase": "Failed",
            "message": "Restart failed: not supported on the Grove path (the PodCliqueSet "
                       "vllm-agg belongs to the GitOps tool; the controller does not stamp "
                       "nvidia.com/restartAt on its cliques)"}
        # more passes (status changes of the cliques): still one log line for generation 1
        for name, res in created.items():
            grove_status(k, res, namespace, name)
        wait_for(lambda: status_of(k, namespace, "vllm-agg")["state"] == "successful",
                 what="successful")
        assert len(logged()) == 1
        assert logged()[0].__dict__["restart_id"] == "r1"

        # a new restart id is a new generation: reported and logged once more
        gitops_apply(k, render(with_restart("r2"), namespace, **settings), kinds=APPLIED)
        wait_for(lambda: status_of(k, namespace, "vllm-agg")["restart"]["observedID"] == "r2",
                 what="r2 reported")
        assert status_of(k, namespace, "vllm-agg")["restart"]["phase"] == "Failed"
        assert [r.__dict__["restart_id"] for r in logged()] == ["r1", "r2"]

    # nothing stamped anywhere
    live_pcs = k.get(PODCLIQUESETS, namespace, "vllm-agg")
    assert FIELD_MANAGER not in {m for m, _, _ in managers(live_pcs)}
    for clique in live_pcs["spec"]["template"]["cliques"]:
        assert "nvidia.com/restartAt" not in (clique.get("annotations") or {})
    for name, res in created.items():
        assert {m for m, _, _ in managers(k.get(res, namespace, name))} == {GROVE_MANAGER}


# ------------------------------------------------------------------ without the Grove CRDs
@pytest.fixture(scope="module")
def bare(test_binaries: Any) -> Iterator[Kube]:
    """A private control plane with our CRDs and the PodCliqueSet CRD, but not Grove's
    PodClique / PodCliqueScalingGroup (as if Grove were not installed)."""
    from support.controlplane import control_plane, install_crds
    from support.thirdparty_crds import grove_crds, thirdparty_crds

    from dyn_gitops.crds import crds

    bins = test_binaries("etcd", "kube-apiserver")
    with control_plane(bins["etcd"], bins["kube-apiserver"]) as cp:
        grove_kinds = {c["metadata"]["name"] for c in grove_crds()}
        install_crds(cp.client(), crds() + [c for c in thirdparty_crds()
                                            if c["metadata"]["name"] not in grove_kinds])
        yield Kube(cp.client())


def test_controller_starts_without_the_grove_crds(bare: Kube) -> None:
    bare.request("POST", "/api/v1/namespaces", body={"metadata": {"name": "nogrove"}})
    apply_graph(bare, "nogrove", "vllm-agg")
    with running(settings_for_tests("nogrove"), bare) as m:
        assert m.podcliques is None and m.pcsgs is None
        st = wait_for(lambda: message_is(
            bare, "nogrove", "vllm-agg", "Resources not ready: vllm-agg: "
            "podclique/vllm-agg-0-frontend: resource not found; "
            "pcsg/vllm-agg-0-vllmdecodeworker: resource not found"), what="not found")
        assert st["state"] == "pending" and st["services"] == {}
        assert m.healthy() and m.ready()
