"""``dyn-gitops hydrate``: render a commit and publish it as a commit on a branch (Flux).

Every test builds a real Git repository in a temporary directory (git CLI for the fixture,
the real ``dyn-gitops`` entry point for the work) and checks the published tree against a
plain full render (``dyn-gitops render --out-dir``) of the same input: the incremental
path must never be distinguishable from it.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from support.cli import run_cli
from support.hydrating import RUNNER_KEY
from support.paths import REPO
from support.workflow_repo import TREE, Repo

META = ".dyn-gitops/metadata.yaml"
CACHE = ".dyn-gitops/cache.json"
OURS = {META, CACHE, "kustomization.yaml"}
SA = "demo/serviceaccount_planner-serviceaccount.yaml"
KEY = RUNNER_KEY  # the runner's DYN_GITOPS_HYDRATE_KEY


@pytest.fixture
def repo(tmp_path: Path) -> Repo:
    r = Repo(tmp_path / "repo")
    shutil.copytree(TREE, r.path / "deploy")
    (r.path / "README.md").write_text("app\n")
    r.commit("initial")
    return r


def full_render(r: Repo, tmp_path: Path, path: str = "deploy") -> dict[str, bytes]:
    """What a plain `dyn-gitops render --out-dir` writes for the work tree."""
    out = tmp_path / "full"
    shutil.rmtree(out, ignore_errors=True)
    res = run_cli("render", path, "--out-dir", str(out), cwd=r.path)
    assert res.code == 0, res.stderr
    return {
        p.relative_to(out).as_posix(): p.read_bytes()
        for p in out.rglob("*")
        if p.is_file() and p.name != ".dyn-gitops-output"
    }


def objects_of(files: dict[str, bytes]) -> dict[str, bytes]:
    return {p: b for p, b in files.items() if p not in OURS}


def changed(r: Repo, old: str, new: str) -> set[str]:
    return set(r.git("diff", "--name-only", old, new).splitlines())


def stats(stderr: str) -> str:
    return stderr.strip().splitlines()[-1]


# ---------------------------------------------------------------------------- basics
def test_hydrate_publishes_the_full_render_with_metadata(repo: Repo, tmp_path: Path) -> None:
    head = repo.git("rev-parse", "HEAD")
    res = repo.hydrate("deploy")
    assert res.code == 0, res.stderr
    tip = repo.tip()
    assert res.stdout.strip() == tip
    files = repo.files()
    assert objects_of(files) == full_render(repo, tmp_path)
    kust = yaml.safe_load(files["kustomization.yaml"])
    assert kust["kind"] == "Kustomization"
    assert kust["resources"] == sorted(objects_of(files))
    meta = yaml.safe_load(files[META])
    assert meta["source"] == {"commit": head, "revision": "HEAD", "path": "deploy"}
    assert meta["renderer"]["version"] == __import__("dyn_gitops").__version__
    assert meta["settings"]["namespace"] == "demo"  # from deploy/dyn-gitops.yaml
    # objects do not carry the commit: one-file changes stay one-file diffs
    assert b"source-commit" not in b"".join(objects_of(files).values())
    # the source DGDs are published in v1beta1 (setting source-api-version)
    dgds = [
        d
        for text in objects_of(files).values()
        for d in yaml.safe_load_all(text)
        if d and d.get("kind") == "DynamoGraphDeployment"
    ]
    assert dgds and {d["apiVersion"] for d in dgds} == {"nvidia.com/v1beta1"}
    assert all("components" in d["spec"] for d in dgds)
    message = repo.git("log", "-1", "--format=%B", "rendered")
    assert f"Dyn-Gitops-Source-Commit: {head}" in message


def test_hydrate_never_touches_work_tree_index_or_head(repo: Repo) -> None:
    (repo.path / "deploy" / "agg.yaml").write_text("uncommitted: edit\n")
    index = (repo.path / ".git" / "index").read_bytes()
    status = repo.git("status", "--porcelain")
    res = repo.hydrate("deploy")
    assert res.code == 0, res.stderr
    assert (repo.path / ".git" / "index").read_bytes() == index
    assert repo.git("status", "--porcelain") == status
    assert repo.git("symbolic-ref", "HEAD") == "refs/heads/main"
    assert (repo.path / "deploy" / "agg.yaml").read_text() == "uncommitted: edit\n"
    assert not (repo.path / ".dyn-gitops").exists()


def test_hydrate_is_idempotent_and_skips_commits_that_change_nothing(repo: Repo) -> None:
    first = repo.hydrate("deploy")
    tip = repo.tip()
    again = repo.hydrate("deploy")
    assert again.code == 0 and again.stdout.strip() == tip
    assert "up to date" in again.stderr and "0 input files rendered" in again.stderr
    (repo.path / "README.md").write_text("only the docs changed\n")
    repo.commit("docs")
    docs = repo.hydrate("deploy")
    assert docs.code == 0 and repo.tip() == tip, docs.stderr
    assert first.stdout.strip() == tip


def test_each_commit_fast_forwards_the_branch(repo: Repo) -> None:
    repo.hydrate("deploy")
    first = repo.tip()
    assert first is not None
    agg = repo.path / "deploy" / "agg.yaml"
    agg.write_text(agg.read_text().replace("replicas: 2", "replicas: 3"))
    repo.commit("scale")
    res = repo.hydrate("deploy")
    assert res.code == 0, res.stderr
    assert repo.git("rev-parse", "rendered~1") == first


def test_same_input_gives_the_same_commit_id(repo: Repo, tmp_path: Path) -> None:
    """The commit is dated like the source commit: hydrating twice (two CI runners) agrees."""
    clone = Repo.__new__(Repo)
    clone.path, clone.env = tmp_path / "clone", repo.env
    subprocess.run(
        ["git", "clone", "-q", str(repo.path), str(clone.path)], check=True, env=repo.env
    )
    for r in (repo, clone):
        assert r.hydrate("deploy", "--author", "CI <ci@example.com>").code == 0
    assert repo.tip() == clone.tip()


# ---------------------------------------------------------------------------- incremental
def test_one_file_change_rerenders_and_rewrites_only_its_outputs(
    repo: Repo, tmp_path: Path
) -> None:
    repo.hydrate("deploy")
    before = repo.tip()
    assert before is not None
    agg = repo.path / "deploy" / "agg.yaml"
    agg.write_text(agg.read_text().replace("replicas: 2", "replicas: 3"))
    repo.commit("scale agg")
    res = repo.hydrate("deploy")
    assert res.code == 0, res.stderr
    assert "1 input files rendered, 4 reused" in stats(res.stderr)
    after = repo.tip()
    assert after is not None
    diff = changed(repo, before, after)
    worker = [p for p in diff if p.startswith("demo/deployment.apps_agg-vllmdecodeworker-")]
    assert len(worker) == 1  # replicas live in an annotation: same worker hash, same file
    assert diff == {META, CACHE, *worker, "demo/dynamographdeployment.nvidia.com_agg.yaml"}
    assert objects_of(repo.files()) == full_render(repo, tmp_path)


def test_shared_planner_rbac_stays_right_as_files_come_and_go(repo: Repo, tmp_path: Path) -> None:
    """The planner ServiceAccount every graph of a namespace shares lists its sources."""
    repo.hydrate("deploy")
    sa = yaml.safe_load(repo.files()[SA])["metadata"]["annotations"]
    assert sa["dyn-gitops.io/source-path"] == "agg.yaml,pair.yaml,planner.yaml"
    steps: list[tuple[str, Any]] = [
        ("remove agg", lambda d: (d / "agg.yaml").unlink()),
        (
            "add agg2",
            lambda d: (d / "agg2.yaml").write_text(
                (TREE / "agg.yaml").read_text().replace("name: agg", "name: agg2")
            ),
        ),
        (
            "move pair-b to prod",
            lambda d: (d / "pair.yaml").write_text(
                (TREE / "pair.yaml")
                .read_text()
                .replace("name: pair-b\n", "name: pair-b\n  namespace: prod\n")
            ),
        ),
        ("restore", lambda d: [shutil.rmtree(d), shutil.copytree(TREE, d)]),
    ]
    for what, change in steps:
        change(repo.path / "deploy")
        repo.commit(what)
        res = repo.hydrate("deploy")
        assert res.code == 0, f"{what}: {res.stderr}"
        files = repo.files()
        assert objects_of(files) == full_render(repo, tmp_path), what
        assert yaml.safe_load(files["kustomization.yaml"])["resources"] == sorted(objects_of(files))
    # shares were merged, not re-rendered together: the last step reused unchanged files
    assert "reused" in stats(res.stderr) and ", 0 reused" not in stats(res.stderr)


def test_clashing_files_are_rendered_together_and_reported_like_render(repo: Repo) -> None:
    (repo.path / "deploy" / "agg-copy.yaml").write_text(
        (TREE / "agg.yaml").read_text().replace("replicas: 2", "replicas: 5")
    )
    repo.commit("a second graph named agg")
    res = repo.hydrate("deploy")
    plain = run_cli("render", "deploy", cwd=repo.path)
    assert res.code == plain.code == 1
    assert res.stdout == ""
    problems = [line for line in res.stderr.splitlines() if not line.startswith("dyn-gitops:")]
    assert problems == [
        line for line in plain.stderr.splitlines() if not line.startswith("dyn-gitops:")
    ]
    assert repo.tip() is None  # nothing published


def test_an_output_edited_on_the_branch_is_rendered_again(repo: Repo, tmp_path: Path) -> None:
    repo.hydrate("deploy")
    path = "demo/service_agg-frontend.yaml"
    wt = tmp_path / "wt"
    repo.git("worktree", "add", "-q", str(wt), "rendered")
    (wt / path).write_text("hand: edit\n")
    (wt / SA).write_text("hand: edit\n")
    subprocess.run(["git", "commit", "-qam", "hand edit"], cwd=wt, env=repo.env, check=True)
    repo.git("worktree", "remove", "--force", str(wt))
    (repo.path / "README.md").write_text("touch\n")
    repo.commit("touch")
    res = repo.hydrate("deploy")
    assert res.code == 0, res.stderr
    assert objects_of(repo.files()) == full_render(repo, tmp_path)
    for edited in (path, SA):  # named, the shared one too
        assert f"dyn-gitops: warning: rendered:{edited}: edited on the branch" in res.stderr


@pytest.mark.parametrize("key", [None, KEY], ids=["no key", "runner key"])
def test_a_forged_output_with_a_matching_cache_is_rendered_again_and_reported(
    repo: Repo, tmp_path: Path, key: str | None
) -> None:
    """Issue 25 point 6: someone who can push to the branch edits an output and its cache
    record to match; the next run must not take it for its own render."""
    assert repo.hydrate("deploy", key=key).code == 0
    path = "demo/service_agg-frontend.yaml"
    forged = repo.forge(tmp_path, path, lambda b: b.replace(b"port: 8000", b"port: 8666"))
    (repo.path / "README.md").write_text("touch\n")
    repo.commit("touch")
    res = repo.hydrate("deploy", key=key)
    assert res.code == 0, res.stderr
    assert repo.files()[path] != forged, f"the forged {path} was reused: {stats(res.stderr)}"
    assert objects_of(repo.files()) == full_render(repo, tmp_path)
    warnings = [line for line in res.stderr.splitlines() if "warning" in line]
    assert any(f"rendered:{path}" in line for line in warnings), res.stderr
    if key is not None:  # only the forged record's input is rendered again
        assert "1 input files rendered, 4 reused" in stats(res.stderr)
        again = repo.hydrate("deploy", key=key)  # healed: reused again, and quiet
        assert "0 input files rendered" in stats(again.stderr)
        assert "warning" not in again.stderr


def test_without_the_runner_key_nothing_is_reused_and_a_note_says_why(repo: Repo) -> None:
    """The cache on the branch proves nothing unless the runner's key signed it: no key (or
    another key) renders every file, says why, and never calls that an edit."""
    assert repo.hydrate("deploy", key=None).code == 0
    again = repo.hydrate("deploy", key=None)
    assert again.code == 0, again.stderr
    assert "5 input files rendered, 0 reused" in stats(again.stderr)
    assert "DYN_GITOPS_HYDRATE_KEY" in again.stderr and "warning" not in again.stderr
    assert "up to date" in again.stderr  # the same bytes: no commit
    assert repo.hydrate("deploy").code == 0  # the runner key signs the records
    other = repo.hydrate("deploy", key="another-runner-key-" + "x" * 20)
    assert "5 input files rendered, 0 reused" in stats(other.stderr), other.stderr
    assert "another key" in other.stderr and "warning" not in other.stderr
    assert repo.hydrate("deploy").code == 0  # back to the runner key: cold once, then reused
    assert "0 input files rendered, 5 reused" in stats(repo.hydrate("deploy").stderr)


def test_a_short_runner_key_is_refused_without_showing_it(repo: Repo) -> None:
    short = "s3cr3t-value"
    res = repo.hydrate("deploy", key=short)
    assert res.code == 2 and repo.tip() is None
    assert "DYN_GITOPS_HYDRATE_KEY" in res.stderr and "openssl rand" in res.stderr
    assert short not in res.stderr + res.stdout
    assert repo.hydrate("deploy", key="").code == 0  # an unset CI secret: no key


def test_no_cache_and_cache_agree(repo: Repo, tmp_path: Path) -> None:
    repo.hydrate("deploy")
    cached = repo.files()
    repo.git("branch", "-D", "rendered")
    assert repo.hydrate("deploy", "--no-cache").code == 0
    assert repo.files() == cached


# ---------------------------------------------------------------------------- safety
def test_bad_input_publishes_nothing(repo: Repo) -> None:
    repo.hydrate("deploy")
    tip = repo.tip()
    (repo.path / "deploy" / "agg.yaml").write_text(
        (TREE / "agg.yaml").read_text().replace("replicas: 2", "replica: 2")
    )
    repo.commit("typo")
    res = repo.hydrate("deploy")
    assert res.code == 1 and res.stdout == ""
    assert "agg.yaml:" in res.stderr and "nothing hydrated" in res.stderr
    assert repo.tip() == tip


def test_an_empty_render_is_refused(repo: Repo) -> None:
    """An empty tree plus Flux's prune would delete every workload."""
    repo.hydrate("deploy")
    tip = repo.tip()
    shutil.rmtree(repo.path / "deploy")
    (repo.path / "deploy").mkdir()
    (repo.path / "deploy" / "dyn-gitops.yaml").write_text("namespace: demo\n")
    repo.commit("delete everything")
    res = repo.hydrate("deploy")
    assert res.code == 1 and "refusing empty output" in res.stderr
    assert repo.tip() == tip
    assert repo.hydrate("deploy", "--allow-empty").code == 0
    assert set(repo.files()) == OURS


