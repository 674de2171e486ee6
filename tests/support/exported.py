"""v1beta1 DGDs as the Dynamo operator stores them (``kubectl get`` on an operator cluster):
the upstream v1alpha1 examples with the spec and ``nvidia.com/dgd-spec`` payload the
operator's own conversion wrote (``tests/golden/operator-conversion.json``), and a small
two-component DGD to carry a payload of one's own."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import yaml

Obj = dict[str, Any]
TESTS = Path(__file__).resolve().parent.parent
CONFORMANCE = TESTS.parent.parent / "shared" / "conformance" / "dynamo-examples"
DGD_SPEC = "nvidia.com/dgd-spec"
IMAGE = "nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.5.1"


def oracle() -> dict[str, Obj]:
    """The operator's conversion of each upstream v1alpha1 example, by name."""
    data = json.loads((TESTS / "golden" / "operator-conversion.json").read_text())
    examples: dict[str, Obj] = data["examples"]
    return examples


def source(entry: Obj) -> Obj:
    """The v1alpha1 example an oracle entry was converted from."""
    docs = yaml.safe_load_all((CONFORMANCE / entry["file"]).read_text())
    [dgd] = [
        d
        for d in docs
        if d and d.get("kind") == "DynamoGraphDeployment" and d["metadata"]["name"] == entry["name"]
    ]
    return dict(dgd)


def exported(entry: Obj) -> Obj:
    """The v1beta1 DGD the operator stores for the oracle entry: the example's metadata,
    the operator's stored spec and payload."""
    src = source(entry)
    meta = copy.deepcopy(src["metadata"])
    if entry["dgd-spec"]:
        meta["annotations"] = {**(meta.get("annotations") or {}), DGD_SPEC: entry["dgd-spec"]}
    return {
        "apiVersion": "nvidia.com/v1beta1",
        "kind": src["kind"],
        "metadata": meta,
        "spec": copy.deepcopy(entry["spec"]),
    }


def exported_with_payload() -> list[Obj]:
    """Every exported example that carries a payload, in name order."""
    return [exported(e) for _, e in sorted(oracle().items()) if e["dgd-spec"]]


def pair(payload: str | None = None) -> Obj:
    """A v1beta1 DGD (a frontend and a ``VllmWorker``, both with an image) carrying
    ``payload`` as its ``nvidia.com/dgd-spec``."""
    main = {"name": "main", "image": IMAGE}
    doc: Obj = {
        "apiVersion": "nvidia.com/v1beta1",
        "kind": "DynamoGraphDeployment",
        "metadata": {"name": "pair"},
        "spec": {
            "backendFramework": "vllm",
            "components": [
                {
                    "name": "Frontend",
                    "type": "frontend",
                    "podTemplate": {"spec": {"containers": [dict(main)]}},
                },
                {
                    "name": "VllmWorker",
                    "type": "worker",
                    "podTemplate": {
                        "spec": {
                            "containers": [
                                {**main, "resources": {"limits": {"nvidia.com/gpu": "1"}}}
                            ]
                        }
                    },
                },
            ],
        },
    }
    if payload is not None:
        doc["metadata"]["annotations"] = {DGD_SPEC: payload}
    return doc


def payload(spec: Obj) -> str:
    """``spec`` as the conversion payload (Go's compact JSON)."""
    return json.dumps({"version": 1, "spec": spec}, separators=(",", ":"))


def dump(doc: Obj) -> str:
    """One document as YAML on long lines (a payload stays on one line)."""
    return yaml.safe_dump(doc, sort_keys=False, width=10**9, allow_unicode=True)
