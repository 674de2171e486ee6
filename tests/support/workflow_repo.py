"""A throw-away Git repository with the workflow tests' fixture tree (hydrate, diff and
their hardening tests)."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pygit2

from support.cli import run_cli
from support.hydrating import RUNNER_KEY
from support.paths import REPO

#: the fixture tree the workflow tests commit (tests/data/workflows/tree)
TREE = REPO / "tests" / "data" / "workflows" / "tree"


CACHE = ".dyn-gitops/cache.json"


class Repo:
    """A throw-away repository; commits are deterministic (fixed identity and dates)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.env = {
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
        path.mkdir(parents=True, exist_ok=True)
        self.git("init", "-q", "-b", "main")

    def git(self, *args: str) -> str:
        proc = subprocess.run(
            ["git", *args], cwd=self.path, env=self.env, check=True, capture_output=True, text=True
        )
        return proc.stdout.strip()

    def commit(self, message: str = "change") -> str:
        self.git("add", "-A")
        self.git("commit", "-q", "--allow-empty", "-m", message)
        return self.git("rev-parse", "HEAD")

    def tip(self, branch: str = "rendered") -> str | None:
        proc = subprocess.run(
            ["git", "rev-parse", "--verify", "-q", f"refs/heads/{branch}"],
            cwd=self.path,
            env=self.env,
            capture_output=True,
            text=True,
        )
        return proc.stdout.strip() or None

    def files(self, rev: str = "rendered", under: str = "") -> dict[str, bytes]:
        repo = pygit2.Repository(str(self.path))
        tree: Any = repo.revparse_single(rev).peel(pygit2.Tree)
        if under:
            tree = repo[tree[under].id]
        out: dict[str, bytes] = {}

        def walk(t: Any, prefix: str) -> None:
            for e in t:
                if e.type_str == "tree":
                    walk(repo[e.id], f"{prefix}{e.name}/")
                else:
                    out[f"{prefix}{e.name}"] = repo[e.id].data

        walk(tree, "")
        return out

    def hydrate(self, *args: str, key: str | None = RUNNER_KEY) -> Any:
        """The real CLI; ``key`` is the runner's cache key (None: the runner holds none)."""
        env = {"HOME": str(self.path)}
        if key is not None:
            env["DYN_GITOPS_HYDRATE_KEY"] = key
        return run_cli("hydrate", *args, cwd=self.path, env=env)

    def forge(self, tmp_path: Path, path: str, edit: Callable[[bytes], bytes]) -> bytes:
        """What anyone who may push to the branch can do: edit an output and, to match,
        every digest of it that ``cache.json`` holds (all but what needs the runner's key)."""
        import hashlib

        from dyn_gitops.workflows.incremental import blob_id

        old = self.files()[path]
        new = edit(old)
        cache = self.files()[CACHE].decode()
        for digest in (blob_id, lambda b: hashlib.sha256(b).hexdigest()):
            cache = cache.replace(digest(old), digest(new))
        wt = tmp_path / "forger"
        self.git("worktree", "add", "-q", str(wt), "rendered")
        (wt / path).write_bytes(new)
        (wt / CACHE).write_text(cache)
        subprocess.run(["git", "commit", "-qam", "forged"], cwd=wt, env=self.env, check=True)
        self.git("worktree", "remove", "--force", str(wt))
        return new
