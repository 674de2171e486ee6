"""ScalingAdapterReconciler on the fake API server (the real-server scenarios:
test_operator_scaling.py and the Grove scaling tests): the adapter's scale status is
published, the workload follows the adapter (a Deployment's spec.replicas, or a Grove
PodClique / PCSG through /scale); field ownership as the real server records it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from dyn_gitops_operator import FIELD_MANAGER
from dyn_gitops_operator.reconcilers.scaling import ScalingAdapterReconciler, selector
from dyn_gitops_operator.resources import DGDS, DGDSAS, PODCLIQUES, PODCLIQUESETS
from dyn_gitops_operator.testing import GITOPS_MANAGER
from support.fakecluster import GROVE_KINDS, FakeCluster
from support.graphs import component_patch
from support.rendering import render

SAMPLES = Path(__file__).resolve().parent.parent / "samples"
DECODE_ADAPTER = "sglang-disagg-decode"
SELECTOR = (
    "nvidia.com/dynamo-component=decode,nvidia.com/dynamo-graph-deployment-name=sglang-disagg"
)


def managers(obj: dict[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    """(manager, subresource) -> fieldsV1."""
    return {
        (m["manager"], m.get("subresource", "")): m.get("fieldsV1", {})
        for m in obj["metadata"].get("managedFields") or []
    }


@pytest.fixture
def c() -> FakeCluster:
    c = FakeCluster()
    c.apply(render(SAMPLES / "scaling-adapter" / "input", c.ns))
    return c


def names(c: FakeCluster) -> tuple[str, str]:
    deps = c.deployments()
    return (
        next(n for n in deps if n.startswith("sglang-disagg-decode-")),
        next(n for n in deps if n.startswith("sglang-disagg-prefill-")),
    )


def test_scale_subresource_drives_the_deployments(c: FakeCluster) -> None:
    decode, prefill = names(c)
    c.converge("sglang-disagg")
    adapter = c.adapter(DECODE_ADAPTER)
    assert adapter["status"] == {
        "replicas": 2,
        "selector": SELECTOR,
        "observedGeneration": adapter["metadata"]["generation"],
        "lastScaleTime": "2025-06-01T00:00:00Z",
    }
    assert c.kube.get(DGDSAS, c.ns, DECODE_ADAPTER, subresource="scale")["status"] == {
        "replicas": 2,
        "selector": SELECTOR,
    }
    assert (c.replicas(decode), c.replicas(prefill)) == (2, 1)

    c.advance(30)
    c.hpa_scale(DECODE_ADAPTER, 4)
    c.hpa_scale("sglang-disagg-frontend", 3)
    c.converge("sglang-disagg")
    assert (c.replicas(decode), c.replicas("sglang-disagg-frontend")) == (4, 3)
    status = c.adapter(DECODE_ADAPTER)["status"]
    assert (status["replicas"], status["lastScaleTime"]) == (4, "2025-06-01T00:00:30Z")
    assert c.replicas(prefill) == 1  # no adapter: untouched by the scaling

    # a GitOps re-sync of the Deployments does not fight the autoscaler
    c.apply(
        render(SAMPLES / "scaling-adapter" / "input", c.ns),
        kinds=("Deployment", "DynamoGraphDeployment"),
    )
    assert (c.replicas(decode), c.replicas("sglang-disagg-frontend")) == (4, 3)
    c.hpa_scale(DECODE_ADAPTER, 0)  # scale to zero is a valid request
    c.converge("sglang-disagg")
    assert c.replicas(decode) == 0

    uid = c.dgd("sglang-disagg")["metadata"]["uid"]
    owner = {"f:metadata": {"f:ownerReferences": {f'k:{{"uid":"{uid}"}}': {}}}}
    for name in (decode, prefill, "sglang-disagg-frontend"):
        mf = managers(c.deployment(name))
        want = {**(owner if name != "sglang-disagg-frontend" else {}), "f:spec": {"f:replicas": {}}}
        assert mf.get((FIELD_MANAGER, ""), {}) == want, name
        assert "f:template" in mf[(GITOPS_MANAGER, "")]["f:spec"]
        assert "f:replicas" not in mf[(GITOPS_MANAGER, "")]["f:spec"]
    for res, name in ((DGDS, "sglang-disagg"), (DGDSAS, DECODE_ADAPTER)):
        mf = managers(c.kube.get(res, c.ns, name))
        assert {sub for (mgr, sub) in mf if mgr == FIELD_MANAGER} == {"status"}
        assert set(mf[(FIELD_MANAGER, "status")]) == {"f:status"}


def test_the_scale_time_moves_only_with_the_replicas(c: FakeCluster) -> None:
    c.converge("sglang-disagg")
    c.advance(30)
    c.gitops.apply(
        DGDSAS,
        {
            "apiVersion": DGDSAS.api_version,
            "kind": DGDSAS.kind,
            "metadata": {"name": DECODE_ADAPTER, "namespace": c.ns, "labels": {"x": "y"}},
            "spec": {"dgdRef": {"name": "sglang-disagg", "serviceName": "decode"}, "replicas": 2},
        },
    )
    c.kube.patch(DGDSAS, c.ns, DECODE_ADAPTER, {"spec": {"replicas": 2}})  # same value
    before = c.writes()
    c.converge("sglang-disagg")
    assert c.writes() == before
    assert c.adapter(DECODE_ADAPTER)["status"]["lastScaleTime"] == "2025-06-01T00:00:00Z"


def test_a_new_adapter_generation_is_acknowledged(c: FakeCluster) -> None:
    """observedGeneration is ours: the Argo CD health check tells "not yet seen" by it."""
    c.converge("sglang-disagg")
    c.hpa_scale(DECODE_ADAPTER, 3)
    plan = c.plan("sglang-disagg", ScalingAdapterReconciler())
    (write,) = [w for w in plan.writes if w.body["metadata"]["name"] == DECODE_ADAPTER]
    assert (write.resource, write.subresource, write.merge) == (DGDSAS, "status", False)
    assert (
        write.body["status"]["observedGeneration"]
        == c.adapter(DECODE_ADAPTER)["metadata"]["generation"]
    )
    assert (
        write.body["metadata"]["resourceVersion"]
        == c.adapter(DECODE_ADAPTER)["metadata"]["resourceVersion"]
    )


def test_never_touches_what_it_does_not_own() -> None:
    """Managed replicas off: Git owns spec.replicas, the controller writes only status."""
    c = FakeCluster()
    objs = render(SAMPLES / "managed-replicas-off" / "input", c.ns)
    c.apply(objs)
    before = {n: d["metadata"]["resourceVersion"] for n, d in c.deployments().items()}
    dgd = next(o["metadata"]["name"] for o in objs if o["kind"] == "DynamoGraphDeployment")
    c.converge(dgd)
    assert c.status(dgd)["state"] == "pending"
    after = c.deployments()
    for name, rv in before.items():
        assert after[name]["metadata"]["resourceVersion"] == rv, name
        assert FIELD_MANAGER not in {m["manager"] for m in after[name]["metadata"]["managedFields"]}


def test_selector_names_every_generation_of_the_service() -> None:
    assert selector("g", "decode") == (
        "nvidia.com/dynamo-component=decode,nvidia.com/dynamo-graph-deployment-name=g"
    )


# ------------------------------------------------------------------ the Grove path
def test_grove_podclique_follows_the_adapter_through_scale() -> None:
    c = FakeCluster()
    objs = [o for o in render(SAMPLES / "scaling-adapter" / "input", c.ns, grove=True)]
    c.apply(objs, kinds=GROVE_KINDS)
    (pcs,) = [o for o in objs if o["kind"] == "PodCliqueSet"]
    before = c.writes()
    c.converge("sglang-disagg")  # Grove has created nothing yet: nothing to scale
    assert all(
        w.body.get("status") for w in c.plan("sglang-disagg", ScalingAdapterReconciler()).writes
    )
    assert c.writes() > before  # (the adapters' status only)
    created = c.grove_create(pcs)
    assert set(created) == {f"sglang-disagg-0-{s}" for s in ("frontend", "decode", "prefill")}
    for name, res in created.items():
        c.grove_status(res, name)
    decode = "sglang-disagg-0-decode"
    c.converge("sglang-disagg")
    assert c.status("sglang-disagg")["state"] == "successful"

    c.hpa_scale(DECODE_ADAPTER, 4)
    c.converge("sglang-disagg")
    live = c.kube.get(PODCLIQUES, c.ns, decode)
    assert live["spec"]["replicas"] == 4 and live["metadata"]["generation"] == 2
    assert (FIELD_MANAGER, "scale") in managers(live)
    assert c.status("sglang-disagg")["conditions"][0]["message"] == (
        "Resources not ready: sglang-disagg: decode: spec not yet processed: "
        "generation=2, observedGeneration=1"
    )

    # no adapter: Git's replicas reach the PodClique (Grove seeds them only at creation)
    c.gitops.patch(
        DGDS, c.ns, "sglang-disagg", component_patch(c.dgd("sglang-disagg"), "prefill", replicas=3)
    )
    c.converge("sglang-disagg")
    replicas = {n: c.kube.get(PODCLIQUES, c.ns, n)["spec"]["replicas"] for n in created}
    assert replicas == {
        "sglang-disagg-0-decode": 4,
        "sglang-disagg-0-prefill": 3,
        "sglang-disagg-0-frontend": 1,
    }
    live_pcs = c.kube.get(PODCLIQUESETS, c.ns, "sglang-disagg")
    assert FIELD_MANAGER not in {m for m, _ in managers(live_pcs)}  # Git's, never written
    assert c.deployments() == {}
    before = c.writes()
    c.converge("sglang-disagg")
    assert c.writes() == before  # at the wanted size: no /scale write


@pytest.mark.parametrize("managed", [False, True])
def test_a_multinode_service_behind_an_adapter_scales_its_leader_worker_set(managed: bool) -> None:
    """Native LWS scaling (#9612, v1.2) makes a multinode service scalable like any other:
    the adapter's replicas become the LeaderWorkerSet's groups (the operator: DGDSA -> DGD
    -> DCD replicas -> LWS spec.replicas); the rollout reconciler sizes a managed one."""
    from dyn_gitops_operator.resources import LWS

    c = FakeCluster()
    dgd = {
        "apiVersion": "nvidia.com/v1alpha1",
        "kind": "DynamoGraphDeployment",
        "metadata": {"name": "mn"},
        "spec": {
            "services": {
                "decode": {
                    "componentType": "worker",
                    "replicas": 2,
                    "multinode": {"nodeCount": 2},
                    "scalingAdapter": {"enabled": True},
                    "extraPodSpec": {
                        "mainContainer": {
                            "image": "nvcr.io/nvidia/ai-dynamo/sglang-runtime:1.1.0",
                            "command": ["python3", "-m", "dynamo.sglang"],
                            "args": ["--model-path", "m"],
                        }
                    },
                }
            }
        },
    }
    objs = render([dgd], c.ns, lws=True, managed_replicas=managed)
    (lws,) = [o for o in objs if o["kind"] == "LeaderWorkerSet"]
    assert "replicas" not in lws["spec"]  # the adapter holds them
    name = lws["metadata"]["name"]
    c.apply(
        objs,
        kinds=("DynamoGraphDeployment", "DynamoGraphDeploymentScalingAdapter", "LeaderWorkerSet"),
    )
    c.converge("mn")
    assert c.kube.get(LWS, c.ns, name)["spec"]["replicas"] == 2
    c.hpa_scale("mn-decode", 5)
    c.converge("mn")
    assert c.kube.get(LWS, c.ns, name)["spec"]["replicas"] == 5
    assert c.adapter("mn-decode")["status"]["replicas"] == 5
