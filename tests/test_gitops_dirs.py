"""A directory of a GitOps repository renders: the files kept beside manifests
(kustomization files, a Helm chart's Chart.yaml, values, templates/ and charts/) are left
out unless they hold a Kubernetes object, and ``.dyn-gitops-ignore`` / ``--exclude``
leave out what they match, bounded like every input (issue 26, point 6)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import yaml
from support.cli import CliResult, invoke_cli, run_cli
from support.inputs import frontend_dgd

from dyn_gitops.settings import (
    IGNORE_FILE_MAX_BYTES,
    IGNORE_MAX_PATTERN_CHARS,
    IGNORE_MAX_PATTERNS,
)

DGD = frontend_dgd("beside")
KUSTOMIZATION = """\
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
  - dgd.yaml
"""
CONFIGMAP = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {}\ndata:\n  a: b\n"
TEMPLATE = """\
apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Release.Name }}
  labels: {{- include "x.labels" . | nindent 4 }}
"""


def tree(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def kinds(res: CliResult) -> list[tuple[str, str]]:
    assert res.code == 0, res.stderr
    docs = [d for d in yaml.safe_load_all(res.stdout) if d]
    return sorted((d["kind"], d["metadata"]["name"]) for d in docs)


def clean_refusal(res: CliResult, code: int, *expected: str) -> None:
    assert res.code == code, (res.code, res.stderr)
    assert res.stdout == ""
    assert "Traceback" not in res.stderr and "internal error" not in res.stderr
    for text in expected:
        assert text in res.stderr, res.stderr


@pytest.fixture
def app(tmp_path: Path) -> Path:
    """An app directory as a GitOps repository holds it: a DGD, a kustomization file, a
    Helm chart (templates that are no YAML, values files, a subchart) beside it."""
    return tree(
        tmp_path / "app",
        {
            "dgd.yaml": DGD,
            "kustomization.yaml": KUSTOMIZATION,
            "overlays/prod/kustomization.yml": "resources:\n  - ../../base\n",
            "chart/Chart.yaml": "apiVersion: v2\nname: x\nversion: 0.1.0\n",
            "chart/Chart.lock": "dependencies: []\n",
            "chart/values.yaml": "replicas: 1\nimage:\n  tag: x\n",
            "chart/values-prod.yaml": "replicas: 3\n",
            "chart/values.schema.json": '{"type": "object"}\n',
            "chart/templates/cm.yaml": TEMPLATE,
            "chart/charts/sub/Chart.yaml": "apiVersion: v2\nname: sub\nversion: 0.1.0\n",
            "chart/charts/sub/templates/d.yaml": TEMPLATE,
        },
    )


def test_a_directory_with_kustomization_and_helm_files_renders(app: Path) -> None:
    """On main: exit 1, "Kustomization/?: metadata.name: required field is missing",
    "Chart.yaml:1: not a Kubernetes object", malformed YAML in templates/."""
    res = run_cli("render", str(app))
    assert ("DynamoGraphDeployment", "beside") in kinds(res)
    assert all(kind != "Kustomization" for kind, _ in kinds(res))
    assert res.stderr == ""  # left out quietly; -v says what and why


def test_every_command_reading_a_directory_skips_them(app: Path) -> None:
    """validate, settings and explain read the directory as render does (on main: exit 1)."""
    assert invoke_cli("validate", str(app)).code == 0
    assert invoke_cli("settings", str(app)).code == 0
    res = invoke_cli("explain", "beside", "Frontend", str(app))
    assert res.code == 0, res.stderr


def test_verbose_lists_each_file_left_out_and_why(app: Path) -> None:
    res = run_cli("validate", "-v", str(app))
    assert res.code == 0, res.stderr
    skipped = {
        line.split(": ")[1].removeprefix("skipped ")
        for line in res.stderr.splitlines()
        if line.startswith("dyn-gitops: skipped ")
    }
    assert skipped == {
        "kustomization.yaml",
        "overlays/prod/kustomization.yml",
        "chart/Chart.yaml",
        "chart/values.yaml",
        "chart/values-prod.yaml",
        "chart/values.schema.json",
        "chart/templates/cm.yaml",
        "chart/charts/sub/Chart.yaml",
        "chart/charts/sub/templates/d.yaml",
    }
    assert "a kustomization file, no Kubernetes object" in res.stderr


def test_a_real_object_is_never_skipped_whatever_its_name(tmp_path: Path) -> None:
    """A Flux Kustomization in kustomization.yaml, a ConfigMap in values.yaml, a static
    template of a chart: each is a Kubernetes object, so each is rendered."""
    flux = (
        "apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\n"
        "metadata:\n  name: apps\nspec:\n  interval: 1m\n  path: ./apps\n  prune: true\n"
        "  sourceRef:\n    kind: GitRepository\n    name: repo\n"
    )
    app = tree(
        tmp_path / "app",
        {
            "dgd.yaml": DGD,
            "kustomization.yaml": flux,
            "values.yaml": CONFIGMAP.format("from-values"),
            "chart/Chart.yaml": "apiVersion: v2\nname: x\nversion: 0.1.0\n",
            "chart/templates/static.yaml": CONFIGMAP.format("static-template"),
        },
    )
    found = kinds(run_cli("render", str(app)))
    assert ("Kustomization", "apps") in found
    assert ("ConfigMap", "from-values") in found
    assert ("ConfigMap", "static-template") in found


def test_a_file_named_on_the_command_line_is_read_whatever_its_name(tmp_path: Path) -> None:
    """The rules are for a directory's walk: a file given by name is read as ever."""
    tree(tmp_path, {"kustomization.yaml": KUSTOMIZATION})
    res = invoke_cli("validate", str(tmp_path / "kustomization.yaml"))
    clean_refusal(res, 1, "metadata.name: required field is missing")


