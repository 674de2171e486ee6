"""The Helm chart with the real helm: lint and template for both modes, the CRDs it ships
equal ``dyn-gitops crds``, least-privilege RBAC, hardened Deployment, values schema, and a
dashboard that only queries metrics the controller exports.

The API-server side (server-side dry-run, and the controller running under the chart's
RBAC) is in ``test_operator_cluster.py``.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from dyn_gitops_operator.metrics import Metrics
from dyn_gitops_operator.testing import helm_template

CHART = Path(__file__).resolve().parent.parent / "charts" / "dyn-gitops"
MODES = {
    "cluster": [],
    "namespace": ["controller.mode=namespace", "controller.watchNamespace=team-a"],
}
EXTRAS = ["metrics.serviceMonitor.enabled=true", "dashboard.enabled=true"]


@pytest.fixture(scope="module")
def helm(test_binaries: Any) -> Path:
    return Path(test_binaries("helm")["helm"])


def by_kind(objs: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [o for o in objs if o["kind"] == kind]


def test_chart_crds_are_the_generated_ones() -> None:
    generated = subprocess.run(  # the real `dyn-gitops crds` entry point
        [sys.executable, "-c", "from dyn_gitops.oneshot import main; main()", "crds"],
        check=True,
        capture_output=True,
        text=True,
    )
    assert (CHART / "crds" / "dyn-gitops-crds.yaml").read_text() == generated.stdout, (
        "refresh with: dyn-gitops crds > charts/dyn-gitops/crds/dyn-gitops-crds.yaml"
    )


@pytest.mark.parametrize("mode", sorted(MODES))
def test_helm_lint(helm: Path, mode: str) -> None:
    args = [a for s in MODES[mode] + EXTRAS for a in ("--set", s)]
    proc = subprocess.run(
        [str(helm), "lint", "--strict", str(CHART), *args], capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "0 chart(s) failed" in proc.stdout


def test_rendered_crds_equal_the_generated_ones(helm: Path) -> None:
    """crds/ (Helm installs them first, skips existing ones, never deletes them)."""
    from dyn_gitops.crds import crds

    assert not by_kind(helm_template(helm, CHART), "CustomResourceDefinition")
    rendered = {
        c["metadata"]["name"]: c
        for c in by_kind(
            helm_template(helm, CHART, extra=["--include-crds"]), "CustomResourceDefinition"
        )
    }
    assert rendered == {c["metadata"]["name"]: json.loads(json.dumps(c)) for c in crds()}


def rules(role: dict[str, Any]) -> dict[tuple[str, str], set[str]]:
    out: dict[tuple[str, str], set[str]] = {}
    for r in role["rules"]:
        for g in r["apiGroups"]:
            for res in r["resources"]:
                key = (
                    g,
                    res + ("#" + ",".join(r["resourceNames"]) if r.get("resourceNames") else ""),
                )
                out.setdefault(key, set()).update(r["verbs"])
    return out


def assert_grove_rules(got: dict[tuple[str, str], set[str]]) -> None:
    """Grove: read PodCliques / PCSGs, scale them through /scale; the PCS is Git's: read
    (GET, only during a restart) and patched with the restartAt clique annotations only."""
    for res in ("podcliques", "podcliquescalinggroups"):
        assert got[("grove.io", res)] == {"get", "list", "watch"}
        assert got[("grove.io", f"{res}/scale")] == {"get", "patch"}
    assert got[("grove.io", "podcliquesets")] == {"get", "patch"}
    assert not {r for g, r in got if g == "grove.io" and r.startswith("podcliquesets/")}


def test_cluster_mode_rbac(helm: Path) -> None:
    objs = helm_template(helm, CHART)
    (cr,) = by_kind(objs, "ClusterRole")
    got = rules(cr)
    assert got[("apps", "deployments")] == {"get", "list", "watch", "patch", "delete"}
    # patch: the seed of a Planner-scaled worker's replicas (docs/operator.md)
    assert got[("nvidia.com", "dynamographdeployments")] == {"get", "list", "watch", "patch"}
    assert got[("nvidia.com", "dynamographdeploymentscalingadapters")] == {"get", "list", "watch"}
    assert got[("nvidia.com", "dynamographdeployments/status")] == {"get", "patch"}
    assert got[("coordination.k8s.io", "leases")] == {"get", "list", "watch"}
    assert got[("", "pods")] == {"list"}
    assert_grove_rules(got)
    (crb,) = by_kind(objs, "ClusterRoleBinding")
    assert crb["subjects"] == [
        {"kind": "ServiceAccount", "name": "dg-dyn-gitops-controller", "namespace": "ops"}
    ]
    (le,) = by_kind(objs, "Role")  # only the leader-election Lease, in the release namespace
    assert le["metadata"]["namespace"] == "ops"
    assert rules(le) == {
        ("coordination.k8s.io", "leases"): {"create"},
        ("coordination.k8s.io", "leases#dg-dyn-gitops-controller"): {"get", "update"},
    }


def test_namespace_mode_rbac(helm: Path) -> None:
    objs = helm_template(helm, CHART, *MODES["namespace"])
    assert not by_kind(objs, "ClusterRole") and not by_kind(objs, "ClusterRoleBinding")
    (role,) = by_kind(objs, "Role")
    assert role["metadata"]["namespace"] == "team-a"
    got = rules(role)
    assert got[("", "pods")] == {"list"}
    assert_grove_rules(got)
    assert got[
        ("coordination.k8s.io", "leases#dg-dyn-gitops-controller,dynamo-operator-namespace-scope")
    ] == {"get", "update", "delete"}
    (rb,) = by_kind(objs, "RoleBinding")
    assert rb["metadata"]["namespace"] == "team-a"
    assert rb["subjects"][0]["namespace"] == "ops"
    (dep,) = by_kind(objs, "Deployment")
    args = dep["spec"]["template"]["spec"]["containers"][0]["args"]
    assert "--mode=namespace" in args and "--namespace=team-a" in args
    assert "--leader-election-namespace=team-a" in args


@pytest.mark.parametrize("mode", sorted(MODES))
def test_least_privilege(helm: Path, mode: str) -> None:
    for role in by_kind(helm_template(helm, CHART, *MODES[mode]), "ClusterRole") + by_kind(
        helm_template(helm, CHART, *MODES[mode]), "Role"
    ):
        for r in role["rules"]:
            assert "*" not in r["verbs"] + r["resources"] + r["apiGroups"]
            assert not {"create", "update"} & set(r["verbs"]) or r["resources"] == ["leases"]
            assert not {"secrets", "configmaps"} & set(r["resources"])
            if "pods" in r["resources"]:  # the rollout's floor: list only (docs/operator.md)
                assert r["resources"] == ["pods"] and r["verbs"] == ["list"], r


def test_deployment_is_hardened(helm: Path) -> None:
    (dep,) = by_kind(helm_template(helm, CHART), "Deployment")
    pod = dep["spec"]["template"]["spec"]
    (c,) = pod["containers"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert c["securityContext"]["readOnlyRootFilesystem"] is True
    assert c["securityContext"]["allowPrivilegeEscalation"] is False
    assert c["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    assert c["resources"]["requests"] and c["resources"]["limits"]["memory"]
    assert c["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert c["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert c["command"] == ["dyn-gitops-operator"]
    assert "--leader-elect" in c["args"] and "--mode=cluster" in c["args"]
    # every flag the chart passes is one the controller accepts
    from dyn_gitops_operator.__main__ import parser, settings_from

    settings = settings_from(parser().parse_args(c["args"]))
    assert settings.mode == "cluster" and settings.http_address == ":8080"


def test_optional_objects(helm: Path) -> None:
    plain = helm_template(helm, CHART)
    assert not by_kind(plain, "ServiceMonitor") and not by_kind(plain, "ConfigMap")
    (svc,) = by_kind(plain, "Service")
    assert svc["spec"]["ports"][0]["port"] == 8080
    objs = helm_template(helm, CHART, *EXTRAS, "dashboard.namespace=monitoring")
    (sm,) = by_kind(objs, "ServiceMonitor")
    assert sm["spec"]["endpoints"][0]["path"] == "/metrics"
    (cm,) = by_kind(objs, "ConfigMap")
    assert cm["metadata"]["namespace"] == "monitoring"
    assert cm["metadata"]["labels"]["grafana_dashboard"] == "1"
    dash = json.loads(cm["data"]["dyn-gitops-controller.json"])
    assert dash["uid"] == "dyn-gitops-controller"


@pytest.mark.parametrize(
    "bad",
    [
        ["controller.mode=bogus"],
        ["controller.workers=0"],
        ["controller.replicas=2", "controller.leaderElection.enabled=false"],
        ["controller.typo=1"],
    ],
)
def test_bad_values_are_refused(helm: Path, bad: list[str]) -> None:
    with pytest.raises(subprocess.CalledProcessError):
        helm_template(helm, CHART, *bad)


def test_dashboard_queries_only_exported_metrics() -> None:
    dash = json.loads((CHART / "dashboards" / "dyn-gitops-controller.json").read_text())
    exported = {m.name for m in Metrics().registry.collect()}
    exprs = [t["expr"] for p in dash["panels"] for t in p.get("targets", [])]
    assert len(exprs) >= 10
    for expr in exprs:
        for name in re.findall(r"dyn_gitops_controller_[a-z_]+", expr):
            base = re.sub(r"_(total|bucket|count|sum)$", "", name)
            assert base in exported or name in exported, name
    yaml.safe_dump(dash)  # plain data, no NaN or objects
