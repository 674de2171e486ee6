"""``dyn-gitops diff``: the workload diff of two Git revisions, without a cluster.

The reports of one realistic change are golden files (``tests/golden/diff-*.{md,txt}``,
refreshed only with ``--update-golden``); the facts they must show are asserted
separately, so a golden refreshed from a wrong output cannot pass review silently.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
from support.cli import run_cli
from support.golden import check_golden
from support.paths import GOLDEN
from support.workflow_repo import TREE, Repo

from dyn_gitops.workflows.diff import ABSENT, FieldChange, compare, field_changes


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, f"{path.name}: {old!r} not found"
    path.write_text(text.replace(old, new, 1))


@pytest.fixture
def repo(tmp_path: Path) -> Repo:
    """base: the fixture tree; head: a typical pull request on top of it."""
    r = Repo(tmp_path / "repo")
    shutil.copytree(TREE, r.path / "deploy")
    r.commit("base")
    r.git("tag", "base")
    d = r.path / "deploy"
    _edit(
        d / "agg.yaml",
        "    Frontend:\n      componentType: frontend\n      replicas: 1",
        "    Frontend:\n      componentType: frontend\n      replicas: 2",
    )
    _edit(
        d / "agg.yaml",
        "args: [--model, Qwen/Qwen3-0.6B]",
        "args: [--model, Qwen/Qwen3-8B]\n      envs:\n        - name: DYN_LOG\n"
        "          value: debug",
    )
    _edit(d / "profile-data.yaml", "'{}'", "'{\"x\": 1}'")
    (d / "pair.yaml").write_text((d / "pair.yaml").read_text().split("---\n")[0])
    (d / "extra.yaml").write_text(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: extra\n"
        "  namespace: demo\ndata:\n  a: b\n"
    )
    r.commit("head")
    r.git("tag", "head")
    return r


def diff(r: Repo, *args: str) -> Any:
    return run_cli("diff", *args, cwd=r.path)


# ---------------------------------------------------------------------------- the CLI
def test_equal_revisions_exit_0(repo: Repo) -> None:
    res = diff(repo, "--base", "base", "--head", "base", "deploy")
    assert res.code == 0, res.stderr
    assert "no differences" in res.stdout and "43 objects unchanged" in res.stdout


def test_a_pull_request_diff_golden(repo: Repo, update_golden: bool) -> None:
    md = diff(repo, "--base", "base", "--head", "head", "--format", "markdown", "deploy")
    txt = diff(repo, "--base", "base", "--head", "head", "deploy")
    assert md.code == txt.code == 1, md.stderr + txt.stderr
    for name, res in (("diff-pull-request.md", md), ("diff-pull-request.txt", txt)):
        check_golden(GOLDEN / name, res.stdout, update_golden, produced_by="dyn-gitops diff")


def test_a_pull_request_diff_shows_the_fields(repo: Repo) -> None:
    out = diff(repo, "--base", "base", "--head", "head", "deploy").stdout
    lines = out.splitlines()
    assert lines[1] == "5 changed, 2 replaced, 1 added, 6 removed; 30 objects unchanged"
    # the frontend Deployment: one field, with its path
    assert "~ Deployment demo/agg-frontend" in lines
    assert "    ~ spec.replicas: 1 -> 2" in lines
    # the worker: new spec, new hash, new name; paired and compared, not removed + added
    replaced = [line for line in lines if "(new worker generation)" in line]
    assert len(replaced) == 2  # its Deployment and its Service
    assert replaced[1].startswith(  # the hash covers the origin-version stamp (1.5.1)
        "~ Deployment demo/agg-vllmdecodeworker-ac793228 -> agg-vllmdecodeworker-"
    )
    # the planner RBAC every graph of the namespace shares no longer lists pair-b
    assert "~ ServiceAccount demo/planner-serviceaccount" in lines
    assert any("containers[name=main].env[name=DYN_LOG]: " in line for line in lines)
    assert any(
        'args: ["--model", "Qwen/Qwen3-0.6B"] -> ["--model", "Qwen/Qwen3-8B"]' in line
        for line in lines
    )
    # pass-through objects are compared too; added and removed are listed
    assert '    ~ data["decode_raw_data.json"]: "{}" -> "{\\"x\\": 1}"' in lines
    assert "+ ConfigMap demo/extra" in lines
    assert "- Deployment demo/pair-b-frontend" in lines
    # the source commit never shows up as a difference
    assert "source-commit" not in out


def test_markdown_has_a_table_and_details(repo: Repo) -> None:
    md = diff(repo, "--base", "base", "--head", "head", "--format", "markdown", "deploy").stdout
    assert md.startswith("### dyn-gitops diff `base` → `head`")
    assert "| ~ | Deployment | demo | agg-frontend | 1 |" in md
    assert "<code>spec.replicas</code> | <code>1</code> | <code>2</code>" in md
    assert "```yaml\napiVersion: v1\nkind: ConfigMap" in md  # an added object, in full


def test_errors_exit_2_with_nothing_on_stdout(repo: Repo) -> None:
    _edit(repo.path / "deploy" / "agg.yaml", "replicas: 2", "replica: 2")
    repo.commit("typo")
    res = diff(repo, "--base", "base", "--head", "HEAD", "deploy")
    assert res.code == 2 and res.stdout == ""
    assert "agg.yaml:" in res.stderr and "unknown field 'replica'" in res.stderr
    assert "1 problem found; HEAD does not render; nothing compared" in res.stderr
    res = diff(repo, "--base", "no-such-rev", "deploy")
    assert res.code == 2 and res.stdout == "" and "unknown Git revision" in res.stderr
    res = diff(repo, "--base", "base", "--discovery-backend", "zk", "deploy")
    assert res.code == 2 and res.stdout == ""


def test_an_app_missing_at_base_is_all_added(repo: Repo) -> None:
    (repo.path / "apps2").mkdir()
    shutil.copy(TREE / "agg.yaml", repo.path / "apps2" / "agg.yaml")
    repo.commit("new app")
    res = diff(repo, "--base", "head", "--head", "HEAD", "apps2")
    assert res.code == 1, res.stderr
    rendered = run_cli("render", "apps2", cwd=repo.path).stdout.count("\nkind: ")
    assert res.stdout.splitlines()[1] == f"{rendered} added; 0 objects unchanged"


def test_each_revision_uses_its_own_settings_file(repo: Repo) -> None:
    (repo.path / "deploy" / "dyn-gitops.yaml").write_text("namespace: staging\n")
    repo.commit("move to staging")
    out = diff(repo, "--base", "head", "--head", "HEAD", "deploy").stdout
    assert "+ Deployment staging/agg-frontend" in out.splitlines()
    assert "- Deployment demo/agg-frontend" in out.splitlines()


# ---------------------------------------------------------------------------- the pieces
def test_field_paths_match_lists_by_name_and_quote_odd_keys() -> None:
    before = {
        "metadata": {"labels": {"app.kubernetes.io/name": "a"}},
        "spec": {
            "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}],
            "args": ["x"],
            "ports": [{"containerPort": 1}],
        },
    }
    after = {
        "metadata": {"labels": {"app.kubernetes.io/name": "b"}},
        "spec": {
            "env": [
                {"name": "B", "value": "3"},
                {"name": "A", "value": "1"},
                {"name": "C", "value": "4"},
            ],
            "args": ["x", "y"],
            "ports": [{"containerPort": 2}],
        },
    }
    assert field_changes(before, after) == [
        FieldChange('metadata.labels["app.kubernetes.io/name"]', "a", "b"),
        FieldChange("spec.env[name=B].value", "2", "3"),
        FieldChange("spec.env[name=C]", ABSENT, {"name": "C", "value": "4"}),
        FieldChange("spec.env (order)", ["A", "B"], ["B", "A"]),
        FieldChange("spec.args", ["x"], ["x", "y"]),
        FieldChange("spec.ports[0].containerPort", 1, 2),
    ]


def test_objects_match_by_group_kind_namespace_and_name() -> None:
    def obj(api: str, kind: str, ns: str, name: str, **spec: Any) -> dict[str, Any]:
        return {
            "apiVersion": api,
            "kind": kind,
            "metadata": {"name": name, "namespace": ns},
            "spec": spec,
        }

    base = [obj("apps/v1", "Deployment", "a", "x", replicas=1), obj("v1", "Service", "a", "x")]
    head = [
        obj("apps/v1", "Deployment", "a", "x", replicas=1),
        obj("v1", "Service", "b", "x"),
        obj("example.com/v1", "Deployment", "a", "x"),
    ]
    changes, unchanged = compare(base, head)
    assert unchanged == 1
    assert sorted((c.status, c.obj["kind"], c.obj["metadata"]["namespace"]) for c in changes) == [
        ("added", "Deployment", "a"),
        ("added", "Service", "b"),
        ("removed", "Service", "a"),
    ]


def test_markdown_stays_under_the_comment_limit(repo: Repo) -> None:
    from dyn_gitops.context import Runner
    from dyn_gitops.workflows import report
    from dyn_gitops.workflows.diff import diff as run_diff

    result = run_diff(str(repo.path), "base", "head", "deploy", runner=Runner())
    full = report.markdown(result)
    short = report.markdown(result, limit=4000)
    assert len(short) <= 4000 < len(full)
    assert "more objects are not shown here" in short or "YAML left out" in short
