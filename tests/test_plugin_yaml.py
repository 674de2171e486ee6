"""plugin.yaml against the settings registry, and the install material that ships it.

plugin.yaml (and the discovery variant) must be exactly what ``dyn-gitops cmp plugin-yaml``
prints from the registry: when a setting is added or its help or default changes, this
fails until the file is regenerated. The sidecar's install material (Dockerfile, Helm
values, kustomize patch) is checked for the fields Argo CD's sidecar contract needs, and
rendered with the real helm and kustomize when tools/test-bins/build.sh has built them.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import yaml
from support.binaries import need_binaries

from dyn_gitops import __version__
from dyn_gitops.argocd import plugin
from dyn_gitops.settings import REGISTRY

REPO = Path(__file__).resolve().parent.parent
ARGOCD = REPO / "deploy" / "argocd"
DATA = Path(__file__).resolve().parent / "data" / "argocd"
REGENERATE = "regenerate: dyn-gitops cmp plugin-yaml > plugin.yaml"


def _binary(name: str) -> Path:
    """A binary from tools/test-bins/build.sh; under CI a missing one fails, else skips."""
    return need_binaries(name)[name]


# --- plugin.yaml --------------------------------------------------------------------
def test_plugin_yaml_is_generated_from_the_registry() -> None:
    assert (REPO / "plugin.yaml").read_text() == plugin.plugin_yaml(), REGENERATE


def test_discovery_variant_is_generated_from_the_registry() -> None:
    assert (ARGOCD / "plugin-discovery.yaml").read_text() == plugin.plugin_yaml(discovery=True), (
        "regenerate: dyn-gitops cmp plugin-yaml --discovery > deploy/argocd/plugin-discovery.yaml"
    )


def test_plugin_yaml_contract() -> None:
    doc = yaml.safe_load((REPO / "plugin.yaml").read_text())
    assert doc["apiVersion"] == "argoproj.io/v1alpha1"
    assert doc["kind"] == "ConfigManagementPlugin"  # validated by argocd-cmp-server
    assert doc["metadata"]["name"] == "dyn-gitops"
    assert doc["spec"]["version"] == __version__  # an upgrade changes the cache key
    assert doc["spec"]["generate"]["command"] == ["dyn-gitops", "cmp", "generate"]
    assert "discover" not in doc["spec"]  # selected by name: no second tar stream
    assert "init" not in doc["spec"]  # one process per generation, not two
    assert not doc["spec"].get("preserveFileMode") and not doc["spec"].get("provideGitCreds")


def test_announcements_follow_the_registry() -> None:
    static = yaml.safe_load((REPO / "plugin.yaml").read_text())["spec"]["parameters"]["static"]
    assert [a["name"] for a in static] == [s.cmp_parameter for s in REGISTRY]
    for spec, ann in zip(REGISTRY, static, strict=True):
        assert spec.help in ann["tooltip"]
        assert ann["collectionType"] == "string"  # every setting is one value
        assert ann["itemType"] == {bool: "boolean", int: "number"}.get(spec.kind, "string")
        if spec.name == "namespace":  # default: the Application's destination namespace
            assert "string" not in ann
        else:
            assert spec.parse(ann["string"]) == spec.default, spec.name
        for choice in spec.choices or ():
            assert choice in ann["tooltip"]


def test_cmp_parameters_prints_the_same_announcements(cli: Any) -> None:
    res = cli("cmp", "parameters")
    assert res.code == 0, res.stderr
    static = yaml.safe_load((REPO / "plugin.yaml").read_text())["spec"]["parameters"]["static"]
    assert json.loads(res.stdout) == static


def test_cmp_plugin_yaml_command_prints_the_file(cli: Any) -> None:
    res = cli("cmp", "plugin-yaml")
    assert res.code == 0 and res.stdout == (REPO / "plugin.yaml").read_text()


# --- the sidecar image --------------------------------------------------------------
def test_dockerfile_follows_argo_cd_sidecar_conventions() -> None:
    text = (REPO / "Dockerfile").read_text()
    stage = text[text.index("AS cmp\n") : text.index("AS controller\n")]  # the sidecar target
    steps = [line for line in stage.splitlines() if line and not line.startswith("#")]
    assert f"COPY plugin.yaml {plugin.CONFIG_PATH}" in steps
    # argocd-cmp-server (repo-server copies it in) under the image's init (docs/images.md)
    assert 'ENTRYPOINT ["/opt/dyn-gitops/bin/dyn-gitops", "cmp", "init", "--"]' in steps
    assert 'CMD ["/var/run/argocd/argocd-cmp-server"]' in steps
    assert steps.index("USER 999:999") > max(i for i, s in enumerate(steps) if s.startswith("RUN"))
    assert "dyn-gitops cmp install-launcher /opt/dyn-gitops/bin/dyn-gitops" in stage
    assert "TMPDIR=/tmp" in text  # the only writable place (read-only root file system)
    assert "--user-group" not in text  # it picks gid 1000: the group is created with gid 999


def test_install_launcher_writes_a_runnable_script(tmp_path: Path, cli: Any) -> None:
    dest = tmp_path / "dyn-gitops"
    res = cli("cmp", "install-launcher", str(dest))
    assert res.code == 0, res.stderr
    assert os.access(dest, os.X_OK)
    first = dest.read_text().splitlines()[0]
    assert first.startswith("#!") and first.endswith(" -IS")  # no site: a fast start
    proc = subprocess.run(
        [str(dest), "--version"], capture_output=True, text=True, timeout=60
    )  # anything but `cmp generate` runs the full CLI
    assert proc.returncode == 0 and __version__ in proc.stdout


# --- install material ---------------------------------------------------------------
def _sidecars() -> dict[str, dict[str, Any]]:
    values = yaml.safe_load((ARGOCD / "helm-values.yaml").read_text())
    patch = yaml.safe_load((ARGOCD / "kustomize" / "repo-server-sidecar.yaml").read_text())
    return {
        "helm": values["repoServer"]["extraContainers"][0],
        "kustomize": patch["spec"]["template"]["spec"]["containers"][0],
    }


def test_helm_and_kustomize_install_the_same_sidecar() -> None:
    sidecars = _sidecars()
    assert sidecars["helm"] == sidecars["kustomize"]


def test_sidecar_fields_argo_cd_needs() -> None:
    """The fields the sidecar contract requires (gitops-contracts.md 1.2)."""
    side = _sidecars()["helm"]
    # argocd-cmp-server under the image's init (its ENTRYPOINT + CMD): it stops on SIGTERM
    init = ["/opt/dyn-gitops/bin/dyn-gitops", "cmp", "init", "--"]
    assert side["command"] == [*init, "/var/run/argocd/argocd-cmp-server"]
    dockerfile = (REPO / "Dockerfile").read_text().split("FROM runtime AS cmp", 1)[1]
    entry = json.loads(dockerfile.split("\nENTRYPOINT ", 1)[1].split("\n", 1)[0])
    cmd = json.loads(dockerfile.split("\nCMD ", 1)[1].split("\n", 1)[0])
    assert side["command"] == entry + cmd
    assert side["image"].endswith(f":{__version__}")  # image and plugin.yaml move together
    sc = side["securityContext"]
    assert sc["runAsNonRoot"] is True and sc["runAsUser"] == 999
    assert sc["readOnlyRootFilesystem"] is True and sc["allowPrivilegeEscalation"] is False
    mounts = {m["mountPath"]: m["name"] for m in side["volumeMounts"]}
    assert mounts["/var/run/argocd"] == "var-files"
    assert mounts["/home/argocd/cmp-server/plugins"] == "plugins"
    assert mounts["/tmp"] not in ("tmp", "var-files", "plugins")  # never repo-server's /tmp


def test_helm_values_set_the_chart_fields() -> None:
    """The argo-cd chart's value paths (gitops-contracts.md 1.2), checked field by field."""
    values = yaml.safe_load((ARGOCD / "helm-values.yaml").read_text())
    assert set(values) == {"repoServer", "configs"}
    assert set(values["repoServer"]) == {"extraContainers", "volumes"}
    side = values["repoServer"]["extraContainers"][0]
    tmp = next(m["name"] for m in side["volumeMounts"] if m["mountPath"] == "/tmp")
    # the chart defines var-files and plugins; the sidecar's own /tmp must come from us
    assert {v["name"] for v in values["repoServer"]["volumes"]} == {tmp}
    assert set(values["configs"]) == {"cm", "params"}
    assert all(isinstance(v, str) for v in values["configs"]["cm"].values())
    params = values["configs"]["params"]
    assert params["reposerver.plugin.tar.exclusions"] == ".git/*"
    assert all(isinstance(v, str) for v in params.values())  # ConfigMap data are strings
    assert "{{" not in (ARGOCD / "helm-values.yaml").read_text()  # extraContainers is tpl'd


