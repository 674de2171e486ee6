"""Read: a directory tree, a file, stdin, or a Git revision (no checkout), into a Source.

Everything returned is text plus where it came from; nothing here knows about Dynamo (or YAML,
but for the optional dyn-gitops.yaml at the root). Hostile input is bounded: symlinks may not
leave the source root, and files have a size limit.

A directory's walk leaves out what its ``.dyn-gitops-ignore`` and ``--exclude`` patterns
exclude (:mod:`dyn_gitops.ignore`; every file left out is listed in ``Source.skipped``), and
marks the files GitOps repositories keep beside manifests (kustomization files, a Helm
chart's files): the context skips them unless they hold a Kubernetes object.
"""

from __future__ import annotations

import errno
import os
import posixpath
import stat
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .errors import Problem
from .ignore import (
    CHART_DIRS,
    IGNORE_FILE,
    ExcludeError,
    Ignore,
    beside_reason,
    compile_patterns,
    ignore_file_lines,
)
from .settings import (
    IGNORE_FILE_MAX_BYTES,
    IGNORE_MAX_PATTERN_CHARS,
    IGNORE_MAX_PATTERNS,
    SETTINGS_FILE,
    SETTINGS_FILE_MAX_BYTES,
    RenderSettings,
)

_IGNORE_BOUNDS = {"max_patterns": IGNORE_MAX_PATTERNS, "max_chars": IGNORE_MAX_PATTERN_CHARS}

MANIFEST_SUFFIXES = (".yaml", ".yml", ".json")


@dataclass(frozen=True)
class SourceFile:
    path: str  # posix path relative to the source root ("-" for stdin)
    text: str
    #: why a file of a directory may be no manifest (a kustomization file, a Helm chart's);
    #: "" for any other. The context skips it unless it holds a Kubernetes object.
    beside: str = ""


@dataclass
class Source:
    """What was read: the files, plus what is known of their origin."""

    files: list[SourceFile]
    root: str  # display name of the root (directory, "-" or "<repo>@<rev>")
    commit: str | None = None  # Git commit id when read from a revision
    #: dyn-gitops.yaml at the root, as read (the context parses it: parse.settings_values)
    settings_file: SourceFile | None = None
    problems: list[Problem] = field(default_factory=list)
    #: dyn-gitops.yaml files below the root (path relative to the root), as read; each
    #: applies to its own subtree (the context resolves them: ``subtrees``)
    nested_settings: list[SourceFile] = field(default_factory=list)
    #: the settings of each subtree that has its own dyn-gitops.yaml (directory relative to
    #: the root -> its settings: the root's file, then each file on the way down, win last);
    #: filled by the context, used by the pipeline
    subtrees: dict[str, RenderSettings] = field(default_factory=dict)
    #: what a directory's read left out, and why (path relative to the root, reason)
    skipped: list[tuple[str, str]] = field(default_factory=list)
    #: the path as given when it is relative ("" for ".", an absolute path, stdin): a
    #: file's problems are shown relative to the current directory (:meth:`shown`)
    given: str = ""
    #: ``given`` is a single file (its one file is named by its base name)
    given_file: bool = False

    def shown(self, rel: str) -> str:
        """How a problem names the file ``rel`` of this source: relative to the current
        directory when the path was given relative, else relative to the root."""
        if not self.given or rel in ("", "-", self.root) or rel.startswith("/"):
            return rel
        if self.given_file:
            return self.given if rel == posixpath.basename(self.given) else rel
        return f"{self.given}/{rel}"


def is_settings_file(rel: str) -> bool:
    """A ``dyn-gitops.yaml`` anywhere in the tree (the root's or a subtree's)."""
    return posixpath.basename(rel) == SETTINGS_FILE


def subtree_of(rel: str, subtrees: Iterable[str]) -> str:
    """The deepest of ``subtrees`` (directories) that holds the file ``rel`` ("" = root)."""
    best = ""
    for d in subtrees:
        if rel.startswith(d + "/") and len(d) > len(best):
            best = d
    return best


