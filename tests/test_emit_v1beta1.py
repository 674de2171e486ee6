"""The source DGD is emitted in ``nvidia.com/v1beta1`` (setting source-api-version): a
v1alpha1 DGD as the Dynamo operator's conversion webhook stores it (``api/v1alpha1``
``ConvertTo`` @ 2a6da14c8), its v1alpha1-only fields in ``nvidia.com/dgd-spec``, byte for
byte; the worker hash does not change with the emitted version."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from support.hubforms import stored_v1beta1
from support.paths import CONFORMANCE
from support.rendering import AS_APPLIED, render

from dyn_gitops.errors import RenderError
from dyn_gitops.workerhash import hub

Obj = dict[str, Any]
ORACLE = json.loads((Path(__file__).parent / "golden" / "operator-conversion.json").read_text())
EXAMPLES: dict[str, Obj] = ORACLE["examples"]
DGD_SPEC = "nvidia.com/dgd-spec"


def _source(entry: Obj) -> Obj:
    docs = yaml.safe_load_all((CONFORMANCE / entry["file"]).read_text())
    [dgd] = [
        d
        for d in docs
        if d and d.get("kind") == "DynamoGraphDeployment" and d["metadata"]["name"] == entry["name"]
    ]
    return dgd


def _stored(spec: Obj) -> Obj:
    """``spec`` as the API server stores it: the CRD schema's pod defaults and the
    defaulting webhook's ``replicas: 1``."""
    spec = copy.deepcopy(spec)
    if spec.get("components"):
        spec["components"] = [hub.apply_pod_defaults(c) for c in spec["components"]]
    for c in spec.get("components") or []:
        c.setdefault("replicas", 1)
    return spec


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_conversion_equals_the_operators(name: str) -> None:
    """Each v1alpha1 upstream example converts to what the operator's conversion stores:
    the ``nvidia.com/dgd-spec`` annotation byte-identical, the spec equal (Go's zero values
    included: ``name: ""`` and ``parameters: null`` of EPP plugins, no empty env ``value``,
    no ``resources: {}``), the API server's defaults aside."""
    entry = EXAMPLES[name]
    got = stored_v1beta1(_source(entry))
    assert got["apiVersion"] == "nvidia.com/v1beta1"
    assert (got["metadata"].get("annotations") or {}).get(DGD_SPEC) == entry["dgd-spec"]
    assert _stored(got["spec"]) == entry["spec"]


def test_the_oracle_covers_the_alpha_only_fields() -> None:
    """The examples exercise the preserved payload (figures at 2a6da14c8)."""
    with_payload = [n for n, e in EXAMPLES.items() if e["dgd-spec"]]
    assert len(EXAMPLES) == 36 and len(with_payload) >= 20, len(with_payload)


ALPHA_ONLY = """\
apiVersion: nvidia.com/v1alpha1
kind: DynamoGraphDeployment
metadata:
  name: g
spec:
  pvcs:
  - name: models
    create: false
  topologyConstraint:
    topologyProfile: zone-a
    packDomain: zone
  services:
    Frontend:
      componentType: frontend
      dynamoNamespace: legacy
      labels: {team: a}
      extraPodSpec:
        mainContainer:
          image: nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.5.1
    worker:
      componentType: worker
      subComponentType: prefill
      sharedMemory: {disabled: false}
      resources:
        limits: {gpu: "1", gpuType: nvidia.com/gpu}
      extraPodSpec:
        mainContainer:
          image: nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.5.1
"""