# ---------------------------------------------------------------------------- ignore file
IGNORED = {
    "drafts/broken.yaml": "kind: [unclosed\n",
    "notes.wip.yaml": "not: an object\n",
    "keep.wip.yaml": CONFIGMAP.format("kept"),
    "legacy/old/x.yaml": "also: not an object\n",
}


def test_the_ignore_file_and_exclude_leave_files_out(tmp_path: Path) -> None:
    """On main: exit 1 (malformed YAML in drafts/, "not a Kubernetes object" for the
    others): nothing could leave them out."""
    app = tree(
        tmp_path / "app",
        {
            "dgd.yaml": DGD,
            ".dyn-gitops-ignore": "# drafts\ndrafts/\n*.wip.yaml\n!keep.wip.yaml\n",
            **IGNORED,
        },
    )
    res = run_cli("render", "-v", str(app), "--exclude", "legacy/**")
    assert ("ConfigMap", "kept") in kinds(res)
    assert "skipped drafts/: excluded by .dyn-gitops-ignore:2" in res.stderr
    assert "skipped notes.wip.yaml: excluded by .dyn-gitops-ignore:3" in res.stderr
    assert "skipped legacy/old/: excluded by --exclude" in res.stderr
    # without the flag, legacy/ is read again
    clean_refusal(invoke_cli("validate", str(app)), 1, "legacy/old/x.yaml:1")


def git(cwd: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@e", *args],
        cwd=cwd,
        check=True,
        capture_output=True,
    )


def test_a_revision_is_read_with_the_same_rules(app: Path) -> None:
    """render --rev (and so diff and hydrate) reads the Git object store with the same
    rules and the revision's own ignore file (on main: exit 1)."""
    tree(app, {".dyn-gitops-ignore": "drafts/\n", "drafts/broken.yaml": "kind: [x\n"})
    git(app, "init", "-q")
    git(app, "add", "-A")
    git(app, "commit", "-qm", "app")
    at_rev = run_cli("render", "--rev", "HEAD", ".", cwd=app)
    assert kinds(at_rev) == kinds(run_cli("render", str(app)))
    res = run_cli("diff", "--base", "HEAD", "--head", "HEAD", "--exclude", "chart/", cwd=app)
    assert res.code == 0, res.stderr


# ---------------------------------------------------------------------------- bounds
def test_a_huge_ignore_file_is_refused(tmp_path: Path) -> None:
    app = tree(tmp_path, {"dgd.yaml": DGD, ".dyn-gitops-ignore": "#" * (IGNORE_FILE_MAX_BYTES + 1)})
    clean_refusal(
        run_cli("render", str(app)),
        1,
        ".dyn-gitops-ignore:1: file is 65537 bytes, over the limit of 65536",
        ".dyn-gitops-ignore is unusable; nothing done",
    )


def test_too_many_or_too_long_patterns_are_refused(tmp_path: Path) -> None:
    many = "".join(f"p{i}\n" for i in range(IGNORE_MAX_PATTERNS + 1))
    app = tree(tmp_path / "many", {"dgd.yaml": DGD, ".dyn-gitops-ignore": many})
    clean_refusal(
        run_cli("validate", str(app)),
        1,
        f".dyn-gitops-ignore:{IGNORE_MAX_PATTERNS + 1}: "
        f"more than {IGNORE_MAX_PATTERNS} ignore patterns",
    )
    long = "x" * (IGNORE_MAX_PATTERN_CHARS + 1) + "\n"
    app = tree(tmp_path / "long", {"dgd.yaml": DGD, ".dyn-gitops-ignore": long})
    clean_refusal(invoke_cli("validate", str(app)), 1, ".dyn-gitops-ignore:1: an ignore pattern of")