def test_lost_race_keeps_both_commits(repo: Repo) -> None:
    """The branch moves between building and publishing: nothing is overwritten or lost."""
    from dyn_gitops import settings as settings_mod
    from dyn_gitops.parse import settings_values
    from dyn_gitops.read import read_git
    from dyn_gitops.workflows import gitstore, hydrate

    repo.hydrate("deploy")
    agg = repo.path / "deploy" / "agg.yaml"
    agg.write_text(agg.read_text().replace("replicas: 2", "replicas: 4"))
    repo.commit("scale")
    src = read_git(str(repo.path), "HEAD", "deploy", max_file_bytes=1 << 20)
    settings = settings_mod.resolve(file_values=settings_values(src)).settings
    rival = repo.git("commit-tree", "-p", "rendered", "-m", "someone else", "rendered^{tree}")

    def someone_else_pushes() -> None:
        repo.git("update-ref", "refs/heads/rendered", rival)

    req = hydrate.Request(rev="HEAD", source_path="deploy", branch="rendered")
    with pytest.raises(gitstore.BranchMoved) as caught:
        hydrate.to_branch(str(repo.path), src, settings, req, before_update=someone_else_pushes)
    assert repo.tip() == rival  # the other writer's commit stands
    ours = caught.value.commit
    assert repo.git("cat-file", "-t", ours) == "commit"  # ours is kept, not lost
    assert ours in str(caught.value) and "re-run" in str(caught.value)


