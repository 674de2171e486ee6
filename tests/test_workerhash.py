"""Worker hash v2, byte-identical to the operator's (``internal/dynamo/hash.go``
``ComputeDGDWorkersSpecHash`` and ``worker-hash.md`` at upstream 2a6da14c8; runtime version
hashed from 1.5.0 on: f7f37be17 / #12633).

The expected values are facts taken from the operator's own code: the worker-hash labels in
``conformance/operator-output`` (its reconcilers on the upstream examples), and the figures
below, printed by the operator's ``ComputeDGDWorkersSpecHash`` and by Go's
``encoding/json`` / ``resource.Quantity`` (k8s.io/apimachinery v0.36.2) for these inputs.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml
from support.cli import run_cli

from dyn_gitops import keys
from dyn_gitops.workerhash import compute, gojson, hub
from dyn_gitops.workerhash.quantity import canonical

SHARED = Path(__file__).resolve().parents[2] / "shared" / "conformance"
EXAMPLES = sorted((SHARED / "operator-output").glob("*.yaml"))


def _graphs(path: Path) -> list[dict[str, Any]]:
    return [
        d
        for d in yaml.safe_load_all(path.read_text())
        if isinstance(d, dict) and d.get("kind") == "DynamoGraphDeployment"
    ]


def _operator_hashes(path: Path) -> dict[str, str]:
    """DGD name -> the worker hash on the objects the operator made for it."""
    out: dict[str, str] = {}
    for obj in yaml.safe_load_all(path.read_text()):
        labels = ((obj or {}).get("metadata") or {}).get("labels") or {}
        if labels.get(keys.LABEL_WORKER_HASH):
            out[labels[keys.LABEL_GRAPH_NAME]] = labels[keys.LABEL_WORKER_HASH]
    return out


@pytest.mark.parametrize("expected", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_worker_hash_equals_the_operators_on_every_upstream_example(expected: Path) -> None:
    theirs = _operator_hashes(expected)
    graphs = _graphs(SHARED / "dynamo-examples" / expected.name)
    ours = {
        d["metadata"]["name"]: compute.worker_hash(hub.graph(d, "default"))
        for d in graphs
        if d["metadata"]["name"] in theirs
    }
    assert ours == theirs


def test_the_operator_output_has_worker_hashes_to_compare() -> None:
    found = sum(len(_operator_hashes(p)) for p in EXAMPLES)
    assert found >= 38  # every example with workers (one file holds two graphs)


RUNTIME_DGD = """
apiVersion: nvidia.com/v1alpha1
kind: DynamoGraphDeployment
metadata: {name: rt}
spec:
  backendFramework: vllm
  services:
    Frontend:
      componentType: frontend
      extraPodSpec: {mainContainer: {image: "nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.5.1"}}
    decode:
      componentType: worker
      subComponentType: decode
      replicas: 2
      resources: {limits: {gpu: "1", memory: 1.5Gi}}
      sharedMemory: {size: 0.5Gi}
      envs: [{name: A, value: "x < y && z"}]
      extraPodSpec:
        mainContainer:
          image: nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.5.1
          command: [python3, -m, dynamo.vllm]
          ports: [{containerPort: 9090, name: http}]
          livenessProbe: {grpc: {port: 9000}}
    prefill:
      componentType: worker
      subComponentType: prefill
      runtimeVersionOverride: 1.4.2
      extraPodSpec: {mainContainer: {image: "nvcr.io/nvidia/ai-dynamo/vllm-runtime:my-tag"}}
