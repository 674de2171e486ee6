"""The rendered samples pass the real kubeconform (strict) offline, with local schemas:
Kubernetes' (kubernetes-validate's JSON schemas, made loadable: see ``kubernetes_schemas``)
and ours (``dyn-gitops crds --json-schema-dir``). This is also the recipe users can run in
CI (docs/workflows.md).
"""

from __future__ import annotations

import json
import random
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from support.cli import run_cli
from support.paths import SAMPLES
from support.schemas import K8S_VERSION
from support.yaml_cases import TRICKY

from dyn_gitops.yamlout import dump_document

pytestmark = pytest.mark.realk8s

#: third-party kinds with no schema here (the API-server dry-run tests cover them)
THIRD_PARTY = ("LeaderWorkerSet", "PodGroup", "PodCliqueSet", "InferencePool", "VirtualService")
BUILTIN_TEMPLATE = "{{ .ResourceKind }}{{ .KindSuffix }}.json"
OURS_TEMPLATE = "{{ .Group }}/{{ .ResourceKind }}_{{ .ResourceAPIVersion }}.json"


def kubernetes_schemas(target: Path) -> Path:
    """kubernetes-validate's strict schemas, rewritten so kubeconform can load them: each
    file's ``$id`` (https://kubernetes.io/...) would make its ``$ref``s resolve to the web,
    and the refs point at ``/api/_definitions.json``; without the id and with the refs
    relative, they resolve to the ``_definitions.json`` beside them."""
    import kubernetes_validate

    source = (
        Path(kubernetes_validate.__file__).parent
        / "kubernetes-json-schema"
        / f"v{K8S_VERSION}-local-strict"
    )
    target.mkdir(parents=True, exist_ok=True)
    for path in source.glob("*.json"):
        doc = json.loads(path.read_text())
        if isinstance(doc, dict):
            doc.pop("$id", None)
        text = json.dumps(doc).replace('"/api/_definitions.json#', '"_definitions.json#')
        (target / path.name).write_text(text)
    return target


@pytest.fixture(scope="module")
def schemas(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("schemas")
    builtin = kubernetes_schemas(root / "kubernetes")
    res = run_cli("crds", "--json-schema-dir", str(root / "dynamo"))
    assert res.code == 0, res.stderr
    return builtin, root / "dynamo"


def kubeconform(binary: Path, schemas: tuple[Path, Path], files: list[Path]) -> Any:
    builtin, ours = schemas
    proc = subprocess.run(
        [
            str(binary),
            "-strict",
            "-summary",
            "-output",
            "json",
            "-schema-location",
            str(builtin / BUILTIN_TEMPLATE),
            "-schema-location",
            str(ours / OURS_TEMPLATE),
            "-skip",
            ",".join(THIRD_PARTY),
            *map(str, files),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    return proc.returncode, json.loads(proc.stdout)


@pytest.mark.parametrize("sample", sorted(p.parent.name for p in SAMPLES.glob("*/expected.yaml")))
def test_samples_pass_kubeconform(
    test_binaries: Any, schemas: tuple[Path, Path], sample: str
) -> None:
    binary = test_binaries("kubeconform")["kubeconform"]
    path = SAMPLES / sample / "expected.yaml"
    code, out = kubeconform(binary, schemas, [path])
    problems = [r for r in out["resources"] if r["status"] not in ("statusValid", "statusSkipped")]
    assert code == 0 and not problems, json.dumps(problems, indent=1)
    objs = [d for d in yaml.safe_load_all(path.read_text()) if d]
    skipped = sum(o["kind"] in THIRD_PARTY for o in objs)
    summary = out["summary"]
    assert (summary["valid"], summary["skipped"]) == (len(objs) - skipped, skipped)
    assert summary["valid"] > 0


def test_kubeconform_catches_bad_objects(
    test_binaries: Any, schemas: tuple[Path, Path], tmp_path: Path
) -> None:
    binary = test_binaries("kubeconform")["kubeconform"]
    objs = [
        d for d in yaml.safe_load_all((SAMPLES / "vllm-agg" / "expected.yaml").read_text()) if d
    ]
    dep = next(o for o in objs if o["kind"] == "Deployment")
    dep["spec"]["template"]["spec"]["containers"][0]["imagePullPolicy2"] = "Always"
    dgd = next(o for o in objs if o["kind"] == "DynamoGraphDeployment")
    dgd["spec"]["components"][0]["replicas"] = "two"  # emitted in v1beta1
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump_all([dep, dgd]))
    code, out = kubeconform(binary, schemas, [bad])
    assert code != 0
    invalid = {r["kind"] for r in out["resources"] if r["status"] == "statusInvalid"}
    assert invalid == {"Deployment", "DynamoGraphDeployment"}, out["resources"]


def _go_numberish() -> list[str]:
    """Strings made of what Go's YAML reader takes for numbers, dates and booleans."""
    rnd = random.Random(11)
    alphabet = "0123456789" * 3 + "._-+eExXoObB: T"
    return [
        "".join(rnd.choice(alphabet) for _ in range(rnd.randint(1, 10))) for _ in range(3000)
    ] + [f"{rnd.randrange(16**8):08x}" for _ in range(500)]


def test_go_reads_every_string_we_write_as_a_string(
    test_binaries: Any, schemas: tuple[Path, Path], tmp_path: Path
) -> None:
    """kubeconform reads YAML with Go (sigs.k8s.io/yaml), as kubectl, Argo CD and Flux do;
    a ConfigMap's data values must be strings, so any value we wrote plain that Go reads
    as a number, boolean, null or date is reported invalid. (A worker hash 06416192 was
    written plain and Flux's server-side apply refused it as a number.)"""
    binary = test_binaries("kubeconform")["kubeconform"]
    values = TRICKY + _go_numberish()
    data = {f"k{i}": v for i, v in enumerate(values)}
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": data}
    path = tmp_path / "cm.yaml"
    path.write_text(dump_document(cm))
    assert yaml.safe_load(path.read_text()) == cm
    code, out = kubeconform(binary, schemas, [path])
    assert code == 0 and out["summary"]["valid"] == 1, json.dumps(out["resources"])[:3000]


def test_a_worker_hash_of_digits_with_a_leading_zero_reaches_go_as_a_string(
    test_binaries: Any, schemas: tuple[Path, Path], tmp_path: Path
) -> None:
    """The incident above, end to end: in namespace ns-400 the vllm-agg decode worker's
    hash is 01053898 (checked here, so a hashing change cannot make this test vacuous);
    the rendered stream passes kubeconform, label and env value read as strings."""
    res = run_cli("render", str(SAMPLES / "vllm-agg" / "input"), "--namespace", "ns-400")
    assert res.code == 0, res.stderr
    assert "nvidia.com/dynamo-worker-hash: '01053898'" in res.stdout
    path = tmp_path / "out.yaml"
    path.write_text(res.stdout)
    code, out = kubeconform(test_binaries("kubeconform")["kubeconform"], schemas, [path])
    problems = [r for r in out["resources"] if r["status"] not in ("statusValid", "statusSkipped")]
    assert code == 0 and not problems, json.dumps(problems, indent=1)
