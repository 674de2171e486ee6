"""/metrics, /healthz and /readyz of a running controller (real kube-apiserver)."""

from __future__ import annotations

import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from dyn_gitops_operator.kube import DGDS, Kube
from dyn_gitops_operator.metrics import RECONCILERS
from dyn_gitops_operator.testing import (
    gitops_apply,
    running,
    settings_for_tests,
    wait_for,
)
from prometheus_client.parser import text_string_to_metric_families
from support.rendering import render

pytestmark = pytest.mark.realk8s
SAMPLES = Path(__file__).resolve().parent.parent / "samples"


def get(port: int, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    out = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def test_metrics_and_health_endpoints(cluster_kube: Any, cluster_namespace: str) -> None:
    """On the realistic cluster: the Deployments' pods really become Ready (KWOK)."""
    kube, namespace = cluster_kube, cluster_namespace
    k = Kube(kube)
    gitops_apply(k, render(SAMPLES / "vllm-agg" / "input", namespace))
    with running(settings_for_tests(namespace, http_address="127.0.0.1:0"), k) as m:
        assert m.http is not None
        port = m.http.port
        wait_for(
            lambda: (
                k.get(DGDS, namespace, "vllm-agg").get("status", {}).get("state") == "successful"
            ),
            timeout=90,
            what="graph ready",
        )
        assert get(port, "/healthz") == (200, "ok\n")
        assert get(port, "/readyz") == (200, "ok\n")
        assert get(port, "/nope")[0] == 404
        wait_for(
            lambda: (
                samples(get(port, "/metrics")[1])[
                    ("dyn_gitops_controller_dgds", (("state", "successful"),))
                ]
                == 1
            ),
            timeout=5,
            what="DGDs by state (counted every second)",
        )
        got = samples(get(port, "/metrics")[1])

    def value(name: str, **labels: str) -> float:
        return got[(name, tuple(sorted(labels.items())))]

    for rec in RECONCILERS:
        assert (
            value("dyn_gitops_controller_reconcile_total", reconciler=rec, result="success") >= 1
        ), rec
        assert value("dyn_gitops_controller_reconcile_duration_seconds_count", reconciler=rec) >= 1
        # every label value exists from the start, at 0
        assert (
            value(
                "dyn_gitops_controller_reconcile_errors_total",
                reconciler=rec,
                error_type="forbidden",
            )
            == 0
        )
    assert value("dyn_gitops_controller_dgds", state="failed") == 0
    assert value("dyn_gitops_controller_leader") == 1
    assert value("dyn_gitops_controller_scope_leases_held") == 1
    assert value("dyn_gitops_controller_namespaces_excluded") == 0
    assert value("dyn_gitops_controller_graph_reconcile_duration_seconds_count") >= 1
    assert (
        value(
            "dyn_gitops_controller_writes_total", kind="DynamoGraphDeployment", verb="apply/status"
        )
        >= 1
    )
    assert (
        value("dyn_gitops_controller_watch_events_total", resource="deployments", type="MODIFIED")
        >= 1
    )
    # after a clean stop the server is gone and the leases are released
    with pytest.raises(OSError):
        urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2)
