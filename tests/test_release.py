"""The release pipeline: the version stamped once and spelled one way everywhere; the GitHub
Actions workflow linted by the real actionlint (built by tools/test-bins/build.sh) and doing
what the ecosystem expects; and its steps rehearsed here by tools/release-rehearsal.sh (wheel,
both images pushed to a loopback registry, the chart pushed as OCI and installed from it into
the test API server with a server-side dry-run).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from support import images
from support.binaries import missing_component

from dyn_gitops import __version__

REPO = Path(__file__).resolve().parent.parent
WORKFLOW = REPO / ".github" / "workflows" / "release.yml"
CHECK = REPO / "tools" / "release" / "check_versions.py"
REHEARSAL = REPO / "tools" / "release-rehearsal.sh"


def check_versions(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(CHECK), "--root", str(root), *args], capture_output=True, text=True
    )


# --- one version, one spelling ----------------------------------------------------------------
def test_the_version_agrees_everywhere() -> None:
    proc = check_versions(REPO)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == __version__


def test_a_tag_must_be_the_version_itself() -> None:
    assert check_versions(REPO, "--tag", __version__).returncode == 0
    proc = check_versions(REPO, "--tag", f"v{__version__}")
    assert proc.returncode == 1
    assert f"the Git tag: found 'v{__version__}', expected '{__version__}'" in proc.stderr


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """A copy of the files the checker reads (not a Git checkout: it then reads every file)."""
    root = tmp_path / "tree"
    for rel in (
        "dyn_gitops/__init__.py",
        "pyproject.toml",
        "plugin.yaml",
        "deploy/argocd/plugin-discovery.yaml",
        "deploy/argocd/helm-values.yaml",
        "charts/dyn-gitops/Chart.yaml",
        "charts/helm-plugin/plugin.yaml",
    ):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(REPO / rel, root / rel)
    assert check_versions(root).returncode == 0
    return root


#: {V}: the version; {W}: the version with a "v" (not written out here: the checker reads this file)
@pytest.mark.parametrize(
    ("rel", "old", "new", "message"),
    [
        ("charts/dyn-gitops/Chart.yaml", "version: {V}", "version: 9.9.9",
         "charts/dyn-gitops/Chart.yaml version: found '9.9.9', expected '{V}'"),
        ("charts/dyn-gitops/Chart.yaml", 'appVersion: "{V}"', 'appVersion: "{W}"',
         "charts/dyn-gitops/Chart.yaml appVersion: found '{W}', expected '{V}'"),
        ("plugin.yaml", "  version: {V}", "  version: {W}",
         "plugin.yaml spec.version: found '{W}', expected '{V}'"),
        ("deploy/argocd/helm-values.yaml", "dyn-gitops-cmp:{V}", "dyn-gitops-cmp:9.9.9",
         "image ghcr.io/dyn-gitops/dyn-gitops-cmp:9.9.9: tag '9.9.9', expected '{V}'"),
        ("charts/helm-plugin/plugin.yaml", "version: {V}", "version: 9.9.9",
         "charts/helm-plugin/plugin.yaml version: found '9.9.9', expected '{V}'"),
    ],
)  # fmt: skip
def test_each_disagreement_is_named(tree: Path, rel: str, old: str, new: str, message: str) -> None:
    old, new, message = (x.format(V=__version__, W="v" + __version__) for x in (old, new, message))
    path = tree / rel
    assert old in path.read_text()
    path.write_text(path.read_text().replace(old, new, 1))
    proc = check_versions(tree)
    assert proc.returncode == 1
    assert message in proc.stderr, proc.stderr


def test_the_v_spelling_is_refused_in_any_file(tree: Path) -> None:
    (tree / "docs").mkdir()
    (tree / "docs" / "x.md").write_text(
        f"plugin name dyn-gitops-v{__version__}\nGrove v{__version__}-alpha.1\n"
    )
    proc = check_versions(tree)
    assert proc.returncode == 1
    assert f"docs/x.md:1: spells the version v{__version__}" in proc.stderr
    assert "docs/x.md:2" not in proc.stderr  # another project's pre-release is not ours


# --- the workflow -------------------------------------------------------------------------
def test_the_release_workflow_passes_actionlint(test_binaries: Any) -> None:
    actionlint = test_binaries("actionlint")["actionlint"]
    proc = subprocess.run(
        [str(actionlint), "-no-color", str(WORKFLOW.relative_to(REPO))],
        capture_output=True, text=True, cwd=REPO,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_actionlint_finds_a_broken_workflow(test_binaries: Any, tmp_path: Path) -> None:
    """The lint can fail: an undefined job output and a bad expression are reported."""
    actionlint = test_binaries("actionlint")["actionlint"]
    bad = WORKFLOW.read_text().replace(
        "needs.version.outputs.version", "needs.version.outputs.vresion"
    )
    (tmp_path / ".github" / "workflows").mkdir(parents=True)
    (tmp_path / ".github" / "workflows" / "release.yml").write_text(bad)
    proc = subprocess.run(
        [str(actionlint), "-no-color", ".github/workflows/release.yml"],
        capture_output=True, text=True, cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 1 and "vresion" in proc.stdout


def _steps(job: dict[str, Any]) -> list[dict[str, Any]]:
    return list(job.get("steps", []))


def _uses(job: dict[str, Any], action: str) -> list[dict[str, Any]]:
    return [s for s in _steps(job) if str(s.get("uses", "")).startswith(action + "@")]


def test_the_workflow_does_what_a_release_needs() -> None:
    wf = yaml.safe_load(WORKFLOW.read_text())
    on = wf[True]  # YAML 1.1 reads the key `on` as true
    tags = on["push"]["tags"]
    assert tags and all(not t.startswith("v") for t in tags)  # the tag is the version: 0.1.0
    assert wf["permissions"] == {}  # each job asks for what it needs
    jobs = wf["jobs"]
    run_all = "\n".join(str(s.get("run", "")) for j in jobs.values() for s in _steps(j))
    assert "tools/release/check_versions.py --tag" in run_all
    assert "scripts/test" in run_all  # build and test before anything is published
    assert "test" in jobs["wheel"]["needs"] and "test" in jobs["images"]["needs"]
    # PyPI trusted publishing: an OIDC token, no stored password
    assert jobs["pypi"]["permissions"] == {"id-token": "write"}
    publish = _uses(jobs["pypi"], "pypa/gh-action-pypi-publish")
    assert publish and "password" not in (publish[0].get("with") or {})
    # multi-arch images with buildx, both targets, tagged with the version only
    build = _uses(jobs["images"], "docker/build-push-action")[0]["with"]
    assert set(build["platforms"].split(",")) == {"linux/amd64", "linux/arm64"}
    assert build["tags"].endswith(":${{ needs.version.outputs.version }}")
    assert {m["target"] for m in jobs["images"]["strategy"]["matrix"]["include"]} == {
        "cmp",
        "controller",
    }
    assert build["sbom"] is True
    # cosign keyless: an OIDC token, sign and attest the SBOM by digest
    assert jobs["images"]["permissions"]["id-token"] == "write"
    assert _uses(jobs["images"], "sigstore/cosign-installer")
    assert "cosign sign --yes" in run_all and "cosign attest --yes --type spdxjson" in run_all
    # the chart as an OCI artifact, signed too
    assert 'helm push "dist/dyn-gitops-$VERSION.tgz" "$CHART_REPOSITORY"' in run_all
    assert wf["env"]["CHART_REPOSITORY"].startswith("oci://")


def test_the_release_and_image_scripts_pass_shellcheck() -> None:
    """shellcheck (installed by tools/images/deps.sh; actionlint also runs it on the workflow's
    `run:` scripts when it is on PATH)."""
    shellcheck = shutil.which("shellcheck")
    if shellcheck is None:
        missing_component("shellcheck is not installed: run tools/images/deps.sh as root")
    scripts = [REHEARSAL, *sorted((REPO / "tools" / "images").glob("*.sh"))]
    proc = subprocess.run([shellcheck, *map(str, scripts)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_the_rehearsal_mirrors_the_workflow() -> None:
    text = REHEARSAL.read_text()
    for step in ("tools/release/check_versions.py", "pip wheel", "tools/images/build.sh",
                 "docker-registry serve", "podman push", '"$HELM" package', '"$HELM" push',
                 '"$HELM" install', "--dry-run=server"):  # fmt: skip
        assert step in text, step


# --- the rehearsal ----------------------------------------------------------------------------
def test_release_rehearsal(
    test_binaries: Any, kube: Any, control_plane: Any, tmp_path: Path
) -> None:
    helm = test_binaries("helm")["helm"]
    why = images.deps_missing()
    if why:
        missing_component(f"the image tools are missing ({why}): run tools/images/deps.sh as root")
    proc = subprocess.run(
        ["bash", str(REHEARSAL), "--kubeconfig", str(control_plane.kubeconfig),
         "--workdir", str(tmp_path / "w")],
        capture_output=True, text=True, timeout=3600,
        env={**images.env(), "HELM": str(helm), "PYTHON": sys.executable},
    )  # fmt: skip
    print("\n" + proc.stdout)
    assert proc.returncode == 0, proc.stdout + proc.stderr[-6000:]
    lines = proc.stdout.splitlines()
    for step in ("version", "wheel", "images", "registry", "push", "chart", "install"):
        assert any(line.startswith(f"rehearsal: {step} ") for line in lines), step
    assert lines[-1].startswith(f"rehearsal: ok {__version__} ")