def test_locked_branch_exits_4_with_an_actionable_message(repo: Repo) -> None:
    repo.hydrate("deploy")
    tip = repo.tip()
    agg = repo.path / "deploy" / "agg.yaml"
    agg.write_text(agg.read_text().replace("replicas: 2", "replicas: 4"))
    repo.commit("scale")
    lock = repo.path / ".git" / "refs" / "heads" / "rendered.lock"
    lock.write_text("")
    res = repo.hydrate("deploy")
    assert res.code == 4 and res.stdout == ""
    assert "rendered" in res.stderr and "re-run" in res.stderr
    assert repo.tip() == tip
    lock.unlink()
    assert repo.hydrate("deploy").code == 0


def test_checked_out_branch_is_refused(repo: Repo) -> None:
    res = repo.hydrate("deploy", "--branch", "main")
    assert res.code == 2 and "checked out" in res.stderr
    res = repo.hydrate("deploy", "--branch", "bad..name")
    assert res.code == 2 and "not a valid branch name" in res.stderr


def test_target_paths_share_one_branch(repo: Repo, tmp_path: Path) -> None:
    assert repo.hydrate("deploy", "--target-path", "apps/demo").code == 0
    assert repo.hydrate("deploy/prod", "--target-path", "apps/prod").code == 0
    top = {p.split("/")[1] for p in repo.files() if p.startswith("apps/")}
    assert top == {"demo", "prod"}
    assert objects_of(repo.files(under="apps/demo")) == full_render(repo, tmp_path)
    meta = yaml.safe_load(repo.files(under="apps/prod")[META])
    assert meta["source"]["path"] == "deploy/prod"


