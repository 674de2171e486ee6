"""Redaction on structure, not on text (issue 25, point 4).

A secret can hide inside a string that holds a document of its own: the ``nvidia.com/dgd-spec``
annotation of the emitted DGD (a v1alpha1 spec as JSON, env values included), a
``DYN_DEPLOYMENT_CONFIG`` env value, any annotation written as JSON. Unique values are planted
in every env value of several conformance examples (:mod:`support.planted`); no output but
``render``'s own shows one: not ``diff`` (text, Markdown), ``explain``, ``validate``,
``settings``, ``hydrate``'s logs and commits, nor the problems of ``render``, ``validate``,
KRM and the Argo CD plugin. Render itself is never redacted.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import CONFORMANCE, resource_list, run_cli
from support.planted import CREDENTIAL_ENVS, Planter, found_in, plant

#: v1alpha1 and v1beta1, agg and disagg, one with envs of its own, one with a planner
EXAMPLES = (
    "examples__backends__vllm__deploy__agg.yaml",
    "examples__backends__vllm__deploy__v1beta1__agg.yaml",
    "examples__backends__sglang__deploy__v1beta1__disagg.yaml",
    "recipes__qwen3-32b__vllm__disagg-kv-router__deploy.yaml",
    "examples__backends__trtllm__deploy__agg-with-config.yaml",
    "examples__backends__vllm__deploy__disagg_planner.yaml",
)
#: the placeholder images of the examples render as applied (no stamp, no 1.5 admission)
SETTINGS = "runtime-version-admission: lenient\norigin-version: none\n"
GIT_ENV = {
    "GIT_AUTHOR_NAME": "Test",
    "GIT_AUTHOR_EMAIL": "test@example.com",
    "GIT_COMMITTER_NAME": "Test",
    "GIT_COMMITTER_EMAIL": "test@example.com",
    "GIT_AUTHOR_DATE": "2026-01-01T00:00:00Z",
    "GIT_COMMITTER_DATE": "2026-01-01T00:00:00Z",
    "GIT_CONFIG_GLOBAL": "/dev/null",
    "GIT_CONFIG_NOSYSTEM": "1",
    "PATH": "/usr/bin:/bin:/usr/local/bin",
}


def _git(repo: Path, *args: str) -> str:
    proc = subprocess.run(
        ["git", *args], cwd=repo, env=GIT_ENV, check=True, capture_output=True, text=True
    )
    return proc.stdout.strip()


def _planted_docs(planter: Planter) -> dict[str, list[dict[str, Any]]]:
    """Each example with planted env values, in a namespace of its own (names repeat)."""
    out = {}
    for i, name in enumerate(EXAMPLES):
        docs = [d for d in yaml.safe_load_all((CONFORMANCE / name).read_text()) if d]
        for d in docs:
            d.setdefault("metadata", {})["namespace"] = f"ns{i}"
        out[name] = [plant(d, planter) if d["kind"] == "DynamoGraphDeployment" else d for d in docs]
    return out


def _write(tree: Path, files: dict[str, list[dict[str, Any]]]) -> None:
    """One directory per file (a diff of one of them stays under the Markdown size limit),
    each with the settings."""
    (tree / "dyn-gitops.yaml").write_text(SETTINGS)
    for name, docs in files.items():
        sub = tree / _dir(name)
        sub.mkdir(exist_ok=True)
        (sub / "dyn-gitops.yaml").write_text(SETTINGS)
        (sub / name).write_text(yaml.safe_dump_all(docs, sort_keys=False))


def _dir(name: str) -> str:
    return f"ex{EXAMPLES.index(name)}" if name in EXAMPLES else Path(name).stem


class Planted:
    """A Git repository: ``base`` the planted examples; ``head`` every credential value
    rotated, one replica count changed, and a DGD added (credentials only, so its whole
    YAML in the Markdown report has nothing plain to show)."""

    def __init__(self, root: Path) -> None:
        self.repo, self.tree = root, root / "deploy"
        self.tree.mkdir(parents=True)
        _git(root, "init", "-q", "-b", "main")
        self.base, self.head = Planter("a"), Planter("b")
        _write(self.tree, _planted_docs(self.base))
        _git(root, "add", "-A")
        _git(root, "commit", "-q", "-m", "base")
        _git(root, "tag", "base")
        head = _planted_docs(self.head)
        head[EXAMPLES[0]][0]["spec"]["services"]["Frontend"]["replicas"] = 3
        added = yaml.safe_load((CONFORMANCE / EXAMPLES[0]).read_text())
        added["metadata"] = {"name": "added", "namespace": "added"}
        head["added.yaml"] = [plant(added, self.head, plain=False)]
        _write(self.tree, head)
        _git(root, "add", "-A")
        _git(root, "commit", "-q", "-m", "head")
        self.values = self.base.values | self.head.values


@pytest.fixture(scope="module")
def planted(tmp_path_factory: pytest.TempPathFactory) -> Planted:
    return Planted(tmp_path_factory.mktemp("planted"))


def _clean(res: Any, values: set[str]) -> None:
    assert not found_in(res.stdout + res.stderr, values), res.stdout[-3000:] + res.stderr[-3000:]


# ---------------------------------------------------------------------------- outputs
def test_render_shows_every_planted_value(planted: Planted) -> None:
    """Render is never redacted: its objects carry every value (so the tests below would
    see one if any leaked)."""
    res = run_cli("render", "deploy", cwd=planted.repo)
    assert res.code == 0, res.stderr
    assert found_in(res.stdout, planted.head.values) == sorted(planted.head.values)
    assert not found_in(res.stderr, planted.values)


@pytest.mark.parametrize("fmt", ["text", "markdown"])
def test_diff_shows_no_planted_value(planted: Planted, fmt: str) -> None:
    """Before, the ``nvidia.com/dgd-spec`` annotation (the v1alpha1 spec as JSON) and the
    ``DYN_DEPLOYMENT_CONFIG`` value were shown whole: every credential env value in them.
    Now they are compared field by field, so the change is there without the values."""
    for path in ("deploy", "deploy/ex0", "deploy/added"):
        res = run_cli("diff", "--base", "base", "--format", fmt, path, cwd=planted.repo)
        assert res.code == 1, res.stderr
        _clean(res, planted.values)
    res = run_cli("diff", "--base", "base", "--format", fmt, "deploy/ex0", cwd=planted.repo)
    if fmt == "text":
        lines = res.stdout.splitlines()
        inside = [ln for ln in lines if '["nvidia.com/dgd-spec"]{json}' in ln]
        assert any(
            ln.endswith("envs[name=HF_TOKEN].value: (redacted) -> (redacted)") for ln in inside
        ), res.stdout
        legacy = [ln for ln in lines if "env[name=DYN_DEPLOYMENT_CONFIG].value{json}" in ln]
        assert any(".Common.hf_token: (redacted) -> (redacted)" in ln for ln in legacy), res.stdout
        assert "    ~ spec.components[name=Frontend].replicas: 1 -> 3" in lines
    else:
        assert "dgd-spec&quot;]{json}" in res.stdout or 'dgd-spec"]{json}' in res.stdout
        added = run_cli("diff", "--base", "base", "--format", fmt, "deploy/added", cwd=planted.repo)
        assert "| + | DynamoGraphDeployment | added | added |" in added.stdout
        for name in CREDENTIAL_ENVS:  # the added DGD's YAML names them, values redacted
            assert f"- name: {name}\n" in added.stdout, added.stdout


def test_explain_shows_no_planted_value(planted: Planted) -> None:
    for where, service in (("ex0", "worker"), ("ex0", "Frontend"), ("ex1", "VllmDecodeWorker")):
        res = run_cli("explain", "vllm-agg", service, f"deploy/{where}", cwd=planted.repo)
        assert res.code == 0, res.stderr
        assert "HF_TOKEN" in res.stdout
        _clean(res, planted.values)


def test_validate_settings_and_hydrate_show_no_planted_value(planted: Planted) -> None:
    for args in (("validate", "deploy"), ("settings", "deploy")):
        res = run_cli(*args, cwd=planted.repo)
        assert res.code == 0, res.stderr
        _clean(res, planted.values)
    res = run_cli("hydrate", "deploy", cwd=planted.repo, env={"HOME": str(planted.repo)})
    assert res.code == 0, res.stderr
    _clean(res, planted.values)
    log = _git(planted.repo, "log", "--format=%B", "rendered")
    assert "dyn-gitops" in log and not found_in(log, planted.values)


# ---------------------------------------------------------------------------- problems
def _broken(planted: Planted, tmp: Path) -> Path:
    """The head tree with one error in a planted DGD (a replica count that is no number)."""
    tree = tmp / "broken"
    shutil.copytree(planted.tree, tree)
    path = tree / "ex0" / EXAMPLES[0]
    path.write_text(path.read_text().replace("replicas: 3", "replicas: lots", 1))
    return tree


def test_an_injected_error_shows_no_planted_value(planted: Planted, tmp_path: Path) -> None:
    tree = _broken(planted, tmp_path)
    for command in ("render", "validate"):
        res = run_cli(command, str(tree))
        assert res.code == 1 and res.stdout == "", res.stderr
        assert "Frontend.replicas" in res.stderr
        _clean(res, planted.values)
    res = run_cli("cmp", "generate", "--server", "off", cwd=tree, env={"TMPDIR": "/nonexistent"})
    assert res.code == 1 and res.stdout == "" and "Frontend.replicas" in res.stderr
    _clean(res, planted.values)


def test_krm_results_show_no_planted_value(planted: Planted, tmp_path: Path) -> None:
    tree = _broken(planted, tmp_path)
    files = sorted(f for f in tree.rglob("*.yaml") if f.name != "dyn-gitops.yaml")
    items = [d for f in files for d in yaml.safe_load_all(f.read_text())]
    config = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "fn"},
        "data": yaml.safe_load(SETTINGS),
    }
    res = run_cli("krm", stdin=resource_list([d for d in items if d.get("kind")], config))
    assert res.code == 1, res.stderr
    results = yaml.safe_load(res.stdout)["results"]
    assert any(r["field"]["path"].endswith("Frontend.replicas") for r in results), results
    assert not found_in(yaml.safe_dump(results) + res.stderr, planted.values)