"""


def test_runtime_version_quantities_probe_defaults_and_escaping_hash_as_go_does() -> None:
    # the operator's ComputeDGDWorkersSpecHash on this DGD (pruned, defaulted, converted)
    dgd = yaml.safe_load(RUNTIME_DGD)
    data = compute.hash_input(hub.graph(dgd, "default"))
    assert compute.worker_hash(hub.graph(dgd, "default")) == "3c3557f7"
    assert '"runtimeVersion":"1.5.1"' in data  # decode: image tag 1.5.1 (>= 1.5.0)
    assert data.count('"runtimeVersion"') == 1  # prefill: override 1.4.2 is not hashed
    assert '"memory":"1536Mi"' in data and '"sharedMemorySize":"512Mi"' in data
    assert '"protocol":"TCP"' in data and '"service":""' in data  # CRD schema defaults
    assert '"value":"x \\u003c y \\u0026\\u0026 z"' in data  # Go's HTML-safe escaping


def test_the_origin_version_stamp_changes_the_hash_as_the_operator_does() -> None:
    dgd = yaml.safe_load(RUNTIME_DGD)
    stamped = copy.deepcopy(dgd)
    stamped["metadata"]["annotations"] = {keys.ANN_OPERATOR_ORIGIN_VERSION: "1.5.1"}
    assert compute.worker_hash(hub.graph(stamped, "default")) == "0e17619f"


def test_replicas_and_scaling_fields_do_not_make_a_new_generation() -> None:
    dgd = yaml.safe_load(RUNTIME_DGD)
    before = compute.worker_hash(hub.graph(dgd, "default"))
    dgd["spec"]["services"]["decode"]["replicas"] = 7
    dgd["spec"]["services"]["decode"]["scalingAdapter"] = {"enabled": True}
    assert compute.worker_hash(hub.graph(dgd, "default")) == before
    dgd["spec"]["services"]["decode"]["envs"][0]["value"] = "changed"
    assert compute.worker_hash(hub.graph(dgd, "default")) != before


def test_a_graph_without_workers_hashes_the_empty_map() -> None:
    # recipes/gpt-oss-120b (no worker components): the operator hashes "{}"
    dgd = {"apiVersion": "nvidia.com/v1beta1", "metadata": {"name": "x"}, "spec": {}}
    assert compute.hash_input(hub.graph(dgd, "default")) == "{}"
    assert compute.worker_hash(hub.graph(dgd, "default")) == "44136fa3"


# resource.Quantity json.Marshal after ParseQuantity (apimachinery v0.36.2)
QUANTITIES = {
    "0.5": "500m",
    "1536Mi": "1536Mi",
    "2048Mi": "2Gi",
    "1e3": "1e3",
    "1E3": "1E3",
    "+5": "+5",
    "100m": "100m",
    "1000m": "1",
    "1.5": "1500m",
    "1500": "1500",
    "2000": "2k",
    "0": "0",
    "1024": "1024",
    "0.1Gi": "107374182400m",
    "1.5Gi": "1536Mi",
    "3.5Ti": "3584Gi",
    "-2Gi": "-2Gi",
    "12e6": "12e6",
    "0.0000000001": "1n",
    "1100k": "1100k",
}


@pytest.mark.parametrize(("written", "marshalled"), sorted(QUANTITIES.items()))
def test_quantities_marshal_as_go_does(written: str, marshalled: str) -> None:
    assert canonical(written) == marshalled


def test_go_zero_values_and_escaping() -> None:
    container = "struct:core/v1.Container"
    assert gojson.encode(container, {"name": "main", "args": ["a && b > c < d", "\u2028x\ty"]}) == (
        '{"name":"main","args":["a \\u0026\\u0026 b \\u003e c \\u003c d","\\u2028x\\ty"],'
        '"resources":{}}'
    )
    assert gojson.encode("struct:core/v1.PodTemplateSpec", {}) == (
        '{"metadata":{},"spec":{"containers":null}}'
    )
    # keys the Go type does not have are dropped, as the API server prunes them
    assert gojson.encode(container, {"name": "m", "bogus": 1}) == '{"name":"m","resources":{}}'


KV_TRANSFER_DGD = """
apiVersion: nvidia.com/v1beta1
kind: DynamoGraphDeployment
metadata: {name: kvt}
spec:
  backendFramework: vllm
  env: [{name: ZED, value: "1"}]
  experimental:
    kvTransferPolicy:
      {labelKey: topology.kubernetes.io/zone, domain: zone, enforcement: preferred,
       preferredWeight: 0.3}
  components:
    - name: decode
      type: decode
      podTemplate:
        spec:
          containers:
            - name: main
              image: nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.5.0
              env: [{name: DYN_KV_TRANSFER_DOMAIN, value: user}]
              volumeMounts: [{name: data, mountPath: /data}]
          volumes: [{name: data, emptyDir: {}}]
"""


def test_graph_env_and_kv_transfer_policy_are_baked_into_the_hashed_worker_spec() -> None:
    # applyDGDTemplateDefaults (graph.go @ 2a6da14c8): graph env merged and sorted, the
    # kvTransferPolicy env / topology volume / mount, and the topology-label annotation
    g = hub.graph(yaml.safe_load(KV_TRANSFER_DGD), "default")
    data = compute.hash_input(g)
    assert compute.worker_hash(g) == "8524dcae"  # the operator's, same input
    assert '"annotations":{"nvidia.com/topology-label-key":"topology.kubernetes.io/zone"}' in data
    assert '{"name":"DYN_KV_TRANSFER_DOMAIN","value":"zone"}' in data  # the policy wins


def test_a_field_of_the_wrong_type_is_an_input_error_naming_it(tmp_path: Path) -> None:
    # found by the fuzz test: an integer field written as a list crashed the encoder
    (tmp_path / "bad.yaml").write_text(
        "apiVersion: nvidia.com/v1alpha1\nkind: DynamoGraphDeployment\nmetadata: {name: bad}\n"
        "spec:\n  services:\n    w:\n      componentType: worker\n      extraPodSpec:\n"
        "        securityContext: {runAsUser: []}\n        mainContainer: {image: 'x:1.0.0'}\n"
    )
    result = run_cli("render", str(tmp_path / "bad.yaml"))
    assert result.code == 1, result.stderr
    assert "components.w.podTemplate.spec.securityContext.runAsUser" in result.stderr
    assert "expected an integer, found []" in result.stderr