def test_bad_exclude_flags_are_usage_errors(tmp_path: Path) -> None:
    app = tree(tmp_path, {"dgd.yaml": DGD})
    flags = [a for i in range(IGNORE_MAX_PATTERNS + 1) for a in ("--exclude", f"p{i}")]
    clean_refusal(invoke_cli("validate", str(app), *flags), 2, "--exclude more than")
    long = "y" * (IGNORE_MAX_PATTERN_CHARS + 1)
    clean_refusal(invoke_cli("render", str(app), "--exclude", long), 2, "an ignore pattern of")


def test_a_pattern_bomb_does_not_stall_the_walk(tmp_path: Path) -> None:
    """``*a*a*a...*b`` against a long name of a's backtracks for minutes in a regular
    expression engine; the matcher is a dynamic program, so this run simply ends (the
    subprocess has a timeout)."""
    bomb = "*a" * 40 + "*b\n"
    app = tree(tmp_path, {"dgd.yaml": DGD, ".dyn-gitops-ignore": bomb * 20})
    for i in range(20):
        tree(app, {f"{'a' * 200}{i}.yaml": CONFIGMAP.format(f"c{i}")})
    found = kinds(run_cli("render", str(app)))
    assert len([k for k in found if k[0] == "ConfigMap"]) == 20


# ---------------------------------------------------------------------------- paths shown
def test_problems_name_files_relative_to_the_current_directory(tmp_path: Path) -> None:
    """``validate apps`` names ``apps/team/bad.yaml``, a path that opens from where the
    command ran (on main: ``team/bad.yaml:1``, relative to PATH), for a directory, a file,
    a revision, the -o json report and -v alike."""
    tree(
        tmp_path,
        {"apps/team/bad.yaml": "kind: Nothing\n", "apps/kustomization.yaml": KUSTOMIZATION},
    )
    want = "apps/team/bad.yaml:1: not a Kubernetes object"
    res = run_cli("validate", "-v", "apps", cwd=tmp_path)
    clean_refusal(res, 1, want, "dyn-gitops: skipped apps/kustomization.yaml: ")
    clean_refusal(run_cli("validate", "./apps/team/bad.yaml", cwd=tmp_path), 1, want)
    report = json.loads(run_cli("validate", "apps", "-o", "json", cwd=tmp_path).stdout)
    assert report["problems"][0]["file"] == "apps/team/bad.yaml"
    git(tmp_path, "init", "-q")
    git(tmp_path, "add", "-A")
    git(tmp_path, "commit", "-qm", "apps")
    clean_refusal(run_cli("validate", "--rev", "HEAD", "apps", cwd=tmp_path), 1, want)
    # from inside PATH, or with an absolute PATH: relative to PATH, as before
    clean_refusal(run_cli("validate", cwd=tmp_path / "apps"), 1, "team/bad.yaml:1: not a")
    res = run_cli("validate", str(tmp_path / "apps"))
    assert res.stderr.startswith("team/bad.yaml:1: not a"), res.stderr


def test_patterns_match_as_gitignore_does() -> None:
    """The matcher agrees with pathspec's GitIgnoreSpec (a reference for gitignore syntax,
    whose regular expressions backtrack, so it is not used on input) wherever no parent
    directory is excluded; under an excluded directory Git (and the walk) keep the file
    out, which pathspec does not model."""
    import random

    pathspec = pytest.importorskip("pathspec")
    from dyn_gitops.ignore import compile_patterns

    patterns = [
        "*.yaml", "values*.yaml", "/a", "a/", "a/**", "**/b", "a/**/c", "!x.yaml", "x*",
        "[ab]*", "[!a]*", "d?", "/d/e", "e/", "**/f/g", "*/c", "c", "a/b", "[a-c]x", "\\#h",
        "!a/b", "!*.yaml", "a/*", "**/*.json", "a/**/b/**", "a\\*", "# comment", "",
    ]  # fmt: skip
    paths = [
        "a", "a/b", "a/b/c", "b", "b/c", "c", "a/c", "x.yaml", "a/x.yaml", "values.yaml",
        "d", "dd", "d/e", "d/e/x", "f/g", "q/f/g", "q/f/g/h", "bx", "ax", "#h", "a/b/c/d",
        "q.json", "a/q.json", "a/b/x/b/y", "a*",
    ]  # fmt: skip
    rng = random.Random(26)
    for _ in range(600):
        chosen = rng.sample(patterns, rng.randint(1, 4))
        ours, problems = compile_patterns(
            (("t", p) for p in chosen),
            max_patterns=IGNORE_MAX_PATTERNS,
            max_chars=IGNORE_MAX_PATTERN_CHARS,
        )
        assert problems == []
        reference = pathspec.GitIgnoreSpec.from_lines(chosen)
        for path in paths:
            parts = path.split("/")
            parents = ("/".join(parts[:i]) for i in range(1, len(parts)))
            if any(ours.excluded(d, is_dir=True) for d in parents):
                continue
            got = bool(ours.excluded(path, is_dir=False))
            assert got == reference.match_file(path), (chosen, path)
