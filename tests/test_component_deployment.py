"""A standalone DynamoComponentDeployment (v1alpha1 or v1beta1) renders as the operator's
DCD controller renders it (``internal/controller/dynamocomponentdeployment_renderer.go`` and
``GenerateBasePodSpecForController`` in ``internal/dynamo/graph.go`` @ 2a6da14c8; the
``dcd/deployment`` golden scenario of #12009): the workload is named after the DCD, the DCD's
name stands in for the missing parent graph (Dynamo namespace, discovery service account,
``DYN_PARENT_DGD_K8S_NAME``), and nothing graph-level is made.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from support import rendering
from support.rendering import AS_APPLIED, renderer

from dyn_gitops import keys
from dyn_gitops.errors import RenderError

Obj = dict[str, Any]
BETA = {
    "apiVersion": "nvidia.com/v1beta1",
    "kind": "DynamoComponentDeployment",
    "metadata": {"name": "dcd-a", "namespace": "ns"},
    "spec": {
        "backendFramework": "vllm",
        "name": "decode",
        "type": "worker",
        "replicas": 2,
        "podTemplate": {"spec": {"containers": [{"name": "main", "image": "img:1"}]}},
    },
}
ALPHA = {
    "apiVersion": "nvidia.com/v1alpha1",
    "kind": "DynamoComponentDeployment",
    "metadata": {"name": "dcd-a", "namespace": "ns"},
    "spec": {
        "backendFramework": "vllm",
        "serviceName": "decode",
        "componentType": "worker",
        "replicas": 2,
        "extraPodSpec": {"mainContainer": {"image": "img:1"}},
    },
}


render = renderer(file="dcd.yaml", managed_replicas=False, **AS_APPLIED)


def env(container: Obj) -> dict[str, Any]:
    return {e["name"]: e.get("value") for e in container.get("env") or []}


@pytest.mark.parametrize("doc", [BETA, ALPHA], ids=["v1beta1", "v1alpha1"])
def test_standalone_dcd_renders_as_the_dcd_controller(tmp_path: Path, doc: Obj) -> None:
    objs = render(tmp_path, doc)
    kinds = sorted((o["kind"], o["metadata"]["name"]) for o in objs)
    # the workload and its discovery Service; no graph-level RBAC, no source emitted
    assert kinds == [("Deployment", "dcd-a"), ("Service", "dcd-a")]
    dep = next(o for o in objs if o["kind"] == "Deployment")
    assert dep["spec"]["replicas"] == 2
    assert dep["spec"]["selector"] == {"matchLabels": {keys.LABEL_SELECTOR: "dcd-a"}}
    labels = dep["spec"]["template"]["metadata"]["labels"]
    assert keys.LABEL_GRAPH_NAME not in labels and keys.LABEL_WORKER_HASH not in labels
    assert labels[keys.LABEL_COMPONENT] == "decode"  # GetDCDComponentName
    assert labels[keys.LABEL_DYNAMO_NAMESPACE] == "ns-dcd-a"  # GetDCDDynamoNamespace
    pod = dep["spec"]["template"]["spec"]
    e = env(pod["containers"][0])
    assert e["DYN_PARENT_DGD_K8S_NAME"] == "dcd-a"
    assert e["DYN_NAMESPACE"] == "ns-dcd-a"
    assert "DYN_NAMESPACE_WORKER_SUFFIX" not in e
    assert pod["serviceAccountName"] == "dcd-a-k8s-service-discovery"


def test_dcd_component_name_falls_back_to_the_dcd_name(tmp_path: Path) -> None:
    doc = {**BETA, "spec": {k: v for k, v in BETA["spec"].items() if k != "name"}}
    dep = next(o for o in render(tmp_path, doc) if o["kind"] == "Deployment")
    assert dep["spec"]["template"]["metadata"]["labels"][keys.LABEL_COMPONENT] == "dcd-a"


def test_dcd_is_never_grove(tmp_path: Path) -> None:
    objs = render(tmp_path, BETA, grove=True)
    assert [o["kind"] for o in objs if o["kind"] in ("Deployment", "PodCliqueSet")] == [
        "Deployment"
    ]


def test_dcd_problems_point_at_the_dcd(tmp_path: Path) -> None:
    doc = {**BETA, "spec": {**BETA["spec"], "replicas": -1}}
    with pytest.raises(RenderError) as info:
        render(tmp_path, doc)
    text = "\n".join(str(p) for p in info.value.problems)
    assert "DynamoComponentDeployment/dcd-a: spec.replicas" in text
    bad = {**ALPHA, "spec": {**ALPHA["spec"], "replicaz": 1}}
    with pytest.raises(RenderError) as info:
        render(tmp_path, bad)
    text = "\n".join(str(p) for p in info.value.problems)
    assert "DynamoComponentDeployment/dcd-a: spec.replicaz: unknown field" in text


def test_a_dcd_and_a_dgd_may_share_a_name(tmp_path: Path) -> None:
    """Different kinds: the duplicate-name check is per kind."""
    dgd = {
        "apiVersion": "nvidia.com/v1alpha1",
        "kind": "DynamoGraphDeployment",
        "metadata": {"name": "dcd-a", "namespace": "ns"},
        "spec": {"services": {"Frontend": {"componentType": "frontend"}}},
    }
    path = tmp_path / "both.yaml"
    path.write_text(yaml.safe_dump_all([BETA, dgd], sort_keys=False))
    objs = rendering.render(path, managed_replicas=False, emit_source=False, **AS_APPLIED)
    assert {o["metadata"]["name"] for o in objs if o["kind"] == "Deployment"} == {
        "dcd-a",
        "dcd-a-frontend",
    }
    path.write_text(yaml.safe_dump_all([BETA, BETA], sort_keys=False))
    with pytest.raises(RenderError, match="DynamoComponentDeployment ns/dcd-a is also defined"):
        rendering.render(path, **AS_APPLIED)


def test_multinode_dcd_gets_the_wait_for_leader_script(tmp_path: Path) -> None:
    """A multinode pod mounts our wait-for-leader ConfigMap: rendered beside the DCD."""
    spec = {
        **BETA["spec"],
        "multinode": {"nodeCount": 2},
        "podTemplate": {
            "spec": {
                "containers": [
                    {
                        "name": "main",
                        "image": "img:1",
                        "command": ["python3", "-m", "dynamo.vllm"],
                        "args": ["--model", "m"],
                        "resources": {"limits": {"nvidia.com/gpu": "8"}},
                    }
                ]
            }
        },
    }
    objs = render(tmp_path, {**BETA, "spec": spec}, lws=True)
    assert ("ConfigMap", "dcd-a-wait-leader-script") in {
        (o["kind"], o["metadata"]["name"]) for o in objs
    }


PAYLOAD = '{"version":1,"spec":{"dynamoNamespace":"x"}}'


def test_a_v1beta1_dcd_with_a_conversion_payload_is_refused(tmp_path: Path) -> None:
    """A v1beta1 DCD's own ``nvidia.com/dgd-spec`` (what the operator's DCD helpers read
    back, ``GetDCDPreservedAlphaLabels`` & co. in ``v1beta1_helpers.go`` @ 2a6da14c8) is not
    read yet: refused at the annotation rather than dropped (a DGD's is read)."""
    doc = {**BETA, "metadata": {**BETA["metadata"], "annotations": {keys.ANN_DGD_SPEC: PAYLOAD}}}
    with pytest.raises(RenderError) as err:
        render(tmp_path, doc)
    assert [
        (p.path, "not yet supported on a DynamoComponentDeployment" in p.message)
        for p in err.value.problems
    ] == [(("metadata", "annotations", keys.ANN_DGD_SPEC), True)]
