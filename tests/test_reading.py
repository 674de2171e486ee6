"""Reading input: directory trees, single files, stdin, Git revisions without a checkout;
writing one file per object; non-Dynamo objects untouched."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from support.cli import CliResult, invoke_cli, run_cli

from dyn_gitops import keys

DGD = """\
apiVersion: nvidia.com/v1alpha1
kind: DynamoGraphDeployment
metadata:
  name: reader
spec:
  services:
    Frontend:
      componentType: frontend
      replicas: 1
      extraPodSpec:
        mainContainer:
          image: example.com/dynamo:1.1.0
    Worker:
      componentType: worker
      replicas: 1
      resources:
        limits:
          gpu: "1"
      extraPodSpec:
        mainContainer:
          image: example.com/dynamo:1.1.0
"""


def cm(name: str, value: str = "v") -> str:
    return f"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\ndata:\n  k: {value}\n"


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def ok(res: CliResult) -> list[dict[str, Any]]:
    assert res.code == 0, res.stderr
    return [o for o in yaml.safe_load_all(res.stdout) if o is not None]


def names(objects: list[dict[str, Any]], kind: str = "ConfigMap") -> set[str]:
    return {o["metadata"]["name"] for o in objects if o["kind"] == kind}


# ----------------------------------------------------------------------------- file system
def test_directory_tree_is_read_recursively(tmp_path: Path) -> None:
    write(tmp_path / "a.yaml", cm("a"))
    write(tmp_path / "b.yml", cm("b"))
    write(tmp_path / "c.json", json.dumps(yaml.safe_load(cm("c"))))
    write(tmp_path / "sub" / "deeper" / "d.yaml", cm("d"))
    write(tmp_path / "sub" / "e.yml", cm("e1") + "---\n" + cm("e2"))
    # never read: other suffixes, hidden files, hidden directories at any depth
    write(tmp_path / "notes.txt", cm("txt"))
    write(tmp_path / "README.md", cm("md"))
    write(tmp_path / "f.yaml.bak", cm("bak"))
    write(tmp_path / "kustomization", cm("nosuffix"))
    write(tmp_path / ".hidden.yaml", cm("hiddenfile"))
    write(tmp_path / ".github" / "workflow.yaml", cm("hiddendir"))
    write(tmp_path / "sub" / ".cache" / "x.yaml", cm("nestedhidden"))
    assert names(ok(invoke_cli("render", str(tmp_path)))) == {"a", "b", "c", "d", "e1", "e2"}


def test_a_single_file(tmp_path: Path) -> None:
    write(tmp_path / "one.yaml", DGD)
    write(tmp_path / "other.yaml", cm("sibling"))
    objects = ok(invoke_cli("render", str(tmp_path / "one.yaml")))
    assert "sibling" not in names(objects)
    dgd_children = [o for o in objects if o["kind"] == "Deployment"]
    assert len(dgd_children) == 2
    assert {o["metadata"]["annotations"][keys.ANN_SOURCE_PATH] for o in dgd_children} == {
        "one.yaml"
    }


def test_stdin(tmp_path: Path) -> None:
    write(tmp_path / "ignored.yaml", cm("not-from-stdin"))
    res = run_cli("render", "-", stdin=DGD + "---\n" + cm("from-stdin"), cwd=tmp_path)
    objects = ok(res)
    assert names(objects) == {"from-stdin"}
    assert len([o for o in objects if o["kind"] == "Deployment"]) == 2


def test_stdin_equals_the_same_file(tmp_path: Path) -> None:
    write(tmp_path / "in.yaml", DGD)
    from_stdin = ok(invoke_cli("render", "-", stdin=DGD))
    from_file = ok(invoke_cli("render", str(tmp_path / "in.yaml")))
    for objs in (from_stdin, from_file):
        for o in objs:
            o.get("metadata", {}).get("annotations", {}).pop(keys.ANN_SOURCE_PATH, None)
    assert from_stdin == from_file


# ----------------------------------------------------------------------------- pass-through
PASSTHROUGH = """\
# comments are not data
apiVersion: example.com/v1
kind: Widget
metadata:
  name: w
  labels: {zeta: "1", alpha: "2"}
spec:
  quoted: ["yes", "no", "on", "0123", "1e3", "null", "~", "true", "2024-01-01"]
  plain: [yes, 0123, 1e3, ~, 1.50, -0]
  multiline: |
    line one
      indented line
  empty: {}
  z: last-key-first
  a: first-key-last
---
apiVersion: v1
kind: Secret
metadata:
  name: s
  namespace: elsewhere
type: Opaque
stringData:
  password: "hunter2"
---
apiVersion: nvidia.com/v1alpha1
kind: DynamoModel
metadata:
  name: lora
spec:
  modelName: m
  baseModelName: b
