"""v1alpha1 service ``annotations``/``labels`` after the 1.5 conversion fix (#14855,
cherry-picked into 1.5.0 as #14882): graph ``spec.annotations``/``spec.labels`` < the
v1alpha1 service's metadata < the explicit pod-template metadata (``extraPodMetadata``),
and the service's metadata ahead of the DGD object annotations the operator propagates.

Upstream: ``propagateDGDSpecMetadata`` in ``internal/dynamo/graph.go`` of the 1.5 line
(read through the public index) reads the service metadata kept in the ``nvidia.com/dgd-spec``
payload and merges it into the component's pod template below the explicit pod-template
metadata and above the graph's, then ``propagateDGDAnnotations`` fills only keys still
absent. At 2a6da14c8 the graph's metadata was merged into the pod template first, so
``GetDCDKubeAnnotations``/``GetDCDKubeLabels`` let it override the service's (DYN-4442).
The worker hash hashes the generated worker DCDs (``internal/dynamo/hash.go``), so it sees
the materialized metadata too.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from support.graph_cases import deployments, dgd, render
from support.hubforms import form_of

from dyn_gitops import keys
from dyn_gitops.workerhash.compute import hash_input

Obj = dict[str, Any]

IMAGE = "nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.5.1"


def worker(**extra: Any) -> Obj:
    main = {"image": IMAGE, "command": ["python3"], "args": ["-m", "dynamo.vllm"]}
    return {"componentType": "worker", "extraPodSpec": {"mainContainer": main}, **extra}


def doc(**services: Obj) -> Obj:
    d = dgd("g", services, namespace="ns", annotations={keys.ANN_ENABLE_METRICS: "false"})
    d["spec"]["annotations"] = {"team": "graph", "graph-only": "g"}
    d["spec"]["labels"] = {"tier": "graph", "graph-label": "g"}
    return d


def test_service_metadata_sits_between_the_graphs_and_the_pod_templates(
    tmp_path: Path,
) -> None:
    """#14855: the v1alpha1 service's annotations and labels win over the graph's
    ``spec.annotations``/``spec.labels`` (keys only the graph sets still arrive), and
    ``extraPodMetadata`` (the v1beta1 pod template's metadata) stays on top of both."""
    svc = {"annotations": {"team": "service"}, "labels": {"tier": "service"}}
    epm = {"annotations": {"team": "pod"}, "labels": {"tier": "pod"}}
    d = doc(Decode=worker(**svc), Prefill=worker(**svc, extraPodMetadata=epm))
    objs = deployments(render(tmp_path, d))
    meta = objs["Decode"]["spec"]["template"]["metadata"]
    assert meta["annotations"]["team"] == "service"
    assert meta["labels"]["tier"] == "service"
    assert meta["annotations"]["graph-only"] == "g" and meta["labels"]["graph-label"] == "g"
    meta = objs["Prefill"]["spec"]["template"]["metadata"]
    assert meta["annotations"]["team"] == "pod" and meta["labels"]["tier"] == "pod"


def test_service_annotation_beats_the_propagated_dgd_annotation(tmp_path: Path) -> None:
    """#14882 ("keep service-level discovery annotations ahead of propagated DGD object
    annotations"): a service's ``nvidia.com/enable-metrics`` wins over the DGD's."""
    svc = worker(annotations={keys.ANN_ENABLE_METRICS: "true"})
    dep = deployments(render(tmp_path, doc(VllmWorker=svc)))["VllmWorker"]
    assert dep["spec"]["template"]["metadata"]["annotations"][keys.ANN_ENABLE_METRICS] == "true"


def test_the_worker_hash_sees_the_materialized_service_metadata() -> None:
    """``ComputeDGDWorkersSpecHash`` hashes the generated worker DCDs, whose pod template
    now carries the service's metadata over the graph's (#14855)."""
    svc = worker(annotations={"team": "service"}, labels={"tier": "service"})
    parts = json.loads(hash_input(form_of(doc(VllmWorker=svc)).hub("ns")))
    tpl_meta = parts["VllmWorker"]["spec"]["podTemplate"]["metadata"]
    assert tpl_meta["annotations"]["team"] == "service"
    assert tpl_meta["labels"]["tier"] == "service"
    assert parts["VllmWorker"]["annotations"]["team"] == "service"
    assert parts["VllmWorker"]["labels"]["tier"] == "service"