def test_alpha_only_fields_are_preserved_as_the_operator_does() -> None:
    """PVCs, ``dynamoNamespace``, service labels, a non-canonical GPU type and an enabled
    shared memory without a size have no v1beta1 home: they go to the payload, with the
    main container's origins; ``topologyProfile`` is v1beta1's ``clusterTopologyName``;
    ``subComponentType: prefill`` is promoted to the type."""
    got = stored_v1beta1(yaml.safe_load(ALPHA_ONLY))
    # Go's encoding: declaration order, a zero Quantity as "0", the main container's
    # origins (name and resources are not omitempty) for the service whose resources it holds
    assert got["metadata"]["annotations"][DGD_SPEC] == (
        '{"version":1,"spec":{"pvcs":[{"create":false,"name":"models","size":"0"}],'
        '"services":{"Frontend":{"labels":{"team":"a"},"dynamoNamespace":"legacy"},'
        '"worker":{"resources":{"limits":{"gpu":"1","gpuType":"nvidia.com/gpu"}},'
        '"sharedMemory":{"size":"0"},"extraPodSpec":{"mainContainer":{"name":"","resources":{}}}}}}}'
    )
    assert got["spec"]["topologyConstraint"] == {
        "clusterTopologyName": "zone-a",
        "packDomain": "zone",
    }
    types = {c["name"]: c.get("type") for c in got["spec"]["components"]}
    assert types == {"Frontend": "frontend", "worker": "prefill"}
    assert "services" not in got["spec"] and "pvcs" not in got["spec"]


PLAIN_ALPHA = """\
apiVersion: nvidia.com/v1alpha1
kind: DynamoGraphDeployment
metadata:
  name: pair
spec:
  backendFramework: vllm
  services:
    Frontend:
      componentType: frontend
      replicas: 1
    VllmWorker:
      componentType: worker
      replicas: 2
      resources:
        limits: {gpu: "1"}
"""

PLAIN_BETA = """\
apiVersion: nvidia.com/v1beta1
kind: DynamoGraphDeployment
metadata:
  name: pair
spec:
  backendFramework: vllm
  components:
  - name: Frontend
    type: frontend
    replicas: 1
  - name: VllmWorker
    type: worker
    replicas: 2
    podTemplate:
      spec:
        containers:
        - name: main
          resources:
            limits: {nvidia.com/gpu: "1"}
"""


def _emitted(tmp_path: Path, text: str, **settings: Any) -> tuple[Obj, list[Obj]]:
    (tmp_path / "dgd.yaml").write_text(text)
    objs = render(tmp_path, namespace="demo", **{**AS_APPLIED, **settings})
    [dgd] = [o for o in objs if o["kind"] == "DynamoGraphDeployment"]
    rest = [o for o in objs if o["kind"] != "DynamoGraphDeployment"]
    for o in [dgd, *rest]:
        (o["metadata"].get("annotations") or {}).pop("dyn-gitops.io/source-path", None)
    return dgd, rest


def test_v1alpha1_and_equivalent_v1beta1_emit_the_same_dgd(tmp_path: Path) -> None:
    """A v1alpha1 DGD and the v1beta1 DGD it converts to emit the same v1beta1 DGD (worker
    hash marker included) and the same children."""
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    alpha, alpha_children = _emitted(tmp_path / "a", PLAIN_ALPHA)
    beta, beta_children = _emitted(tmp_path / "b", PLAIN_BETA)
    assert alpha["apiVersion"] == beta["apiVersion"] == "nvidia.com/v1beta1"
    assert alpha == beta
    assert alpha_children == beta_children
    assert "nvidia.com/current-worker-hash-v2" in alpha["metadata"]["annotations"]


def test_emitted_version_does_not_change_the_worker_hash(tmp_path: Path) -> None:
    """The hash is over the hub form: v1beta1 or v1alpha1 emission names the workers alike,
    and only the source DGD differs."""
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    beta, beta_children = _emitted(tmp_path / "a", PLAIN_ALPHA)
    alpha, alpha_children = _emitted(tmp_path / "b", PLAIN_ALPHA, source_api_version="v1alpha1")
    assert alpha["apiVersion"] == "nvidia.com/v1alpha1" and "services" in alpha["spec"]
    assert beta_children == alpha_children
    key = "nvidia.com/current-worker-hash-v2"
    assert beta["metadata"]["annotations"][key] == alpha["metadata"]["annotations"][key]