def test_builds_on_the_remote_tracking_branch_in_a_fresh_clone(repo: Repo, tmp_path: Path) -> None:
    repo.hydrate("deploy")
    clone = Repo.__new__(Repo)
    clone.path, clone.env = tmp_path / "clone", repo.env
    subprocess.run(
        ["git", "clone", "-q", str(repo.path), str(clone.path)], check=True, env=repo.env
    )
    assert clone.tip() is None  # only origin/rendered
    agg = clone.path / "deploy" / "agg.yaml"
    agg.write_text(agg.read_text().replace("replicas: 2", "replicas: 3"))
    clone.commit("scale")
    res = clone.hydrate("deploy")
    assert res.code == 0, res.stderr
    assert clone.git("rev-parse", "rendered~1") == repo.tip()  # a fast-forward: pushable
    assert "1 input files rendered" in stats(res.stderr)


# ---------------------------------------------------------------------------- out-dir
def test_out_dir_holds_the_same_tree(repo: Repo, tmp_path: Path) -> None:
    repo.hydrate("deploy")
    out = tmp_path / "artifact"
    res = repo.hydrate("deploy", "--out-dir", str(out))
    assert res.code == 0, res.stderr
    got = {p.relative_to(out).as_posix(): p.read_bytes() for p in out.rglob("*") if p.is_file()}
    assert got == repo.files()
    again = repo.hydrate("deploy", "--out-dir", str(out))
    assert "0 input files rendered" in again.stderr
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "keep.txt").write_text("mine")
    res = repo.hydrate("deploy", "--out-dir", str(foreign))
    assert res.code == 2 and "refusing" in res.stderr
    assert (foreign / "keep.txt").read_text() == "mine"


