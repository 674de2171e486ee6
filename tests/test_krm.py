"""``dyn-gitops krm``: the KRM function (ResourceList in, ResourceList out).

The contract is checked on the real entry point, and end to end through a real
``kustomize build --enable-alpha-plugins --enable-exec`` of ``samples/kustomize-krm``; a build
that skips the function (kustomize without ``--enable-exec``, ``kubectl kustomize``) fails on
the sample's guard instead of passing the raw DGD through.
"""

from __future__ import annotations

import copy
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from support.cli import run_cli
from support.inputs import resource_list
from support.paths import REPO, SAMPLES
from support.rendering import render

TREE = REPO / "tests" / "data" / "workflows" / "tree"
SAMPLE = SAMPLES / "kustomize-krm"
OURS = ("dyn-gitops.io/source-path",)


def load(name: str) -> dict[str, Any]:
    return yaml.safe_load((TREE / name).read_text())  # type: ignore[no-any-return]


def annotate(obj: dict[str, Any], path: str, index: int) -> dict[str, Any]:
    obj = copy.deepcopy(obj)
    obj["metadata"]["annotations"] = {
        "config.kubernetes.io/path": path,
        "config.kubernetes.io/index": str(index),
        "internal.config.kubernetes.io/path": path,
        "internal.config.kubernetes.io/index": str(index),
        "config.k8s.io/id": "7",
    }
    return obj


def krm(stdin: str, *args: str) -> tuple[Any, dict[str, Any] | None]:
    res = run_cli("krm", *args, stdin=stdin)
    return res, (yaml.safe_load(res.stdout) if res.stdout else None)


def without(objs: list[dict[str, Any]], keys: tuple[str, ...]) -> list[dict[str, Any]]:
    out = copy.deepcopy(objs)
    for o in out:
        for k in keys:
            (o["metadata"].get("annotations") or {}).pop(k, None)
    return out


CONFIG = {
    "apiVersion": "v1",
    "kind": "ConfigMap",
    "metadata": {"name": "fn"},
    "data": {"namespace": "demo"},
}


# ---------------------------------------------------------------------------- contract
def test_dgds_are_expanded_and_other_items_kept_untouched() -> None:
    dgd = annotate(load("agg.yaml"), "apps/agg.yaml", 0)
    cm = annotate(load("profile-data.yaml"), "apps/data.yaml", 0)
    res, out = krm(resource_list([dgd, cm], CONFIG))
    assert res.code == 0, res.stderr
    assert out is not None
    assert out["apiVersion"] == "config.kubernetes.io/v1" and out["kind"] == "ResourceList"
    items = out["items"]
    assert cm in items  # pass-through, orchestrator annotations and all
    # the children are exactly what `dyn-gitops render` makes of the same DGD
    expected = render(TREE / "agg.yaml", namespace="demo")
    children = [i for i in items if i["kind"] != "DynamoGraphDeployment" and i != cm]
    assert without(children, OURS) == without(
        [o for o in expected if o["kind"] != "DynamoGraphDeployment"], OURS
    )
    assert {c["metadata"]["annotations"]["dyn-gitops.io/source-path"] for c in children} == {
        "apps/agg.yaml"
    }
    # the source DGD is emitted (default setting) with the orchestrator's annotations kept
    source = [i for i in items if i["kind"] == "DynamoGraphDeployment"]
    assert len(source) == 1
    # in v1beta1, converted as the operator's webhook stores it (setting source-api-version)
    assert source[0]["apiVersion"] == "nvidia.com/v1beta1" and "components" in source[0]["spec"]
    assert source[0]["metadata"]["annotations"]["config.k8s.io/id"] == "7"
    assert out["results"][0]["severity"] == "info"


def test_function_config_carries_settings() -> None:
    dgd = load("agg.yaml")
    custom = {
        "apiVersion": "dyn-gitops.io/v1alpha1",
        "kind": "ExpandDynamoGraphs",
        "metadata": {"name": "fn"},
        "spec": {"namespace": "team-a", "emit-source": False},
    }
    res, out = krm(resource_list([dgd], custom))
    assert res.code == 0, res.stderr
    assert out is not None
    assert {i["metadata"]["namespace"] for i in out["items"]} == {"team-a"}
    assert "DynamoGraphDeployment" not in {i["kind"] for i in out["items"]}
    # flags still win over the functionConfig
    res, out = krm(resource_list([dgd], custom), "--namespace", "team-b")
    assert out is not None and {i["metadata"]["namespace"] for i in out["items"]} == {"team-b"}


