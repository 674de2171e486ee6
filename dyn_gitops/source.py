"""Reading input: a directory tree, a file, stdin, or a Git revision (no checkout).

Everything returned is text plus where it came from; nothing here knows about Dynamo.
Hostile input is bounded: symlinks may not leave the source root, files have a size
limit, runs have a document limit, and YAML aliases may not expand past a node limit.
"""

from __future__ import annotations

import os
import posixpath
import stat
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from .errors import Problem, RenderError
from .settings import SETTINGS_FILE

try:  # libyaml when present: several times faster
    from yaml import CSafeLoader as _BaseLoader
except ImportError:  # pragma: no cover - depends on the PyYAML build
    from yaml import SafeLoader as _BaseLoader  # type: ignore[assignment]


class _Loader(_BaseLoader):
    """Safe loader that keeps timestamps as written: Kubernetes fields holding dates are
    strings, and a datetime would come back out in another spelling."""


_Loader.yaml_implicit_resolvers = {
    first: [(tag, rx) for tag, rx in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in _BaseLoader.yaml_implicit_resolvers.items()
}

MANIFEST_SUFFIXES = (".yaml", ".yml", ".json")


@dataclass(frozen=True)
class SourceFile:
    path: str  # posix path relative to the source root ("-" for stdin)
    text: str


@dataclass
class Source:
    """What was read: the files, plus what is known of their origin."""

    files: list[SourceFile]
    root: str  # display name of the root (directory, "-" or "<repo>@<rev>")
    commit: str | None = None  # Git commit id when read from a revision
    settings_file: dict[str, Any] | None = None  # parsed dyn-gitops.yaml at the root
    problems: list[Problem] = field(default_factory=list)


@dataclass(frozen=True)
class Document:
    file: SourceFile
    index: int  # position of the document in its file
    line: int  # 1-based line where the document starts
    data: Any


# ---------------------------------------------------------------------------- file system
def _within(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def read_path(path: str, *, max_file_bytes: int) -> Source:
    """Read a directory tree (recursively, hidden entries skipped) or a single file."""
    if path == "-":
        import sys

        data = sys.stdin.buffer.read(max_file_bytes + 1)
        src = Source(files=[], root="-")
        if len(data) > max_file_bytes:
            src.problems.append(_too_big("-", len(data), max_file_bytes, at_least=True))
        else:
            src.files.append(SourceFile("-", _decode("-", data, src.problems)))
        return src
    p = Path(path)
    if not p.exists():
        raise FileNotFoundError(path)
    if p.is_file():
        src = Source(files=[], root=str(p))
        _read_one(p, p.name, max_file_bytes, src)
        return src
    root = os.path.realpath(p)
    src = Source(files=[], root=str(p))
    seen_dirs: set[str] = set()
    for dirpath, dirnames, filenames in os.walk(root, followlinks=True):
        real_dir = os.path.realpath(dirpath)
        rel_dir = os.path.relpath(dirpath, root)
        if not _within(real_dir, root):
            src.problems.append(Problem(
                _posix(rel_dir), 0, "", "",
                f"symlink leads outside the source root (to {real_dir}); refused"))
            dirnames[:] = []
            continue
        if real_dir in seen_dirs:  # symlink loop
            dirnames[:] = []
            continue
        seen_dirs.add(real_dir)
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        for name in sorted(filenames):
            if name.startswith("."):
                continue
            full = os.path.join(dirpath, name)
            rel = _posix(os.path.normpath(os.path.join(rel_dir, name)))
            if rel == SETTINGS_FILE:
                src.settings_file = _read_settings_file(full, src)
                continue
            if not name.endswith(MANIFEST_SUFFIXES):
                continue
            real = os.path.realpath(full)
            if not _within(real, root):
                src.problems.append(Problem(
                    rel, 0, "", "", f"symlink leads outside the source root (to {real}); refused"))
                continue
            _read_one(Path(full), rel, max_file_bytes, src)
    return src


def _posix(p: str) -> str:
    return p.replace(os.sep, "/")


def _read_one(p: Path, rel: str, limit: int, src: Source) -> None:
    st = p.stat()
    if not stat.S_ISREG(st.st_mode):
        return
    if st.st_size > limit:
        src.problems.append(_too_big(rel, st.st_size, limit))
        return
    src.files.append(SourceFile(rel, _decode(rel, p.read_bytes(), src.problems)))


# The settings file is read before the settings (and their limits) are known.
_SETTINGS_FILE_MAX_BYTES = 64 * 1024
_SETTINGS_FILE_MAX_NODES = 1_000


def _read_settings_file(full: str, src: Source) -> dict[str, Any] | None:
    data = Path(full).read_bytes()
    if len(data) > _SETTINGS_FILE_MAX_BYTES:
        src.problems.append(_too_big(SETTINGS_FILE, len(data), _SETTINGS_FILE_MAX_BYTES))
        return None
    return _parse_settings_text(data.decode("utf-8", errors="replace"), src)


def _parse_settings_text(text: str, src: Source) -> dict[str, Any] | None:
    problems: list[Problem] = []
    docs = parse_documents([SourceFile(SETTINGS_FILE, text)], max_documents=1,
                           max_yaml_nodes=_SETTINGS_FILE_MAX_NODES, problems=problems)
    if problems:
        src.problems.extend(problems)
        return None
    data = docs[0].data if docs else None
    if data is None:
        return {}
    if not isinstance(data, dict):
        src.problems.append(Problem(SETTINGS_FILE, 1, "", "",
                                    "expected a mapping of setting names to values"))
        return None
    return data


def _too_big(rel: str, size: int, limit: int, *, at_least: bool = False) -> Problem:
    more = "more than " if at_least else ""
    return Problem(rel, 0, "", "", f"file is {more}{size} bytes, over the limit of {limit} "
                   "(setting max-file-bytes)")


def _decode(rel: str, data: bytes, problems: list[Problem]) -> str:
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        problems.append(Problem(rel, 0, "", "",
                                f"not UTF-8 text ({exc.reason} at byte {exc.start})"))
        return ""


# ---------------------------------------------------------------------------- Git
# A symlink's blob is its target path: longer than PATH_MAX is not a path. Chains of links
# are followed as the kernel does, up to its limit (ELOOP after 40).
_LINK_MAX_BYTES = 4096
_LINK_MAX_HOPS = 40
_LFS_POINTER = b"version https://git-lfs.github.com/spec/v1"


def read_git(repo_path: str, rev: str, subpath: str, *, max_file_bytes: int) -> Source:
    """Read the tree of ``rev`` below ``subpath`` straight from the object store.

    Every blob's size is read from its object header before the blob itself, so a huge
    blob costs nothing. Submodules and Git LFS pointers are problems: the object store
    holds neither the submodule's files nor the LFS file, and rendering without them
    would silently drop objects.
    """
    import pygit2  # imported here: only Git reads pay for it

    found = pygit2.discover_repository(repo_path)
    if found is None:
        raise FileNotFoundError(f"{repo_path}: not inside a Git repository")
    repo = pygit2.Repository(found)
    try:
        commit = repo.revparse_single(rev).peel(pygit2.Commit)
    except (KeyError, ValueError, pygit2.GitError) as exc:
        raise LookupError(f"unknown Git revision {rev!r}: {exc}") from None
    workdir = repo.workdir or os.path.dirname(found.rstrip("/"))
    # subpath is relative to the current directory; make it relative to the repo root
    abs_sub = os.path.realpath(os.path.join(repo_path, subpath)) if subpath else os.path.realpath(
        repo_path)
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
            _git_blob(repo, tree, rel_root, posixpath.basename(rel_root), obj, "", max_file_bytes,
                      src)
            return src
        tree = repo[obj.id]
    for rel, entry in _walk_tree(repo, tree, ""):
        if entry.filemode == pygit2.enums.FileMode.COMMIT:
            src.problems.append(_submodule(rel))
            continue
        _git_blob(repo, commit.tree, rel_root, rel, entry, rel_root, max_file_bytes, src)
    return src


def _submodule(rel: str) -> Problem:
    return Problem(rel, 0, "", "", "is a Git submodule, whose files are not in this "
                   "repository's object store, so its objects would be missing; render the "
                   "submodule's repository on its own, or copy its manifests into this one")


def _walk_tree(repo: Any, tree: Any, prefix: str) -> Iterator[tuple[str, Any]]:
    """Every blob and submodule (gitlink) entry below ``tree``, hidden entries skipped."""
    for entry in sorted(tree, key=lambda e: e.name):
        if entry.name.startswith("."):
            continue
        rel = f"{prefix}{entry.name}"
        if entry.type_str == "tree":
            yield from _walk_tree(repo, repo[entry.id], rel + "/")
        elif entry.type_str in ("blob", "commit"):
            yield rel, entry


def _git_blob(repo: Any, full_tree: Any, rel_root: str, rel: str, entry: Any, root: str,
              limit: int, src: Source) -> None:
    """Read one file of the revision into ``src`` (or a problem), sizes checked first."""
    repo_rel = posixpath.join(root, rel) if root else rel
    if not (rel.endswith(MANIFEST_SUFFIXES) or rel == SETTINGS_FILE):
        _check_dir_link(repo, full_tree, repo_rel, entry, root, rel, src)
        return
    found = _follow_links(repo, full_tree, repo_rel, entry, root, rel, src)
    if found is None:
        return
    cap = _SETTINGS_FILE_MAX_BYTES if rel == SETTINGS_FILE else limit
    _kind, size = repo.odb.read_header(found.id)
    if size > cap:
        src.problems.append(_too_big(rel, size, cap))
        return
    data = repo[found.id].data
    if data.startswith(_LFS_POINTER):
        src.problems.append(Problem(
            rel, 0, "", "", "is a Git LFS pointer, not the file: LFS keeps the content "
            "outside the object store that dyn-gitops reads; store manifests in Git itself "
            "(remove their pattern from .gitattributes and commit the files again)"))
        return
    if rel == SETTINGS_FILE:
        src.settings_file = _parse_settings_text(data.decode("utf-8", "replace"), src)
        return
    src.files.append(SourceFile(rel, _decode(rel, data, src.problems)))


def _check_dir_link(repo: Any, full_tree: Any, repo_rel: str, entry: Any, root: str,
                    rel: str, src: Source) -> None:
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
        src.problems.append(Problem(
            rel, 0, "", "", f"symlink leads outside the source root (to {target}); refused"))


def _follow_links(repo: Any, full_tree: Any, repo_rel: str, entry: Any, root: str, rel: str,
                  src: Source) -> Any:
    """The blob entry ``entry`` stands for (through symlinks), or None with a problem.

    Links are resolved inside the revision as a checkout would, but never to a path
    outside the source root; their targets are size-checked before they are read.
    """
    import pygit2

    seen: set[str] = set()
    while entry.filemode == pygit2.enums.FileMode.LINK:
        if len(seen) >= _LINK_MAX_HOPS or repo_rel in seen:
            src.problems.append(Problem(rel, 0, "", "", "symlink loop (or more than "
                                        f"{_LINK_MAX_HOPS} links in a chain); refused"))
            return None
        seen.add(repo_rel)
        _kind, size = repo.odb.read_header(entry.id)
        if size > _LINK_MAX_BYTES:
            src.problems.append(Problem(rel, 0, "", "", f"symlink target is {size} bytes, over "
                                        f"the limit of {_LINK_MAX_BYTES}; refused"))
            return None
        target = repo[entry.id].data.decode("utf-8", "replace")
        resolved = posixpath.normpath(posixpath.join(posixpath.dirname(repo_rel), target))
        inside = (not target.startswith("/") and not resolved.startswith("../")
                  and resolved != ".." and (not root or resolved == root
                                            or resolved.startswith(root + "/")))
        if not inside:
            src.problems.append(Problem(
                rel, 0, "", "", f"symlink leads outside the source root (to {target}); refused"))
            return None
        try:
            entry = full_tree[resolved]
        except KeyError:
            src.problems.append(Problem(rel, 0, "", "", f"dangling symlink (to {target}): "
                                        "nothing in the revision at that path"))
            return None
        repo_rel = resolved
    if entry.type_str != "blob":
        return None  # a link to a directory: read as the directory itself is (or not)
    return entry


# ---------------------------------------------------------------------------- YAML
def parse_documents(files: Sequence[SourceFile], *, max_documents: int, max_yaml_nodes: int,
                    problems: list[Problem]) -> list[Document]:
    """Parse every file into documents; problems are appended, never raised."""
    docs: list[Document] = []
    for f in files:
        if not f.text.strip():
            continue
        loader = _Loader(f.text)
        index = 0
        try:
            while loader.check_node():
                node = loader.get_node()
                if node is None:
                    break
                line = node.start_mark.line + 1
                if len(docs) >= max_documents:
                    problems.append(Problem(f.path, line, "", "",
                                            f"more than {max_documents} documents in this run "
                                            "(setting max-documents)"))
                    return docs
                if not _check_nodes(node, f, line, max_yaml_nodes, problems):
                    index += 1
                    continue
                data = loader.construct_document(node)
                if data is not None:
                    docs.append(Document(f, index, line, data))
                index += 1
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
            line = mark.line + 1 if mark is not None else 0
            what = getattr(exc, "problem", None) or str(exc)
            ctx = getattr(exc, "context", None)
            problems.append(Problem(f.path, line, "", "",
                                    f"malformed YAML: {what}" + (f" ({ctx})" if ctx else "")))
        finally:
            loader.dispose()
    return docs


def _check_nodes(root: yaml.Node, f: SourceFile, line: int, limit: int,
                 problems: list[Problem]) -> bool:
    """Duplicate keys and alias expansion; False when the document must not be constructed."""
    sizes: dict[int, int] = {}
    ok = True

    def size(node: yaml.Node, depth: int) -> int:
        nonlocal ok
        key = id(node)
        if key in sizes:  # an alias (or a shared anchor): counted again, as it would expand
            return sizes[key]
        if depth > 200:
            raise _TooDeep
        total = 1
        if isinstance(node, yaml.MappingNode):
            seen: set[str] = set()
            for k, v in node.value:
                if isinstance(k, yaml.ScalarNode):
                    if k.value in seen and k.value != "<<":
                        problems.append(Problem(f.path, k.start_mark.line + 1, "", "",
                                                f"duplicate key {k.value!r}"))
                        ok = False
                    seen.add(k.value)
                total += size(k, depth + 1) + size(v, depth + 1)
        elif isinstance(node, yaml.SequenceNode):
            for v in node.value:
                total += size(v, depth + 1)
        sizes[key] = total
        return total

    try:
        total = size(root, 0)
    except _TooDeep:
        problems.append(Problem(f.path, line, "", "", "YAML nested more than 200 levels deep"))
        return False
    if total > limit:
        problems.append(Problem(
            f.path, line, "", "",
            f"document expands to {total} YAML nodes through aliases, over the limit of "
            f"{limit} (setting max-yaml-nodes)"))
        return False
    return ok


class _TooDeep(Exception):
    pass


def locate(doc: Document, loc: Sequence[str | int]) -> int:
    """Line of the deepest node along ``loc`` in ``doc`` (re-parsed: errors are rare)."""
    try:
        nodes = list(yaml.compose_all(doc.file.text, Loader=_Loader))
        node: yaml.Node | None = nodes[doc.index]
    except (yaml.YAMLError, IndexError):
        return doc.line
    line = doc.line
    for part in loc:
        if isinstance(node, yaml.MappingNode) and isinstance(part, str):
            nxt = None
            for k, v in node.value:
                if isinstance(k, yaml.ScalarNode) and k.value == part:
                    line = k.start_mark.line + 1
                    nxt = v
                    break
            if nxt is None:
                return line
            node = nxt
        elif isinstance(node, yaml.SequenceNode) and isinstance(part, int):
            if part >= len(node.value):
                return line
            node = node.value[part]
            line = node.start_mark.line + 1
        else:
            return line
    return line


def raise_if(problems: list[Problem]) -> None:
    if problems:
        raise RenderError(problems)
