"""Reading input: a directory tree, a file, stdin, or a Git revision (no checkout).

Everything returned is text plus where it came from; nothing here knows about Dynamo.
Hostile input is bounded: symlinks may not leave the source root, files have a size
limit, runs have a document limit, and YAML aliases may not expand past a node limit.
"""

from __future__ import annotations

import errno
import os
import posixpath
import re
import stat
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from yaml.composer import ComposerError

from .errors import Problem, RenderError, field_path
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
    """Read a directory tree (recursively, hidden entries skipped) or a single file.

    Every entry that cannot be read is a problem (never silently skipped): unreadable files
    and directories, symlink loops, dangling symlinks, FIFOs and devices (never opened for
    reading, so nothing blocks), symlinks that leave the root.
    """
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
    if not os.path.lexists(p):
        raise FileNotFoundError(path)
    if not p.is_dir():
        src = Source(files=[], root=str(p))
        data = _read_bytes(str(p), p.name, max_file_bytes, src.problems)
        if data is not None:
            src.files.append(SourceFile(p.name, _decode(p.name, data, src.problems)))
        return src
    root = os.path.realpath(p)
    src = Source(files=[], root=str(p))
    seen_dirs: set[str] = set()

    def unreadable(exc: OSError) -> None:
        rel = _posix(os.path.relpath(exc.filename or root, root))
        src.problems.append(Problem(rel, 0, "", "",
                                    f"cannot read the directory ({_os_reason(exc)})"))

    for dirpath, dirnames, filenames in os.walk(root, followlinks=True, onerror=unreadable):
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
            rel = _posix(os.path.normpath(os.path.join(rel_dir, name)))
            if rel != SETTINGS_FILE and not name.endswith(MANIFEST_SUFFIXES):
                continue
            full = os.path.join(dirpath, name)
            real = os.path.realpath(full)
            if not _within(real, root):
                src.problems.append(Problem(
                    rel, 0, "", "", f"symlink leads outside the source root (to {real}); refused"))
                continue
            if rel == SETTINGS_FILE:
                src.settings_file = _read_settings_file(full, src)
                continue
            data = _read_bytes(full, rel, max_file_bytes, src.problems)
            if data is not None:
                src.files.append(SourceFile(rel, _decode(rel, data, src.problems)))
    return src


def _posix(p: str) -> str:
    return p.replace(os.sep, "/")


_OS_REASONS = {errno.ELOOP: "a symlink loop", errno.ENOENT: "a dangling symlink",
               errno.EACCES: "permission denied", errno.EPERM: "permission denied"}


def _os_reason(exc: OSError) -> str:
    return _OS_REASONS.get(exc.errno or 0) or exc.strerror or type(exc).__name__


def _read_bytes(full: str, rel: str, limit: int, problems: list[Problem],
                what: str = "max-file-bytes") -> bytes | None:
    """A regular file's bytes, at most ``limit``; anything else is a problem."""
    try:
        # O_NONBLOCK: opening a FIFO must not wait for a writer
        fd = os.open(full, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        problems.append(Problem(rel, 0, "", "", f"cannot read the file ({_os_reason(exc)})"))
        return None
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode):
            problems.append(Problem(rel, 0, "", "", "not a regular file (a FIFO, socket or "
                                                    "device); refused"))
            return None
        if st.st_size > limit:
            problems.append(_too_big(rel, st.st_size, limit, setting=what))
            return None
        try:
            data = f.read(limit + 1)
        except OSError as exc:
            problems.append(Problem(rel, 0, "", "",
                                    f"cannot read the file ({_os_reason(exc)})"))
            return None
    if len(data) > limit:  # grew while being read
        problems.append(_too_big(rel, len(data), limit, at_least=True, setting=what))
        return None
    return data


# The settings file is read before the settings (and their limits) are known.
_SETTINGS_FILE_MAX_BYTES = 64 * 1024
_SETTINGS_FILE_MAX_NODES = 1_000
_SETTINGS_FILE_MAX_DEPTH = 10


def _read_settings_file(full: str, src: Source) -> dict[str, Any] | None:
    data = _read_bytes(full, SETTINGS_FILE, _SETTINGS_FILE_MAX_BYTES, src.problems,
                       what="a fixed bound for " + SETTINGS_FILE)
    if data is None:
        return None
    return _parse_settings_text(_decode(SETTINGS_FILE, data, src.problems), src)