"""


@pytest.mark.parametrize("fmt", ["yaml", "json"])
def test_non_dynamo_objects_pass_through_unchanged(fmt: str, tmp_path: Path) -> None:
    write(tmp_path / "things.yaml", PASSTHROUGH)
    res = invoke_cli("render", str(tmp_path), "--output-format", fmt)
    assert res.code == 0, res.stderr
    out = (
        json.loads(res.stdout)["items"]
        if fmt == "json"
        else [o for o in yaml.safe_load_all(res.stdout) if o is not None]
    )
    expected = [d for d in yaml.safe_load_all(PASSTHROUGH) if d is not None]
    by_kind = {o["kind"]: o for o in out}
    assert len(out) == len(expected)
    for doc in expected:
        got = by_kind[doc["kind"]]
        assert got == doc
        assert json.dumps(got) == json.dumps(doc), "key order changed"


@pytest.mark.parametrize("fmt", ["yaml", "json"])
def test_pass_through_timestamps_keep_their_spelling(fmt: str, tmp_path: Path) -> None:
    """Kubernetes reads an unquoted timestamp as the string it spells; a pass-through object
    must still spell it the same way (not '2024-05-06 07:08:09+00:00')."""
    write(
        tmp_path / "ts.yaml",
        "apiVersion: example.com/v1\nkind: Event\nmetadata:\n"
        "  name: e\nspec:\n  at: 2024-05-06T07:08:09Z\n  day: 2024-05-06\n",
    )
    res = invoke_cli("render", str(tmp_path), "--output-format", fmt)
    assert res.code == 0, res.stderr
    assert "2024-05-06T07:08:09Z" in res.stdout, res.stdout
    assert "2024-05-06 07:08:09" not in res.stdout, res.stdout


def test_pass_through_keeps_key_order(tmp_path: Path) -> None:
    write(tmp_path / "things.yaml", PASSTHROUGH)
    out = ok(invoke_cli("render", str(tmp_path)))
    widget = next(o for o in out if o["kind"] == "Widget")
    assert list(widget) == ["apiVersion", "kind", "metadata", "spec"]
    assert list(widget["spec"]) == ["quoted", "plain", "multiline", "empty", "z", "a"]
    assert list(widget["metadata"]["labels"]) == ["zeta", "alpha"]


# ----------------------------------------------------------------------------- Git revisions
def git(repo: Path, *args: str) -> str:
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.com",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.com",
        "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_CONFIG_NOSYSTEM": "1",
    }
    return subprocess.run(
        ["git", *args], cwd=repo, env=env, check=True, capture_output=True, text=True
    ).stdout.strip()


@pytest.fixture
def repo(tmp_path: Path) -> dict[str, Any]:
    """Commit A, then commit B, then uncommitted changes in the working tree."""
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    write(root / "deploy" / "cm.yaml", cm("state", "A"))
    write(root / "deploy" / "dgd.yaml", DGD)
    write(root / "deploy" / "dyn-gitops.yaml", "namespace: ns-a\n")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "A")
    a = git(root, "rev-parse", "HEAD")
    write(root / "deploy" / "cm.yaml", cm("state", "B"))
    write(root / "deploy" / "dyn-gitops.yaml", "namespace: ns-b\n")
    write(root / "deploy" / "added-in-b.yaml", cm("added-in-b"))
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "B")
    b = git(root, "rev-parse", "HEAD")
    write(root / "deploy" / "cm.yaml", cm("state", "W"))  # uncommitted
    write(root / "deploy" / "untracked.yaml", cm("untracked"))
    return {"root": root, "A": a, "B": b}


def snapshot(root: Path) -> dict[str, Any]:
    """Working-tree files (bytes and mtimes), staged changes, status and HEAD. (.git itself
    is left out: ``git status`` refreshes the index it reads.)"""
    files = {
        p.relative_to(root).as_posix(): (p.read_bytes(), p.stat().st_mtime_ns)
        for p in root.rglob("*")
        if p.is_file() and ".git" not in p.relative_to(root).parts
    }
    return {
        "files": files,
        "status": git(root, "status", "--porcelain"),
        "staged": git(root, "diff", "--cached", "--name-only"),
        "head": git(root, "rev-parse", "HEAD"),
    }


def state(objects: list[dict[str, Any]]) -> str:
    return next(
        o["data"]["k"]
        for o in objects
        if o["kind"] == "ConfigMap" and o["metadata"]["name"] == "state"
    )


def test_rev_reads_the_revision_not_the_working_tree(
    repo: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    root = repo["root"]
    before = snapshot(root)
    monkeypatch.chdir(root)

    at_a = ok(invoke_cli("render", "--rev", repo["A"], "deploy"))
    assert state(at_a) == "A"
    assert names(at_a) == {"state"}  # neither added-in-b nor untracked
    deployments = [o for o in at_a if o["kind"] == "Deployment"]
    assert deployments and {o["metadata"]["namespace"] for o in deployments} == {"ns-a"}, (
        "dyn-gitops.yaml must come from the revision too"
    )
    assert {o["metadata"]["annotations"][keys.ANN_SOURCE_COMMIT] for o in deployments} == {
        repo["A"]
    }

    for rev in ("HEAD", "main", repo["B"][:10]):
        at_b = ok(invoke_cli("render", "--rev", rev, "deploy"))
        assert state(at_b) == "B" and names(at_b) == {"state", "added-in-b"}, rev
    assert state(ok(invoke_cli("render", "--rev", "HEAD~1", "deploy"))) == "A"
    assert state(ok(invoke_cli("render", "deploy"))) == "W"  # without --rev: the working tree

    assert snapshot(root) == before, "--rev must not touch the working tree, index or HEAD"


def test_rev_through_the_real_entry_point(repo: dict[str, Any]) -> None:
    res = run_cli("render", "--rev", repo["A"], "deploy", cwd=repo["root"])
    assert state(ok(res)) == "A"


def test_rev_of_a_single_file(repo: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(repo["root"])
    assert names(ok(invoke_cli("render", "--rev", repo["A"], "deploy/cm.yaml"))) == {"state"}


def test_unknown_rev_is_a_usage_error(
    repo: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(repo["root"])
    res = invoke_cli("render", "--rev", "no-such-branch", "deploy")
    assert res.code == 2, res.stderr
    assert res.stdout == ""
    assert "no-such-branch" in res.stderr


def test_path_missing_in_the_rev_is_a_usage_error(
    repo: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(repo["root"])
    res = invoke_cli("render", "--rev", repo["A"], "deploy/added-in-b.yaml")
    assert res.code == 2, res.stderr
    assert res.stdout == ""
    assert "added-in-b.yaml" in res.stderr


# ----------------------------------------------------------------------------- --out-dir
def expected_filename(obj: dict[str, Any]) -> str:
    """The documented stable name: <namespace|_cluster>/<kind>[.<group>]_<name>.yaml"""
    meta = obj["metadata"]
    group = obj["apiVersion"].rpartition("/")[0]
    kind = obj["kind"].lower() + (f".{group}" if group else "")
    return f"{meta.get('namespace') or '_cluster'}/{kind}_{meta['name']}.yaml"


def out_files(out: Path) -> dict[str, str]:
    return {
        p.relative_to(out).as_posix(): p.read_text(encoding="utf-8")
        for p in sorted(out.rglob("*"))
        if p.is_file() and not p.name.startswith(".")
    }


def test_out_dir_writes_one_file_per_object(tmp_path: Path) -> None:
    src = tmp_path / "src"
    write(src / "dgd.yaml", DGD)
    write(src / "cm.yaml", cm("plain"))
    stream = ok(invoke_cli("render", str(src)))
    out = tmp_path / "out"

    res = invoke_cli("render", str(src), "--out-dir", str(out))
    assert res.code == 0, res.stderr
    assert res.stdout == ""
    files = out_files(out)
    assert set(files) == {expected_filename(o) for o in stream}
    assert len(files) == len(stream)
    for obj in stream:
        docs = [d for d in yaml.safe_load_all(files[expected_filename(obj)]) if d is not None]
        assert docs == [obj]
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")], (
        "temporary directories left behind"
    )

    again = invoke_cli("render", str(src), "--out-dir", str(out))
    assert again.code == 0, again.stderr
    assert out_files(out) == files, "names and contents must be stable across runs"


def test_out_dir_replaces_its_own_output(tmp_path: Path) -> None:
    src = tmp_path / "src"
    write(src / "a.yaml", cm("a"))
    write(src / "b.yaml", cm("b"))
    out = tmp_path / "out"
    assert invoke_cli("render", str(src), "--out-dir", str(out)).code == 0
    (src / "b.yaml").unlink()
    assert invoke_cli("render", str(src), "--out-dir", str(out)).code == 0
    assert set(out_files(out)) == {"_cluster/configmap_a.yaml"}, "stale file kept"


def test_out_dir_may_be_an_existing_empty_dir(tmp_path: Path) -> None:
    write(tmp_path / "src" / "a.yaml", cm("a"))
    (tmp_path / "out").mkdir()
    assert invoke_cli("render", str(tmp_path / "src"), "--out-dir", str(tmp_path / "out")).code == 0
    assert set(out_files(tmp_path / "out")) == {"_cluster/configmap_a.yaml"}


def test_out_dir_refuses_a_directory_it_did_not_write(tmp_path: Path) -> None:
    write(tmp_path / "src" / "a.yaml", cm("a"))
    out = tmp_path / "precious"
    keep = write(out / "notes.txt", "mine\n")
    res = invoke_cli("render", str(tmp_path / "src"), "--out-dir", str(out))
    assert res.code == 2, res.stderr
    assert res.stdout == ""
    assert str(out) in res.stderr
    assert [p.name for p in out.iterdir()] == ["notes.txt"]
    assert keep.read_text() == "mine\n"


def test_out_dir_untouched_on_bad_input(tmp_path: Path) -> None:
    write(tmp_path / "src" / "bad.yaml", "a: b: c\n")
    out = tmp_path / "out"
    res = invoke_cli("render", str(tmp_path / "src"), "--out-dir", str(out))
    assert res.code == 1
    assert not out.exists()