def test_problems_become_results_and_a_non_zero_exit() -> None:
    bad = load("agg.yaml")
    bad["spec"]["services"]["VllmDecodeWorker"]["replica"] = 2
    ok = annotate(load("planner.yaml"), "apps/planner.yaml", 0)
    items = [ok, annotate(bad, "apps/agg.yaml", 3)]
    res, out = krm(resource_list(items, CONFIG))
    assert res.code == 1
    assert out is not None and out["items"] == items  # returned unchanged
    errors = [r for r in out["results"] if r["severity"] == "error"]
    assert errors == [
        {
            "message": "unknown field 'replica' (did you mean 'replicas'?)",
            "severity": "error",
            "resourceRef": {
                "apiVersion": "nvidia.com/v1alpha1",
                "kind": "DynamoGraphDeployment",
                "name": "agg",
            },
            "field": {"path": "spec.services.VllmDecodeWorker.replica"},
            "file": {"path": "apps/agg.yaml", "index": 3},
        }
    ]
    assert (
        "apps/agg.yaml (document 3): DynamoGraphDeployment/agg: "
        "spec.services.VllmDecodeWorker.replica: unknown field"
    ) in res.stderr


def test_legacy_path_annotations_are_read_too() -> None:
    bad = load("agg.yaml")
    bad["spec"]["services"]["VllmDecodeWorker"]["replica"] = 2
    bad["metadata"]["annotations"] = {
        "config.kubernetes.io/path": "old.yaml",
        "config.kubernetes.io/index": "1",
    }
    res, out = krm(resource_list([bad], CONFIG))
    assert res.code == 1 and out is not None
    assert out["results"][0]["file"] == {"path": "old.yaml", "index": 1}


def test_bad_function_config_is_an_error_result() -> None:
    config = {**CONFIG, "data": {"namespaec": "demo"}}
    res, out = krm(resource_list([load("agg.yaml")], config))
    assert res.code == 1 and out is not None
    assert (
        "unknown setting 'namespaec' (did you mean 'namespace'?)" in (out["results"][0]["message"])
    )


def test_items_with_metadata_of_the_wrong_shape_are_results() -> None:
    """An item whose metadata (or its name, or annotations) has the wrong shape is a
    problem of that item, exit 1; it was an internal error (exit 3)."""
    items = [
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": "oops"},
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": {"token": "s3cr3t"}, "annotations": [1]},
        },
    ]
    res, out = krm(resource_list(items, CONFIG))
    assert res.code == 1 and out is not None and out["items"] == items
    assert [(r["field"]["path"], r["resourceRef"]) for r in out["results"]] == [
        ("metadata", {"apiVersion": "v1", "kind": "ConfigMap"}),
        ("metadata.name", {"apiVersion": "v1", "kind": "ConfigMap"}),
        ("metadata.annotations", {"apiVersion": "v1", "kind": "ConfigMap"}),
    ]
    assert "ConfigMap/?: metadata: expected a mapping" in res.stderr
    assert "s3cr3t" not in res.stderr and "Traceback" not in res.stderr


@pytest.mark.parametrize(
    "stdin",
    [
        "",
        "kind: ConfigMap\n",
        "items: [1]\n",
        "[: bad",
        "apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems: [1, 2]\n",
    ],
)
def test_malformed_input_writes_nothing(stdin: str) -> None:
    res, _ = krm(stdin)
    assert res.code == 1 and res.stdout == ""
    assert res.stderr.startswith("dyn-gitops krm:") and "Traceback" not in res.stderr


# ---------------------------------------------------------------------------- real kustomize
BOTH_FLAGS = ("--enable-alpha-plugins", "--enable-exec")
#: what the guard (samples/kustomize-krm/require-expansion.yaml) makes kustomize print
NOT_EXPANDED = "this graph was not expanded, the KRM function did not run"


def _kustomize(
    test_binaries: Any, path: Path, flags: tuple[str, ...] = BOTH_FLAGS
) -> subprocess.CompletedProcess[str]:
    kustomize = test_binaries("kustomize")["kustomize"]
    return _run([str(kustomize), "build", *flags, str(path)])


def _run(argv: list[str]) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DYN_GITOPS_")}
    # the exec plugin runs `dyn-gitops` from PATH: the one installed beside this Python
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    return subprocess.run(argv, capture_output=True, text=True, env=env, timeout=120)


@pytest.mark.realk8s
def test_kustomize_runs_the_sample_function(test_binaries: Any) -> None:
    proc = _kustomize(test_binaries, SAMPLE)
    assert proc.returncode == 0, proc.stderr
    built = list(yaml.safe_load_all(proc.stdout))
    expected = render(SAMPLE / "vllm-agg.yaml", namespace="demo")
    pvc = yaml.safe_load((SAMPLE / "hf-cache.yaml").read_text())
    pvc["metadata"]["namespace"] = "demo"  # kustomize's own namespace transformer

    def key(o: dict[str, Any]) -> tuple[str, str]:
        return (o["kind"], o["metadata"]["name"])

    assert sorted(without(built, OURS), key=key) == sorted(without([*expected, pvc], OURS), key=key)
    # kustomize's internal annotations never leak into the build
    assert "config.kubernetes.io" not in proc.stdout and "config.k8s.io" not in proc.stdout