# ---------------------------------------------------------------------------- real kustomize
@pytest.mark.realk8s
def test_kustomize_builds_the_hydrated_tree(repo: Repo, tmp_path: Path, test_binaries: Any) -> None:
    """What Flux's kustomize-controller does with the branch: `kustomize build` of it."""
    kustomize = test_binaries("kustomize")["kustomize"]
    repo.hydrate("deploy")
    out = tmp_path / "checkout"
    for path, data in repo.files().items():
        (out / path).parent.mkdir(parents=True, exist_ok=True)
        (out / path).write_bytes(data)
    built = subprocess.run(
        [str(kustomize), "build", str(out)], capture_output=True, text=True, check=True
    ).stdout
    expected = [yaml.safe_load(b) for b in full_render(repo, tmp_path).values()]
    got = list(yaml.safe_load_all(built))

    def key(o: dict[str, Any]) -> tuple[str, str, str]:
        return (o["kind"], o["metadata"].get("namespace", ""), o["metadata"]["name"])

    assert sorted(got, key=key) == sorted(expected, key=key)


def test_two_ci_runners_racing_lose_nothing(tmp_path: Path) -> None:
    """The CI sample's loop: the runner whose push is rejected rebuilds on the winner."""
    origin = tmp_path / "origin.git"
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(origin)], check=True)
    seed = Repo(tmp_path / "seed")
    shutil.copytree(TREE, seed.path / "deploy")
    seed.commit("initial")
    seed.git("push", "-q", str(origin), "main")
    runners = []
    for name in ("a", "b"):
        r = Repo.__new__(Repo)
        r.path, r.env = tmp_path / name, seed.env
        subprocess.run(["git", "clone", "-q", str(origin), str(r.path)], check=True, env=r.env)
        runners.append(r)
    a, b = runners
    agg = b.path / "deploy" / "agg.yaml"  # b renders the newer commit (a rewind is refused)
    agg.write_text(agg.read_text().replace("replicas: 2", "replicas: 3"))
    b.commit("b: scale")
    for r in (a, b):
        assert r.hydrate("deploy").code == 0
    a.git("push", "-q", "origin", "rendered")
    with pytest.raises(subprocess.CalledProcessError):
        b.git("push", "-q", "origin", "rendered")  # not a fast-forward: rejected
    b.git("fetch", "-q", "origin", "rendered")
    b.git("branch", "-D", "rendered")
    assert b.hydrate("deploy").code == 0
    b.git("push", "-q", "origin", "rendered")
    history = b.git("log", "--format=%H", "origin/rendered").splitlines()
    assert a.tip() in history  # the winner's commit is kept under ours