def _parse_settings_text(text: str, src: Source) -> dict[str, Any] | None:
    problems: list[Problem] = []
    docs = parse_documents([SourceFile(SETTINGS_FILE, text)], max_documents=1,
                           max_yaml_nodes=_SETTINGS_FILE_MAX_NODES,
                           max_depth=_SETTINGS_FILE_MAX_DEPTH, problems=problems)
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


def _too_big(rel: str, size: int, limit: int, *, at_least: bool = False,
             setting: str = "max-file-bytes") -> Problem:
    more = "more than " if at_least else ""
    where = f"setting {setting}" if setting == "max-file-bytes" else setting
    return Problem(rel, 0, "", "", f"file is {more}{size} bytes, over the limit of {limit} "
                   f"({where})")


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
#: nesting accepted whatever the settings say: deeper data would exhaust the recursion of
#: the code that builds, validates and writes it
DEPTH_CEILING = 250
_MERGE_TAG = "tag:yaml.org,2002:merge"
_SCALAR_STATS = (1, 0)


class _InputTooBig(Exception):
    """A document breaks a limit: the line and the problem to report."""

    def __init__(self, line: int | None, message: str, *, stop: bool = False) -> None:
        super().__init__(message)
        self.line = line
        #: stop reading the file: skipping the rest of a too-deep document would make libyaml
        #: scan all of it, and its scanner slows down with every open flow bracket
        self.stop = stop


@dataclass
class _Composed:
    """One YAML document composed from the event stream: its node (None when refused)."""

    index: int
    line: int
    node: yaml.Node | None
    problems: list[tuple[int, str]]  # (line, message): refused, or duplicate keys
    size: int = 0  # nodes, aliases counted as what they expand to
    stop: bool = False  # nothing after this document is read


