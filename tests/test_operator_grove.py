"""The Grove path against the real kube-apiserver: DGD status from PodCliques and
PodCliqueScalingGroups, scaling through their ``/scale`` subresource, restarts stamped into
the PodCliqueSet's clique annotations (refused when the CRD's ``cliques`` is an atomic list),
and a cluster without the Grove CRDs.

The rendered sample (setting ``grove``) is applied as Argo CD would (DGD, PodCliqueSet,
adapters); no Grove runs, so the tests create the PodCliques / PCSGs Grove would create
(``grove_create``) and write their status (``grove_status``). Reasons are the Dynamo
operator's (``CheckPodCliqueReady`` / ``CheckPCSGReady``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from typing import Any

import pytest
from dyn_gitops_operator import FIELD_MANAGER, grove
from dyn_gitops_operator.kube import DEPLOYMENTS, DGDS, DGDSAS, PCSGS, PODCLIQUES, Kube
from dyn_gitops_operator.testing import (
    GROVE_MANAGER,
    PODCLIQUESETS,
    gitops_apply,
    grove_create,
    grove_status,
    hpa_scale,
    running,
    settings_for_tests,
    wait_for,
)
from support.graphs import component_patch
from support.grove_graph import (
    APPLIED,
    PCLQ,
    PCSG,
    apply_graph,
    pcs_observed,
    ready_grove_graph,
    with_restart,
)
from support.paths import SAMPLES
from support.rendering import render

pytestmark = pytest.mark.realk8s


def status_of(k: Kube, ns: str, name: str) -> dict[str, Any]:
    return dict(k.get(DGDS, ns, name).get("status") or {})


def ready_cond(status: dict[str, Any]) -> dict[str, Any]:
    return next(c for c in status.get("conditions") or [] if c["type"] == "Ready")


def message_is(k: Kube, ns: str, name: str, want: str) -> Any:
    st = status_of(k, ns, name)
    return st.get("conditions") and ready_cond(st)["message"] == want and st


def managers(obj: dict[str, Any]) -> set[tuple[str, str, str]]:
    """(manager, operation, subresource) of every managedFields entry."""
    return {
        (m["manager"], m["operation"], m.get("subresource", ""))
        for m in obj["metadata"].get("managedFields") or []
    }


# ------------------------------------------------------------------------- readiness (pure)
def _comp(kind: str, spec: int, generation: int = 1, **status: int) -> grove.Component:
    res = PCSGS if kind == "pcsg" else PODCLIQUES
    return grove.Component(
        res,
        "g-0-svc",
        {"metadata": {"generation": generation}, "spec": {"replicas": spec}, "status": status},
    )


@pytest.mark.parametrize(
    ("comp", "want"),
    [
        (grove.Component(PODCLIQUES, "g-0-svc", None), "resource not found"),
        (
            _comp("pclq", 2, readyReplicas=2, updatedReplicas=2, replicas=2),
            "observedGeneration is nil",
        ),
        (
            _comp(
                "pclq", 2, 3, observedGeneration=2, readyReplicas=2, updatedReplicas=2, replicas=2
            ),
            "spec not yet processed: generation=3, observedGeneration=2",
        ),
        (_comp("pclq", 0, observedGeneration=1), ""),  # desired 0 is ready, whatever runs
        (
            _comp("pclq", 2, observedGeneration=1, readyReplicas=1, updatedReplicas=2, replicas=2),
            "scheduled but ready=1/2",
        ),
        (
            _comp(
                "pcsg",
                2,
                observedGeneration=1,
                availableReplicas=1,
                readyReplicas=2,
                updatedReplicas=2,
                replicas=2,
            ),
            "scheduled but available=1/2",
        ),
        (
            _comp("pclq", 2, observedGeneration=1, readyReplicas=2, updatedReplicas=1, replicas=2),
            "desired=2, updated=1",
        ),
        (
            _comp(
                "pcsg", 2, observedGeneration=1, availableReplicas=2, updatedReplicas=2, replicas=3
            ),
            "performing rolling update: desired=2, replicas=3",
        ),
        (
            _comp(
                "pcsg", 2, observedGeneration=1, availableReplicas=2, updatedReplicas=2, replicas=2
            ),
            "",
        ),
    ],
)
def test_readiness_reasons_are_the_operators(comp: grove.Component, want: str) -> None:
    assert grove.readiness(comp) == (not want, want)


def _cond(kind: str, status: str, reason: str) -> dict[str, str]:
    return {"type": kind, "status": status, "reason": reason, "message": "m"}


@pytest.mark.parametrize(
    ("kind", "status", "why", "reason"),
    [
        # observePodCliqueReadiness / observePCSGReadiness, internal/dynamo/grove.go @ 2a6da14c8
        ("pclq", {}, "observedGeneration is nil", "some_resources_are_not_ready"),
        (
            "pclq",
            {"readyReplicas": 4, "updatedReplicas": 4, "replicas": 4},
            "",  # fully ready is checked first: Grove may leave scheduledReplicas unset
            "",
        ),
        (
            "pclq",
            {"scheduleGatedReplicas": 2, "scheduledReplicas": 2, "replicas": 4},
            "schedule-gated replicas: 2",
            "insufficient_capacity",
        ),
        (
            "pclq",
            {
                "replicas": 4,
                "conditions": [_cond("PodCliqueScheduled", "False", "InsufficientScheduledPods")],
            },
            "scheduling condition InsufficientScheduledPods: m",
            "insufficient_capacity",
        ),
        (
            "pclq",  # another scheduling reason is no capacity signal
            {
                "replicas": 4,
                "updatedReplicas": 4,
                "conditions": [_cond("PodCliqueScheduled", "False", "Other")],
            },
            "scheduled but ready=0/4",
            "pods_not_ready",
        ),
        (
            "pclq",
            {"scheduledReplicas": 3, "replicas": 4, "updatedReplicas": 4, "readyReplicas": 3},
            "insufficient scheduled replicas: scheduled=3/4",
            "insufficient_capacity",
        ),
        (
            "pcsg",
            {
                "replicas": 4,
                "conditions": [
                    _cond(
                        "MinAvailableBreached",
                        "False",
                        "InsufficientScheduledPodCliqueScalingGroupReplicas",
                    )
                ],
            },
            "min-available breached (InsufficientScheduledPodCliqueScalingGroupReplicas): m",
            "insufficient_capacity",
        ),
        (
            "pcsg",  # Grove alpha.8 polarity: True pairs with the availability reason
            {
                "replicas": 4,
                "updatedReplicas": 4,
                "scheduledReplicas": 4,
                "conditions": [
                    _cond(
                        "MinAvailableBreached",
                        "True",
                        "InsufficientAvailablePodCliqueScalingGroupReplicas",
                    )
                ],
            },
            "scheduled but available=0/4",
            "pods_not_ready",
        ),
        (
            "pclq",
            {"scheduledReplicas": 4, "replicas": 4, "updatedReplicas": 2, "readyReplicas": 4},
            "desired=4, updated=2",
            "updating",
        ),
        (
            "pcsg",
            {"scheduledReplicas": 4, "replicas": 5, "updatedReplicas": 4, "availableReplicas": 4},
            "performing rolling update: desired=4, replicas=5",
            "updating",
        ),
    ],
)
def test_not_ready_components_are_classified_as_the_operator_does(
    kind: str, status: dict[str, Any], why: str, reason: str
) -> None:
    """The DGD Ready reasons of 1.4+ (#11057 / #11131): each component implies one."""
    observed = {} if not status else {"observedGeneration": 1}
    r = grove.classify(_comp(kind, 4, **observed, **status))
    assert (r.ready, r.why, r.reason) == (not why, why, reason)


@pytest.mark.parametrize(
    ("reasons", "want"),
    [
        ([], "all_resources_are_ready"),
        (["updating"], "updating"),
        (["pods_not_ready", "pods_not_ready"], "pods_not_ready"),
        (["insufficient_capacity", "updating"], "mixed_not_ready_reasons"),
    ],
)
def test_not_ready_reasons_aggregate_as_the_operator_does(reasons: list[str], want: str) -> None:
    """``evaluateGroveComponents`` (internal/dynamo/grove.go @ 2a6da14c8): the components'
    common reason, else mixed."""
    assert grove.aggregate(reasons) == want


def _pcs(*entries: tuple[str, str, dict[str, Any]]) -> dict[str, Any]:
    return {
        "metadata": {
            "managedFields": [
                {
                    "manager": m,
                    "operation": op,
                    "fieldsV1": {"f:spec": {"f:template": {"f:cliques": cliques}}},
                }
                for m, op, cliques in entries
            ]
        }
    }


def test_cliques_list_type_from_managed_fields() -> None:
    entry = {".": {}, "f:name": {}, "f:annotations": {"f:nvidia.com/restartAt": {}}}
    as_map = {'k:{"name":"a"}': {".": {}, "f:name": {}}}
    assert grove.cliques_map_list(_pcs(("argocd-controller", "Apply", as_map)))
    # atomic: the GitOps manager owns the list whole
    assert not grove.cliques_map_list(_pcs(("argocd-controller", "Apply", {})))
    assert not grove.cliques_map_list(
        _pcs(("kubectl", "Update", {}), ("argocd-controller", "Apply", as_map))
    )
    # undecidable (only our own entry, or no managedFields): refused
    assert not grove.cliques_map_list(_pcs((FIELD_MANAGER, "Apply", as_map)))
    assert not grove.cliques_map_list({"metadata": {}})
    assert grove.owned_restart_cliques(
        _pcs(
            ("argocd-controller", "Apply", {'k:{"name":"b"}': entry}),
            (
                FIELD_MANAGER,
                "Apply",
                {'k:{"name":"a"}': entry, 'k:{"name":"c"}': {".": {}, "f:name": {}}},
            ),
        )
    ) == {"a"}


# ------------------------------------------------------------------------- real API server
def test_status_from_podclique_and_pcsg(k: Kube, namespace: str) -> None:
    """vllm-agg: Frontend is a PodClique (replicas 2), the multinode worker a PCSG."""
    pcs = apply_graph(k, namespace, "vllm-agg")
    pclq, pcsg = "vllm-agg-0-frontend", "vllm-agg-0-vllmdecodeworker"
    with running(settings_for_tests(namespace), k) as m:
        assert m.podcliques is not None and m.pcsgs is not None
        # Grove has not created anything yet
        st = wait_for(
            lambda: message_is(
                k,
                namespace,
                "vllm-agg",
                "Resources not ready: vllm-agg: "
                "Frontend: resource not found; VllmDecodeWorker: resource not found",
            ),
            what="not found",
        )
        # a missing object still has its entry: kind and expected name (grove.go @ 2a6da14c8)
        assert st["state"] == "pending" and st["components"] == {
            "Frontend": {
                "componentKind": "PodClique",
                "componentNames": [pclq],
                "replicas": 0,
                "updatedReplicas": 0,
            },
            "VllmDecodeWorker": {
                "componentKind": "PodCliqueScalingGroup",
                "componentNames": [pcsg],
                "replicas": 0,
                "updatedReplicas": 0,
            },
        }
        assert ready_cond(st)["reason"] == "some_resources_are_not_ready"

        # created, nothing observed yet
        assert grove_create(k, pcs) == {pclq: PODCLIQUES, pcsg: PCSGS}
        st = wait_for(
            lambda: message_is(
                k,
                namespace,
                "vllm-agg",
                "Resources not ready: vllm-agg: "
                "Frontend: observedGeneration is nil; "
                "VllmDecodeWorker: observedGeneration is nil",
            ),
            what="not observed",
        )
        assert st["components"]["Frontend"] == {
            "componentKind": "PodClique",
            "componentNames": [pclq],
            "replicas": 0,
            "updatedReplicas": 0,
            "readyReplicas": 0,
        }

        # pods coming up: one ready of two, no PCSG replica available (scheduled):
        # pods_not_ready (observePodCliqueReadiness / observePCSGReadiness @ 2a6da14c8)
        grove_status(k, PODCLIQUES, namespace, pclq, readyReplicas=1)
        grove_status(k, PCSGS, namespace, pcsg, availableReplicas=0)
        st = wait_for(
            lambda: message_is(
                k,
                namespace,
                "vllm-agg",
                "Resources not ready: vllm-agg: Frontend: scheduled but ready=1/2; "
                "VllmDecodeWorker: scheduled but available=0/1",
            ),
            what="not ready",
        )
        assert ready_cond(st)["reason"] == "pods_not_ready"
        assert st["components"]["Frontend"]["scheduledReplicas"] == 2
        # updated and total replicas count too
        grove_status(k, PODCLIQUES, namespace, pclq, updatedReplicas=1)
        grove_status(k, PCSGS, namespace, pcsg, replicas=2)
        wait_for(
            lambda: message_is(
                k,
                namespace,
                "vllm-agg",
                "Resources not ready: vllm-agg: "
                "Frontend: desired=2, updated=1; "
                "VllmDecodeWorker: performing rolling update: desired=1, replicas=2",
            ),
            what="not updated / rolling",
        )
        assert ready_cond(status_of(k, namespace, "vllm-agg"))["reason"] == "updating"

        # ready
        grove_status(k, PODCLIQUES, namespace, pclq)
        grove_status(k, PCSGS, namespace, pcsg)
        st = wait_for(
            lambda: (s := status_of(k, namespace, "vllm-agg"))["state"] == "successful" and s,
            what="successful",
        )
        assert ready_cond(st) | {"lastTransitionTime": None} == {
            "type": "Ready",
            "status": "True",
            "reason": "all_resources_are_ready",
            "message": "All resources are ready",
            "lastTransitionTime": None,
            "observedGeneration": k.get(DGDS, namespace, "vllm-agg")["metadata"]["generation"],
        }
        assert st["components"] == {
            "Frontend": {
                "componentKind": "PodClique",
                "componentNames": [pclq],
                "replicas": 2,
                "updatedReplicas": 2,
                "readyReplicas": 2,
                "scheduledReplicas": 2,
            },
            "VllmDecodeWorker": {
                "componentKind": "PodCliqueScalingGroup",
                "componentNames": [pcsg],
                "replicas": 1,
                "updatedReplicas": 1,
                "availableReplicas": 1,
                "scheduledReplicas": 1,
            },
        }
        assert "rollingUpdate" not in st and "restart" not in st

        # Grove takes a new PodCliqueSet template into the PodClique: generation 2, not
        # yet observed by Grove
        k.request(
            "PATCH",
            PODCLIQUES.path(namespace, pclq),
            None,
            {"spec": {"podSpec": {"terminationGracePeriodSeconds": 5}}},
            "application/merge-patch+json",
        )
        wait_for(
            lambda: message_is(
                k,
                namespace,
                "vllm-agg",
                "Resources not ready: vllm-agg: "
                "Frontend: spec not yet processed: generation=2, observedGeneration=1",
            ),
            what="generation not observed",
        )
        grove_status(k, PODCLIQUES, namespace, pclq)
        wait_for(
            lambda: status_of(k, namespace, "vllm-agg")["state"] == "successful",
            what="successful again",
        )

        # a deleted PodClique is missing again
        k.delete(PODCLIQUES, namespace, pclq)
        st = wait_for(
            lambda: message_is(
                k,
                namespace,
                "vllm-agg",
                "Resources not ready: vllm-agg: Frontend: resource not found",
            ),
            what="deleted",
        )
        assert st["components"]["Frontend"]["replicas"] == 0

    # never wrote the PodCliqueSet, the PCSG, or any Deployment
    assert FIELD_MANAGER not in {
        m for m, _, _ in managers(k.get(PODCLIQUESETS, namespace, "vllm-agg"))
    }
    assert FIELD_MANAGER not in {m for m, _, _ in managers(k.get(PCSGS, namespace, pcsg))}
    assert k.list(DEPLOYMENTS, namespace)[0] == []


def test_multinode_graph_counts_every_scaling_group(k: Kube, namespace: str) -> None:
    """trtllm-disagg-mn: prefill (2 replicas) and decode are PCSGs, the frontend a clique."""
    pcs = apply_graph(k, namespace, "trtllm-disagg-mn")
    created = grove_create(k, pcs)
    assert created == {
        "trtllm-disagg-mn-0-frontend": PODCLIQUES,
        "trtllm-disagg-mn-0-decode": PCSGS,
        "trtllm-disagg-mn-0-prefill": PCSGS,
    }
    for name, res in created.items():
        grove_status(k, res, namespace, name)
    grove_status(k, PCSGS, namespace, "trtllm-disagg-mn-0-prefill", availableReplicas=1)
    with running(settings_for_tests(namespace), k):
        st = wait_for(
            lambda: message_is(
                k,
                namespace,
                "trtllm-disagg-mn",
                "Resources not ready: trtllm-disagg-mn: prefill: scheduled but available=1/2",
            ),
            what="prefill",
        )
        assert {s: v["componentKind"] for s, v in st["components"].items()} == {
            "Frontend": "PodClique",
            "prefill": "PodCliqueScalingGroup",
            "decode": "PodCliqueScalingGroup",
        }
        assert st["components"]["prefill"]["availableReplicas"] == 1
        grove_status(k, PCSGS, namespace, "trtllm-disagg-mn-0-prefill")
        wait_for(
            lambda: status_of(k, namespace, "trtllm-disagg-mn")["state"] == "successful",
            what="successful",
        )

        # Git scales the multinode decode service: its PCSG follows through /scale
        k.request(
            "PATCH",
            DGDS.path(namespace, "trtllm-disagg-mn"),
            None,
            component_patch(k.get(DGDS, namespace, "trtllm-disagg-mn"), "decode", replicas=2),
            "application/merge-patch+json",
        )
        pcsg = wait_for(
            lambda: (
                (g := k.get(PCSGS, namespace, "trtllm-disagg-mn-0-decode"))["spec"]["replicas"] == 2
                and g
            ),
            what="decode PCSG scaled",
        )
        assert (FIELD_MANAGER, "Update", "scale") in managers(pcsg)
        wait_for(
            lambda: message_is(
                k,
                namespace,
                "trtllm-disagg-mn",
                "Resources not ready: trtllm-disagg-mn: "
                "decode: spec not yet processed: generation=2, "
                "observedGeneration=1",
            ),
            what="decode scale not observed",
        )
    assert FIELD_MANAGER not in {
        m for m, _, _ in managers(k.get(PODCLIQUESETS, namespace, "trtllm-disagg-mn"))
    }


def spec_replicas(k: Kube, ns: str, name: str) -> int:
    return int(k.get(PODCLIQUES, ns, name)["spec"]["replicas"])


def test_scaling_adapter_scales_the_podclique_through_scale(k: Kube, namespace: str) -> None:
    """scaling-adapter on Grove: the adapter drives the PodClique's /scale; the PodCliqueSet
    (Git's) is never written; a service without an adapter follows the DGD's replicas."""
    pcs = apply_graph(
        k, namespace, "sglang-disagg", SAMPLES / "scaling-adapter" / "input", grove=True
    )
    created = grove_create(k, pcs)
    assert set(created) == {f"sglang-disagg-0-{s}" for s in ("frontend", "decode", "prefill")}
    decode = "sglang-disagg-0-decode"
    for name, res in created.items():
        grove_status(k, res, namespace, name)
    with running(settings_for_tests(namespace), k):
        adapter = wait_for(
            lambda: (
                (a := k.get(DGDSAS, namespace, "sglang-disagg-decode"))
                .get("status", {})
                .get("replicas")
                == 2
                and a
            ),
            what="adapter",
        )
        assert adapter["status"]["selector"] == (
            "nvidia.com/dynamo-component=decode,"
            "nvidia.com/dynamo-graph-deployment-name=sglang-disagg"
        )
        wait_for(
            lambda: status_of(k, namespace, "sglang-disagg").get("state") == "successful",
            what="successful",
        )

        hpa_scale(k, namespace, "sglang-disagg-decode", 4)
        wait_for(lambda: spec_replicas(k, namespace, decode) == 4, what="decode scaled to 4")
        live = k.get(PODCLIQUES, namespace, decode)
        assert (FIELD_MANAGER, "Update", "scale") in managers(live)
        assert live["metadata"]["generation"] == 2
        # Grove has not caught up: the DGD says so, the adapter already reports 4
        wait_for(
            lambda: message_is(
                k,
                namespace,
                "sglang-disagg",
                "Resources not ready: sglang-disagg: "
                "decode: spec not yet processed: generation=2, "
                "observedGeneration=1",
            ),
            what="scale not observed",
        )
        assert (
            k.request("GET", DGDSAS.path(namespace, "sglang-disagg-decode", "scale"))["status"][
                "replicas"
            ]
            == 4
        )
        grove_status(k, PODCLIQUES, namespace, decode, readyReplicas=3)
        st = wait_for(
            lambda: message_is(
                k,
                namespace,
                "sglang-disagg",
                "Resources not ready: sglang-disagg: decode: scheduled but ready=3/4",
            ),
            what="3 of 4",
        )
        assert st["components"]["decode"]["replicas"] == 4
        grove_status(k, PODCLIQUES, namespace, decode)
        wait_for(
            lambda: status_of(k, namespace, "sglang-disagg")["state"] == "successful",
            what="successful at 4",
        )

        # no adapter: Git's replicas reach the PodClique (Grove seeds them only at creation)
        k.request(
            "PATCH",
            DGDS.path(namespace, "sglang-disagg"),
            None,
            component_patch(k.get(DGDS, namespace, "sglang-disagg"), "prefill", replicas=3),
            "application/merge-patch+json",
        )
        wait_for(
            lambda: spec_replicas(k, namespace, "sglang-disagg-0-prefill") == 3,
            what="prefill follows the DGD",
        )
        assert spec_replicas(k, namespace, "sglang-disagg-0-frontend") == 1  # its adapter: 1
        assert spec_replicas(k, namespace, decode) == 4

    live_pcs = k.get(PODCLIQUESETS, namespace, "sglang-disagg")
    assert FIELD_MANAGER not in {m for m, _, _ in managers(live_pcs)}
    assert {c["name"]: c["spec"]["replicas"] for c in live_pcs["spec"]["template"]["cliques"]} == {
        "decode": 2,
        "frontend": 1,
        "prefill": 1,
    }  # as Git rendered it
    assert k.list(DEPLOYMENTS, namespace)[0] == []


def test_moving_to_grove_drains_the_old_workers_once_grove_is_ready(
    cluster_k: Kube, cluster_namespace: str
) -> None:
    """A DGD re-rendered for Grove: its managed worker Deployment (Prune=false, so the GitOps
    tool keeps it) serves until the worker's PodClique is ready, then is drained and
    deleted; the frontend Deployment is the GitOps tool's to prune, not ours. On the
    realistic cluster: the Deployments' pods are real; no Grove runs, so the PodCliques and
    their status are written as Grove would."""
    from support.cluster import is_ready, pods

    k, namespace = cluster_k, cluster_namespace
    component = render(SAMPLES / "vllm-agg" / "input", namespace)
    gitops_apply(k, component)
    worker = next(
        o["metadata"]["name"]
        for o in component
        if o["kind"] == "Deployment"
        and o["metadata"]["name"].startswith("vllm-agg-vllmdecodeworker-")
    )
    with running(settings_for_tests(namespace), k):
        wait_for(
            lambda: status_of(k, namespace, "vllm-agg").get("state") == "successful",
            timeout=90,
            what="component path ready",
        )
        serving = k.get(DEPLOYMENTS, namespace, worker)["spec"]["replicas"]
        assert serving >= 1

        def worker_pods() -> list[Any]:
            return [p for p in pods(k.api, namespace) if p.metadata.name.startswith(worker)]

        assert sum(is_ready(p) for p in worker_pods()) == serving
        pcs = apply_graph(k, namespace, "vllm-agg", SAMPLES / "vllm-agg" / "input", grove=True)
        created = grove_create(k, pcs)
        wait_for(
            lambda: message_is(
                k,
                namespace,
                "vllm-agg",
                "Resources not ready: vllm-agg: "
                "Frontend: observedGeneration is nil; "
                "VllmDecodeWorker: observedGeneration is nil",
            ),
            what="Grove status",
        )
        time.sleep(1)  # a few reconcile passes: the old worker keeps serving meanwhile
        assert k.get(DEPLOYMENTS, namespace, worker)["spec"]["replicas"] == serving
        assert sum(is_ready(p) for p in worker_pods()) == serving
        for name, res in created.items():
            grove_status(k, res, namespace, name)
        wait_for(
            lambda: (
                worker not in {d["metadata"]["name"] for d in k.list(DEPLOYMENTS, namespace)[0]}
            ),
            timeout=90,
            what="old worker drained and deleted",
        )
        wait_for(lambda: not worker_pods(), timeout=90, what="its pods deleted")
        assert status_of(k, namespace, "vllm-agg")["state"] == "successful"
        # not ours to delete (no managed-replicas annotation): left to the GitOps tool
        assert k.get(DEPLOYMENTS, namespace, "vllm-agg-frontend")


def test_stale_cache_scale_is_refused_not_applied(k: Kube, namespace: str) -> None:
    """The /scale patch carries the resourceVersion the decision read: a real 409."""
    from dyn_gitops_operator.errors import ConflictError

    pcs = apply_graph(k, namespace, "vllm-agg")
    grove_create(k, pcs)
    pclq = k.get(PODCLIQUES, namespace, "vllm-agg-0-frontend")
    comp = grove.Component(PODCLIQUES, "vllm-agg-0-frontend", grove.trim(pclq))
    grove_status(k, PODCLIQUES, namespace, "vllm-agg-0-frontend")  # newer than our read
    with pytest.raises(ConflictError):
        k.patch(
            PODCLIQUES,
            namespace,
            "vllm-agg-0-frontend",
            grove.scale_patch(comp, 5),
            subresource="scale",
        )
    assert spec_replicas(k, namespace, "vllm-agg-0-frontend") == 2


RESTART_AT = "nvidia.com/restartAt"
CLIQUES = {
    "Frontend": ["frontend"],
    "VllmDecodeWorker": ["vllmdecodeworker-ldr", "vllmdecodeworker-wkr"],
}


def stamps(k: Kube, ns: str, pcs: str = "vllm-agg") -> dict[str, str | None]:
    live = k.get(PODCLIQUESETS, ns, pcs)
    return {
        c["name"]: (c.get("annotations") or {}).get(RESTART_AT)
        for c in live["spec"]["template"]["cliques"]
    }


def restart_status(k: Kube, ns: str) -> dict[str, Any]:
    return dict(status_of(k, ns, "vllm-agg").get("restart") or {})


def stays(cond: Any, seconds: float = 3.0) -> None:
    """``cond()`` holds for ``seconds`` (the controller polls the PCS every 2 s)."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        assert cond()
        time.sleep(0.1)


def test_sequential_restart_follows_order_and_grove_readiness(k: Kube, namespace: str) -> None:
    """Sequential, order [VllmDecodeWorker, Frontend]: the worker's two cliques first; the
    Frontend only once the PCS's observedGeneration caught up AND the worker's PCSG is
    ready again; Completed leaves every clique stamped; a GitOps re-apply keeps the stamps;
    the controller owns only the restartAt keys."""
    objs, pcs = ready_grove_graph(k, namespace)
    with running(settings_for_tests(namespace), k):
        wait_for(
            lambda: status_of(k, namespace, "vllm-agg").get("state") == "successful",
            what="successful",
        )
        restarted = render(
            with_restart("r1", type="Sequential", order=["VllmDecodeWorker", "Frontend"]),
            namespace,
            grove=True,
        )
        gitops_apply(k, restarted, kinds=APPLIED)
        wait_for(
            lambda: (
                restart_status(k, namespace)
                == {"observedID": "r1", "phase": "Restarting", "inProgress": ["VllmDecodeWorker"]}
            ),
            what="worker restarting",
        )
        assert stamps(k, namespace) == {
            "frontend": None,
            "vllmdecodeworker-ldr": "r1",
            "vllmdecodeworker-wkr": "r1",
        }
        # the PCSG still reports ready (old status), but Grove has not observed the PCS
        stays(lambda: stamps(k, namespace)["frontend"] is None)
        # Grove syncs: the PCSG rolls (not available), the PCS generation is observed
        grove_status(k, PCSGS, namespace, PCSG, availableReplicas=0, updatedReplicas=0)
        pcs_observed(k, namespace)
        stays(
            lambda: (
                stamps(k, namespace)["frontend"] is None
                and restart_status(k, namespace)["inProgress"] == ["VllmDecodeWorker"]
            )
        )
        grove_status(k, PCSGS, namespace, PCSG)  # rolled, ready again
        wait_for(
            lambda: restart_status(k, namespace).get("inProgress") == ["Frontend"],
            what="frontend restarting",
        )
        assert stamps(k, namespace) == dict.fromkeys(
            ["frontend", "vllmdecodeworker-ldr", "vllmdecodeworker-wkr"], "r1"
        )
        grove_status(k, PODCLIQUES, namespace, PCLQ, readyReplicas=1, updatedReplicas=1)
        pcs_observed(k, namespace)
        stays(lambda: restart_status(k, namespace)["phase"] == "Restarting", 2.5)
        grove_status(k, PODCLIQUES, namespace, PCLQ)
        wait_for(
            lambda: restart_status(k, namespace) == {"observedID": "r1", "phase": "Completed"},
            what="completed",
        )

        # steady state: every clique stamped; a GitOps re-apply (SSA, another manager)
        # neither removes the stamps nor is changed by them otherwise
        gitops_apply(k, restarted, kinds=APPLIED)
        live = k.get(PODCLIQUESETS, namespace, "vllm-agg")
        assert {
            c["name"]: c["annotations"][RESTART_AT] for c in live["spec"]["template"]["cliques"]
        } == dict.fromkeys(["frontend", "vllmdecodeworker-ldr", "vllmdecodeworker-wkr"], "r1")
        (rendered,) = [o for o in restarted if o["kind"] == "PodCliqueSet"]
        for got, want in zip(
            live["spec"]["template"]["cliques"],
            rendered["spec"]["template"]["cliques"],
            strict=True,
        ):
            ann = {a: v for a, v in got["annotations"].items() if a != RESTART_AT}
            assert {**got, "annotations": ann} == {**want, "annotations": ann}
            assert ann == (want.get("annotations") or {})
        assert {k2: v for k2, v in live["spec"].items() if k2 != "template"} == {
            k2: v for k2, v in rendered["spec"].items() if k2 != "template"
        }
        stays(lambda: restart_status(k, namespace)["phase"] == "Completed", 1.0)

    # managedFields: the controller owns the restartAt key of each clique, nothing else
    (ours,) = [m for m in live["metadata"]["managedFields"] if m["manager"] == FIELD_MANAGER]
    assert ours["operation"] == "Apply" and not ours.get("subresource")
    entry = {".": {}, "f:annotations": {f"f:{RESTART_AT}": {}}, "f:name": {}}
    assert ours["fieldsV1"] == {
        "f:spec": {
            "f:template": {
                "f:cliques": {
                    f'k:{{"name":"{c}"}}': entry
                    for c in ("frontend", "vllmdecodeworker-ldr", "vllmdecodeworker-wkr")
                }
            }
        }
    }
    assert grove.owned_restart_cliques(live) == {
        "frontend",
        "vllmdecodeworker-ldr",
        "vllmdecodeworker-wkr",
    }
    assert pcs["metadata"]["name"] == "vllm-agg" and objs


def test_parallel_restart_then_sequential_keeps_the_others(k: Kube, namespace: str) -> None:
    """Parallel stamps every clique in one write and completes when all are ready again;
    a later Sequential restart stamps the first service and keeps the others' token."""
    ready_grove_graph(k, namespace)
    with running(settings_for_tests(namespace), k):
        gitops_apply(
            k, render(with_restart("p1", type="Parallel"), namespace, grove=True), kinds=APPLIED
        )
        wait_for(
            lambda: (
                restart_status(k, namespace)
                == {
                    "observedID": "p1",
                    "phase": "Restarting",
                    "inProgress": ["Frontend", "VllmDecodeWorker"],
                }
            ),
            what="parallel restarting",
        )
        assert set(stamps(k, namespace).values()) == {"p1"}
        grove_status(k, PODCLIQUES, namespace, PCLQ, readyReplicas=0)
        pcs_observed(k, namespace)
        wait_for(
            lambda: restart_status(k, namespace).get("inProgress") == ["Frontend"],
            what="worker ready, frontend not",
        )
        grove_status(k, PODCLIQUES, namespace, PCLQ)
        wait_for(
            lambda: restart_status(k, namespace) == {"observedID": "p1", "phase": "Completed"},
            what="parallel completed",
        )
        pcs_generation = k.get(PODCLIQUESETS, namespace, "vllm-agg")["metadata"]["generation"]

        gitops_apply(k, render(with_restart("s2"), namespace, grove=True), kinds=APPLIED)
        wait_for(
            lambda: (
                restart_status(k, namespace).get("inProgress") == ["Frontend"]
                and restart_status(k, namespace)["observedID"] == "s2"
            ),
            what="s2 started",
        )
        assert stamps(k, namespace) == {
            "frontend": "s2",
            "vllmdecodeworker-ldr": "p1",
            "vllmdecodeworker-wkr": "p1",
        }
        assert k.get(PODCLIQUESETS, namespace, "vllm-agg")["metadata"]["generation"] == (
            pcs_generation + 1
        )


def test_a_service_removed_after_a_restart_loses_its_stamp(k: Kube, namespace: str) -> None:
    """After a restart the controller owns each clique's name and restartAt; when Git drops
    a service, it must let go of that clique, or the entry would outlive the GitOps tool's
    apply (and, against the real CRD, a clique without spec refuses that apply)."""
    ready_grove_graph(k, namespace)
    with running(settings_for_tests(namespace), k):
        gitops_apply(
            k, render(with_restart("p1", type="Parallel"), namespace, grove=True), kinds=APPLIED
        )
        wait_for(lambda: set(stamps(k, namespace).values()) == {"p1"}, what="stamped")
        pcs_observed(k, namespace)
        wait_for(
            lambda: restart_status(k, namespace) == {"observedID": "p1", "phase": "Completed"},
            what="completed",
        )
        docs = with_restart("p1", type="Parallel")
        del docs[0]["spec"]["services"]["Frontend"]  # removed from Git
        gitops_apply(k, render(docs, namespace, grove=True), kinds=APPLIED)
        wait_for(
            lambda: (
                stamps(k, namespace) == {"vllmdecodeworker-ldr": "p1", "vllmdecodeworker-wkr": "p1"}
            ),
            what="the frontend clique gone, with our stamp",
        )
        assert grove.owned_restart_cliques(k.get(PODCLIQUESETS, namespace, "vllm-agg")) == {
            "vllmdecodeworker-ldr",
            "vllmdecodeworker-wkr",
        }


# ------------------------------------------------------- an old Grove: cliques is atomic
@pytest.fixture(scope="module")
def old_grove(test_binaries: Any) -> Iterator[Kube]:
    """A private control plane whose PodCliqueSet CRD is free-form: ``cliques`` is an
    atomic list, which a server-side apply would take over whole."""
    from support.controlplane import control_plane, install_crds
    from support.thirdparty_crds import thirdparty_crds

    from dyn_gitops.crds import crds as dynamo_crds

    bins = test_binaries("etcd", "kube-apiserver")
    with control_plane(bins["etcd"], bins["kube-apiserver"]) as cp:
        install_crds(cp.client(), dynamo_crds() + thirdparty_crds(pcs_map_list=False))
        kube = Kube(cp.client())
        kube.request("POST", "/api/v1/namespaces", body={"metadata": {"name": "old"}})
        yield kube


def test_restart_refused_when_cliques_is_an_atomic_list(
    old_grove: Kube, caplog: pytest.LogCaptureFixture
) -> None:
    k, namespace = old_grove, "old"
    caplog.set_level(logging.WARNING, logger="dyn_gitops_operator.reconcilers.restart")
    settings = {"grove": True}
    created = with_restart("unused")
    del created[0]["spec"]["restart"]  # an id written at create is no restart (#10955)
    gitops_apply(k, render(created, namespace, **settings), kinds=APPLIED)
    objs = render(with_restart("r1"), namespace, **settings)
    gitops_apply(k, objs, kinds=APPLIED)
    (pcs,) = [o for o in objs if o["kind"] == "PodCliqueSet"]
    before = k.get(PODCLIQUESETS, namespace, "vllm-agg")
    (gitops_fields,) = [m["fieldsV1"] for m in before["metadata"]["managedFields"]]
    assert gitops_fields["f:spec"]["f:template"]["f:cliques"] == {}  # atomic
    assert not grove.cliques_map_list(before)
    created = grove_create(k, pcs)

    def logged() -> list[logging.LogRecord]:
        return [
            r
            for r in caplog.records
            if r.getMessage()
            == "restart not supported on the Grove path: cliques is not a map list"
        ]

    with running(settings_for_tests(namespace), k):
        st = wait_for(
            lambda: (s := status_of(k, namespace, "vllm-agg")).get("restart") and s,
            what="restart status",
        )
        assert st["restart"] == {
            "observedID": "r1",
            "phase": "Failed",
            "message": "Restart failed: not supported by this PodCliqueSet CRD: the cliques "
            "list of the PodCliqueSet vllm-agg is not a map list keyed by name "
            "(an older Grove?), so applying nvidia.com/restartAt to its cliques "
            "would replace the whole list the GitOps tool owns; the controller "
            "does not write it",
        }
        # more passes (status changes of the cliques): still one log line for generation 2
        for name, res in created.items():
            grove_status(k, res, namespace, name)
        wait_for(
            lambda: status_of(k, namespace, "vllm-agg")["state"] == "successful", what="successful"
        )
        assert len(logged()) == 1
        assert logged()[0].__dict__["restart_id"] == "r1"

        # a new restart id is a new generation: reported and logged once more
        gitops_apply(k, render(with_restart("r2"), namespace, **settings), kinds=APPLIED)
        wait_for(
            lambda: status_of(k, namespace, "vllm-agg")["restart"]["observedID"] == "r2",
            what="r2 reported",
        )
        assert status_of(k, namespace, "vllm-agg")["restart"]["phase"] == "Failed"
        assert [r.__dict__["restart_id"] for r in logged()] == ["r1", "r2"]

    # nothing written: the PCS is exactly what GitOps applied
    live_pcs = k.get(PODCLIQUESETS, namespace, "vllm-agg")
    assert FIELD_MANAGER not in {m for m, _, _ in managers(live_pcs)}
    assert live_pcs["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]
    for clique in live_pcs["spec"]["template"]["cliques"]:
        assert RESTART_AT not in (clique.get("annotations") or {})
    for name, res in created.items():
        assert {m for m, _, _ in managers(k.get(res, namespace, name))} == {GROVE_MANAGER}


# ------------------------------------------------------------------ without the Grove CRDs
@pytest.fixture(scope="module")
def bare(test_binaries: Any) -> Iterator[Kube]:
    """A private control plane with our CRDs and the PodCliqueSet CRD, but not Grove's
    PodClique / PodCliqueScalingGroup (as if Grove were not installed)."""
    from support.controlplane import control_plane, install_crds
    from support.thirdparty_crds import grove_crds, thirdparty_crds

    from dyn_gitops.crds import crds as dynamo_crds

    bins = test_binaries("etcd", "kube-apiserver")
    with control_plane(bins["etcd"], bins["kube-apiserver"]) as cp:
        grove_kinds = {c["metadata"]["name"] for c in grove_crds()}
        install_crds(
            cp.client(),
            dynamo_crds()
            + [c for c in thirdparty_crds() if c["metadata"]["name"] not in grove_kinds],
        )
        yield Kube(cp.client())


def test_controller_starts_without_the_grove_crds(bare: Kube) -> None:
    bare.request("POST", "/api/v1/namespaces", body={"metadata": {"name": "nogrove"}})
    apply_graph(bare, "nogrove", "vllm-agg")
    with running(settings_for_tests("nogrove"), bare) as m:
        assert m.podcliques is None and m.pcsgs is None
        st = wait_for(
            lambda: message_is(
                bare,
                "nogrove",
                "vllm-agg",
                "Resources not ready: vllm-agg: "
                "Frontend: resource not found; "
                "VllmDecodeWorker: resource not found",
            ),
            what="not found",
        )
        assert st["state"] == "pending" and set(st["components"]) == {
            "Frontend",
            "VllmDecodeWorker",
        }
        assert m.healthy() and m.ready()
