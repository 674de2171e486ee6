"""The Grove path on the API server as GitOps applies it (tests/test_operator_grove.py,
tests/test_rollout_pains.py): the rendered vllm-agg / grove-multinode samples, their objects
Argo CD applies, a restart written into the DGD, and what Grove writes once it has synced a
PodCliqueSet (no Grove runs: the tests create its children).

Grove behaviours modelled (docs/grove-standin.md): ``pcs-observed-generation``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from dyn_gitops_operator.errors import ConflictError
from dyn_gitops_operator.kube import Kube
from dyn_gitops_operator.testing import (
    GROVE_MANAGER,
    PODCLIQUESETS,
    gitops_apply,
    grove_create,
    grove_status,
)

from support.paths import SAMPLES
from support.rendering import render

GROVE_SAMPLE = SAMPLES / "grove-multinode" / "input"
APPLIED = ("DynamoGraphDeployment", "DynamoGraphDeploymentScalingAdapter", "PodCliqueSet")
PCLQ, PCSG = "vllm-agg-0-frontend", "vllm-agg-0-vllmdecodeworker"


def graph_objects(objs: list[dict[str, Any]], dgd: str) -> list[dict[str, Any]]:
    """The DGD, its PodCliqueSet and its adapters (the sample renders two graphs)."""
    return [
        o
        for o in objs
        if o["metadata"]["name"] == dgd
        or (o["metadata"].get("annotations") or {})
        .get("dyn-gitops.io/source-dgd", "")
        .endswith(f"/{dgd}")
    ]


def apply_graph(
    k: Kube, ns: str, dgd: str, sample: Path = GROVE_SAMPLE, **settings: Any
) -> dict[str, Any]:
    """Render, apply as GitOps would; the PodCliqueSet."""
    mine = graph_objects(render(sample, ns, **settings), dgd)
    gitops_apply(k, mine, kinds=APPLIED)
    (pcs,) = [o for o in mine if o["kind"] == "PodCliqueSet"]
    return pcs


def with_restart(restart_id: str, **strategy: Any) -> list[dict[str, Any]]:
    docs = [d for d in yaml.safe_load_all((GROVE_SAMPLE / "vllm-agg.yaml").read_text()) if d]
    docs[0]["spec"]["restart"] = {"id": restart_id, **({"strategy": strategy} if strategy else {})}
    return docs


def pcs_observed(k: Kube, ns: str, name: str = "vllm-agg") -> None:
    """What Grove writes once it has synced the PodCliqueSet: status.observedGeneration."""
    grove_k = Kube(k.api, k.timeout, field_manager=GROVE_MANAGER)
    for _ in range(20):
        obj = grove_k.get(PODCLIQUESETS, ns, name)
        body = {
            **obj,
            "status": {
                **(obj.get("status") or {}),
                "observedGeneration": obj["metadata"]["generation"],
            },
        }
        try:
            grove_k.request(
                "PUT",
                PODCLIQUESETS.path(ns, name, "status"),
                [("fieldManager", GROVE_MANAGER)],
                body,
            )
            return
        except ConflictError:
            continue
    raise RuntimeError("could not write the PodCliqueSet status")


def ready_grove_graph(k: Kube, ns: str) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """vllm-agg applied without a restart, Grove's children created, ready, PCS observed."""
    docs = with_restart("unused")
    del docs[0]["spec"]["restart"]
    objs = render(docs, ns, grove=True)
    gitops_apply(k, objs, kinds=APPLIED)
    (pcs,) = [o for o in objs if o["kind"] == "PodCliqueSet"]
    for name, res in grove_create(k, pcs).items():
        grove_status(k, res, ns, name)
    pcs_observed(k, ns)
    return objs, pcs
