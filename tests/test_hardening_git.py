"""Hardening of the Git workflows (issue 11, point 6, and "Git blobs are size-checked before
they are read" of point 3): hydrate never rolls a branch back unless told to, branch names,
target paths and authors are held to git's rules, a revision's submodules, LFS pointers,
oversized blobs and odd symlinks are clear problems, and `diff` refuses a path that exists
in neither revision. Every test works on a real repository built with the git CLI.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from support.cli import run_cli
from support.paths import REPO
from support.workflow_repo import TREE, Repo

META = ".dyn-gitops/metadata.yaml"


@pytest.fixture
def repo(tmp_path: Path) -> Repo:
    r = Repo(tmp_path / "repo")
    shutil.copytree(TREE, r.path / "deploy")
    r.commit("initial")
    return r


def _scale(r: Repo, replicas: int) -> str:
    agg = r.path / "deploy" / "agg.yaml"
    agg.write_text((TREE / "agg.yaml").read_text().replace("replicas: 2", f"replicas: {replicas}"))
    return r.commit(f"scale to {replicas}")


def _source_of(r: Repo, branch: str = "rendered") -> str:
    meta = yaml.safe_load(r.files(branch)[META])
    return str(meta["source"]["commit"])


# ---------------------------------------------------------------------------- rewinds
def test_hydrate_refuses_to_publish_an_older_commit(repo: Repo) -> None:
    old = repo.git("rev-parse", "HEAD")
    new = _scale(repo, 3)
    assert repo.hydrate("deploy").code == 0
    tip = repo.tip()
    res = repo.hydrate("deploy", "--rev", old)
    assert res.code == 2 and res.stdout == ""
    assert old in res.stderr and new in res.stderr and "--allow-rewind" in res.stderr
    assert repo.tip() == tip and _source_of(repo) == new
    res = repo.hydrate("deploy", "--rev", old, "--allow-rewind")
    assert res.code == 0, res.stderr
    assert _source_of(repo) == old and repo.git("rev-parse", "rendered~1") == tip


def test_hydrate_refuses_rewritten_history_but_follows_descendants(repo: Repo) -> None:
    first = _scale(repo, 3)
    assert repo.hydrate("deploy").code == 0
    second = _scale(repo, 4)  # a descendant: published as usual
    assert repo.hydrate("deploy").code == 0 and _source_of(repo) == second
    assert repo.hydrate("deploy").code == 0  # the same commit again: up to date
    repo.git("reset", "-q", "--hard", first)
    amended = _scale(repo, 5)  # a sibling of `second`: history was rewritten
    res = repo.hydrate("deploy")
    assert res.code == 2 and second in res.stderr and amended in res.stderr
    assert _source_of(repo) == second


def test_each_target_path_keeps_its_own_last_source(repo: Repo) -> None:
    old = repo.git("rev-parse", "HEAD")
    new = _scale(repo, 3)
    assert repo.hydrate("deploy", "--target-path", "apps/a").code == 0
    res = repo.hydrate("deploy", "--rev", old, "--target-path", "apps/b")  # new directory
    assert res.code == 0, res.stderr
    res = repo.hydrate("deploy", "--rev", old, "--target-path", "apps/a")
    assert res.code == 2 and new in res.stderr and "rendered:apps/a" in res.stderr


def test_a_last_source_missing_from_a_shallow_clone_is_explained(
    repo: Repo, tmp_path: Path
) -> None:
    assert repo.hydrate("deploy").code == 0
    last = repo.git("rev-parse", "HEAD")
    _scale(repo, 3)
    clone = Repo.__new__(Repo)
    clone.path, clone.env = tmp_path / "clone", repo.env
    subprocess.run(
        [
            "git",
            "clone",
            "-q",
            "--depth",
            "1",
            "--no-single-branch",
            f"file://{repo.path}",
            str(clone.path),
        ],
        check=True,
        env=repo.env,
    )
    res = clone.hydrate("deploy")
    assert res.code == 2 and last in res.stderr and "shallow" in res.stderr
    assert clone.tip() is None


# ---------------------------------------------------------------------------- names
BAD_BRANCHES = [
    "-x",
    "a..b",
    "a@{1}",
    "a b",
    "a~1",
    "a^",
    "a:b",
    "a?",
    "a*",
    "a[b",
    "a\\b",
    "x.lock",
    "a/",
    "a.",
    ".hidden",
    "a/.b",
    "a//b",
    "HEAD",
    "tab\there",
    "nl\n",
]


@pytest.mark.parametrize("name", BAD_BRANCHES)
def test_branch_names_follow_git(repo: Repo, name: str) -> None:
    git = subprocess.run(
        ["git", "check-ref-format", "--branch", name], cwd=repo.path, capture_output=True
    )
    assert git.returncode != 0, f"git accepts {name!r}: the test list is wrong"
    res = repo.hydrate("deploy", f"--branch={name}")
    assert res.code == 2 and "not a valid branch name" in res.stderr and res.stdout == ""
    assert repo.git("for-each-ref", "refs/heads/").count("\n") == 0  # only main


def test_unusual_but_valid_branch_names_are_accepted(repo: Repo) -> None:
    for name in ("feature/rendered-prod", "release-1.2", "rénder"):
        res = repo.hydrate("deploy", f"--branch={name}")
        assert res.code == 0, res.stderr
        assert repo.tip(name) == res.stdout.strip()


@pytest.mark.parametrize(
    "path",
    [
        "../up",
        "a/../b",
        "/abs",
        ".git",
        "a/.dyn-gitops",
        "-a",
        "a b",
        "a:b",
        "x.lock",
        "a//b",
        "a\x1b[31m",
    ],
)
def test_target_paths_follow_git(repo: Repo, path: str) -> None:
    res = repo.hydrate("deploy", f"--target-path={path}")
    assert res.code == 2 and "--target-path" in res.stderr and res.stdout == ""
    assert repo.tip() is None


@pytest.mark.parametrize(
    "author",
    [
        "no email",
        "<a@example.com>",
        "A <>",
        "A <a@example.com> <b@example.com>",
        "A <a<b@example.com>",
        "A\nB <a@example.com>",
        "A <a@example.com\n>",
        "A\x1b[31m <a@example.com>",
        "A <a@example.com> trailing",
    ],
)
def test_authors_follow_git(repo: Repo, author: str) -> None:
    res = repo.hydrate("deploy", "--author", author)
    assert res.code == 2 and "--author" in res.stderr and res.stdout == ""
    assert repo.tip() is None


def test_a_valid_author_is_used(repo: Repo) -> None:
    assert repo.hydrate("deploy", "--author", "CI Bot <ci@example.com>").code == 0
    assert repo.git("log", "-1", "--format=%an|%ae|%cn", "rendered") == (
        "CI Bot|ci@example.com|CI Bot"
    )


def test_an_unusable_configured_identity_is_a_usage_error(repo: Repo) -> None:
    repo.git("config", "user.name", "A <b>")
    repo.git("config", "user.email", "a@example.com")
    res = repo.hydrate("deploy")
    assert res.code == 2 and "user.name" in res.stderr and "--author" in res.stderr
    assert repo.tip() is None
    assert repo.hydrate("deploy", "--author", "CI <ci@example.com>").code == 0


# ---------------------------------------------------------------------------- reading a revision
def _render(r: Repo, *args: str) -> tuple[int, str, str]:
    res = run_cli("render", "--rev", "HEAD", "deploy", *args, cwd=r.path)
    return res.code, res.stdout, res.stderr


def _add_entry(r: Repo, mode: str, content: bytes, path: str) -> None:
    """Put a raw tree entry (gitlink, symlink) into the index, as git itself would store it."""
    if mode == "160000":
        oid = r.git("rev-parse", "HEAD")
    else:
        proc = subprocess.run(
            ["git", "hash-object", "-w", "--stdin"],
            cwd=r.path,
            env=r.env,
            input=content,
            capture_output=True,
            check=True,
        )
        oid = proc.stdout.decode().strip()
    r.git("update-index", "--add", "--cacheinfo", f"{mode},{oid},{path}")
    r.git("commit", "-q", "-m", f"add {path}")


def test_a_submodule_is_a_clear_problem(repo: Repo) -> None:
    _add_entry(repo, "160000", b"", "deploy/vendored")
    code, out, err = _render(repo)
    assert code == 1 and out == ""
    assert "vendored:" in err and "submodule" in err
    res = repo.hydrate("deploy")
    assert res.code == 1 and "submodule" in res.stderr and repo.tip() is None


def test_an_lfs_pointer_is_a_clear_problem(repo: Repo) -> None:
    (repo.path / "deploy" / "big.yaml").write_text(
        "version https://git-lfs.github.com/spec/v1\n"
        "oid sha256:4d7a214614ab2935c943f9e0ff69d22eadbb8f32b1258daaa5e2ca24d17e2393\n"
        "size 12345\n"
    )
    repo.commit("lfs")
    code, out, err = _render(repo)
    assert code == 1 and out == ""
    assert "big.yaml:" in err and "LFS pointer" in err and ".gitattributes" in err


def test_symlink_chains_loops_and_long_targets(repo: Repo) -> None:
    _add_entry(repo, "120000", b"agg.yaml", "deploy/one.yaml")  # one -> agg: a duplicate
    _add_entry(repo, "120000", b"x" * 5000, "deploy/long.yaml")
    _add_entry(repo, "120000", b"loop-b.yaml", "deploy/loop-a.yaml")
    _add_entry(repo, "120000", b"loop-a.yaml", "deploy/loop-b.yaml")
    _add_entry(repo, "120000", b"missing.yaml", "deploy/dangling.yaml")
    code, _, err = _render(repo)
    assert code == 1
    assert "long.yaml:" in err and "5000 bytes, over the limit of 4096" in err
    assert "loop-a.yaml:" in err and "loop-b.yaml:" in err and "symlink loop" in err
    assert "dangling.yaml:" in err and "dangling symlink" in err
    assert "one.yaml:" in err  # read through the link: the same graph twice


def test_a_directory_link_out_of_the_source_root_is_refused(repo: Repo) -> None:
    (repo.path / "common").mkdir()
    (repo.path / "deploy" / "agg.yaml").rename(repo.path / "common" / "agg.yaml")
    repo.commit("agg moved out of deploy/")
    (repo.path / "README.md").write_text("app\n")
    (repo.path / "deploy" / "common").symlink_to("../common")
    (repo.path / "deploy" / "README").symlink_to("../README.md")  # a file: not read, fine
    repo.commit("links")
    code, out, err = _render(repo)
    assert code == 1 and out == ""
    assert "common:" in err and "outside the source root" in err
    assert "README" not in err
    checkout = run_cli("render", "deploy", cwd=repo.path)  # the work tree agrees
    assert checkout.code == 1 and "outside the source root" in checkout.stderr


def test_a_chain_of_links_inside_the_root_is_followed(repo: Repo) -> None:
    (repo.path / "deploy" / "agg.yaml").rename(repo.path / "deploy" / "agg.txt")
    repo.commit("agg hidden from the reader")
    without = _render(repo)
    _add_entry(repo, "120000", b"agg.txt", "deploy/hop.txt")
    _add_entry(repo, "120000", b"hop.txt", "deploy/agg.yaml")
    code, out, err = _render(repo)
    assert code == 0, err
    graph = "dyn-gitops.io/source-dgd: demo/agg\n"
    assert graph in out and graph not in without[1]


@pytest.mark.parametrize(
    ("name", "limit"), [("huge.yaml", "1048576"), ("dyn-gitops.yaml", "65536")]
)
def test_oversized_blobs_are_refused_before_they_are_read(
    repo: Repo, name: str, limit: str
) -> None:
    """A 512 MiB manifest or settings file: refused from its object header, so the process
    never holds it (its peak memory stays far below the blob's size)."""
    size = 512 * 1024 * 1024
    path = repo.path / "deploy" / name
    with path.open("wb") as f:
        f.truncate(size)  # sparse zeros: cheap on disk, and Git compresses them to little
    repo.commit("huge")
    path.unlink()
    # the child's own peak RSS: ru_maxrss would carry the parent's (pytest's, which grows
    # with the tests run before) across fork and exec, so reset VmHWM first and read it after
    probe = (
        "import sys\n"
        "with open('/proc/self/clear_refs', 'w') as f:\n    f.write('5')\n"
        "from dyn_gitops.cli import entry\n"
        "try:\n    entry()\nfinally:\n"
        "    print([line.split()[1] for line in open('/proc/self/status')\n"
        "           if line.startswith('VmHWM:')][0], file=sys.stderr)"
    )
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            probe,
            "render",
            "--rev",
            "HEAD",
            "deploy",
            "--max-file-bytes",
            "1048576",
        ],
        cwd=repo.path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 1 and proc.stdout == ""
    assert f"{name}:" in proc.stderr
    assert f"file is {size} bytes, over the limit of {limit}" in proc.stderr
    peak_kib = int(proc.stderr.strip().splitlines()[-1])
    assert peak_kib * 1024 < size // 2, f"peak memory {peak_kib} KiB: the blob was read"


# ---------------------------------------------------------------------------- diff
def test_diff_of_a_path_in_neither_revision_is_an_error(repo: Repo) -> None:
    base = repo.git("rev-parse", "HEAD")
    _scale(repo, 3)
    res = run_cli("diff", "--base", base, "--head", "HEAD", "no-such-app", cwd=repo.path)
    assert res.code == 2 and res.stdout == ""
    assert "no-such-app" in res.stderr and "neither" in res.stderr
    shutil.copytree(TREE, repo.path / "new-app")
    repo.commit("a new app")
    res = run_cli("diff", "--base", base, "--head", "HEAD", "new-app", cwd=repo.path)
    assert res.code == 1, res.stderr  # in one of them: all added
    assert REPO.exists()