@pytest.mark.realk8s
def test_kustomize_fails_the_build_on_a_bad_graph(test_binaries: Any, tmp_path: Path) -> None:
    work = tmp_path / "k"
    shutil.copytree(SAMPLE, work)
    dgd = work / "vllm-agg.yaml"
    dgd.write_text(dgd.read_text().replace("replicas: 2", "replica: 2"))
    proc = _kustomize(test_binaries, work)
    assert proc.returncode != 0 and proc.stdout == ""
    assert "unknown field 'replica'" in proc.stderr


@pytest.mark.realk8s
def test_kustomize_skipping_the_function_fails_the_build(test_binaries: Any) -> None:
    """Without --enable-exec kustomize skips an exec function silently (exit 0, the raw DGD
    in the output): the sample's guard fails the build instead."""
    proc = _kustomize(test_binaries, SAMPLE, ("--enable-alpha-plugins",))
    assert proc.returncode != 0, f"the raw DGD passed through:\n{proc.stdout[:2000]}"
    assert proc.stdout == "" and NOT_EXPANDED in proc.stderr, proc.stderr


@pytest.mark.realk8s
def test_kubectl_kustomize_cannot_run_the_function_and_fails_the_build(test_binaries: Any) -> None:
    """kubectl's built-in kustomize has no --enable-exec; with --enable-alpha-plugins alone it
    skips the function like kustomize does, and the guard fails the build (the real kubectl of
    tools/test-bins, built from k8s.io/kubernetes at the API server's version)."""
    kubectl = test_binaries("kubectl")["kubectl"]
    exec_flag = _run([kubectl, "kustomize", *BOTH_FLAGS, str(SAMPLE)])
    assert exec_flag.returncode != 0 and "unknown flag: --enable-exec" in exec_flag.stderr
    proc = _run([kubectl, "kustomize", "--enable-alpha-plugins", str(SAMPLE)])
    assert proc.returncode != 0, f"the raw DGD passed through:\n{proc.stdout[:2000]}"
    assert proc.stdout == "" and NOT_EXPANDED in proc.stderr, proc.stderr


@pytest.mark.realk8s
@pytest.mark.parametrize("emit_source", ["true", "false"])
def test_the_guard_lets_an_expanded_build_through(
    test_binaries: Any, tmp_path: Path, emit_source: str
) -> None:
    """The emitted DGD carries the renderer's annotation (the guard lets it through); with
    emit-source false there is no DGD at all."""
    work = tmp_path / "k"
    shutil.copytree(SAMPLE, work)
    fn = work / "expand-dynamo.yaml"
    fn.write_text(fn.read_text() + f'  emit-source: "{emit_source}"\n')
    proc = _kustomize(test_binaries, work)
    assert proc.returncode == 0, proc.stderr
    kinds = [o["kind"] for o in yaml.safe_load_all(proc.stdout)]
    assert ("DynamoGraphDeployment" in kinds) == (emit_source == "true")
    assert "Deployment" in kinds


@pytest.mark.realk8s
def test_the_guard_catches_a_standalone_component_deployment(
    test_binaries: Any, tmp_path: Path
) -> None:
    work = tmp_path / "k"
    shutil.copytree(SAMPLE, work)
    (work / "vllm-agg.yaml").write_text(
        "apiVersion: nvidia.com/v1alpha1\nkind: DynamoComponentDeployment\n"
        "metadata: {name: worker}\nspec: {componentType: worker}\n"
    )
    proc = _kustomize(test_binaries, work, ("--enable-alpha-plugins",))
    assert proc.returncode != 0 and NOT_EXPANDED in proc.stderr, proc.stdout


@pytest.mark.realk8s
def test_kustomize_with_a_v1beta1_dgd(test_binaries: Any, tmp_path: Path) -> None:
    """A v1beta1 DGD through the function: its source comes back as written, in v1beta1
    (setting source-api-version), and kustomize takes the changed item."""
    work = tmp_path / "k"
    shutil.copytree(SAMPLE, work)
    beta = SAMPLES / "v1beta1-pair" / "input" / "sglang-disagg.yaml"
    (work / "vllm-agg.yaml").write_text(beta.read_text())
    proc = _kustomize(test_binaries, work)
    assert proc.returncode == 0, proc.stderr
    built = list(yaml.safe_load_all(proc.stdout))
    expected = render(beta, namespace="demo")
    pvc = yaml.safe_load((SAMPLE / "hf-cache.yaml").read_text())
    pvc["metadata"]["namespace"] = "demo"

    def key(o: dict[str, Any]) -> tuple[str, str, str]:
        return (o["apiVersion"], o["kind"], o["metadata"]["name"])

    assert sorted(without(built, OURS), key=key) == sorted(without([*expected, pvc], OURS), key=key)
    (dgd,) = [o for o in built if o["kind"] == "DynamoGraphDeployment"]
    assert dgd["apiVersion"] == "nvidia.com/v1beta1" and "components" in dgd["spec"]
