"""The expansion's internal model is the v1beta1 component list (``expand/components.py``):
a v1alpha1 DGD is converted **up** as the operator's conversion webhook does (``ConvertTo``
@ 2a6da14c8), a v1beta1 DGD read as written. Facts: ``tests/golden/operator-conversion.json``
(what the operator's own Go conversion stores for each upstream v1alpha1 example)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import CONFORMANCE, SAMPLES, render_objects

from dyn_gitops import keys
from dyn_gitops.expand import components, replica_owners
from dyn_gitops.workerhash import hub

Obj = dict[str, Any]
ORACLE = json.loads((Path(__file__).parent / "golden" / "operator-conversion.json").read_text())
EXAMPLES: dict[str, Obj] = ORACLE["examples"]


def _source(entry: Obj) -> Obj:
    docs = yaml.safe_load_all((CONFORMANCE / entry["file"]).read_text())
    [dgd] = [
        d
        for d in docs
        if d and d.get("kind") == "DynamoGraphDeployment" and d["metadata"]["name"] == entry["name"]
    ]
    return dgd


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_v1alpha1_is_converted_up_as_the_operator_does(name: str) -> None:
    """Each upstream v1alpha1 example becomes the operator's component list (names, order,
    promoted ``prefill``/``decode`` types, scaling adapters), and the typed v1beta1 model
    holds the conversion (the same one the worker hash and the emitted DGD read, proven
    byte-identical by test_emit_v1beta1) without losing or adding a field."""
    entry = EXAMPLES[name]
    source = _source(entry)
    graph = components.of(source)
    stored = entry["spec"]["components"]
    assert [(c.name, c.type, c.scalingAdapter is not None) for c in graph.components] == [
        (c["name"], c.get("type"), "scalingAdapter" in c) for c in stored
    ]
    dumped = [c.model_dump(mode="json", exclude_unset=True) for c in graph.components]
    assert dumped == [c.spec for c in hub.AlphaComponents(source["spec"]).get()]


def test_v1beta1_components_keep_their_written_order() -> None:
    beta = yaml.safe_load((SAMPLES / "v1beta1-pair/input/sglang-disagg.yaml").read_text())
    alpha = yaml.safe_load((SAMPLES / "v1beta1-pair/v1alpha1/sglang-disagg.yaml").read_text())
    written = [c["name"] for c in beta["spec"]["components"]]
    got = components.of(beta)
    assert got.names == written
    # the twin in v1alpha1: the same components, name-sorted, of the same types
    twin = components.of(alpha)
    assert twin.names == sorted(written)
    assert {c.name: c.type for c in twin.components} == {c.name: c.type for c in got.components}


PLANNED = """\
apiVersion: nvidia.com/v1alpha1
kind: DynamoGraphDeployment
metadata:
  name: planned
spec:
  services:
    Planner:
      componentType: planner
      extraPodSpec:
        mainContainer:
          image: nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.1.0
    Prefill:
      componentType: worker
      subComponentType: prefill
      scalingAdapter:
        enabled: false
      extraPodSpec:
        mainContainer:
          image: nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.1.0
          command: [python3, -m, dynamo.vllm]
    Decode:
      componentType: worker
      subComponentType: decode
      scalingAdapter:
        enabled: true
      extraPodSpec:
        mainContainer:
          image: nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.1.0
          command: [python3, -m, dynamo.vllm]
"""


def test_planner_scaled_workers_read_the_v1beta1_model(tmp_path: Path) -> None:
    """A worker a Planner scales (no scaling adapter: a disabled one converts to none) gets
    the seed annotation; one with an adapter does not; the Planner itself is no worker."""
    graph = components.of(yaml.safe_load(PLANNED))
    assert [c.type for c in graph.components] == ["decode", "planner", "prefill"]
    assert replica_owners.planner_scaled(graph, "Prefill")
    assert not replica_owners.planner_scaled(graph, "Decode")  # has an adapter
    assert not replica_owners.planner_scaled(graph, "Planner")
    assert not replica_owners.planner_scaled(None, "Prefill")  # a standalone DCD

    (tmp_path / "g.yaml").write_text(PLANNED)
    objs = render_objects(tmp_path, namespace="ns", origin_version="none")
    seeded = {
        o["metadata"]["labels"][keys.LABEL_COMPONENT]
        for o in objs
        if o["kind"] == "Deployment"
        and keys.ANN_SEED_REPLICAS in (o["metadata"].get("annotations") or {})
    }
    assert seeded == {"Prefill"}


def test_runtime_version_reads_the_v1beta1_main_container() -> None:
    """The runtime version comes from the v1beta1 component: ``runtimeVersionOverride``,
    else the tag of container ``main``'s image (a v1alpha1 ``extraPodSpec.mainContainer``
    converts into it); a bad override is an error, a tag that does not parse is no version."""
    from dyn_gitops.expand.context import ComponentError, component_runtime

    graph = components.of(yaml.safe_load(PLANNED))
    runtime = component_runtime(graph.components[0])
    assert runtime is not None and str(runtime) == "1.1.0"
    beta = yaml.safe_load((SAMPLES / "v1beta1-pair/input/sglang-disagg.yaml").read_text())
    alpha = yaml.safe_load((SAMPLES / "v1beta1-pair/v1alpha1/sglang-disagg.yaml").read_text())
    got = {c.name: component_runtime(c) for c in components.of(beta).components}
    assert got == {c.name: component_runtime(c) for c in components.of(alpha).components}
    assert all(v is not None for v in got.values())

    doc = yaml.safe_load(PLANNED)
    doc["spec"]["services"]["Planner"]["runtimeVersionOverride"] = "1.5.1"
    doc["spec"]["services"]["Prefill"]["extraPodSpec"]["mainContainer"]["image"] = "x:latest"
    doc["spec"]["services"]["Decode"]["runtimeVersionOverride"] = "not-a-version"
    by_name = {c.name: c for c in components.of(doc).components}
    assert str(component_runtime(by_name["Planner"])) == "1.5.1"
    assert component_runtime(by_name["Prefill"]) is None
    with pytest.raises(ComponentError):
        component_runtime(by_name["Decode"])