class _Composer:
    """Builds YAML nodes from libyaml's event stream with an explicit stack.

    libyaml's own composer recurses once per nesting level (deep input crashes the
    process); here nothing recurses, nesting is bounded before anything is built, and the
    size of every node (aliases expanded) is known without expanding anything.
    """

    def __init__(self, loader: Any, max_depth: int, max_nodes: int) -> None:
        self.loader = loader
        self.max_depth = min(max_depth, DEPTH_CEILING)
        self.max_nodes = max_nodes
        #: id(collection) -> (size with aliases expanded, nesting depth below it)
        self.stats: dict[int, tuple[int, int]] = {}

    def documents(self) -> Iterator[_Composed]:
        loader = self.loader
        index = 0
        while loader.check_event():
            event = loader.get_event()
            if isinstance(event, yaml.DocumentStartEvent):
                mark: Any = event.start_mark
                composed = self._document(index, mark.line + 1)
                yield composed
                if composed.stop:
                    return
                index += 1

    def _document(self, index: int, line: int) -> _Composed:
        doc = _Composed(index, line, None, [])
        try:
            doc.node, doc.size = self._compose(doc)
        except _InputTooBig as exc:
            doc.problems.append((exc.line or line, str(exc)))
            if exc.stop:
                doc.stop = True
                doc.problems.append((exc.line or line, "the rest of this file is not read"))
            else:
                self._skip_document()
        self.stats.clear()
        return doc

    def _skip_document(self) -> None:
        while not isinstance(self.loader.get_event(), yaml.DocumentEndEvent):
            pass

    def _compose(self, doc: _Composed) -> tuple[yaml.Node, int]:
        loader = self.loader
        resolve = loader.resolve
        anchors: dict[str, yaml.Node] = {}
        open_ids: set[int] = set()
        # stack of [collection node, pending mapping key or None]
        stack: list[list[Any]] = []
        root: yaml.Node | None = None
        while True:
            event = loader.get_event()
            kind = type(event)
            node: yaml.Node
            if kind is yaml.ScalarEvent:  # the common case first
                tag = event.tag
                if tag is None or tag == "!":
                    tag = resolve(yaml.ScalarNode, event.value, event.implicit)
                start: Any = event.start_mark  # libyaml's marks, typed apart from PyYAML's
                node = yaml.ScalarNode(tag, event.value, start, event.end_mark,
                                       style=event.style)
                if event.anchor is not None:
                    anchors[event.anchor] = node  # a later anchor of a name wins (YAML 1.2)
            elif kind is yaml.MappingStartEvent or kind is yaml.SequenceStartEvent:
                self._check_depth(len(stack) + 1, event)
                tag = event.tag
                node_kind = yaml.MappingNode if kind is yaml.MappingStartEvent else \
                    yaml.SequenceNode
                if tag is None or tag == "!":
                    tag = resolve(node_kind, None, True)
                start = event.start_mark
                coll = node_kind(tag, [], start, None, flow_style=event.flow_style)
                if event.anchor is not None:
                    anchors[event.anchor] = coll
                    open_ids.add(id(coll))
                stack.append([coll, None])
                continue
            elif kind is yaml.MappingEndEvent or kind is yaml.SequenceEndEvent:
                node = stack.pop()[0]
                node.end_mark = event.end_mark
                open_ids.discard(id(node))
                self._finish(node, doc)
            elif kind is yaml.AliasEvent:
                start = event.start_mark
                if event.anchor not in anchors:
                    raise ComposerError(
                        None, None, f"found undefined alias {event.anchor!r}", start)
                node = anchors[event.anchor]
                if id(node) in open_ids:
                    raise ComposerError(
                        None, None, f"alias {event.anchor!r} refers to a node that contains "
                        "it (a recursive structure)", start)
                self._check_depth(len(stack) + self._stats(node)[1], event)
            else:  # DocumentEndEvent: libyaml sends nothing else inside a document
                assert root is not None
                return root, self._stats(root)[0]
            if not stack:
                root = node
                if self._stats(root)[0] > self.max_nodes:
                    raise _InputTooBig(None, self._too_many(self._stats(root)[0]))
                continue
            top = stack[-1]
            parent = top[0]
            if type(parent) is yaml.SequenceNode:
                parent.value.append(node)
            elif top[1] is None:
                top[1] = node
            else:
                parent.value.append((top[1], node))
                top[1] = None

    def _stats(self, node: yaml.Node) -> tuple[int, int]:
        """(expanded size, height) of a finished node; a scalar's is (1, 0)."""
        return self.stats.get(id(node), _SCALAR_STATS)

    def _check_depth(self, depth: int, event: Any) -> None:
        if depth > self.max_depth:
            raise _InputTooBig(event.start_mark.line + 1,
                               f"YAML nested more than {self.max_depth} levels deep "
                               "(setting max-depth)", stop=True)

    def _too_many(self, total: int) -> str:
        return (f"document expands to more than {self.max_nodes} YAML nodes through aliases "
                f"(at least {total}; setting max-yaml-nodes)")

    def _finish(self, node: yaml.Node, doc: _Composed) -> None:
        """Size and height of a finished collection; duplicate keys reported."""
        children: list[yaml.Node]
        if isinstance(node, yaml.MappingNode):
            children = [n for pair in node.value for n in pair]
            seen: set[str] = set()
            for key, _ in node.value:
                if isinstance(key, yaml.ScalarNode) and key.tag != _MERGE_TAG:
                    if key.value in seen:
                        doc.problems.append((key.start_mark.line + 1,
                                             f"duplicate key {key.value!r}"))
                    seen.add(key.value)
        else:
            children = node.value
        size, height = 1, 0
        stats = self.stats
        for child in children:
            csize, cheight = stats.get(id(child), _SCALAR_STATS)
            size += csize
            height = max(height, cheight)
        if size > self.max_nodes:
            raise _InputTooBig(None, self._too_many(size))
        stats[id(node)] = (size, height + 1)


def _yaml_problem(path: str, exc: yaml.YAMLError) -> Problem:
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    line = mark.line + 1 if mark is not None else 0
    what = getattr(exc, "problem", None) or str(exc)
    ctx = getattr(exc, "context", None)
    return Problem(path, line, "", "", f"malformed YAML: {what}" + (f" ({ctx})" if ctx else ""))


