"""Migration from the Dynamo operator to dyn-gitops with zero restarts (docs/migration.md), on
the realistic cluster: real kube-controller-manager (Deployments, ReplicaSets, the garbage
collector), scheduler and KWOK (pods Ready).

The live state is what the operator created for an upstream example (its own output,
``conformance/operator-output``, its reconcilers at 2a6da14c8), created with its field
manager and owner references (``support/adoption.py`` cites the upstream code), its pods
Ready; the operator itself is not running (migration step 1: scaled to zero). Then the
documented order: ``adopt --check`` on the live objects, the render applied as Argo CD and
Flux apply it (server-side apply, ``--force-conflicts``, their field manager), the
references to the DCDs removed, the companion controller started, the operator's DCDs
deleted. A pod watch over all of it sees no pod deleted and no new one.

The operator's output is for namespace ``default`` (its labels and env name it), so these
tests work there, each on its own graph, and delete what they created.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from dyn_gitops_operator.kube import DEPLOYMENTS, Kube
from dyn_gitops_operator.testing import running, settings_for_tests
from support.operator_live import (
    AGG,
    ARGOCD,
    FLUX,
    NS,
    SGLANG,
    TRTLLM,
    as_operator_left_it,
    cleanup,
    delete_dcds,
    gitops_apply,
    migrate,
    selector,
    serving,
)
from support.pain import baseline, check
from support.podwatch import ReadyPods

pytestmark = pytest.mark.realk8s


@pytest.mark.parametrize(("example", "applier"), [(AGG, ARGOCD), (SGLANG, FLUX)])
def test_migration_from_the_operator_restarts_and_deletes_nothing(
    cluster_k: Kube, cluster_kube: Any, tmp_path: Path, example: str, applier: str
) -> None:
    """The documented order moves an aggregated example (a frontend and a GPU worker
    Deployment; vLLM applied as Argo CD does, SGLang as Flux does) from the operator to
    GitOps (``support.operator_live.migrate``): ``adopt --check`` sees no restart or deletion,
    the pod watch over the whole migration no pod deleted or added, no container restarted,
    the same ReplicaSets and workload uids, the pod templates the applier's alone."""
    k = cluster_k
    with cleanup(k, example), running(settings_for_tests(NS), k):
        migrate(
            k, cluster_kube, tmp_path, example, applier, lambda: gitops_apply(k, example, applier)
        )


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