def test_helm_values_render_with_real_helm(tmp_path: Path) -> None:
    """Real helm renders the snippet through a stand-in with the chart's value paths."""
    helm = _binary("helm")
    env = {
        **os.environ,
        "HELM_CACHE_HOME": str(tmp_path / "c"),
        "HELM_CONFIG_HOME": str(tmp_path / "f"),
        "HELM_DATA_HOME": str(tmp_path / "d"),
    }
    proc = subprocess.run(
        [
            str(helm),
            "template",
            "argocd",
            str(DATA / "argo-cd-standin"),
            "-f",
            str(ARGOCD / "helm-values.yaml"),
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    docs = {d["metadata"]["name"]: d for d in yaml.safe_load_all(proc.stdout) if d}
    pod = docs["argocd-repo-server"]["spec"]["template"]["spec"]
    assert [c["name"] for c in pod["containers"]] == ["repo-server", "dyn-gitops"]
    assert pod["containers"][1] == _sidecars()["helm"]
    volumes = {v["name"] for v in pod["volumes"]}
    for mount in pod["containers"][1]["volumeMounts"]:
        assert mount["name"] in volumes
    values = yaml.safe_load((ARGOCD / "helm-values.yaml").read_text())
    assert docs["argocd-cm"]["data"] == values["configs"]["cm"]
    assert docs["argocd-cmd-params-cm"]["data"] == values["configs"]["params"]


def test_kustomize_patch_builds_with_real_kustomize(tmp_path: Path) -> None:
    """The plain-install overlay, built by real kustomize over a stand-in of install.yaml."""
    kustomize = _binary("kustomize")
    overlay = tmp_path / "overlay"
    shutil.copytree(ARGOCD / "kustomize", overlay)
    shutil.copy(DATA / "install-standin" / "base.yaml", overlay / "base.yaml")
    k = (overlay / "kustomization.yaml").read_text()
    k, n = re.subn(
        r"- https://raw\.githubusercontent\.com/argoproj/argo-cd/\S+/install\.yaml",
        "- base.yaml",
        k,
    )
    assert n == 1
    (overlay / "kustomization.yaml").write_text(k)
    proc = subprocess.run(
        [str(kustomize), "build", str(overlay)], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    docs = {d["metadata"]["name"]: d for d in yaml.safe_load_all(proc.stdout) if d}
    pod = docs["argocd-repo-server"]["spec"]["template"]["spec"]
    containers = {c["name"]: c for c in pod["containers"]}  # a strategic merge prepends
    assert set(containers) == {"argocd-repo-server", "dyn-gitops"}
    assert containers["dyn-gitops"] == _sidecars()["kustomize"]
    assert {v["name"] for v in pod["volumes"]} == {"tmp", "var-files", "plugins", "dyn-gitops-tmp"}
    cm = docs["argocd-cm"]["data"]
    assert cm["application.instanceLabelKey"] == "argocd.argoproj.io/instance"  # kept
    assert "resource.customizations.health.nvidia.com_DynamoGraphDeployment" in cm
    params = docs["argocd-cmd-params-cm"]["data"]
    assert params["reposerver.plugin.tar.exclusions"] == ".git/*"
    assert all(d["metadata"].get("namespace") == "argocd" for d in docs.values())
