"""Scaling adapters and managed replicas against the real kube-apiserver.

HPA / KEDA / the Planner write the DGDSA's ``/scale`` subresource; the controller publishes
the adapter's scale status and sets the Deployment's ``spec.replicas``; on the realistic
cluster the pods follow (kube-controller-manager, scheduler, KWOK). Field ownership is
checked through ``managedFields``: the controller owns only what the table gives it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from dyn_gitops_operator import FIELD_MANAGER
from dyn_gitops_operator.kube import DEPLOYMENTS, DGDS, DGDSAS, Kube
from dyn_gitops_operator.testing import (
    GITOPS_MANAGER,
    gitops_apply,
    hpa_scale,
    running,
    settings_for_tests,
    wait_for,
)
from support.cluster import is_ready, pods
from support.rendering import render

from dyn_gitops import keys

pytestmark = pytest.mark.realk8s
SAMPLES = Path(__file__).resolve().parent.parent / "samples"


def managers(obj: dict[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    """(manager, subresource) -> fieldsV1."""
    return {
        (m["manager"], m.get("subresource", "")): m.get("fieldsV1", {})
        for m in obj["metadata"].get("managedFields") or []
    }


def replicas(k: Kube, ns: str, name: str) -> int:
    return int(k.get(DEPLOYMENTS, ns, name)["spec"]["replicas"])


def ready_pods(k: Kube, ns: str, deployment: str) -> int:
    return sum(is_ready(p) for p in pods(k.api, ns) if p.metadata.name.startswith(deployment + "-"))


def test_scale_subresource_drives_the_deployments(cluster_k: Kube, cluster_namespace: str) -> None:
    k, namespace = cluster_k, cluster_namespace
    objs = render(SAMPLES / "scaling-adapter" / "input", namespace)
    gitops_apply(k, objs)
    deps = {o["metadata"]["name"] for o in objs if o["kind"] == "Deployment"}
    decode = next(n for n in deps if n.startswith("sglang-disagg-decode-"))
    prefill = next(n for n in deps if n.startswith("sglang-disagg-prefill-"))
    with running(settings_for_tests(namespace), k):
        # the adapter publishes what /scale needs, the workload follows the adapter
        adapter = wait_for(
            lambda: (
                (a := k.get(DGDSAS, namespace, "sglang-disagg-decode"))
                .get("status", {})
                .get("replicas")
                == 2
                and a
            ),
            what="adapter status",
        )
        assert adapter["status"]["observedGeneration"] == adapter["metadata"]["generation"]
        sel = k.request("GET", DGDSAS.path(namespace, "sglang-disagg-decode", "scale"))
        assert sel["status"] == {
            "replicas": 2,
            "selector": "nvidia.com/dynamo-component=decode,"
            "nvidia.com/dynamo-graph-deployment-name=sglang-disagg",
        }
        wait_for(lambda: replicas(k, namespace, decode) == 2, what="decode at 2")
        wait_for(lambda: replicas(k, namespace, prefill) == 1, what="prefill at 1 (annotation)")

        # HPA scales the worker adapter and the frontend adapter
        hpa_scale(k, namespace, "sglang-disagg-decode", 4)
        hpa_scale(k, namespace, "sglang-disagg-frontend", 3)
        wait_for(lambda: replicas(k, namespace, decode) == 4, what="decode scaled to 4")
        wait_for(
            lambda: replicas(k, namespace, "sglang-disagg-frontend") == 3,
            what="frontend scaled to 3",
        )
        wait_for(lambda: ready_pods(k, namespace, decode) == 4, 90, "4 decode pods Ready")

        def available(s: dict[str, Any], component: str) -> Any:
            return s.get("components", {}).get(component, {}).get("availableReplicas")

        # (the frontend's third pod may become available after the fourth decode worker)
        wait_for(
            lambda: (
                available(s := k.get(DGDS, namespace, "sglang-disagg").get("status", {}), "decode")
                == 4
                and available(s, "Frontend") == 3
            ),
            timeout=90,
            what="the DGD reports the 4 available decode workers and 3 frontends",
        )
        adapter = wait_for(
            lambda: (
                (a := k.get(DGDSAS, namespace, "sglang-disagg-decode"))["status"]["replicas"] == 4
                and a
            ),
            what="adapter status 4",
        )
        assert adapter["status"]["lastScaleTime"]
        assert (
            k.request("GET", DGDSAS.path(namespace, "sglang-disagg-decode", "scale"))["status"][
                "replicas"
            ]
            == 4
        )
        assert replicas(k, namespace, prefill) == 1  # no adapter: untouched by the scaling

        # a GitOps re-sync of the Deployments does not fight the autoscaler
        gitops_apply(k, objs, kinds=("Deployment", "DynamoGraphDeployment"))
        assert replicas(k, namespace, decode) == 4
        assert replicas(k, namespace, "sglang-disagg-frontend") == 3

        # scale to zero is a valid request
        hpa_scale(k, namespace, "sglang-disagg-decode", 0)
        wait_for(lambda: replicas(k, namespace, decode) == 0, what="decode at 0")
        wait_for(
            lambda: not [p for p in pods(k.api, namespace) if p.metadata.name.startswith(decode)],
            timeout=90,
            what="the decode pods deleted",
        )

    # ownership: the controller owns spec.replicas of the workloads, the owner reference
    # to the DGD of the managed workers and the status of the custom resources, nothing
    # else; GitOps keeps everything it rendered
    uid = k.get(DGDS, namespace, "sglang-disagg")["metadata"]["uid"]
    owner = {"f:metadata": {"f:ownerReferences": {f'k:{{"uid":"{uid}"}}': {}}}}
    for name in (decode, prefill, "sglang-disagg-frontend"):
        dep = k.get(DEPLOYMENTS, namespace, name)
        mf = managers(dep)
        # (the managed prefill worker wants 1, the API server's default; the write that adds
        # the owner reference carries the replicas it sizes too)
        want = {**(owner if name != "sglang-disagg-frontend" else {}), "f:spec": {"f:replicas": {}}}
        assert mf.get((FIELD_MANAGER, ""), {}) == want, name
        if name != "sglang-disagg-frontend":  # a managed worker: the DGD owns it
            assert dep["metadata"]["ownerReferences"] == [
                {
                    "apiVersion": "nvidia.com/v1beta1",
                    "kind": "DynamoGraphDeployment",
                    "name": "sglang-disagg",
                    "uid": uid,
                }
            ]
        else:  # the GitOps tool prunes it
            assert "ownerReferences" not in dep["metadata"]
        assert "f:template" in mf[(GITOPS_MANAGER, "")]["f:spec"]
        assert "f:replicas" not in mf[(GITOPS_MANAGER, "")]["f:spec"]
    for res, name in ((DGDS, "sglang-disagg"), (DGDSAS, "sglang-disagg-decode")):
        mf = managers(k.get(res, namespace, name))
        ours = {sub for (mgr, sub) in mf if mgr == FIELD_MANAGER}
        assert ours == {"status"}, (name, mf.keys())
        assert set(mf[(FIELD_MANAGER, "status")]) == {"f:status"}


def test_never_touches_what_it_does_not_own(k: Kube, namespace: str) -> None:
    """Managed replicas off: Git owns spec.replicas, the controller writes only status."""
    objs = render(SAMPLES / "managed-replicas-off" / "input", namespace)
    gitops_apply(k, objs)
    before = {
        d["metadata"]["name"]: d["metadata"]["resourceVersion"]
        for d in k.list(DEPLOYMENTS, namespace)[0]
    }
    assert before
    with running(settings_for_tests(namespace), k):
        dgd_name = next(o["metadata"]["name"] for o in objs if o["kind"] == "DynamoGraphDeployment")
        wait_for(
            lambda: k.get(DGDS, namespace, dgd_name).get("status", {}).get("state"),
            what="a DGD status",
        )
    after = {d["metadata"]["name"]: d for d in k.list(DEPLOYMENTS, namespace)[0]}
    for name, rv in before.items():
        assert after[name]["metadata"]["resourceVersion"] == rv, name
        assert FIELD_MANAGER not in {m["manager"] for m in after[name]["metadata"]["managedFields"]}


def test_a_desired_replicas_above_the_ceiling_is_not_applied(k: Kube, namespace: str) -> None:
    """The API server takes any annotation value: a worker's desired-replicas of 20000 is
    refused by the controller's ceiling (the renderer's max-replicas default), the DGD
    reads failed with the reason, and another graph in the namespace is served. main: the
    worker Deployment scaled to 20000."""
    objs = render(SAMPLES / "vllm-agg" / "input", namespace)
    (worker,) = [
        o
        for o in objs
        if o["kind"] == "Deployment" and keys.LABEL_WORKER_HASH in o["metadata"]["labels"]
    ]
    worker["metadata"]["annotations"][keys.ANN_DESIRED_REPLICAS] = "20000"
    other = render(SAMPLES / "vllm-disagg" / "input", namespace)
    prefill = next(
        o["metadata"]["name"] for o in other if "vllmprefillworker" in o["metadata"]["name"]
    )
    gitops_apply(k, objs + other)
    name = worker["metadata"]["name"]
    with running(settings_for_tests(namespace), k):
        wait_for(lambda: replicas(k, namespace, prefill) == 2, what="the other graph served")
        status = wait_for(
            lambda: (
                (s := k.get(DGDS, namespace, "vllm-agg").get("status") or {}).get("state") and s
            ),
            what="a status of the refused graph",
        )
        assert replicas(k, namespace, name) == 1, (
            f"Deployment scaled to {replicas(k, namespace, name)}"
        )
        ready = next(c for c in status["conditions"] if c["type"] == "Ready")
        assert (status["state"], ready["status"], ready["reason"]) == (
            "failed",
            "False",
            "ReplicasAboveCeiling",
        )
        assert ready["message"] == (
            f"Replicas not applied: Deployment {namespace}/{name}: annotation "
            f"{keys.ANN_DESIRED_REPLICAS} is 20000, more than the 10000 replicas the controller "
            "applies (its setting max-replicas: --max-replicas, DYN_GITOPS_OPERATOR_MAX_REPLICAS)"
            "; its replicas are left as they are"
        )
    dep = k.get(DEPLOYMENTS, namespace, name)
    assert "f:replicas" not in managers(dep).get((FIELD_MANAGER, ""), {}).get("f:spec", {})
