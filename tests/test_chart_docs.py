"""The chart as an adopter meets it, with the real helm: a README generated from described
values (and a test that fails when it is stale), ``image.digest``, a ServiceMonitor only
where its API is served, and NOTES that list every ignoreDifference docs/argocd.md lists."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from dyn_gitops_operator.testing import helm_template

from dyn_gitops.keys import CONTROLLER_FIELD_MANAGER

ROOT = Path(__file__).resolve().parent.parent
CHART = ROOT / "charts" / "dyn-gitops"
GENERATOR = ROOT / "tools" / "chart_readme.py"
MONITORING_API = ["--api-versions", "monitoring.coreos.com/v1"]
DIGEST = "sha256:" + "0123456789abcdef" * 4


@pytest.fixture(scope="module")
def helm(test_binaries: Any) -> Path:
    return Path(test_binaries("helm")["helm"])


def kinds(objs: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [o for o in objs if o["kind"] == kind]


def notes(helm: Path, tmp: Path, *sets: str) -> str:
    """The NOTES of ``helm install --dry-run=client`` (no cluster asked)."""
    cmd = [str(helm), "install", "dg", str(CHART), "--dry-run=client", "--namespace", "ops"]
    for s in sets:
        cmd += ["--set", s]
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp), "KUBECONFIG": str(tmp / "none")}
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, env=env)
    return out.stdout.split("\nNOTES:\n", 1)[1]


def generator(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(GENERATOR), *args], capture_output=True, text=True, cwd=ROOT
    )


# ---------------------------------------------------------------- README, schema


def schema_properties(node: dict[str, Any], path: str = "") -> list[tuple[str, dict[str, Any]]]:
    out = []
    for key, sub in (node.get("properties") or {}).items():
        where = f"{path}.{key}" if path else key
        out += [(where, sub), *schema_properties(sub, where)]
        if isinstance(sub.get("items"), dict):
            out += schema_properties(sub["items"], where + "[]")
    return out


def test_every_schema_property_is_described() -> None:
    schema = json.loads((CHART / "values.schema.json").read_text())
    props = schema_properties(schema)
    bare = [k for k, sub in props if not str(sub.get("description", "")).strip()]
    assert not bare, f"{len(bare)} of {len(props)} properties without a description: {bare}"


def test_readme_is_generated_and_current() -> None:
    """README.md is what tools/chart_readme.py writes: every value's row, its default."""
    proc = generator("--check")
    assert proc.returncode == 0, proc.stderr
    readme = (CHART / "README.md").read_text()
    schema = json.loads((CHART / "values.schema.json").read_text())
    for key, sub in schema_properties(schema):
        assert f"| `{key}` |" in readme, key
        assert " ".join(sub["description"].split()) in readme, key
    assert "| `controller.workers` | integer | `2` |" in readme


def test_a_stale_readme_fails_the_check(tmp_path: Path) -> None:
    chart = tmp_path / "dyn-gitops"
    shutil.copytree(CHART, chart)
    schema = json.loads((chart / "values.schema.json").read_text())
    schema["properties"]["nameOverride"]["description"] = "changed, README not regenerated"
    (chart / "values.schema.json").write_text(json.dumps(schema))
    proc = generator("--chart", str(chart), "--check")
    assert proc.returncode == 1 and "README.md is stale" in proc.stderr, proc.stderr
    del schema["properties"]["nameOverride"]["description"]
    (chart / "values.schema.json").write_text(json.dumps(schema))
    assert generator("--chart", str(chart)).returncode == 1  # written, but undescribed
    proc = generator("--chart", str(chart), "--check")
    assert proc.returncode == 1 and "nameOverride: no description" in proc.stderr


# ---------------------------------------------------------------- image.digest


def images(objs: list[dict[str, Any]]) -> tuple[str, str]:
    """The controller's image and the Argo CD sidecar's (from its patch)."""
    (dep,) = kinds(objs, "Deployment")
    patches = {c["metadata"]["name"]: c for c in kinds(objs, "ConfigMap")}[
        "dg-dyn-gitops-argocd-patches"
    ]
    sidecar = yaml.safe_load(patches["data"]["argocd-repo-server.yaml"])
    (ctl,) = dep["spec"]["template"]["spec"]["containers"]
    (cmp,) = sidecar["spec"]["template"]["spec"]["containers"]
    return ctl["image"], cmp["image"]