def parse_documents(files: Sequence[SourceFile], *, max_documents: int, max_yaml_nodes: int,
                    problems: list[Problem], max_depth: int,
                    max_total_yaml_nodes: int | None = None) -> list[Document]:
    """Parse every file into documents; problems are appended, never raised.

    Limits: nesting (``max_depth``), nodes per document and per call, aliases expanded
    (``max_yaml_nodes``, ``max_total_yaml_nodes``), documents per call.
    """
    docs: list[Document] = []
    budget = max_total_yaml_nodes if max_total_yaml_nodes is not None else max_yaml_nodes
    used = 0
    for f in files:
        if not f.text.strip():
            continue
        loader = _Loader(f.text)
        try:
            for composed in _Composer(loader, max_depth, max_yaml_nodes).documents():
                if composed.node is not None and len(docs) >= max_documents:
                    problems.append(Problem(f.path, composed.line, "", "",
                                            f"more than {max_documents} documents in this run "
                                            "(setting max-documents)"))
                    return docs
                problems.extend(Problem(f.path, line, "", "", msg)
                                for line, msg in composed.problems)
                if composed.problems or composed.node is None:
                    continue
                used += composed.size
                if used > budget:
                    problems.append(Problem(
                        f.path, composed.line, "", "",
                        f"the documents read so far expand to more than {budget} YAML nodes "
                        "through aliases (setting max-total-yaml-nodes)"))
                    return docs
                data = _construct(loader, composed.node, f.path, problems)
                if data is not None:
                    docs.append(Document(f, composed.index, composed.line, data))
        except yaml.YAMLError as exc:
            problems.append(_yaml_problem(f.path, exc))
        finally:
            loader.dispose()
    return docs


def _construct(loader: Any, node: yaml.Node, path: str, problems: list[Problem]) -> Any:
    """The document's data, or None (with problems) when it is not plain JSON data."""
    try:
        data = loader.construct_document(node)
    except Exception as exc:  # PyYAML's constructors applied to hostile
        # input fail in many ways ("!foo x", "!!int abc", "!!float x", an integer with too
        # many digits, an empty "!!int" -> IndexError): each is the input's fault, never ours
        line, message = _unreadable(node, exc)
        problems.append(Problem(path, line, "", "", message))
        loader.state_generators = []
        loader.constructed_objects = {}
        loader.recursive_objects = {}
        return None
    found = not_json(data)
    if found:
        problems.extend(Problem(path, _line_at(node, loc), "", field_path(loc), msg)
                        for loc, msg in found)
        return None
    return data


def _unreadable(node: yaml.Node, exc: BaseException) -> tuple[int, str]:
    """Where and why a document cannot be built; the value itself is not repeated (it may
    be a secret)."""
    if isinstance(exc, RecursionError):
        return int(node.start_mark.line) + 1, "nested too deeply (merge keys)"
    if isinstance(exc, yaml.MarkedYAMLError) and exc.problem_mark is not None:
        line = exc.problem_mark.line + 1
        if exc.problem and "constructor for the tag" in exc.problem:
            return line, f"unknown YAML tag {_short_tag(exc.problem)}"
        return line, f"cannot read a value: {exc.problem}"
    bad = _failed_scalar(node)
    if bad is None:
        return int(node.start_mark.line) + 1, f"cannot read a value ({type(exc).__name__})"
    why = "too many digits" if "digits" in str(exc) else "not a valid value for its tag"
    return int(bad.start_mark.line) + 1, f"value tagged {_short_tag(bad.tag)} cannot be " \
                                         f"read ({why})"


def _short_tag(text: str) -> str:
    return text.replace("tag:yaml.org,2002:", "!!").removeprefix(
        "could not determine a constructor for the tag ")


def _failed_scalar(node: yaml.Node) -> yaml.Node | None:
    """The first scalar whose tag cannot be built from its text."""
    stack = [node]
    seen: set[int] = set()
    while stack:
        n = stack.pop()
        if id(n) in seen:
            continue
        seen.add(id(n))
        if isinstance(n, yaml.ScalarNode):
            try:
                _Loader.yaml_constructors.get(n.tag, _fail)(_PROBE, n)
            except Exception:  # any failure marks the culprit
                return n
        elif isinstance(n, yaml.MappingNode):
            stack.extend(x for pair in reversed(n.value) for x in reversed(pair))
        elif isinstance(n, yaml.SequenceNode):
            stack.extend(reversed(n.value))
    return None


def _fail(_loader: Any, _node: Any) -> Any:
    raise ValueError("no constructor")


_PROBE = yaml.SafeLoader("")


def _line_at(node: yaml.Node, loc: Sequence[str | int]) -> int:
    return _walk_nodes(node, loc)[1]


