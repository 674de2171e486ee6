"""Issue 11, point 1: output paths are safe by construction.

An object's namespace, name, kind, group and version become a file path under
``render --out-dir`` and ``hydrate`` (branch and ``--out-dir``). Whatever the input says,
nothing may be written outside the output directory, two objects never share a file (not
even on a case-insensitive disk), identities the API server would refuse are input errors
(exit 1, ``file:line: Kind/name: field: message``, nothing written, nothing on stdout) for
every output, and a failed write leaves neither a half-written tree nor a temporary
directory behind.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml
from support.cli import invoke_cli, run_cli
from support.hydrating import RUNNER_KEY, RUNNER_KEY_ENV
from support.paths import SAMPLES

from dyn_gitops import emit, objpath
from dyn_gitops.workflows.cachetrust import content_digest, signed
from dyn_gitops.workflows.incremental import CACHE_FORMAT, blob_id

PROBLEM = re.compile(
    r"^[^:\n]+\.yaml:\d+: .+?/.*?: (metadata\.name|metadata\.namespace|"
    r"apiVersion|kind): .+$"
)
GIT_ENV = {
    "GIT_AUTHOR_NAME": "Test",
    "GIT_AUTHOR_EMAIL": "test@example.com",
    "GIT_COMMITTER_NAME": "Test",
    "GIT_COMMITTER_EMAIL": "test@example.com",
    "GIT_CONFIG_GLOBAL": "/dev/null",
    "GIT_CONFIG_NOSYSTEM": "1",
    "PATH": "/usr/bin:/bin:/usr/local/bin",
}


def cm(name: str, namespace: str | None = None, kind: str = "ConfigMap", api: str = "v1") -> str:
    ns = f"  namespace: {json.dumps(namespace)}\n" if namespace is not None else ""
    return (
        f"apiVersion: {api}\nkind: {kind}\nmetadata:\n  name: {json.dumps(name)}\n{ns}"
        "data:\n  a: b\n"
    )


def role(name: str) -> str:
    return cm(name, kind="ClusterRole", api="rbac.authorization.k8s.io/v1").replace(
        "data:\n  a: b\n", "rules: []\n"
    )


def tree(root: Path) -> set[str]:
    """Every path under ``root`` (hidden ones too), as a listing to compare."""
    return {p.relative_to(root).as_posix() for p in root.rglob("*")}


# Each case: the input, and the field the problem names. {elsewhere} is an absolute path
# outside the output directory (a directory that must stay absent).
BAD = {
    "slash-in-name": (cm("a/b", "demo"), "metadata.name"),
    "dotdot-name": (cm("..", "demo"), "metadata.name"),
    "dotdot-namespace": (cm("x", "../.."), "metadata.namespace"),
    "absolute-namespace": (cm("x", "{elsewhere}"), "metadata.namespace"),
    "nul-in-name": (cm("a\0b", "demo"), "metadata.name"),
    "overlong-name": (cm("a" * 254, "demo"), "metadata.name"),
    "overlong-namespace": (cm("x", "n" * 64), "metadata.namespace"),
    "uppercase-namespace": (cm("x", "Demo"), "metadata.namespace"),
    "uppercase-name": (cm("Data", "demo"), "metadata.name"),
    "slash-in-rbac-name": (role("system:a/b"), "metadata.name"),
    "dotdot-kind": (cm("x", "demo", kind=".."), "kind"),
    "slash-in-group": (cm("x", "demo", api="a/b/v1"), "apiVersion"),
    "case-collision": (role("Reader") + "---\n" + role("reader"), "metadata.name"),
    "service-name-not-dns1035": (
        cm("1st", "demo", kind="Service").replace(
            "data:\n  a: b\n", "spec:\n  ports: [{port: 80}]\n"
        ),
        "metadata.name",
    ),
}


def _write_input(root: Path, case: str) -> Path:
    text, _ = BAD[case]
    src = root / "in"
    src.mkdir(parents=True)
    (src / "bad.yaml").write_text(text.replace("{elsewhere}", str(root / "elsewhere")))
    return src


def _assert_refused(res: object, case: str, before: set[str], root: Path) -> None:
    code, stdout, stderr = (getattr(res, k) for k in ("code", "stdout", "stderr"))
    assert code == 1, stderr
    assert stdout == ""
    problems = [line for line in stderr.splitlines() if not line.startswith("dyn-gitops:")]
    assert problems, stderr
    assert all(PROBLEM.match(line) for line in problems), stderr
    assert BAD[case][1] in problems[0]
    assert tree(root) == before  # nothing written anywhere, no temporary directory
    assert not (root / "elsewhere").exists()


@pytest.mark.parametrize("case", sorted(BAD))
def test_render_refuses_unsafe_identities_for_out_dir_and_stream(case: str, tmp_path: Path) -> None:
    src = _write_input(tmp_path, case)
    before = tree(tmp_path)
    res = invoke_cli("render", str(src), "--out-dir", str(tmp_path / "out"))
    _assert_refused(res, case, before, tmp_path)
    # the stream (stdout) refuses the same objects: the API server would
    _assert_refused(invoke_cli("render", str(src)), case, before, tmp_path)
    _assert_refused(
        invoke_cli("render", str(src), "--output-format", "json"), case, before, tmp_path
    )


@pytest.fixture(scope="module")
def bad_repos(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """One repository per case (built once; each hydrate test only reads it)."""
    out = {}
    for case in sorted(BAD):
        root = tmp_path_factory.mktemp(case)
        repo = root / "repo"
        repo.mkdir()
        shutil.copytree(SAMPLES / "vllm-agg" / "input", repo / "deploy")
        text = BAD[case][0].replace("{elsewhere}", str(root / "elsewhere"))
        (repo / "deploy" / "bad.yaml").write_text(text)
        for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-q", "-m", "bad"]):
            subprocess.run(["git", *args], cwd=repo, env=GIT_ENV, check=True)
        out[case] = repo
    return out


@pytest.mark.parametrize("case", sorted(BAD))
def test_hydrate_refuses_unsafe_identities(case: str, bad_repos: dict[str, Path]) -> None:
    repo = bad_repos[case]
    root = repo.parent
    refs = subprocess.run(
        ["git", "for-each-ref"], cwd=repo, capture_output=True, text=True, check=True
    ).stdout
    before = tree(root)
    env = {"HOME": str(root)}
    res = run_cli("hydrate", "deploy", "--rev", "HEAD", "--branch", "rendered", cwd=repo, env=env)
    _assert_refused(res, case, before, root)
    assert (
        subprocess.run(
            ["git", "for-each-ref"], cwd=repo, capture_output=True, text=True, check=True
        ).stdout
        == refs
    )  # no branch made or moved
    res = run_cli(
        "hydrate", "deploy", "--rev", "HEAD", "--out-dir", str(root / "out"), cwd=repo, env=env
    )
    _assert_refused(res, case, before, root)


# ---------------------------------------------------------------------------- valid names
def test_valid_but_long_names_get_bounded_unique_file_names(tmp_path: Path) -> None:
    """A custom kind in a long group with a long name: file names the disk accepts (a
    readable prefix and a digest of the whole name), still one file per object."""
    group = ".".join(["g" * 60] * 4)  # 243 characters, a valid subdomain
    names = ["n" * 250 + "a", "n" * 250 + "b"]
    docs = [cm(n, "demo", kind="Widget", api=f"{group}/v1") for n in names]
    src = tmp_path / "in"
    src.mkdir()
    (src / "w.yaml").write_text("---\n".join(docs))
    res = invoke_cli("render", str(src), "--out-dir", str(tmp_path / "out"))
    assert res.code == 0, res.stderr
    files = sorted(p for p in tree(tmp_path / "out") if p.startswith("demo/"))
    assert len(files) == 2
    for rel in files:
        assert len(rel.split("/")[1].encode()) <= objpath.MAX_FILE_NAME
        assert objpath.is_object_path(rel)
    loaded = {
        yaml.safe_load((tmp_path / "out" / rel).read_text())["metadata"]["name"] for rel in files
    }
    assert loaded == set(names)


def test_cluster_scoped_and_rbac_names_need_no_namespace(tmp_path: Path) -> None:
    src = tmp_path / "in"
    src.mkdir()
    (src / "r.yaml").write_text(role("system:controller:Reader"))
    res = invoke_cli("render", str(src), "--out-dir", str(tmp_path / "out"))
    assert res.code == 0, res.stderr
    assert "_cluster/clusterrole.rbac.authorization.k8s.io_system:controller:Reader.yaml" in tree(
        tmp_path / "out"
    )


def test_generate_name_objects_stream_but_have_no_file(tmp_path: Path) -> None:
    src = tmp_path / "in"
    src.mkdir()
    (src / "job.yaml").write_text(cm("x", "demo").replace('  name: "x"', "  generateName: x-"))
    assert invoke_cli("render", str(src)).code == 0
    before = tree(tmp_path)
    res = invoke_cli("render", str(src), "--out-dir", str(tmp_path / "out"))
    assert res.code == 1 and res.stdout == "", res.stderr
    assert "generateName" in res.stderr
    assert tree(tmp_path) == before


# ---------------------------------------------------------------------------- the setting
@pytest.fixture
def app(tmp_path: Path) -> Path:
    d = tmp_path / "app"
    d.mkdir()
    shutil.copy(SAMPLES / "vllm-agg" / "input" / "vllm-agg.yaml", d)
    return d


BAD_NAMESPACES = ["../evil", "/abs/path", "Demo", "a" * 64, "a_b", ""]


@pytest.mark.parametrize("value", BAD_NAMESPACES)
def test_namespace_setting_is_a_dns_label_from_flags_env_and_file(app: Path, value: str) -> None:
    before = tree(app.parent)
    for res in (
        invoke_cli("render", str(app), "--namespace", value),
        invoke_cli("render", str(app), env={"DYN_GITOPS_NAMESPACE": value}),
    ):
        assert res.code == 2, res.stderr  # as every other bad flag or variable
        assert res.stdout == ""
        assert "namespace: found " in res.stderr and "expected a namespace name" in res.stderr
    (app / "dyn-gitops.yaml").write_text(yaml.safe_dump({"namespace": value}))
    before = tree(app.parent)
    res = invoke_cli("render", str(app), "--out-dir", str(app.parent / "out"))
    assert res.code in (1, 2), res.stderr  # refused, never rendered
    assert res.stdout == ""
    assert "dyn-gitops.yaml:1: namespace: found " in res.stderr
    assert "expected a namespace name" in res.stderr
    assert tree(app.parent) == before


@pytest.mark.parametrize(
    "env",
    [
        {"ARGOCD_APP_NAMESPACE": "../evil"},
        {"DYN_GITOPS_NAMESPACE": "Team-A"},
        {"ARGOCD_ENV_DYN_GITOPS_NAMESPACE": "/abs"},
        {"ARGOCD_APP_PARAMETERS": json.dumps([{"name": "namespace", "string": "a/b"}])},
    ],
)
def test_namespace_from_argocd_is_checked_too(app: Path, env: dict[str, str]) -> None:
    res = run_cli(
        "cmp", "generate", "--server", "off", cwd=app, env={"TMPDIR": "/nonexistent", **env}
    )
    assert res.code == 2, res.stderr  # as every other bad plugin setting
    assert res.stdout == ""
    assert "namespace: found " in res.stderr and "expected a namespace name" in res.stderr


def test_a_valid_argocd_namespace_still_renders(app: Path) -> None:
    res = run_cli(
        "cmp",
        "generate",
        "--server",
        "off",
        cwd=app,
        env={"TMPDIR": "/nonexistent", "ARGOCD_APP_NAMESPACE": "team-a"},
    )
    assert res.code == 0, res.stderr


# ---------------------------------------------------------------------------- atomic writes
def _siblings(parent: Path) -> set[str]:
    return {p.name for p in parent.iterdir()}


@pytest.mark.parametrize("existing", [False, True])
@pytest.mark.parametrize("error", [RuntimeError, KeyboardInterrupt])
def test_a_failing_fill_changes_nothing_and_leaves_no_temp_dir(
    tmp_path: Path, existing: bool, error: type[BaseException]
) -> None:
    target = tmp_path / "out"
    if existing:
        emit.write_out_dir([yaml.safe_load(cm("old", "demo"))], str(target))
    before = (
        {p: (target / p).read_bytes() for p in tree(target) if (target / p).is_file()}
        if existing
        else None
    )
    listing = _siblings(tmp_path)

    def fill(tmp: Path) -> None:
        (tmp / "half.yaml").write_text("half")
        raise error("boom")

    with pytest.raises(error):
        emit.replace_dir(target, fill)
    assert _siblings(tmp_path) == listing  # no .out.* left
    if existing:
        assert {
            p: (target / p).read_bytes() for p in tree(target) if (target / p).is_file()
        } == before


def _fail_renames(monkeypatch: pytest.MonkeyPatch, failing: set[int]) -> None:
    """``os.rename`` in emit fails ("disk on fire") on the calls numbered in ``failing``."""
    real_rename: Callable[..., None] = os.rename
    calls = 0

    def rename(src: object, dst: object) -> None:
        nonlocal calls
        calls += 1
        if calls in failing:
            raise OSError("disk on fire")
        real_rename(src, dst)

    monkeypatch.setattr(emit.os, "rename", rename)


def test_a_failing_swap_puts_the_old_tree_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "out"
    emit.write_out_dir([yaml.safe_load(cm("old", "demo"))], str(target))
    old_files = tree(target)
    listing = _siblings(tmp_path)
    _fail_renames(monkeypatch, {2})  # the new tree into place
    with pytest.raises(OSError, match="disk on fire"):
        emit.write_out_dir([yaml.safe_load(cm("new", "demo"))], str(target))
    monkeypatch.undo()
    assert tree(target) == old_files
    assert _siblings(tmp_path) == listing


def test_the_old_tree_is_never_deleted_when_it_cannot_be_put_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "out"
    emit.write_out_dir([yaml.safe_load(cm("old", "demo"))], str(target))
    _fail_renames(monkeypatch, {2, 3})  # the new tree into place, and the way back
    with pytest.raises(OSError, match="disk on fire"):
        emit.write_out_dir([yaml.safe_load(cm("new", "demo"))], str(target))
    monkeypatch.undo()
    kept = [p for p in tmp_path.iterdir() if p.name.startswith(".out.old.")]
    assert len(kept) == 1 and (kept[0] / "x" / "demo" / "configmap_old.yaml").is_file()
    assert not [
        p
        for p in tmp_path.iterdir()
        if p.name.startswith(".out.") and not p.name.startswith(".out.old.")
    ]


def test_success_leaves_only_the_target(tmp_path: Path) -> None:
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "a.yaml").write_text(cm("a", "demo"))
    for _ in range(2):  # create, then replace
        res = invoke_cli("render", str(tmp_path / "in"), "--out-dir", str(tmp_path / "out"))
        assert res.code == 0, res.stderr
        assert _siblings(tmp_path) == {"in", "out"}
    assert tree(tmp_path / "out") == {".dyn-gitops-output", "demo", "demo/configmap_a.yaml"}


@pytest.mark.parametrize("hydrate", [False, True])
def test_symlinked_or_file_out_dir_is_refused(tmp_path: Path, hydrate: bool) -> None:
    """A link is never followed (it could point anywhere) nor replaced; a file is kept."""
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "in").mkdir()
    (repo / "in" / "a.yaml").write_text(cm("a", "demo"))
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-q", "-m", "x"]):
        subprocess.run(["git", *args], cwd=repo, env=GIT_ENV, check=True)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (tmp_path / "link").symlink_to(elsewhere)
    (tmp_path / "file").write_text("keep me")
    before = tree(tmp_path)
    for target in ("link", "file"):
        out = str(tmp_path / target)
        res = (
            run_cli(
                "hydrate",
                "in",
                "--rev",
                "HEAD",
                "--out-dir",
                out,
                cwd=repo,
                env={"HOME": str(tmp_path)},
            )
            if hydrate
            else invoke_cli("render", str(repo / "in"), "--out-dir", out)
        )
        assert res.code == 2 and res.stdout == "", res.stderr
        assert "refusing" in res.stderr or "not a directory" in res.stderr
        assert tree(tmp_path) == before
    assert (tmp_path / "file").read_text() == "keep me"
    assert (tmp_path / "link").is_symlink() and not any(elsewhere.iterdir())


def _hydrated_sample(tmp_path: Path) -> tuple[Path, Path, dict[str, str]]:
    """A repository holding the vllm-agg sample, hydrated once into ``out``."""
    repo = tmp_path / "repo"
    shutil.copytree(SAMPLES / "vllm-agg" / "input", repo / "deploy")
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-q", "-m", "x"]):
        subprocess.run(["git", *args], cwd=repo, env=GIT_ENV, check=True)
    out = tmp_path / "out"
    env = {"HOME": str(tmp_path), **RUNNER_KEY_ENV}  # the cache is trusted, so used
    assert (
        run_cli("hydrate", "deploy", "--rev", "HEAD", "--out-dir", str(out), cwd=repo, env=env).code
        == 0
    )
    return repo, out, env


def _files(out: Path) -> dict[str, bytes]:
    return {p: (out / p).read_bytes() for p in tree(out) if (out / p).is_file()}


def test_a_tampered_cache_cannot_choose_output_files(tmp_path: Path) -> None:
    """hydrate reads back the cache it wrote (people can edit it): only paths of the shape
    objpath produces are trusted, even in a record signed with the runner's key."""
    repo, out, env = _hydrated_sample(tmp_path)
    clean = _files(out)
    cache_path = out / ".dyn-gitops" / "cache.json"
    cache = json.loads(cache_path.read_text())
    assert cache["format"] == CACHE_FORMAT
    # a unit that claims the real input, and as its output a file of the last run that is
    # no object: reusing it would publish whatever the cache says instead of the render
    source_id = blob_id((repo / "deploy" / "vllm-agg.yaml").read_bytes())
    kust = content_digest((out / "kustomization.yaml").read_bytes())
    head = {k: cache[k] for k in ("format", "renderer", "settings")}
    record = {
        "files": {"vllm-agg.yaml": source_id},
        "graphs": [],
        "objects": {"kustomization.yaml": {"key": "k", "digest": kust}},
    }
    cache["units"] = [signed(RUNNER_KEY.encode(), head, record)]  # as a bug of ours could
    cache_path.write_text(json.dumps(cache))
    before = tree(tmp_path)
    res = run_cli("hydrate", "deploy", "--rev", "HEAD", "--out-dir", str(out), cwd=repo, env=env)
    assert res.code == 0, res.stderr
    assert tree(tmp_path) == before
    assert _files(out) == clean