# ---------------------------------------------------------------------------- samples
def _options(command: str) -> set[str]:
    text = run_cli(command, "--help").stdout.replace(",", " ").replace("/", " ")
    return {w for w in text.split() if w.startswith("--")}


def test_flux_samples_watch_what_hydrate_writes() -> None:
    flux = REPO / "samples" / "flux"
    repo = yaml.safe_load((flux / "git" / "gitrepository.yaml").read_text())
    kust = yaml.safe_load((flux / "git" / "flux-kustomization.yaml").read_text())
    assert repo["spec"]["ref"]["branch"] == "rendered"  # hydrate's default --branch
    assert kust["spec"]["sourceRef"] == {"kind": "GitRepository", "name": repo["metadata"]["name"]}
    oci = yaml.safe_load((flux / "oci" / "ocirepository.yaml").read_text())
    oci_kust = yaml.safe_load((flux / "oci" / "flux-kustomization.yaml").read_text())
    assert oci["kind"] == "OCIRepository"
    assert oci_kust["spec"]["sourceRef"] == {
        "kind": "OCIRepository",
        "name": oci["metadata"]["name"],
    }
    for k in (kust, oci_kust):
        assert k["apiVersion"] == "kustomize.toolkit.fluxcd.io/v1" and k["spec"]["prune"]
        assert [e["kind"] for e in k["spec"]["healthCheckExprs"]] == [
            "DynamoGraphDeployment",
            "DynamoModel",
            "PodCliqueSet",
        ]
    assert kust["spec"]["healthCheckExprs"] == oci_kust["spec"]["healthCheckExprs"]


def _flux_health(kind: str, obj: dict[str, Any]) -> str:
    """Flux's verdict from the sample's CEL expressions (evaluated by cel-python; Flux
    evaluates the same CEL with cel-go): failed first, then current, else in progress."""
    import celpy

    kust = yaml.safe_load(
        (REPO / "samples" / "flux" / "git" / "flux-kustomization.yaml").read_text()
    )
    (check,) = [e for e in kust["spec"]["healthCheckExprs"] if e["kind"] == kind]
    env = celpy.Environment()
    activation = {k: celpy.json_to_cel(v) for k, v in obj.items()}

    def holds(expr: str) -> bool:
        return bool(env.program(env.compile(expr)).evaluate(activation))

    if holds(check["failed"]):
        return "Failed"
    return "Current" if holds(check["current"]) else "InProgress"