def test_our_annotations_are_kept_on_the_converted_dgd(tmp_path: Path) -> None:
    """The admission stamps and the companion controller's markers survive conversion."""
    (tmp_path / "dgd.yaml").write_text(PLAIN_ALPHA)
    objs = render(tmp_path, namespace="demo", runtime_version_admission="lenient")
    [dgd] = [o for o in objs if o["kind"] == "DynamoGraphDeployment"]
    ann = dgd["metadata"]["annotations"]
    assert dgd["apiVersion"] == "nvidia.com/v1beta1"
    for key in (
        "nvidia.com/current-worker-hash-v2",
        "nvidia.com/dynamo-operator-origin-version",
        "nvidia.com/workload-provider",
        "dyn-gitops.io/worker-hash",
    ):
        assert ann.get(key), key


def test_every_v1alpha1_example_emitted_in_v1beta1_renders_alike(tmp_path: Path) -> None:
    """Fixpoint over the upstream examples: each v1alpha1 DGD, re-read as the v1beta1 DGD we
    emit (with the preserved payload ``nvidia.com/dgd-spec``, read back for what v1beta1
    cannot hold), renders the same children and emits the same DGD."""
    same = 0
    for name, entry in sorted(EXAMPLES.items()):
        src = _source(entry)
        (tmp_path / name / "a").mkdir(parents=True)
        (tmp_path / name / "b").mkdir(parents=True)
        alpha, alpha_children = _emitted(
            tmp_path / name / "a", yaml.safe_dump(src), lws=True, dra=True
        )
        beta_src = yaml.safe_dump(stored_v1beta1(src))
        beta, beta_children = _emitted(tmp_path / name / "b", beta_src, lws=True, dra=True)
        assert alpha == beta, name
        assert alpha_children == beta_children, name
        same += 1
    assert same == len(EXAMPLES), same


def _exported(entry: Obj) -> str:
    """The v1beta1 DGD the operator stores for the example ``entry`` (``kubectl get`` on an
    operator cluster): its metadata, the operator's own stored spec and payload."""
    src = _source(entry)
    meta = copy.deepcopy(src["metadata"])
    if entry["dgd-spec"]:
        meta["annotations"] = {**(meta.get("annotations") or {}), DGD_SPEC: entry["dgd-spec"]}
    out = {"apiVersion": "nvidia.com/v1beta1", "kind": src["kind"], "metadata": meta}
    return yaml.safe_dump({**out, "spec": entry["spec"]})


@pytest.mark.parametrize("name", sorted(n for n, e in EXAMPLES.items() if e["dgd-spec"]))
def test_an_exported_dgd_renders_as_its_v1alpha1_original(name: str, tmp_path: Path) -> None:
    """A v1beta1 DGD as the operator stores it (its spec and ``nvidia.com/dgd-spec`` as the
    operator's own conversion wrote them, ``tests/golden/operator-conversion.json``) renders
    the children its v1alpha1 original renders: the payload's ``pvcs``, ingress, labels,
    annotations, ``dynamoNamespace``, ``subComponentType`` and ``envFromSecret`` are read
    back as the operator reads them (``GetDCDKubeLabels``, ``GetDCDDynamoNamespace``,
    ``internal/dynamo/v1beta1_helpers.go`` @ 2a6da14c8). The emitted DGD keeps the payload."""
    entry = EXAMPLES[name]
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    _, alpha_children = _emitted(tmp_path / "a", yaml.safe_dump(_source(entry)), lws=True, dra=True)
    beta, beta_children = _emitted(tmp_path / "b", _exported(entry), lws=True, dra=True)
    assert beta_children == alpha_children
    assert beta["metadata"]["annotations"][DGD_SPEC] == entry["dgd-spec"]