# ---------------------------------------------------------------------------- file system
def _within(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def read_path(path: str, *, max_file_bytes: int, exclude: Sequence[str] = ()) -> Source:
    """Read a directory tree (recursively, hidden entries and what its ignore file or
    ``exclude`` excludes skipped) or a single file (read whatever its name).

    Every entry that cannot be read is a problem (never silently skipped): unreadable files
    and directories, symlink loops, dangling symlinks, FIFOs and devices (never opened for
    reading, so nothing blocks), symlinks that leave the root.
    """
    if path == "-":
        return _read_stdin(max_file_bytes)
    p = Path(path)
    if not os.path.lexists(p):
        raise FileNotFoundError(_missing(path))
    if not p.is_dir():
        src = Source(files=[], root=str(p), given_file=True)
        data = _read_bytes(str(p), p.name, max_file_bytes, src.problems)
        if data is not None:
            src.files.append(SourceFile(p.name, _decode(p.name, data, src.problems)))
        return src
    return _read_tree(p, max_file_bytes, exclude)


def _read_stdin(max_file_bytes: int) -> Source:
    import sys

    data = sys.stdin.buffer.read(max_file_bytes + 1)
    src = Source(files=[], root="-")
    if len(data) > max_file_bytes:
        src.problems.append(_too_big("-", len(data), max_file_bytes, at_least=True))
    else:
        src.files.append(SourceFile("-", _decode("-", data, src.problems)))
    return src


def excludes(text: str | None, exclude: Sequence[str], src: Source) -> Ignore | None:
    """The ignore file's patterns, then ``--exclude``'s (so a flag wins); None with a
    problem when the ignore file is unusable. Raises :class:`ExcludeError` for a flag."""
    flags, flag_problems = compile_patterns((("--exclude", e) for e in exclude), **_IGNORE_BOUNDS)
    if flag_problems:
        raise ExcludeError("; ".join(f"{where} {m}" for where, m in flag_problems))
    found, problems = compile_patterns(ignore_file_lines(text or ""), **_IGNORE_BOUNDS)
    for where, message in problems:
        line = int(where.rpartition(":")[2])
        src.problems.append(Problem(IGNORE_FILE, line, message=message))
    return None if problems else Ignore(found.patterns + flags.patterns)


def _tree_ignore(root: str, src: Source, exclude: Sequence[str]) -> Ignore | None:
    full = os.path.join(root, IGNORE_FILE)
    text = None
    if os.path.lexists(full):
        real = os.path.realpath(full)
        if not _within(real, root):
            message = f"symlink leads outside the source root (to {real}); refused"
            src.problems.append(Problem(IGNORE_FILE, 0, message=message))
            return None
        what = f"a fixed bound for {IGNORE_FILE}"
        data = _read_bytes(full, IGNORE_FILE, IGNORE_FILE_MAX_BYTES, src.problems, what=what)
        if data is None:
            return None
        text = _decode(IGNORE_FILE, data, src.problems)
    return excludes(text, exclude, src)


def _read_tree(p: Path, max_file_bytes: int, exclude: Sequence[str] = ()) -> Source:
    """The manifests and settings files under directory ``p``, in a stable order."""
    root = os.path.realpath(p)
    src = Source(files=[], root=str(p))
    seen_dirs: set[str] = set()
    ignore = _tree_ignore(root, src, exclude)
    if ignore is None:  # an unusable ignore file: nothing read (the context reports it)
        return src
    charts: set[str] = set()  # a chart's templates/ and charts/ directories

    def unreadable(exc: OSError) -> None:
        rel = _posix(os.path.relpath(exc.filename or root, root))
        src.problems.append(Problem(rel, message=f"cannot read the directory ({_os_reason(exc)})"))

    for dirpath, dirnames, filenames in os.walk(root, followlinks=True, onerror=unreadable):
        real_dir = os.path.realpath(dirpath)
        rel_dir = os.path.relpath(dirpath, root)
        if not _within(real_dir, root):
            message = f"symlink leads outside the source root (to {real_dir}); refused"
            src.problems.append(Problem(_posix(rel_dir), message=message))
            dirnames[:] = []
            continue
        if real_dir in seen_dirs:  # symlink loop
            dirnames[:] = []
            continue
        seen_dirs.add(real_dir)
        prefix = "" if rel_dir == "." else _posix(rel_dir) + "/"
        dirnames[:] = _kept_dirs(src, ignore, prefix, dirnames)
        if "Chart.yaml" in filenames:
            charts.update(prefix + d for d in CHART_DIRS)
        chart = _chart_of(prefix, charts)
        for name in sorted(filenames):
            if name.startswith(".") or (
                name != SETTINGS_FILE and not name.endswith(MANIFEST_SUFFIXES)
            ):
                continue
            if _left_out(src, ignore, prefix + name, is_dir=False):
                continue
            beside = chart or beside_reason(name)
            _read_tree_file(src, root, dirpath, rel_dir, name, max_file_bytes, beside)
    return src


def _kept_dirs(src: Source, ignore: Ignore, prefix: str, dirnames: Iterable[str]) -> list[str]:
    """The subdirectories the walk enters, sorted: not hidden, not excluded."""
    return sorted(
        d
        for d in dirnames
        if not d.startswith(".") and not _left_out(src, ignore, prefix + d, is_dir=True)
    )


def _left_out(src: Source, ignore: Ignore, rel: str, *, is_dir: bool) -> bool:
    """Whether ``rel`` is excluded; a directory or a file that would be read is then listed
    in ``src.skipped`` (a README left out is not worth a line)."""
    where = ignore.excluded(rel, is_dir=is_dir) if ignore else ""
    if where and (is_dir or rel.endswith(MANIFEST_SUFFIXES) or is_settings_file(rel)):
        src.skipped.append((rel + "/" if is_dir else rel, f"excluded by {where}"))
    return bool(where)


def _chart_of(prefix: str, charts: set[str]) -> str:
    """Why a file in the directory ``prefix`` may be Helm's: it is in a chart's
    ``templates/`` or ``charts/`` ("" if not)."""
    for d in charts:
        if prefix.startswith(d + "/"):
            return f"in a Helm chart's {posixpath.basename(d)}/ directory"
    return ""


def _read_tree_file(
    src: Source,
    root: str,
    dirpath: str,
    rel_dir: str,
    name: str,
    max_file_bytes: int,
    beside: str = "",
) -> None:
    """One file of the tree into ``src``: a manifest, the root's or a subtree's settings."""
    rel = _posix(os.path.normpath(os.path.join(rel_dir, name)))
    full = os.path.join(dirpath, name)
    real = os.path.realpath(full)
    if not _within(real, root):
        message = f"symlink leads outside the source root (to {real}); refused"
        src.problems.append(Problem(rel, 0, message=message))
        return
    if rel == SETTINGS_FILE:
        src.settings_file = _read_settings_file(full, src)
        return
    if name == SETTINGS_FILE:  # a subtree's own settings
        nested = _read_settings_file(full, src, rel)
        if nested is not None:
            src.nested_settings.append(nested)
        return
    data = _read_bytes(full, rel, max_file_bytes, src.problems)
    if data is not None:
        src.files.append(SourceFile(rel, _decode(rel, data, src.problems), beside))


def _missing(path: str) -> str:
    """Why ``path`` cannot be read: which part of it is missing, relative to where."""
    here = os.path.abspath(path)
    parent = existing_ancestor(here)
    where = "" if os.path.isabs(path) else f" (relative to the current directory {os.getcwd()})"
    if parent == os.path.dirname(here):
        return f"{path}: no such file or directory{where}"
    return (
        f"{path}: no such file or directory{where}; {parent} exists, "
        f"{os.path.relpath(here, parent)} does not"
    )


def _posix(p: str) -> str:
    return p.replace(os.sep, "/")


_OS_REASONS = {
    errno.ELOOP: "a symlink loop",
    errno.ENOENT: "a dangling symlink",
    errno.EACCES: "permission denied",
    errno.EPERM: "permission denied",
}


def _os_reason(exc: OSError) -> str:
    return _OS_REASONS.get(exc.errno or 0) or exc.strerror or type(exc).__name__


def _read_bytes(
    full: str, rel: str, limit: int, problems: list[Problem], what: str = "max-file-bytes"
) -> bytes | None:
    """A regular file's bytes, at most ``limit``; anything else is a problem."""
    try:
        # O_NONBLOCK: opening a FIFO must not wait for a writer
        fd = os.open(full, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        problems.append(Problem(rel, 0, message=f"cannot read the file ({_os_reason(exc)})"))
        return None
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode):
            problems.append(
                Problem(rel, 0, message="not a regular file (a FIFO, socket or device); refused")
            )
            return None
        if st.st_size > limit:
            problems.append(_too_big(rel, st.st_size, limit, setting=what))
            return None
        try:
            data = f.read(limit + 1)
        except OSError as exc:
            problems.append(Problem(rel, message=f"cannot read the file ({_os_reason(exc)})"))
            return None
    if len(data) > limit:  # grew while being read
        problems.append(_too_big(rel, len(data), limit, at_least=True, setting=what))
        return None
    return data


def _read_settings_file(full: str, src: Source, rel: str = SETTINGS_FILE) -> SourceFile | None:
    data = _read_bytes(
        full,
        rel,
        SETTINGS_FILE_MAX_BYTES,
        src.problems,
        what="a fixed bound for " + SETTINGS_FILE,
    )
    if data is None:
        return None
    return SourceFile(rel, _decode(rel, data, src.problems))


def _too_big(
    rel: str, size: int, limit: int, *, at_least: bool = False, setting: str = "max-file-bytes"
) -> Problem:
    more = "more than " if at_least else ""
    where = f"setting {setting}" if setting == "max-file-bytes" else setting
    return Problem(
        rel, 0, message=f"file is {more}{size} bytes, over the limit of {limit} ({where})"
    )


def _decode(rel: str, data: bytes, problems: list[Problem]) -> str:
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        problems.append(Problem(rel, message=f"not UTF-8 text ({exc.reason} at byte {exc.start})"))
        return ""


# ---------------------------------------------------------------------------- Git
# A symlink's blob is its target path: longer than PATH_MAX is not a path. Chains of links
# are followed as the kernel does, up to its limit (ELOOP after 40).
_LINK_MAX_BYTES = 4096
_LINK_MAX_HOPS = 40
_LFS_POINTER = b"version https://git-lfs.github.com/spec/v1"


def existing_ancestor(path: str) -> str:
    """``path`` itself if it exists, else its nearest existing parent (absolute): where a
    Git repository is looked for (a path may exist in a revision but not in the checkout)."""
    here = os.path.abspath(path)
    while not os.path.exists(here) and os.path.dirname(here) != here:
        here = os.path.dirname(here)
    return here


def open_repository(path: str) -> Any:
    """The Git repository holding ``path`` (looked for from the path itself upward, not
    from the current directory); FileNotFoundError if there is none."""
    import pygit2

    start = existing_ancestor(path)
    found = pygit2.discover_repository(start)
    if found is None:
        raise FileNotFoundError(
            f"{path}: not inside a Git repository (looked in {start} and every parent); "
            "--rev and diff read a revision of the repository that holds the path"
        )
    return pygit2.Repository(found)


def read_git(
    repo_path: str, rev: str, subpath: str, *, max_file_bytes: int, exclude: Sequence[str] = ()
) -> Source:
    """Read the tree of ``rev`` below ``subpath`` straight from the object store.

    Every blob's size is read from its object header before the blob itself, so a huge
    blob costs nothing. Submodules and Git LFS pointers are problems: the object store
    holds neither the submodule's files nor the LFS file, and rendering without them
    would silently drop objects.
    """
    import pygit2  # imported here: only Git reads pay for it

    repo = open_repository(os.path.join(repo_path, subpath) if subpath else repo_path)
    try:
        commit = repo.revparse_single(rev).peel(pygit2.Commit)
    except (KeyError, ValueError, pygit2.GitError) as exc:
        raise LookupError(f"unknown Git revision {rev!r}: {exc}") from None
    workdir = repo.workdir or os.path.dirname(repo.path.rstrip("/"))
    # subpath is relative to the current directory; make it relative to the repo root
    abs_sub = (
        os.path.realpath(os.path.join(repo_path, subpath))
        if subpath
        else os.path.realpath(repo_path)
    )
    rel_root = os.path.relpath(abs_sub, os.path.realpath(workdir))
    rel_root = "" if rel_root == "." else _posix(rel_root)
    if rel_root.startswith(".."):
        raise FileNotFoundError(f"{subpath}: outside the repository {workdir}")
    tree: Any = commit.tree
    src = Source(files=[], root=f"{rel_root or '.'}@{rev}", commit=str(commit.id))
    if rel_root:
        try:
            obj = tree[rel_root]
        except KeyError:
            raise FileNotFoundError(f"{rel_root}: not in revision {rev}") from None
        if obj.filemode == pygit2.enums.FileMode.COMMIT:
            src.problems.append(_submodule(posixpath.basename(rel_root)))
            return src
        if obj.type_str == "blob":  # a single file
            src.given_file = True
            _git_blob(
                repo, tree, rel_root, posixpath.basename(rel_root), obj, "", max_file_bytes, src
            )
            return src
        tree = repo[obj.id]
    ignore = _git_ignore(repo, tree, src, exclude)
    if ignore is None:  # an unusable ignore file: nothing read (the context reports it)
        return src
    for rel, entry, beside in _walk_tree(repo, tree, "", _Walk(ignore, src)):
        if entry.filemode == pygit2.enums.FileMode.COMMIT:
            src.problems.append(_submodule(rel))
            continue
        _git_blob(repo, commit.tree, rel_root, rel, entry, rel_root, max_file_bytes, src, beside)
    return src


def _git_ignore(repo: Any, tree: Any, src: Source, exclude: Sequence[str]) -> Ignore | None:
    """The revision's ignore file at the source root (size read from the header first)."""
    try:
        entry = tree[IGNORE_FILE]
    except KeyError:
        return excludes(None, exclude, src)
    if entry.type_str != "blob":
        src.problems.append(Problem(IGNORE_FILE, 0, message="not a file; refused"))
        return None
    _kind, size = repo.odb.read_header(entry.id)
    if size > IGNORE_FILE_MAX_BYTES:
        bound = f"a fixed bound for {IGNORE_FILE}"
        src.problems.append(_too_big(IGNORE_FILE, size, IGNORE_FILE_MAX_BYTES, setting=bound))
        return None
    data = repo[entry.id].data
    import pygit2

    if entry.filemode == pygit2.enums.FileMode.LINK:
        message = "a symlink; refused (the ignore file must be a file at the source root)"
        src.problems.append(Problem(IGNORE_FILE, 0, message=message))
        return None
    return excludes(_decode(IGNORE_FILE, data, src.problems), exclude, src)


@dataclass
class _Walk:
    """What a revision's walk leaves out and marks: the patterns, a chart's directories."""

    ignore: Ignore
    src: Source
    charts: set[str] = field(default_factory=set)


def _submodule(rel: str) -> Problem:
    return Problem(
        rel,
        0,
        message="is a Git submodule, whose files are not in this "
        "repository's object store, so its objects would be missing; render the "
        "submodule's repository on its own, or copy its manifests into this one",
    )


def _walk_tree(repo: Any, tree: Any, prefix: str, walk: _Walk) -> Iterator[tuple[str, Any, str]]:
    """Every blob and submodule (gitlink) entry below ``tree`` and why it may be no
    manifest (:attr:`SourceFile.beside`); hidden and excluded entries skipped."""
    entries = sorted(tree, key=lambda e: e.name)
    if any(e.name == "Chart.yaml" and e.type_str == "blob" for e in entries):
        walk.charts.update(prefix + d for d in CHART_DIRS)
    chart = _chart_of(prefix, walk.charts)
    for entry in entries:
        if entry.name.startswith("."):
            continue
        rel = f"{prefix}{entry.name}"
        is_dir = entry.type_str == "tree"
        if _left_out(walk.src, walk.ignore, rel, is_dir=is_dir):
            continue
        if is_dir:
            yield from _walk_tree(repo, repo[entry.id], rel + "/", walk)
        elif entry.type_str in ("blob", "commit"):
            yield rel, entry, chart or beside_reason(entry.name)


def _git_blob(
    repo: Any,
    full_tree: Any,
    rel_root: str,
    rel: str,
    entry: Any,
    root: str,
    limit: int,
    src: Source,
    beside: str = "",
) -> None:
    """Read one file of the revision into ``src`` (or a problem), sizes checked first."""
    repo_rel = posixpath.join(root, rel) if root else rel
    if not (rel.endswith(MANIFEST_SUFFIXES) or is_settings_file(rel)):
        _check_dir_link(repo, full_tree, repo_rel, entry, root, rel, src)
        return
    found = _follow_links(repo, full_tree, repo_rel, entry, root, rel, src)
    if found is None:
        return
    cap = SETTINGS_FILE_MAX_BYTES if is_settings_file(rel) else limit
    _kind, size = repo.odb.read_header(found.id)
    if size > cap:
        src.problems.append(_too_big(rel, size, cap))
        return
    data = repo[found.id].data
    if data.startswith(_LFS_POINTER):
        src.problems.append(
            Problem(
                rel,
                0,
                message="is a Git LFS pointer, not the file: LFS keeps the content "
                "outside the object store that dyn-gitops reads; store manifests in Git itself "
                "(remove their pattern from .gitattributes and commit the files again)",
            )
        )
        return
    if rel == SETTINGS_FILE:
        src.settings_file = SourceFile(SETTINGS_FILE, data.decode("utf-8", "replace"))
        return
    if is_settings_file(rel):  # a subtree's own settings
        src.nested_settings.append(SourceFile(rel, data.decode("utf-8", "replace")))
        return
    src.files.append(SourceFile(rel, _decode(rel, data, src.problems), beside))


def _check_dir_link(
    repo: Any, full_tree: Any, repo_rel: str, entry: Any, root: str, rel: str, src: Source
) -> None:
    """A link to a directory of the repository outside the source root is refused, as a
    directory tree refuses it (its files would otherwise be silently missing)."""
    import pygit2

    if entry.filemode != pygit2.enums.FileMode.LINK:
        return
    _kind, size = repo.odb.read_header(entry.id)
    if size > _LINK_MAX_BYTES:
        return  # not a path; nothing is read through it
    target = repo[entry.id].data.decode("utf-8", "replace")
    resolved = posixpath.normpath(posixpath.join(posixpath.dirname(repo_rel), target))
    if not root or resolved == root or resolved.startswith(root + "/"):
        return
    try:
        is_dir = full_tree[resolved].type_str == "tree"
    except (KeyError, ValueError):
        is_dir = False  # outside the repository: a file or a directory, nobody can tell
    if is_dir:
        src.problems.append(
            Problem(rel, 0, message=f"symlink leads outside the source root (to {target}); refused")
        )


def _follow_links(
    repo: Any, full_tree: Any, repo_rel: str, entry: Any, root: str, rel: str, src: Source
) -> Any:
    """The blob entry ``entry`` stands for (through symlinks), or None with a problem.

    Links are resolved inside the revision as a checkout would, but never to a path
    outside the source root; their targets are size-checked before they are read.
    """
    import pygit2

    seen: set[str] = set()
    while entry.filemode == pygit2.enums.FileMode.LINK:
        if len(seen) >= _LINK_MAX_HOPS or repo_rel in seen:
            message = f"symlink loop (or more than {_LINK_MAX_HOPS} links in a chain); refused"
            src.problems.append(Problem(rel, 0, message=message))
            return None
        seen.add(repo_rel)
        resolved = _link_target(repo, entry, repo_rel, root, rel, src)
        if resolved is None:
            return None
        try:
            entry = full_tree[resolved]
        except KeyError:
            target = repo[entry.id].data.decode("utf-8", "replace")
            message = f"dangling symlink (to {target}): nothing in the revision at that path"
            src.problems.append(Problem(rel, 0, message=message))
            return None
        repo_rel = resolved
    if entry.type_str != "blob":
        return None  # a link to a directory: read as the directory itself is (or not)
    return entry


def _link_target(
    repo: Any, entry: Any, repo_rel: str, root: str, rel: str, src: Source
) -> str | None:
    """The repository path symlink ``entry`` (at ``repo_rel``) leads to, or None with a
    problem: a target over the size limit, or one outside the source root."""
    _kind, size = repo.odb.read_header(entry.id)
    if size > _LINK_MAX_BYTES:
        message = f"symlink target is {size} bytes, over the limit of {_LINK_MAX_BYTES}; refused"
        src.problems.append(Problem(rel, 0, message=message))
        return None
    target = repo[entry.id].data.decode("utf-8", "replace")
    resolved = posixpath.normpath(posixpath.join(posixpath.dirname(repo_rel), target))
    inside = (
        not target.startswith("/")
        and not resolved.startswith("../")
        and resolved != ".."
        and (not root or resolved == root or resolved.startswith(root + "/"))
    )
    if not inside:
        message = f"symlink leads outside the source root (to {target}); refused"
        src.problems.append(Problem(rel, 0, message=message))
        return None
    return resolved