@pytest.mark.parametrize(
    ("status", "verdict"),
    [
        ({}, "InProgress"),  # the controller has not written status yet
        ({"state": "pending", "observedGeneration": 3}, "InProgress"),
        ({"state": "successful", "observedGeneration": 2}, "InProgress"),  # older generation
        ({"state": "successful", "observedGeneration": 3}, "Current"),
        ({"state": "failed", "observedGeneration": 3}, "Failed"),
    ],
)
def test_flux_health_of_a_dgd(status: dict[str, Any], verdict: str) -> None:
    obj = {"metadata": {"generation": 3}, "spec": {}, "status": status}
    assert _flux_health("DynamoGraphDeployment", obj) == verdict


@pytest.mark.parametrize(
    ("status", "verdict"),
    [
        ({}, "InProgress"),  # Grove has not written status yet
        ({"observedGeneration": 2, "availableReplicas": 1, "updatedReplicas": 1}, "Current"),
        ({"observedGeneration": 1, "availableReplicas": 1, "updatedReplicas": 1}, "InProgress"),
        ({"observedGeneration": 2, "availableReplicas": 0, "updatedReplicas": 1}, "InProgress"),
        ({"observedGeneration": 2, "availableReplicas": 1, "updatedReplicas": 0}, "InProgress"),
        (
            {
                "observedGeneration": 2,
                "availableReplicas": 0,
                "updatedReplicas": 1,
                "conditions": [{"type": "MinAvailableBreached", "status": "True"}],
            },
            "Failed",
        ),
    ],
)
def test_flux_health_of_a_podcliqueset(status: dict[str, Any], verdict: str) -> None:
    obj = {"metadata": {"generation": 2}, "spec": {"replicas": 1}, "status": status}
    assert _flux_health("PodCliqueSet", obj) == verdict


def test_ci_and_pre_commit_samples_use_real_options() -> None:
    import shlex

    commands = []
    for path in sorted((REPO / "samples" / "ci").glob("*.yaml")):
        workflow = yaml.safe_load(path.read_text())
        for job in workflow["jobs"].values():
            for step in job["steps"]:
                script = step.get("run", "").replace("\\\n", " ")
                commands += [
                    line.strip()
                    for line in script.splitlines()
                    if line.strip().startswith("dyn-gitops ")
                ]
    hooks = yaml.safe_load((REPO / ".pre-commit-hooks.yaml").read_text())
    commands += [h["entry"] for h in hooks]
    assert {c.split()[1] for c in commands} == {"hydrate", "diff", "validate"}
    for command in commands:
        words = shlex.split(command)
        words = words[: next((i for i, w in enumerate(words) if w in (">", "||")), None)]
        known = _options(words[1])
        used = {w.split("=")[0] for w in words[2:] if w.startswith("--")}
        assert used <= known, f"{command}: unknown options {used - known}"
    assert {h["id"] for h in hooks} == {"dyn-gitops-validate", "dyn-gitops-hydrate"}
    assert next(h for h in hooks if h["id"] == "dyn-gitops-hydrate")["stages"] == [
        "post-commit"
    ]  # it publishes HEAD: it must run after the commit exists