def test_a_deeply_nested_cache_starts_cold(tmp_path: Path) -> None:
    """The cache read back from the branch or directory is bounded like any input: a cache
    nested past what json.loads can recurse through is ignored (a cold run), not a crash."""
    repo, out, env = _hydrated_sample(tmp_path)
    clean = _files(out)
    (out / ".dyn-gitops" / "cache.json").write_text("[" * 200_000 + "]" * 200_000)
    res = run_cli("hydrate", "deploy", "--rev", "HEAD", "--out-dir", str(out), cwd=repo, env=env)
    assert res.code == 0, res.stderr
    assert _files(out) == clean


# ---------------------------------------------------------------------------- the rule
def test_the_path_rule_is_one_function() -> None:
    obj = yaml.safe_load(cm("a", "demo", kind="Widget", api="example.com/v1"))
    assert emit.object_filename(obj) == objpath.relpath(obj) == "demo/widget.example.com_a.yaml"
    assert (
        objpath.relpath(yaml.safe_load(role("r")))
        == "_cluster/clusterrole.rbac.authorization.k8s.io_r.yaml"
    )
    with pytest.raises(objpath.PathError):
        objpath.assign([yaml.safe_load(role("R")), yaml.safe_load(role("r"))])
    for bad in (
        "../x.yaml",
        "/abs/x.yaml",
        "demo/../x.yaml",
        "a/b/c.yaml",
        "Demo/x.yaml",
        "demo/x\0.yaml",
        "demo/.yaml/",
        "demo/x.txt",
    ):
        assert not objpath.is_object_path(bad), bad


