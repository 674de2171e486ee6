"""The controller's version-neutral view of a DGD (``dgdview``): v1beta1 read as stored,
v1alpha1 converted as the operator's conversion does (api/v1alpha1
dynamographdeployment_conversion.go @ 2a6da14c8), both giving the same view and hash."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml
from dyn_gitops_operator.dgdview import ANN_ALPHA_SPEC, as_v1beta1, component_names, view
from dyn_gitops_operator.graph import compute_worker_hash
from support.graphs import restart_graph, rollout_graph

SAMPLES = Path(__file__).resolve().parent.parent / "samples"


def _alpha_dgds() -> list[dict[str, Any]]:
    out = []
    for path in sorted(SAMPLES.glob("*/input/*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if (doc or {}).get("apiVersion") == "nvidia.com/v1alpha1" and doc.get(
                "kind"
            ) == "DynamoGraphDeployment":
                out.append(doc)
    return out


ALPHA = _alpha_dgds()


def test_samples_hold_v1alpha1_graphs() -> None:
    assert len(ALPHA) >= 5


@pytest.mark.parametrize("dgd", ALPHA, ids=[d["metadata"]["name"] for d in ALPHA])
def test_v1alpha1_and_its_stored_v1beta1_form_read_the_same(dgd: dict[str, Any]) -> None:
    """Same components, types (worker + prefill/decode promoted), replicas, adapters,
    multinode, annotations, restart and worker hash from either version."""
    beta = as_v1beta1(copy.deepcopy(dgd))
    assert beta["apiVersion"] == "nvidia.com/v1beta1"
    assert "services" not in beta["spec"]
    assert view(dgd) == view(beta)
    assert sorted(component_names(dgd)) == sorted(component_names(beta))
    assert compute_worker_hash(dgd) == compute_worker_hash(beta)


def test_component_fields_of_a_v1beta1_object() -> None:
    dgd = {
        "apiVersion": "nvidia.com/v1beta1",
        "kind": "DynamoGraphDeployment",
        "metadata": {"name": "g"},
        "spec": {
            "annotations": {"a": "graph", "b": "graph"},
            "restart": {"id": "r1", "strategy": {"type": "Parallel"}},
            "components": [
                {"name": "Frontend", "type": "frontend"},
                {
                    "name": "decode",
                    "type": "decode",
                    "replicas": 3,
                    "scalingAdapter": {},
                    "multinode": {"nodeCount": 2},
                    "podTemplate": {"metadata": {"annotations": {"b": "pod"}}},
                },
            ],
        },
    }
    v = view(dgd)
    fe, dec = v.components["Frontend"], v.components["decode"]
    # replicas as written (unset: None, the operator's 1 is Graph.spec_replicas's, checked
    # against the controller's ceiling there)
    assert (fe.replicas, fe.explicit_replicas, fe.adapter, fe.worker) == (None, False, False, False)
    assert (dec.replicas, dec.explicit_replicas, dec.adapter, dec.multinode, dec.worker) == (
        3,
        True,
        True,
        True,
        True,
    )
    # GetDGDComponentResourceAnnotations (internal/dynamo/graph.go @ 2a6da14c8): graph
    # annotations, then the pod template's
    assert dec.annotations == {"a": "graph", "b": "pod"}
    assert v.restart is not None
    assert (v.restart.id, v.restart.strategy, v.restart.order) == (
        "r1",
        "Parallel",
        ("Frontend", "decode"),
    )


def test_service_annotations_survive_the_conversion() -> None:
    """A v1alpha1 service's annotations (the rolling-update knobs) have no v1beta1 field:
    the conversion keeps them in ``nvidia.com/dgd-spec`` and the operator reads them back
    (``getDGDComponentAlphaAnnotations``, internal/dynamo/graph.go @ 2a6da14c8)."""
    alpha = rollout_graph("img:1", 4, surge="50%", unavailable="0")
    beta = as_v1beta1(alpha)
    assert ANN_ALPHA_SPEC in beta["metadata"]["annotations"]
    worker = view(beta).components["VllmDecodeWorker"]
    assert worker.annotations == {
        "nvidia.com/deployment-rolling-update-max-surge": "50%",
        "nvidia.com/deployment-rolling-update-max-unavailable": "0",
    }
    assert view(alpha) == view(beta)


def test_a_v1alpha1_object_served_as_v1beta1_without_conversion_is_still_read() -> None:
    """A CRD serving both versions with no conversion hands out the stored ``services`` map
    under the other apiVersion: read as v1alpha1, not as an empty v1beta1 graph."""
    alpha = restart_graph({"id": "x"})
    relabelled = {**alpha, "apiVersion": "nvidia.com/v1beta1"}
    assert view(relabelled) == view(alpha)
    assert set(view(alpha).components) == {"Frontend", "decode", "prefill"}
    assert view(alpha).components["prefill"].component_type == "prefill"
    assert compute_worker_hash(relabelled) == compute_worker_hash(alpha) is not None


def test_a_live_payload_is_read_within_the_render_bounds() -> None:
    """A live DGD's conversion annotation is input too: read through the render's bounded
    reader (``bounded.loads_json``), so nesting, digits or a lone surrogate that would break
    a plain ``json.loads`` (RecursionError, ValueError on int digits) read as no payload."""
    from dyn_gitops_operator.dgdview import preserved_services

    deep = '{"version":1,"spec":{"services":{"W":' + "[" * 50_000 + "]" * 50_000 + "}}}"
    digits = '{"version":1,"spec":{"services":{"W":{"replicas":' + "9" * 5000 + "}}}}"
    for raw in (deep, digits, '{"spec":{"services":{"W":{"labels":{"a":"\\ud800"}}}}}'):
        dgd = {"metadata": {"name": "g", "annotations": {ANN_ALPHA_SPEC: raw}}}
        assert preserved_services(dgd) == {}
    kept = '{"version":1,"spec":{"services":{"W":{"labels":{"a":"b"}}}}}'
    dgd = {"metadata": {"name": "g", "annotations": {ANN_ALPHA_SPEC: kept}}}
    assert preserved_services(dgd) == {"W": {"labels": {"a": "b"}}}