def test_an_exported_dgd_is_not_emitted_as_v1alpha1(tmp_path: Path) -> None:
    """Emitting a v1beta1 DGD that carries the payload in v1alpha1 would need the operator's
    ``ConvertFrom`` restore of it (not ported): refused at the annotation."""
    entry = next(e for _, e in sorted(EXAMPLES.items()) if e["dgd-spec"])
    (tmp_path / "dgd.yaml").write_text(_exported(entry))
    with pytest.raises(RenderError) as err:
        render(tmp_path, namespace="demo", source_api_version="v1alpha1", **AS_APPLIED)
    [problem] = err.value.problems
    assert problem.path == ("metadata", "annotations", DGD_SPEC)
    assert "not yet emitted as v1alpha1" in problem.message


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        ("{}", 'the operator\'s conversion payload: expected a JSON object {"version":1,'),
        ("not json", "the operator's conversion payload: not JSON: Expecting value (line 1"),
        (
            '{"version":1,"spec":{"pvcs":[{"size":"x y"}]}}',
            "spec.pvcs[0].size: expected a Kubernetes quantity such as '1', '500m' or '8Gi' "
            "(found a string of 3 characters)",
        ),
    ],
)
def test_a_bad_conversion_payload_is_refused(payload: str, message: str, tmp_path: Path) -> None:
    """At the annotation, the path inside the payload first; no value of it quoted."""
    doc = yaml.safe_load(PLAIN_BETA)
    doc["metadata"]["annotations"] = {DGD_SPEC: payload}
    (tmp_path / "dgd.yaml").write_text(yaml.safe_dump(doc))
    with pytest.raises(RenderError) as err:
        render(tmp_path, namespace="demo", **AS_APPLIED)
    [problem] = err.value.problems
    assert problem.path == ("metadata", "annotations", DGD_SPEC)
    assert problem.message.startswith(message)
    assert "x y" not in problem.message


def test_a_conversion_payload_on_a_v1alpha1_dgd_is_refused(tmp_path: Path) -> None:
    """The operator's ConvertTo restores v1beta1-only fields from ``nvidia.com/dgd-spec``
    (not ported): refused at the annotation rather than dropped."""
    text = PLAIN_ALPHA.replace(
        "  name: pair\n", "  name: pair\n  annotations:\n    nvidia.com/dgd-spec: '{}'\n"
    )
    (tmp_path / "dgd.yaml").write_text(text)
    with pytest.raises(RenderError) as err:
        render(tmp_path, namespace="demo", **AS_APPLIED)
    [problem] = err.value.problems
    assert problem.path == ("metadata", "annotations", DGD_SPEC)
    assert "write the DGD in v1beta1" in problem.message
    # emitted in v1alpha1, nothing is converted: accepted
    render(tmp_path, namespace="demo", source_api_version="v1alpha1", **AS_APPLIED)


def test_the_hub_form_reads_the_payload_and_tolerates_a_bad_one() -> None:
    """The worker hash's hub form of a v1beta1 DGD takes the payload's labels, annotations,
    ``dynamoNamespace`` and ``subComponentType`` (as the v1alpha1 original's conversion
    does); one that is no payload (a bare spec of older operators, garbage) is skipped, not
    raised: the companion controller reads live DGDs with it (``dgdview``)."""
    doc = yaml.safe_load(PLAIN_BETA)
    name = doc["spec"]["components"][0]["name"]
    kept = {"services": {name: {"labels": {"a": "b"}, "dynamoNamespace": "ns-x"}}}
    doc["metadata"]["annotations"] = {DGD_SPEC: json.dumps({"version": 1, "spec": kept})}
    [first, *_] = hub.graph(doc, "demo").components
    assert (first.alpha_labels, first.dynamo_namespace) == ({"a": "b"}, "ns-x")
    for bad in (json.dumps(kept), "garbage"):
        doc["metadata"]["annotations"] = {DGD_SPEC: bad}
        [first, *_] = hub.graph(doc, "demo").components
        assert (first.alpha_labels, first.dynamo_namespace) == ({}, None)