def test_identity_rule_edges() -> None:
    ok = yaml.safe_load(cm("a", ""))  # an empty namespace is unset, as kubectl takes it
    assert objpath.object_problems(ok) == []
    assert objpath.relpath(ok) == "_cluster/configmap_a.yaml"
    for api in ("/v1", "apps/", "a/b/v1", "Apps/v1"):
        assert objpath.type_problem(api, "Deployment") is not None, api
    assert objpath.type_problem("apps/v1", "Deployment") is None
    assert objpath.name_problem("", "Service", "a" * 63) is None
    assert objpath.name_problem("", "Service", "a" * 64) is not None
    assert objpath.name_problem("", "Namespace", "a.b") is not None  # a label, not a subdomain
    assert objpath.name_problem("example.com", "Widget", "Any:Thing") is None  # path segment
    assert objpath.name_problem("example.com", "Widget", "a\nb") is not None


def test_hydrate_finds_a_case_collision_across_files_with_a_warm_cache(tmp_path: Path) -> None:
    """Input files are rendered apart and reused from the cache; objects in different files
    that would share a file on a case-insensitive disk are still found (as render does)."""
    repo = tmp_path / "repo"
    shutil.copytree(SAMPLES / "vllm-agg" / "input", repo / "deploy")
    (repo / "deploy" / "a.yaml").write_text(role("Reader"))
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-q", "-m", "x"]):
        subprocess.run(["git", *args], cwd=repo, env=GIT_ENV, check=True)
    env = {"HOME": str(tmp_path), **RUNNER_KEY_ENV}  # a warm, trusted cache
    out = tmp_path / "out"
    for where in (["--branch", "rendered"], ["--out-dir", str(out)]):
        res = run_cli("hydrate", "deploy", "--rev", "HEAD", *where, cwd=repo, env=env)
        assert res.code == 0, res.stderr
    (repo / "deploy" / "b.yaml").write_text(role("reader"))
    for args in (["add", "-A"], ["commit", "-q", "-m", "y"]):
        subprocess.run(["git", *args], cwd=repo, env=GIT_ENV, check=True)
    tip = subprocess.run(
        ["git", "rev-parse", "rendered"], cwd=repo, capture_output=True, text=True, check=True
    ).stdout
    before = tree(tmp_path)
    for where in (["--branch", "rendered"], ["--out-dir", str(out)]):
        res = run_cli("hydrate", "deploy", "--rev", "HEAD", *where, cwd=repo, env=env)
        assert res.code == 1 and res.stdout == "", res.stderr
        # PATH "deploy" is relative: the file is named from the current directory
        assert re.search(
            r"^deploy/b\.yaml:\d+: ClusterRole/reader: metadata\.name: writes the same "
            r"output file as ClusterRole/Reader from a\.yaml",
            res.stderr,
            re.M,
        ) or re.search(
            r"^deploy/a\.yaml:\d+: ClusterRole/Reader: metadata\.name: writes the same "
            r"output file as ClusterRole/reader from b\.yaml",
            res.stderr,
            re.M,
        ), res.stderr
        assert tree(tmp_path) == before
    assert (
        subprocess.run(
            ["git", "rev-parse", "rendered"], cwd=repo, capture_output=True, text=True, check=True
        ).stdout
        == tip
    )