def not_json(data: Any, max_problems: int = 20) -> list[tuple[tuple[str | int, ...], str]]:
    """Where ``data`` holds something JSON (and so Kubernetes) cannot: non-string keys,
    bytes, sets, dates, pairs, NaN or infinity. Walks without recursion."""
    found: list[tuple[tuple[str | int, ...], str]] = []
    stack: list[tuple[tuple[str | int, ...], Any]] = [((), data)]
    while stack and len(found) < max_problems:
        loc, value = stack.pop()
        if isinstance(value, dict):
            for k, v in reversed(list(value.items())):
                if not isinstance(k, str):
                    found.append((loc, f"mapping key {k!r} is {_what(k)}, not a string; "
                                       "quote it"))
                    continue
                stack.append(((*loc, k), v))
        elif isinstance(value, list):
            stack.extend(((*loc, i), v) for i, v in reversed(list(enumerate(value))))
        elif isinstance(value, float):
            if value != value or value in (float("inf"), float("-inf")):
                found.append((loc, "NaN and infinity are not numbers JSON (and so Kubernetes) "
                                   "can carry"))
        elif value is not None and not isinstance(value, str | int):
            found.append((loc, f"{_what(value)} is not a JSON value (strings, numbers, "
                               "booleans, null, lists and mappings only)"))
    return found


def _what(value: Any) -> str:
    names = {bytes: "binary data (!!binary)", set: "a set (!!set)", tuple: "a pair"}
    for kind, name in names.items():
        if isinstance(value, kind):
            return name
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    return f"a {type(value).__name__}"


def _walk_nodes(node: yaml.Node | None, loc: Sequence[str | int]) -> tuple[bool, int]:
    """Follow ``loc`` down ``node``: (reached the end, line of the deepest node found)."""
    line = node.start_mark.line + 1 if node is not None else 0
    for part in loc:
        if isinstance(node, yaml.MappingNode) and isinstance(part, str):
            nxt = None
            for k, v in node.value:
                if isinstance(k, yaml.ScalarNode) and k.value == part:
                    line = k.start_mark.line + 1
                    nxt = v
                    break
            if nxt is None:
                return False, line
            node = nxt
        elif isinstance(node, yaml.SequenceNode) and isinstance(part, int):
            if part >= len(node.value):
                return False, line
            node = node.value[part]
            line = node.start_mark.line + 1
        else:
            return False, line
    return True, line


def locate(doc: Document, loc: Sequence[str | int]) -> int:
    """Line of the deepest node along ``loc`` in ``doc`` (re-parsed: errors are rare)."""
    loader = _Loader(doc.file.text)
    try:
        for composed in _Composer(loader, DEPTH_CEILING, 2**62).documents():
            if composed.index == doc.index:
                if composed.node is None:
                    return doc.line
                line = _walk_nodes(composed.node, loc)[1]
                return line or doc.line
    except yaml.YAMLError:
        pass
    finally:
        loader.dispose()
    return doc.line


_JSON_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.DOTALL)
_JSON_BRACKET = re.compile(r"[\[\]{}]")


def json_loads_bounded(text: str | bytes, *, max_depth: int) -> Any:
    """``json.loads`` with the nesting checked first (the decoder recurses once per level);
    raises ValueError for anything that is not JSON within the bound."""
    import json

    if isinstance(text, bytes):
        text = text.decode("utf-8", errors="replace")
    depth = 0
    limit = min(max_depth, DEPTH_CEILING)
    for bracket in _JSON_BRACKET.findall(_JSON_STRING.sub("", text)):
        depth += 1 if bracket in "[{" else -1
        if depth > limit:
            raise ValueError(f"nested more than {limit} levels deep")
    return json.loads(text)


def load_bounded(text: str, *, max_depth: int, max_nodes: int, what: str) -> Any:
    """One YAML (or JSON) document from a small input outside a file (an annotation, an
    environment variable); raises ValueError with the problem."""
    problems: list[Problem] = []
    docs = parse_documents([SourceFile(what, text)], max_documents=1, max_yaml_nodes=max_nodes,
                           max_depth=max_depth, problems=problems)
    if problems:
        raise ValueError("; ".join(str(p) for p in problems))
    return docs[0].data if docs else None


def raise_if(problems: list[Problem]) -> None:
    if problems:
        raise RenderError(problems)
