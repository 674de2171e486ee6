"""The Helm chart with the real helm: lint and template for both modes, the CRDs it ships
equal ``dyn-gitops crds``, least-privilege RBAC, hardened Deployment whose command is the
controller image's ENTRYPOINT, values schema, and a dashboard that only queries metrics the
controller exports.

The API-server side (server-side dry-run, and the controller running under the chart's
RBAC) is in ``test_operator_cluster.py``; the chart installed and its controller run as its
ServiceAccount under Argo CD in ``test_argocd_e2e.py``.
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
EXTRAS = [
    "metrics.serviceMonitor.enabled=true",
    "dashboard.enabled=true",
    "controller.renderArtifacts.enabled=true",
]
#: the Prometheus Operator's API served (the ServiceMonitor is rendered only then)
MONITORING_API = ["--api-versions", "monitoring.coreos.com/v1"]


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


def assert_model_rules(got: dict[tuple[str, str], set[str]]) -> None:
    """DynamoModel: read, patch (our finalizer), its status, finalizers/update (as the
    operator's role); the worker pods and the Services read only."""
    assert got[("nvidia.com", "dynamomodels")] == {"get", "list", "watch", "patch"}
    assert got[("nvidia.com", "dynamomodels/status")] == {"get", "patch"}
    assert got[("nvidia.com", "dynamomodels/finalizers")] == {"update"}
    assert got[("", "pods")] == {"get", "list", "watch"}
    assert got[("", "services")] == {"get", "list", "watch"}


def test_dynamo_models_can_be_turned_off(helm: Path) -> None:
    objs = helm_template(helm, CHART, "controller.dynamoModels.enabled=false")
    (cr,) = by_kind(objs, "ClusterRole")
    got = rules(cr)
    assert not {k for k in got if "dynamomodels" in k[1] or k[1] == "services"}
    assert got[("", "pods")] == {"list"}  # the rollout's floor only
    (dep,) = by_kind(objs, "Deployment")
    args = dep["spec"]["template"]["spec"]["containers"][0]["args"]
    from dyn_gitops_operator.__main__ import parser, settings_from

    assert settings_from(parser().parse_args(args)).models.enabled is False


@pytest.mark.parametrize("mode", sorted(MODES))
def test_in_cluster_rendering_for_flux_is_off_unless_asked(helm: Path, mode: str) -> None:
    """controller.renderArtifacts (issue 27): off, no Flux rule, no Service; on, read-only
    Flux sources, the ExternalArtifacts and their status, a Service for the artifact server
    that the controller advertises, the artifacts on their own emptyDir; replicas > 1 is
    refused (the artifacts live in the one pod)."""
    from dyn_gitops_operator.__main__ import parser, settings_from

    objs = helm_template(helm, CHART, *MODES[mode])
    assert not [
        r for o in objs for r in o.get("rules", []) if "source.toolkit.fluxcd.io" in r["apiGroups"]
    ]
    assert [s["metadata"]["name"] for s in by_kind(objs, "Service")] == [
        "dg-dyn-gitops-controller-metrics"
    ]
    objs = helm_template(helm, CHART, *MODES[mode], "controller.renderArtifacts.enabled=true")
    (role,) = [
        r
        for r in by_kind(objs, "ClusterRole") + by_kind(objs, "Role")
        if "leader" not in r["metadata"]["name"]
    ]
    got = rules(role)
    flux = "source.toolkit.fluxcd.io"
    assert (
        got[(flux, "gitrepositories")] == got[(flux, "ocirepositories")] == {"get", "list", "watch"}
    )
    assert got[(flux, "externalartifacts")] == {"get", "list", "watch", "create", "patch", "delete"}
    assert got[(flux, "externalartifacts/status")] == {"get", "patch"}
    (svc,) = [s for s in by_kind(objs, "Service") if s["metadata"]["name"].endswith("-artifacts")]
    (dep,) = by_kind(objs, "Deployment")
    pod = dep["spec"]["template"]["spec"]
    (c,) = pod["containers"]
    a = settings_from(parser().parse_args(c["args"])).artifacts
    assert a.enabled and a.address == ":9797"
    assert a.url_base() == f"http://{svc['metadata']['name']}.ops.svc.cluster.local.:9797"
    assert {"name": "artifacts", "containerPort": 9797, "protocol": "TCP"} in c["ports"]
    (mount,) = [m for m in c["volumeMounts"] if m["name"] == "artifacts"]
    assert mount["mountPath"] == a.storage_dir
    assert {"name": "artifacts", "emptyDir": {"sizeLimit": "1Gi"}} in pod["volumes"]
    proc = subprocess.run(
        [
            str(helm),
            "template",
            "dg",
            str(CHART),
            "--set",
            "controller.renderArtifacts.enabled=true",
            "--set",
            "controller.replicas=2",
        ],
        capture_output=True,
        text=True,
    )
    assert proc.returncode != 0 and "controller.replicas: 1" in proc.stderr


def test_the_replica_ceiling_reaches_the_controller(helm: Path) -> None:
    """controller.maxReplicas becomes --max-replicas; unset, the controller's default (the
    renderer's max-replicas default) applies."""
    from dyn_gitops_operator.__main__ import parser, settings_from
    from dyn_gitops_operator.settings import DEFAULT_MAX_REPLICAS

    for sets, want in (((), DEFAULT_MAX_REPLICAS), (("controller.maxReplicas=64",), 64)):
        (dep,) = by_kind(helm_template(helm, CHART, *sets), "Deployment")
        args = dep["spec"]["template"]["spec"]["containers"][0]["args"]
        assert settings_from(parser().parse_args(args)).max_replicas == want, sets


def test_the_controller_identity_is_its_pod_name(helm: Path, monkeypatch: Any) -> None:
    """POD_NAME from the downward API: the identity a restarted container keeps, so it
    takes its own leader lease back at once (leader.py)."""
    from dyn_gitops_operator.__main__ import parser, settings_from

    for sets in MODES.values():
        (dep,) = by_kind(helm_template(helm, CHART, *sets), "Deployment")
        (container,) = dep["spec"]["template"]["spec"]["containers"]
        env = {e["name"]: e for e in container.get("env", [])}
        assert env["POD_NAME"]["valueFrom"] == {"fieldRef": {"fieldPath": "metadata.name"}}
        assert "--identity" not in " ".join(container["args"])
        monkeypatch.setenv("POD_NAME", "dg-dyn-gitops-5c7d-x1")
        assert settings_from(parser().parse_args(container["args"])).identity == (
            "dg-dyn-gitops-5c7d-x1"
        )


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
    assert "list" in got[("", "pods")]
    assert got[("", "events")] == {"create"}
    assert_grove_rules(got)
    assert_model_rules(got)
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
    assert "list" in got[("", "pods")]
    assert_grove_rules(got)
    assert_model_rules(got)
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
    sets = [*MODES[mode], "controller.renderArtifacts.enabled=true"]
    for role in by_kind(helm_template(helm, CHART, *sets), "ClusterRole") + by_kind(
        helm_template(helm, CHART, *sets), "Role"
    ):
        for r in role["rules"]:
            assert "*" not in r["verbs"] + r["resources"] + r["apiGroups"]
            assert not {"create", "update"} & set(r["verbs"]) or r["resources"] in (
                ["leases"],
                ["dynamomodels/finalizers"],
                ["events"],
                ["externalartifacts"],  # the in-cluster rendering's own objects
            )
            if r["resources"] == ["events"]:  # a terminal error's Event: nothing else
                assert r["verbs"] == ["create"], r
            assert not {"secrets", "configmaps"} & set(r["resources"])
            if "pods" in r["resources"]:  # the rollout's floor: list; DynamoModel: read only
                assert (r["resources"], r["verbs"]) in (
                    (["pods"], ["list"]),
                    (["pods", "services"], ["get", "list", "watch"]),
                ), r


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
    assert settings.models.enabled and settings.models.port == 9090


def dockerfile_stage(name: str) -> list[str]:
    """The instruction lines of the Dockerfile stage ``FROM ... AS <name>``."""
    lines = (CHART.parent.parent / "Dockerfile").read_text().splitlines()
    start = next(i for i, ln in enumerate(lines) if re.match(rf"FROM \S+ AS {name}$", ln))
    end = next(
        (i for i in range(start + 1, len(lines)) if lines[i].startswith("FROM ")), len(lines)
    )
    return lines[start:end]


def test_deployment_command_is_the_image_entrypoint(helm: Path) -> None:
    """The Deployment's command is the controller image's ENTRYPOINT, the console script of
    pyproject.toml: what tests/support/chart_controller.py runs locally is what the pod runs."""
    import tomllib

    (dep,) = by_kind(helm_template(helm, CHART), "Deployment")
    (c,) = dep["spec"]["template"]["spec"]["containers"]
    stage = dockerfile_stage("controller")
    (entry,) = [json.loads(ln.split(None, 1)[1]) for ln in stage if ln.startswith("ENTRYPOINT ")]
    assert c["command"] == entry == ["dyn-gitops-operator"]
    assert any("--from=venv-controller /opt/dyn-gitops /opt/dyn-gitops" in ln for ln in stage)
    runtime = "\n".join(dockerfile_stage("runtime"))
    assert "PATH=/opt/dyn-gitops/bin:" in runtime  # the console script is on the PATH
    pyproject = tomllib.loads((CHART.parent.parent / "pyproject.toml").read_text())
    assert pyproject["project"]["scripts"][entry[0]] == "dyn_gitops_operator.__main__:main"


def test_replicas_zero_renders_a_deployment_without_pods(helm: Path) -> None:
    """The Argo CD e2e installs with controller.replicas=0 and runs the container itself."""
    (dep,) = by_kind(helm_template(helm, CHART, "controller.replicas=0"), "Deployment")
    assert dep["spec"]["replicas"] == 0


def test_optional_objects(helm: Path) -> None:
    plain = helm_template(helm, CHART)
    assert not by_kind(plain, "ServiceMonitor") and not by_kind(plain, "ConfigMap")
    (svc,) = by_kind(plain, "Service")
    assert svc["spec"]["ports"][0]["port"] == 8080
    objs = helm_template(
        helm, CHART, *EXTRAS, "dashboard.namespace=monitoring", extra=MONITORING_API
    )
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
        ["controller.dynamoModels.concurrency=0"],
        ["controller.maxReplicas=0"],
        ["controller.maxReplicas=2147483648"],
        ["controller.maxReplicas=many"],
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


# ------------------------------------------------------------------- the Argo CD side
REPO = CHART.parent.parent
ARGOCD = REPO / "deploy" / "argocd"
ARGOCD_ON = ["argocd.enabled=true", "argocd.namespace=argo"]


def test_chart_argocd_files_are_the_repository_ones() -> None:
    """The chart carries copies (Helm reads only files inside the chart): plugin.yaml as
    ``dyn-gitops cmp plugin-yaml`` prints it, the health Lua of deploy/argocd."""
    from dyn_gitops.argocd import plugin

    files = CHART / "files" / "argocd"
    assert (files / "plugin.yaml").read_text() == plugin.plugin_yaml(), (
        "refresh: dyn-gitops cmp plugin-yaml > charts/dyn-gitops/files/argocd/plugin.yaml"
    )
    lua = sorted((ARGOCD / "resource_customizations").glob("*/*/health.lua"))
    assert lua
    copies = {p.name for p in (files / "health").glob("*.lua")}
    assert copies == {f"{p.parent.parent.name}_{p.parent.name}.lua" for p in lua}
    for p in lua:
        copy = files / "health" / f"{p.parent.parent.name}_{p.parent.name}.lua"
        assert copy.read_text() == p.read_text(), f"refresh {copy} from {p}"


def argocd_objects(helm: Path, *sets: str) -> dict[str, dict[str, Any]]:
    objs = helm_template(helm, CHART, *ARGOCD_ON, *sets)
    return {o["metadata"]["name"]: o for o in by_kind(objs, "ConfigMap")}


def test_argocd_side_is_off_unless_asked(helm: Path) -> None:
    assert not by_kind(helm_template(helm, CHART), "ConfigMap")
    cms = argocd_objects(helm)
    assert set(cms) == {"dg-dyn-gitops-cmp-plugin", "dg-dyn-gitops-argocd-patches"}
    assert {c["metadata"]["namespace"] for c in cms.values()} == {"argo"}


def test_argocd_side_installs_the_plugin_and_the_documented_patches(helm: Path) -> None:
    """The CMP ConfigMap holds plugin.yaml; the patches equal the kustomize install path's
    (argocd-cm: health Lua and ignoreDifferences; argocd-cmd-params-cm), and the sidecar
    patch is the documented one, with the values' image, pull secrets, resources and
    security context, mounting plugin.yaml from the CMP ConfigMap."""
    from dyn_gitops.argocd import plugin

    cms = argocd_objects(
        helm,
        "argocd.sidecar.image.repository=registry.example/cmp",
        "argocd.sidecar.imagePullSecrets[0].name=regcred",
        "argocd.sidecar.resources.limits.memory=2Gi",
        "argocd.sidecar.securityContext.runAsUser=999",
    )
    assert cms["dg-dyn-gitops-cmp-plugin"]["data"]["plugin.yaml"] == plugin.plugin_yaml()
    patches = {k: yaml.safe_load(v) for k, v in cms["dg-dyn-gitops-argocd-patches"]["data"].items()}
    assert set(patches) == {
        "argocd-repo-server.yaml",
        "argocd-cm.yaml",
        "argocd-cmd-params-cm.yaml",
    }
    kustomize = ARGOCD / "kustomize"
    for name in ("argocd-cm.yaml", "argocd-cmd-params-cm.yaml"):
        assert patches[name]["data"] == yaml.safe_load((kustomize / name).read_text())["data"]
    pod = patches["argocd-repo-server.yaml"]["spec"]["template"]["spec"]
    assert pod["imagePullSecrets"] == [{"name": "regcred"}]
    (sidecar,) = pod["containers"]
    documented = yaml.safe_load((kustomize / "repo-server-sidecar.yaml").read_text())
    (doc_sidecar,) = documented["spec"]["template"]["spec"]["containers"]
    chart_version = yaml.safe_load((CHART / "Chart.yaml").read_text())["appVersion"]
    assert sidecar["image"] == f"registry.example/cmp:{chart_version}"
    for key in ("name", "command", "env"):
        assert sidecar[key] == doc_sidecar[key], key
    assert sidecar["resources"]["limits"]["memory"] == "2Gi"
    assert sidecar["securityContext"]["readOnlyRootFilesystem"] is True
    assert sidecar["securityContext"]["runAsUser"] == 999
    mounts = {m["mountPath"]: m for m in sidecar["volumeMounts"]}
    assert mounts["/home/argocd/cmp-server/config/plugin.yaml"] == {
        "name": "dyn-gitops-plugin",
        "mountPath": "/home/argocd/cmp-server/config/plugin.yaml",
        "subPath": "plugin.yaml",
    }
    assert {m["mountPath"] for m in doc_sidecar["volumeMounts"]} < set(mounts)
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes["dyn-gitops-plugin"]["configMap"]["name"] == "dg-dyn-gitops-cmp-plugin"


def test_values_schema_covers_every_value() -> None:
    """values.schema.json stays in sync with values.yaml: every value (the argocd ones too)
    is declared, objects are closed (additionalProperties false) except free-form ones."""
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    schema = json.loads((CHART / "values.schema.json").read_text())

    def walk(value: Any, node: dict[str, Any], where: str) -> None:
        if not isinstance(value, dict) or node.get("type") != "object" or "properties" not in node:
            return
        assert node.get("additionalProperties") is False, where
        for key, sub in value.items():
            assert key in node["properties"], f"{where}.{key} is not in values.schema.json"
            walk(sub, node["properties"][key], f"{where}.{key}")

    walk(values, schema, "values")


@pytest.mark.parametrize(
    "bad",
    [
        ["argocd.enabled=yes"],
        ["argocd.namespace=Not_A_Namespace"],
        ["argocd.sidecar.image.repository="],
        ["argocd.sidecar.execTimeout=forever"],
        ["argocd.sidecar.typo=1"],
        ["argocd.repoServerTimeoutSeconds=0"],
    ],
)
def test_bad_argocd_values_are_refused(helm: Path, bad: list[str]) -> None:
    with pytest.raises(subprocess.CalledProcessError):
        helm_template(helm, CHART, *bad)


@pytest.mark.realk8s
def test_helm_install_with_the_argocd_side_into_the_api_server(
    helm: Path, control_plane: Any, kube: Any, namespace: str
) -> None:
    """``helm install`` (server-side dry run, then for real) with the Argo CD side into the
    test API server, then the NOTES' patches applied to stand-ins of Argo CD's objects (as
    in manifests/install.yaml): the repo-server pod gets the sidecar beside its own
    container, mounting plugin.yaml from the CMP ConfigMap; argocd-cm keeps its own keys
    and gains the health checks and ignoreDifferences."""
    import uuid

    from dyn_gitops_operator.kube import Kube
    from kubernetes import client as k8s

    k = Kube(kube)
    argo = namespace
    release_ns = f"ops-{uuid.uuid4().hex[:8]}"
    k8s.CoreV1Api(kube).create_namespace({"metadata": {"name": release_ns}})
    standin = REPO / "tests" / "data" / "argocd" / "install-standin" / "base.yaml"
    for obj in yaml.safe_load_all(standin.read_text()):
        if not obj:
            continue
        api = "/apis/apps/v1" if obj["kind"] == "Deployment" else "/api/v1"
        plural = "deployments" if obj["kind"] == "Deployment" else "configmaps"
        k.request("POST", f"{api}/namespaces/{argo}/{plural}", None, obj)
    release = f"argo-{uuid.uuid4().hex[:6]}"  # cluster-scoped RBAC is named by release
    base = [
        str(helm),
        "install",
        release,
        str(CHART),
        "--namespace",
        release_ns,
        "--kubeconfig",
        str(control_plane.kubeconfig),
        "--skip-crds",
        "--set",
        "argocd.enabled=true",
        "--set",
        f"argocd.namespace={argo}",
    ]
    dry = subprocess.run([*base, "--dry-run=server"], capture_output=True, text=True, timeout=120)
    assert dry.returncode == 0, dry.stderr
    assert "STATUS: pending-install" in dry.stdout
    real = subprocess.run(base, capture_output=True, text=True, timeout=120)
    assert real.returncode == 0, real.stderr
    assert "patch deployment argocd-repo-server --type strategic" in real.stdout
    assert "curl" in real.stdout and "&" in real.stdout  # port-forward in the background

    patches = k.request(
        "GET", f"/api/v1/namespaces/{argo}/configmaps/{release}-dyn-gitops-argocd-patches"
    )
    data = patches["data"]
    strategic = "application/strategic-merge-patch+json"
    merge = "application/merge-patch+json"
    for path, key, kind in (
        (
            f"/apis/apps/v1/namespaces/{argo}/deployments/argocd-repo-server",
            "argocd-repo-server",
            strategic,
        ),
        (f"/api/v1/namespaces/{argo}/configmaps/argocd-cm", "argocd-cm", merge),
        (
            f"/api/v1/namespaces/{argo}/configmaps/argocd-cmd-params-cm",
            "argocd-cmd-params-cm",
            merge,
        ),
    ):
        k.request("PATCH", path, None, yaml.safe_load(data[f"{key}.yaml"]), kind)

    repo = k.request("GET", f"/apis/apps/v1/namespaces/{argo}/deployments/argocd-repo-server")
    pod = repo["spec"]["template"]["spec"]
    assert sorted(c["name"] for c in pod["containers"]) == ["argocd-repo-server", "dyn-gitops"]
    assert {v["name"] for v in pod["volumes"]} >= {
        "tmp",
        "var-files",
        "plugins",
        "dyn-gitops-plugin",
        "dyn-gitops-tmp",
    }
    plugin_cm = {v["name"]: v for v in pod["volumes"]}["dyn-gitops-plugin"]["configMap"]["name"]
    cmp = k.request("GET", f"/api/v1/namespaces/{argo}/configmaps/{plugin_cm}")
    assert yaml.safe_load(cmp["data"]["plugin.yaml"])["kind"] == "ConfigManagementPlugin"
    cm = k.request("GET", f"/api/v1/namespaces/{argo}/configmaps/argocd-cm")["data"]
    assert cm["application.instanceLabelKey"] == "argocd.argoproj.io/instance"  # kept
    assert "resource.customizations.health.nvidia.com_DynamoGraphDeployment" in cm
    assert (
        "dyn-gitops-controller" in cm["resource.customizations.ignoreDifferences.apps_Deployment"]
    )
