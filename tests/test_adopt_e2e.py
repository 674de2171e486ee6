"""The pain the documented migration from the Dynamo operator (docs/migration.md) avoids, on
the realistic cluster: real kube-controller-manager (Deployments, ReplicaSets, the garbage
collector), scheduler and KWOK (pods Ready).

The live state is what the operator created for an upstream example (its own output,
``conformance/operator-output``, its reconcilers at 2a6da14c8), created with its field
manager and owner references (``support/operator_live.py``, ``support/adoption.py`` cite the
upstream code), its pods Ready. The migration itself, in the documented order and with zero
restarts, runs through the real GitOps tools: ``test_argocd_e2e.py`` and
``test_flux_e2e.py``, ``test_migration_from_the_operator_to_*`` (the same
``support.operator_live.migrate``). Here, the baseline: the order not followed.

The operator's output is for namespace ``default`` (its labels and env name it), so this
works there, on its own graph, and deletes what it created.
"""

from __future__ import annotations

from typing import Any

import pytest
from dyn_gitops_operator.kube import DEPLOYMENTS, Kube
from support.operator_live import (
    ARGOCD,
    NS,
    TRTLLM,
    as_operator_left_it,
    cleanup,
    delete_dcds,
    gitops_apply,
    selector,
    serving,
)
from support.pain import baseline, check
from support.podwatch import ReadyPods

pytestmark = pytest.mark.realk8s


@baseline("a naive migration deletes the operator's DCDs with the workloads still theirs")
def test_naive_migration_deleting_the_dcds_first_deletes_the_workloads(
    cluster_k: Kube, cluster_kube: Any
) -> None:
    """The pain the documented order avoids: the render applied as GitOps does, then the
    operator's DCDs deleted (uninstalling the operator's objects) while the workloads still
    carry the operator's controller references to them: the garbage collector deletes the
    Deployments and their serving pods."""
    k = cluster_k
    with cleanup(k, TRTLLM) as graph:
        workloads = as_operator_left_it(k, TRTLLM)
        serving(cluster_kube, graph, len(workloads))
        with ReadyPods(cluster_kube, NS, selector(graph)) as watch:
            gitops_apply(k, TRTLLM, ARGOCD)
            delete_dcds(k, graph)
            watch.check_alive()
            remaining = {d["metadata"]["name"] for d in k.list(DEPLOYMENTS, NS)[0]}
            check(
                {d["metadata"]["name"] for d in workloads} <= remaining,
                f"the garbage collector deleted the workloads; pods deleted while serving: "
                f"{watch.deleted_while_serving}",
            )