# ---------------------------------------------------------------------------- the planner
def test_incremental_plan_equals_a_full_render_through_many_edits() -> None:
    """In-process, many steps: every incremental result is byte-identical to a full render
    (or fails with the same problems), whatever the previous run left behind."""
    import dataclasses

    from dyn_gitops.emit import object_filename, to_yaml
    from dyn_gitops.errors import RenderError
    from dyn_gitops.pipeline import render
    from dyn_gitops.read import Source, SourceFile
    from dyn_gitops.settings import resolve
    from dyn_gitops.workflows.incremental import Previous, Reused, plan

    base = {
        p.relative_to(TREE).as_posix(): p.read_text()
        for p in sorted(TREE.rglob("*.yaml"))
        if p.name != "dyn-gitops.yaml"
    }
    agg, cm = base["agg.yaml"], base["profile-data.yaml"]
    moved = agg.replace("name: agg\n", "name: agg\n  namespace: prod\n")
    steps: list[tuple[str, dict[str, str], dict[str, Any], bool]] = [
        ("start", dict(base), {}, True),
        ("same again", dict(base), {}, True),
        ("edit one", {**base, "agg.yaml": agg.replace("replicas: 2", "replicas: 7")}, {}, True),
        ("duplicate graph name", {**base, "dup.yaml": agg}, {}, False),
        (
            "fixed by renaming",
            {**base, "dup.yaml": agg.replace("name: agg", "name: dup")},
            {},
            True,
        ),
        ("a pass-through object twice", {**base, "cm2.yaml": cm}, {}, False),
        ("moved onto another graph's name", {**base, "agg.yaml": moved}, {}, False),
        (
            "the other graph removed",
            {**{k: v for k, v in base.items() if k != "prod/agg.yaml"}, "agg.yaml": moved},
            {},
            True,
        ),
        ("planner removed", {k: v for k, v in base.items() if k != "planner.yaml"}, {}, True),
        ("settings change", dict(base), {"discovery-backend": "etcd"}, True),
        ("back to start", dict(base), {}, True),
    ]
    previous = Previous()
    for what, files, flags, renders in steps:
        settings = resolve(file_values={"namespace": "demo"}, flags=flags).settings
        src = Source([SourceFile(p, t) for p, t in sorted(files.items())], root="deploy")
        try:
            objects = render(dataclasses.replace(src), settings).objects
            full: dict[str, bytes] | RenderError = {
                object_filename(o): to_yaml([o]).encode() for o in objects
            }
        except RenderError as exc:
            full = exc
        assert isinstance(full, dict) == renders, f"{what}: the step is not what it says"
        try:
            p = plan(src, settings, previous, key=KEY.encode())
        except RenderError as exc:
            assert isinstance(full, RenderError), f"{what}: incremental failed, full did not"
            assert exc.problems == full.problems, what
            continue
        assert not isinstance(full, RenderError), f"{what}: full failed: {full}"
        old = previous
        got = {
            path: (old.content(path) if isinstance(o, Reused) else o) for path, o in p.files.items()
        }
        assert got == full, what
        rerendered = {
            "same again": [],
            "edit one": ["agg.yaml"],
            "planner removed": ["agg.yaml", "prod/agg.yaml"],  # changed, re-added
            "settings change": sorted(files),
        }  # nothing is reusable
        if what in rerendered:
            assert p.rendered == rerendered[what], what
        from dyn_gitops.workflows.incremental import blob_id

        snapshot = dict(got)
        previous = Previous(
            p.cache, lambda path, s=snapshot: blob_id(s[path]) if path in s else None, snapshot.get
        )


@pytest.mark.parametrize(
    "cache",
    [
        "not json at all",
        {"format": 2},
        {"units": [{"files": {"agg.yaml": 1}}]},
        "same settings, wrong shapes",
        "same settings, wrong shapes, signed",
    ],
)
def test_a_damaged_cache_is_ignored(cache: Any) -> None:
    from dyn_gitops import __version__
    from dyn_gitops.parse import settings_values
    from dyn_gitops.pipeline import render
    from dyn_gitops.read import read_path
    from dyn_gitops.settings import resolve
    from dyn_gitops.workflows import cachetrust
    from dyn_gitops.workflows.incremental import CACHE_FORMAT, Previous, plan, settings_digest

    src = read_path(str(TREE), max_file_bytes=1 << 20)
    settings = resolve(file_values=settings_values(src)).settings
    if isinstance(cache, str) and cache.startswith("same settings, wrong shapes"):
        head = {
            "format": CACHE_FORMAT,
            "renderer": __version__,
            "settings": settings_digest(settings),
        }
        record: dict[str, Any] = {
            "files": {"agg.yaml": "0" * 40},
            "graphs": [],
            "objects": {"x.yaml": {"key": 1, "digest": None}},
        }
        if cache.endswith("signed"):  # only a bug of ours could sign it: still not used
            record = cachetrust.signed(KEY.encode(), head, record)
        cache = {**head, "key": cachetrust.key_id(KEY.encode()), "units": [record]}
    previous = Previous(cache, lambda path: None, lambda path: None)
    p = plan(src, settings, previous, key=KEY.encode())
    assert len(p.files) == len(render(src, settings).objects)
    assert not p.reused