def test_image_digest_wins_over_the_tag(helm: Path) -> None:
    version = yaml.safe_load((CHART / "Chart.yaml").read_text())["appVersion"]
    on = "argocd.enabled=true"
    assert images(helm_template(helm, CHART, on)) == (
        f"ghcr.io/dyn-gitops/dyn-gitops:{version}",
        f"ghcr.io/dyn-gitops/dyn-gitops-cmp:{version}",
    )
    got = images(
        helm_template(
            helm,
            CHART,
            on,
            "image.repository=registry.example.com/dg",
            "image.tag=t1",
            f"image.digest={DIGEST}",
            "argocd.sidecar.image.tag=t2",
            f"argocd.sidecar.image.digest={DIGEST}",
        )
    )
    assert got == (
        f"registry.example.com/dg@{DIGEST}",
        f"ghcr.io/dyn-gitops/dyn-gitops-cmp@{DIGEST}",
    )
    tagged = images(helm_template(helm, CHART, on, "image.tag=t1"))
    assert tagged[0] == "ghcr.io/dyn-gitops/dyn-gitops:t1"


@pytest.mark.parametrize("bad", ["sha256:abc", "md5:" + "0" * 64, DIGEST.upper()])
def test_a_malformed_digest_is_refused(helm: Path, bad: str) -> None:
    with pytest.raises(subprocess.CalledProcessError) as err:
        helm_template(helm, CHART, f"image.digest={bad}")
    assert "/image/digest" in err.value.stderr


# ---------------------------------------------------------------- ServiceMonitor


def test_service_monitor_only_where_its_api_is_served(helm: Path, tmp_path: Path) -> None:
    """Enabled without the Prometheus Operator's CRDs, an install would fail ("no matches
    for kind ServiceMonitor"): nothing is rendered then, and the NOTES say why."""
    on = "metrics.serviceMonitor.enabled=true"
    assert not kinds(helm_template(helm, CHART, on), "ServiceMonitor")
    assert not kinds(helm_template(helm, CHART, extra=MONITORING_API), "ServiceMonitor")
    (sm,) = kinds(helm_template(helm, CHART, on, extra=MONITORING_API), "ServiceMonitor")
    assert sm["apiVersion"] == "monitoring.coreos.com/v1"
    why = "No ServiceMonitor: metrics.serviceMonitor.enabled is true but the API"
    assert why in notes(helm, tmp_path, on)  # (helm install has no --api-versions)
    assert why not in notes(helm, tmp_path)


# ---------------------------------------------------------------- NOTES = docs


def notes_ignore_differences(text: str) -> list[dict[str, Any]]:
    """The indented ``ignoreDifferences:`` block of the NOTES, parsed."""
    m = re.search(r"^( +)ignoreDifferences:\n((?:\1 .*\n)+)", text, re.M)
    assert m, f"no ignoreDifferences in the NOTES:\n{text}"
    return list(yaml.safe_load(m[0])["ignoreDifferences"])


def docs_ignore_differences() -> list[dict[str, Any]]:
    """The ``yaml`` block of docs/argocd.md that lists them (section 4)."""
    text = (ROOT / "docs" / "argocd.md").read_text()
    blocks = [
        yaml.safe_load(b)
        for b in re.findall(r"^```yaml\n(.*?)^```", text, re.M | re.S)
        if b.startswith("ignoreDifferences:")
    ]
    assert len(blocks) == 1, "docs/argocd.md must list the ignoreDifferences in one yaml block"
    return list(blocks[0]["ignoreDifferences"])


def test_notes_list_every_ignore_difference_the_docs_list(helm: Path, tmp_path: Path) -> None:
    listed = notes_ignore_differences(notes(helm, tmp_path))
    app = yaml.safe_load((ROOT / "deploy" / "argocd" / "application.yaml").read_text())
    assert listed == app["spec"]["ignoreDifferences"], "NOTES vs the sample Application"
    assert listed == docs_ignore_differences(), "NOTES vs docs/argocd.md"
    assert {m for e in listed for m in e["managedFieldsManagers"]} == {CONTROLLER_FIELD_MANAGER}
