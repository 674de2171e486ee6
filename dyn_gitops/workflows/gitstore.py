"""Git object store access for hydrate: trees built in memory, branch moved by compare-and-swap.

Nothing here touches a working tree or an index: blobs and trees are written straight into
the object database, and a branch only ever moves from the commit we built on to a commit
whose parent is that commit (a fast-forward), under Git's own ref lock.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

import pygit2
from pygit2.enums import FileMode

from ..errors import DynGitopsError, ExitCode

BLOB = FileMode.BLOB
TREE = FileMode.TREE


class BranchMoved(DynGitopsError):
    """The branch changed (or was locked) between reading it and updating it."""

    exit_code = ExitCode.BRANCH_MOVED

    def __init__(
        self, branch: str, expected: str | None, found: str | None, commit: str, reason: str = ""
    ) -> None:
        self.branch, self.expected, self.found, self.commit = branch, expected, found, commit
        what = reason or (f"moved from {expected or '(absent)'} to {found or '(absent)'}")
        super().__init__(
            f"branch {branch} {what} while hydrating; it was not updated. The new commit "
            f"{commit} is kept in the object store (it is not lost); re-run hydrate to build "
            "on the current branch tip"
        )


def open_repo(path: str) -> pygit2.Repository:
    """The repository that holds ``path`` (looked for from the path upward)."""
    from ..read import open_repository

    repo: pygit2.Repository = open_repository(path)
    return repo


def workdir(repo: pygit2.Repository) -> str:
    return os.path.realpath(repo.workdir or os.path.dirname(repo.path.rstrip("/")))


def repo_relative(repo: pygit2.Repository, path: str) -> str:
    """``path`` (relative to the current directory) as a path inside the repository."""
    rel = os.path.relpath(os.path.realpath(path), workdir(repo))
    if rel == "." or rel == "":
        return ""
    if rel.startswith(".."):
        raise FileNotFoundError(f"{path}: outside the repository {workdir(repo)}")
    return rel.replace(os.sep, "/")


def commit_of(repo: pygit2.Repository, rev: str) -> pygit2.Commit:
    try:
        return repo.revparse_single(rev).peel(pygit2.Commit)
    except (KeyError, ValueError, pygit2.GitError) as exc:
        raise LookupError(f"unknown Git revision {rev!r}: {exc}") from None


def valid_branch(name: str) -> bool:
    """As ``git check-ref-format --branch``: libgit2's ref rules (no ``..``, ``@{``, space,
    control characters or ``~^:?*[\\``, no ``.lock`` or ``/`` or ``.`` at the end, no
    component starting with ``.``), plus git's own refusals for branches: no leading ``-``
    (it would read as an option) and not ``HEAD`` or ``@`` (they name revisions)."""
    return (
        bool(name)
        and not name.startswith("-")
        and name not in ("HEAD", "@")
        and pygit2.reference_is_valid_name(f"refs/heads/{name}")
    )


def valid_path(path: str) -> bool:
    """A directory of a tree, held to the same rules as a branch name: every component is
    a plain name (no ``.`` or ``..``, none hidden, nothing git or a shell would misread)."""
    return (
        bool(path)
        and not path.startswith("-")
        and pygit2.reference_is_valid_name(f"refs/heads/{path}")
    )


def descends(repo: pygit2.Repository, new: str, old: str) -> bool | None:
    """Whether commit ``new`` is ``old`` or has it in its history; None when ``old`` is not
    in this repository (a shallow clone, or a commit never fetched here)."""
    if new == old:
        return True
    try:
        repo[old].peel(pygit2.Commit)
    except (KeyError, ValueError, pygit2.GitError):
        return None
    return bool(repo.descendant_of(new, old))


def tree_of(repo: pygit2.Repository, commit: str | None) -> pygit2.Tree | None:
    return repo[commit].peel(pygit2.Tree) if commit else None


def tip(repo: pygit2.Repository, ref: str) -> str | None:
    """The commit a ref points to, or None when the ref does not exist."""
    try:
        return str(repo.references[ref].resolve().target)
    except (KeyError, pygit2.GitError):
        return None


def checked_out(repo: pygit2.Repository, ref: str) -> bool:
    """Whether ``ref`` is the branch of the main work tree or of a linked one."""
    repos = [repo]
    for name in repo.list_worktrees():
        try:
            repos.append(pygit2.Repository(repo.lookup_worktree(name).path))
        except (KeyError, pygit2.GitError):
            continue
    for r in repos:
        try:
            if str(r.lookup_reference("HEAD").target) == ref:  # symbolic: the branch name
                return True
        except (KeyError, pygit2.GitError):
            continue
    return False


# ---------------------------------------------------------------------------- trees
def subtree(repo: pygit2.Repository, tree: pygit2.Tree | None, path: str) -> pygit2.Tree | None:
    if tree is None or not path:
        return tree
    try:
        obj = repo[tree[path].id]
    except KeyError:
        return None
    return obj if isinstance(obj, pygit2.Tree) else None


def exists(repo: pygit2.Repository, commit: pygit2.Commit, path: str) -> bool:
    if not path:
        return True
    try:
        commit.tree[path]
    except KeyError:
        return False
    return True


def walk_blobs(
    repo: pygit2.Repository, tree: pygit2.Tree | None, prefix: str = ""
) -> Iterator[tuple[str, str]]:
    """(path, blob id) of every file below ``tree``."""
    if tree is None:
        return
    for entry in tree:
        path = f"{prefix}{entry.name}"
        if entry.type_str == "tree":
            yield from walk_blobs(repo, repo[entry.id].peel(pygit2.Tree), path + "/")
        elif entry.type_str == "blob":
            yield path, str(entry.id)


def read_blob(
    repo: pygit2.Repository, tree: pygit2.Tree | None, path: str, *, limit: int | None = None
) -> bytes | None:
    """The blob at ``path``; None when absent, not a blob, or (checked from the object
    header, before reading it) larger than ``limit`` bytes."""
    if tree is None:
        return None
    try:
        oid = tree[path].id
    except (KeyError, ValueError, pygit2.GitError):
        return None
    return read_blob_id(repo, str(oid), limit=limit)


def read_blob_id(repo: pygit2.Repository, oid: str, *, limit: int | None = None) -> bytes | None:
    """The blob ``oid`` (from :func:`walk_blobs`: no path lookup, which costs a scan of its
    directory each time); None when absent, not a blob, or larger than ``limit`` bytes."""
    try:
        kind, size = repo.odb.read_header(oid)
        if kind != pygit2.enums.ObjectType.BLOB or (limit is not None and size > limit):
            return None
        blob = repo[oid]
    except (KeyError, ValueError, pygit2.GitError):
        return None
    return blob.data if isinstance(blob, pygit2.Blob) else None


def write_files(repo: pygit2.Repository, files: Mapping[str, bytes | str]) -> str:
    """Write a tree holding ``files`` (path -> content, or hex id of an existing blob)."""
    nested: dict[str, object] = {}
    for path, content in files.items():
        *dirs, name = path.split("/")
        node = nested
        for d in dirs:
            child = node.setdefault(d, {})
            assert isinstance(child, dict), f"{path}: a file and a directory share a name"
            node = child
        node[name] = content
    return str(_write_nested(repo, nested))


def _write_nested(repo: pygit2.Repository, node: Mapping[str, object]) -> pygit2.Oid:
    builder = repo.TreeBuilder()
    for name, value in node.items():
        if isinstance(value, dict):
            builder.insert(name, _write_nested(repo, value), TREE)
        elif isinstance(value, bytes):
            builder.insert(name, repo.create_blob(value), BLOB)
        else:
            assert isinstance(value, str)
            builder.insert(name, pygit2.Oid(hex=value), BLOB)
    return builder.write()


def graft(repo: pygit2.Repository, base: pygit2.Tree | None, path: str, sub: str) -> str:
    """``base`` with the directory ``path`` replaced by tree ``sub`` (all else kept)."""
    if not path:
        return sub
    head, _, rest = path.partition("/")
    builder = repo.TreeBuilder(base) if base is not None else repo.TreeBuilder()
    child = subtree(repo, base, head)
    new = graft(repo, child, rest, sub) if rest else sub
    if base is not None and head in [e.name for e in base]:
        builder.remove(head)
    builder.insert(head, pygit2.Oid(hex=new), TREE)
    return str(builder.write())


# ---------------------------------------------------------------------------- commits
@dataclass(frozen=True)
class Identity:
    name: str
    email: str

    @classmethod
    def parse(cls, value: str) -> Identity:
        """``Name <email>`` as git reads it; ValueError says what is wrong."""
        name, sep, rest = value.partition("<")
        email, sep2, tail = rest.partition(">")
        if not sep or not sep2 or tail.strip():
            raise ValueError(f"expected 'Name <email>', got {value!r}")
        who = cls(name.strip(" "), email.strip(" "))  # a line break is refused, not trimmed
        who.check()
        return who

    def check(self) -> None:
        """Git refuses an empty name and a name or email holding ``<``, ``>`` or a line
        break; control characters (terminal escapes, NUL) are refused as well."""
        for what, text in (("name", self.name), ("email", self.email)):
            if not text:
                raise ValueError(f"the {what} is empty")
            bad = sorted({c for c in text if c in "<>" or ord(c) < 0x20 or ord(c) == 0x7F})
            if bad:
                raise ValueError(f"the {what} may not contain {', '.join(map(repr, bad))}")


def signature(
    repo: pygit2.Repository, who: Identity | None, when: pygit2.Commit
) -> pygit2.Signature:
    """Signature dated like the source commit, so the same input gives the same commit id.

    ValueError when the identity (given, or user.name/user.email) is not one git accepts.
    """
    if who is None:
        try:
            default = repo.default_signature
            who = Identity(default.name, default.email)
        except pygit2.InvalidError as exc:  # configured, but not an identity git accepts
            raise ValueError(
                f"user.name/user.email of the Git configuration: {exc}; "
                "pass --author 'Name <email>'"
            ) from None
        except (KeyError, pygit2.GitError):  # not configured
            who = Identity("dyn-gitops", "dyn-gitops@localhost")
        try:
            who.check()
        except ValueError as exc:
            raise ValueError(
                f"user.name/user.email of the Git configuration: {exc}; "
                "pass --author 'Name <email>'"
            ) from None
    return pygit2.Signature(who.name, who.email, when.commit_time, when.commit_time_offset)


def create_commit(
    repo: pygit2.Repository, tree: str, parent: str | None, message: str, sig: pygit2.Signature
) -> str:
    parents = [pygit2.Oid(hex=parent)] if parent else []
    oid = repo.create_commit(None, sig, sig, message, pygit2.Oid(hex=tree), parents)
    return str(oid)


def update_branch(
    repo: pygit2.Repository,
    ref: str,
    new: str,
    expected: str | None,
    *,
    message: str,
    sig: pygit2.Signature,
) -> None:
    """Move ``ref`` to ``new`` only if it still points at ``expected`` (None: absent).

    The ref is locked the way ``git update-ref`` locks it, then re-read under the lock:
    a concurrent writer either holds the lock (we fail) or has already moved it (we fail).
    """
    branch = ref.removeprefix("refs/heads/")
    try:
        with repo.transaction() as txn:
            txn.lock_ref(ref)
            found = tip(repo, ref)
            if found != expected:
                raise BranchMoved(branch, expected, found, new)
            txn.set_target(ref, new, message=message)  # reflog identity: libgit2 default
    except pygit2.GitError as exc:
        raise BranchMoved(
            branch, expected, tip(repo, ref), new, reason=f"could not be locked ({exc})"
        ) from None
