"""Write conflicts (409) against the real kube-apiserver are retried, and converge.

The wrapper below sends a stale resourceVersion with the first writes of every object:
the API server answers with a genuine 409 Conflict, exactly what a write based on a stale
cache gets.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from dyn_gitops_operator.errors import ConflictError
from dyn_gitops_operator.kube import DEPLOYMENTS, DGDS, DGDSAS, Kube, Obj, Resource
from dyn_gitops_operator.testing import (
    gitops_apply,
    running,
    settings_for_tests,
    wait_for,
)
from support.rendering import render

pytestmark = pytest.mark.realk8s
SAMPLES = Path(__file__).resolve().parent.parent / "samples"


class StaleFirstWrites(Kube):
    """Sends the resourceVersion of the object's creation with the first N applies."""

    def __init__(self, api: Any, n: int) -> None:
        super().__init__(api)
        self.n = n
        self.sent: Counter[str] = Counter()
        self.conflicts = 0

    def apply(self, res: Resource, obj: Obj, **kw: Any) -> Obj:
        key = f"{res.plural}/{obj['metadata']['name']}/{kw.get('subresource')}"
        self.sent[key] += 1
        if self.sent[key] <= self.n and obj["metadata"].get("resourceVersion"):
            obj = {**obj, "metadata": {**obj["metadata"], "resourceVersion": "1"}}
            try:
                return super().apply(res, obj, **kw)
            except ConflictError:
                self.conflicts += 1
                raise
        return super().apply(res, obj, **kw)


def test_conflicts_are_retried_until_the_write_lands(
    cluster_kube: Any, cluster_namespace: str
) -> None:
    """On the realistic cluster: the Deployments' pods really become Ready (KWOK)."""
    kube, namespace = cluster_kube, cluster_namespace
    k = Kube(kube)
    stale = StaleFirstWrites(kube, n=1)
    gitops_apply(k, render(SAMPLES / "scaling-adapter" / "input", namespace))
    with running(settings_for_tests(namespace), stale) as m:
        st = wait_for(
            lambda: (
                (s := k.get(DGDS, namespace, "sglang-disagg").get("status", {})).get("state")
                == "successful"
                and s
            ),
            timeout=90,
            what="converged despite conflicts",
        )
        assert st["components"]["decode"]["replicas"] == 2
        assert k.get(DGDSAS, namespace, "sglang-disagg-decode")["status"]["replicas"] == 2
        assert stale.conflicts >= 4  # real 409s from the API server ...
        assert (
            m.metrics.value(
                "dyn_gitops_controller_reconcile_errors_total",
                {"reconciler": "status", "error_type": "conflict"},
            )
            >= 1
        )
        # parallel writes of one pass fail together and are retried together
        assert m.metrics.value("dyn_gitops_controller_workqueue_retries_total") >= 2
    for d in k.list(DEPLOYMENTS, namespace)[0]:  # ... and every write landed once retried
        assert d["spec"]["replicas"] >= 1
