"""Hydrate: render the tree at a commit and publish it as a commit on a branch (or a directory).

The published tree (at ``target_path`` of the branch, the rest of the branch is kept)::

    kustomization.yaml              lists every object file (so Flux, kubectl -k and
                                    Argo CD apply exactly these, never the metadata)
    <namespace>/<kind>.<group>_<name>.yaml   one object per file, as `render --out-dir`
    .dyn-gitops/metadata.yaml       source commit, renderer version, settings
    .dyn-gitops/cache.json          what the next run may reuse (input blob ids -> outputs,
                                    each record signed with the runner's key)

Objects carry no source-commit annotation here (the metadata does): otherwise every commit
would rewrite every file, and a one-file change could not stay a one-file diff.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import yaml

from .. import __version__, objpath
from ..errors import UsageError
from ..parse import json_loads_bounded
from ..read import Source
from ..settings import HYDRATE_KEY_ENV, HYDRATE_KEY_MIN_CHARS, REGISTRY, RenderSettings
from . import gitstore
from .incremental import (
    CACHE_FILE,
    META_DIR,
    Output,
    Plan,
    Previous,
    Reused,
    output_ids,
    plan,
)

METADATA_FILE = f"{META_DIR}/metadata.yaml"
KUSTOMIZATION_FILE = "kustomization.yaml"


#: what is read back from the branch before it is trusted (checked before reading)
METADATA_MAX_BYTES = 64 * 1024
CACHE_MAX_BYTES = 64 * 1024 * 1024
# the source commit line of metadata_text(); read with a pattern, never by parsing YAML
# that anyone who can push to the branch may have replaced
_SOURCE_COMMIT = re.compile(rb"^source:\n  commit: '?([0-9a-f]{40}|[0-9a-f]{64})'?$", re.M)


class HydrateUsageError(UsageError):
    """The request cannot be carried out as asked (bad branch, checked-out branch, ...)."""


class Rewind(HydrateUsageError):
    """The branch was rendered from a commit that the requested one does not descend from."""


@dataclass(frozen=True)
class Request:
    rev: str
    source_path: str  # inside the repository, "" for its root
    branch: str
    target_path: str = ""  # directory of the branch to replace, "" for the whole branch
    message: str | None = None
    author: gitstore.Identity | None = None
    use_cache: bool = True
    allow_rewind: bool = False  # publish even if the source is not a descendant of the last
    #: the runner's cache key (:func:`cache_key`); None: the cache is never trusted
    cache_key: bytes | None = field(default=None, repr=False)


@dataclass
class Result:
    commit: str | None  # the new commit, None when the branch was already up to date
    tip: str  # the branch tip after the run
    parent: str | None
    plan: Plan


# ---------------------------------------------------------------------------- tree content
def metadata_text(commit: str | None, rev: str, path: str, settings: RenderSettings) -> bytes:
    values = dataclasses.asdict(settings)
    doc = {
        "source": {"commit": commit, "revision": rev, "path": path or "."},
        "renderer": {"name": "dyn-gitops", "version": __version__},
        "settings": {s.name: values[s.attr] for s in REGISTRY},
    }
    head = "# Written by `dyn-gitops hydrate`; replaced on every run. Do not edit.\n"
    return (head + yaml.safe_dump(doc, sort_keys=False, default_flow_style=False)).encode()


def kustomization_text(paths: list[str]) -> bytes:
    doc = {
        "apiVersion": "kustomize.config.k8s.io/v1beta1",
        "kind": "Kustomization",
        "resources": sorted(paths),
    }
    head = "# Written by `dyn-gitops hydrate`: every rendered object, one file each.\n"
    return (head + yaml.safe_dump(doc, sort_keys=False, default_flow_style=False)).encode()


def cache_text(cache: Mapping[str, Any]) -> bytes:
    """Compact JSON, one unit per line: small, and a one-file change is a one-line diff."""
    head = {k: v for k, v in cache.items() if k != "units"}
    lines = [json.dumps(u, sort_keys=True, separators=(",", ":")) for u in cache.get("units", [])]
    body = ",\n".join(lines)
    return (
        json.dumps(head, sort_keys=True, separators=(",", ":"))[:-1]
        + ',"units":[\n'
        + body
        + "\n]}\n"
    ).encode()


def tree_content(p: Plan, meta: bytes) -> dict[str, Output]:
    """Every file of the published tree; object paths are checked once more (the one path
    rule of :mod:`dyn_gitops.objpath`), so nothing can land beside or outside the tree."""
    bad = [rel for rel in p.files if not objpath.is_object_path(rel)]
    if bad:
        raise objpath.PathError(f"unsafe output path {bad[0]!r}")
    files: dict[str, Output] = dict(p.files)
    files[KUSTOMIZATION_FILE] = kustomization_text(list(p.files))
    files[CACHE_FILE] = cache_text(p.cache)
    files[METADATA_FILE] = meta
    return files


#: the cache is ours but read back from a branch anyone with push rights can write
CACHE_MAX_DEPTH = 16


def load_cache(data: bytes | None) -> Any:
    if data is None:
        return None
    try:
        return json_loads_bounded(data, max_depth=CACHE_MAX_DEPTH)
    except ValueError:
        return None  # unreadable or too deep: start cold


def cache_key(environ: Mapping[str, str]) -> bytes | None:
    """The runner's cache key from its environment (None when unset or empty, as a CI
    secret that is not configured reads); its value is never shown."""
    value = environ.get(HYDRATE_KEY_ENV, "")
    if not value:
        return None
    if len(value) < HYDRATE_KEY_MIN_CHARS:
        raise HydrateUsageError(
            f"{HYDRATE_KEY_ENV} has {len(value)} characters, fewer than the "
            f"{HYDRATE_KEY_MIN_CHARS} required (its MACs are on the branch, so a short key "
            "could be guessed); use a random one, e.g. `openssl rand -hex 32`"
        )
    return value.encode("utf-8", "surrogateescape")


def _clean(path: str, what: str) -> str:
    """A directory of the branch: relative, trailing ``/`` allowed, else git's ref rules."""
    clean = path.rstrip("/")
    if clean and not gitstore.valid_path(clean):
        raise HydrateUsageError(
            f"{what} {path!r} is not a valid directory of a branch: use plain names joined "
            "by '/' (no '..', no component starting with '.', no leading '/' or '-', no "
            "space, control character or any of ~^:?*[\\, no '@{', no '.lock' ending)"
        )
    return clean


def last_source(repo: Any, old: Any) -> str | None:
    """The source commit the branch's ``target_path`` was last rendered from, if recorded."""
    meta = gitstore.read_blob(repo, old, METADATA_FILE, limit=METADATA_MAX_BYTES)
    found = _SOURCE_COMMIT.search(meta) if meta else None
    return found.group(1).decode() if found else None


def _check_rewind(repo: Any, req: Request, old: Any, source: str) -> None:
    last = last_source(repo, old)
    if last is None or req.allow_rewind:
        return
    where = f"{req.branch}:{req.target_path or '.'}"
    ok = gitstore.descends(repo, source, last)
    if ok is None:
        raise Rewind(
            f"{where} was last rendered from {last}, which is not in this repository (a "
            f"shallow clone?), so {source} ({req.rev}) cannot be shown to descend from it; "
            "fetch the history (git fetch --unshallow, or fetch-depth: 0 in CI), or pass "
            "--allow-rewind to publish it anyway"
        )
    if not ok:
        shallow = (
            " (or the history between them is cut off: this is a shallow clone)"
            if repo.is_shallow
            else ""
        )
        raise Rewind(
            f"{where} was last rendered from {last}; {source} ({req.rev}) does not descend "
            f"from it (an older or rewritten commit){shallow}, so publishing it would roll "
            "the branch back; nothing committed. Pass --allow-rewind if that is intended"
        )


# ---------------------------------------------------------------------------- to a branch
@dataclass
class _Branch:
    """The branch as found, and what the new commit builds on."""

    repo: Any
    ref: str
    expected: str | None  # the local branch tip (None: absent), moved only from this
    parent: str | None  # the local tip, else origin's (a fresh CI clone)
    parent_tree: Any
    target: str  # the directory of the branch replaced
    old: Any  # its tree in ``parent`` (None: absent)
    source: Any  # the source commit that was read, even if --rev moved since


def to_branch(
    repo_path: str,
    src: Source,
    settings: RenderSettings,
    req: Request,
    *,
    before_update: Callable[[], None] | None = None,
) -> Result:
    """Render ``src`` and commit it on ``req.branch``; see the module docstring.

    Raises RenderError (bad input), HydrateUsageError, gitstore.BranchMoved (lost race).
    ``before_update`` runs between building the commit and moving the branch (tests).
    """
    b = _open_branch(repo_path, src, req)
    _check_rewind(b.repo, req, b.old, str(b.source.id))
    try:
        sig = gitstore.signature(b.repo, req.author, b.source)
    except ValueError as exc:
        raise HydrateUsageError(str(exc)) from None
    old_ids = dict(gitstore.walk_blobs(b.repo, b.old))
    previous = _previous(b, old_ids, settings) if req.use_cache else None
    p = plan(src, settings, previous, key=req.cache_key)
    meta = metadata_text(str(b.source.id), req.rev, req.source_path, settings)
    files = tree_content(p, meta)
    if b.parent is not None and _same_output(output_ids(files), old_ids):
        return _up_to_date(b, req, sig, p)
    return _publish(b, req, sig, files, p, before_update)


def _open_branch(repo_path: str, src: Source, req: Request) -> _Branch:
    """The request checked against the repository (usage errors), and the branch read."""
    repo = gitstore.open_repo(repo_path)
    ref = f"refs/heads/{req.branch}"
    if not gitstore.valid_branch(req.branch):
        raise HydrateUsageError(f"{req.branch!r} is not a valid branch name")
    if gitstore.checked_out(repo, ref):
        raise HydrateUsageError(
            f"branch {req.branch} is checked out; hydrate never touches a work tree, so "
            "publish to a branch that is not checked out (e.g. --branch rendered)"
        )
    if src.commit is None:
        raise HydrateUsageError("hydrate reads its input from a Git revision (--rev)")
    target = _clean(req.target_path, "--target-path")
    expected = gitstore.tip(repo, ref)
    # a fresh CI clone has only the remote-tracking branch: build on it, never beside it
    parent = expected or gitstore.tip(repo, f"refs/remotes/origin/{req.branch}")
    parent_tree = gitstore.tree_of(repo, parent)
    old = gitstore.subtree(repo, parent_tree, target)
    source = gitstore.commit_of(repo, src.commit)
    return _Branch(repo, ref, expected, parent, parent_tree, target, old, source)


def _previous(b: _Branch, old_ids: Mapping[str, str], settings: RenderSettings) -> Previous:
    """The last run's files, each read back bounded (anyone who may push wrote them)."""
    cache = gitstore.read_blob(b.repo, b.old, CACHE_FILE, limit=CACHE_MAX_BYTES)
    limit = settings.max_output_bytes

    def content(path: str) -> bytes | None:
        oid = old_ids.get(path)
        return None if oid is None else gitstore.read_blob_id(b.repo, oid, limit=limit)

    return Previous(load_cache(cache), old_ids.get, content)


def _up_to_date(b: _Branch, req: Request, sig: Any, p: Plan) -> Result:
    """Nothing changed but the metadata: no commit (the local branch made if absent)."""
    assert b.parent is not None
    if b.expected != b.parent:  # up to date, but the local branch does not exist yet
        gitstore.update_branch(
            b.repo,
            b.ref,
            b.parent,
            b.expected,
            sig=sig,
            message=f"dyn-gitops hydrate: from origin/{req.branch}",
        )
    return Result(None, b.parent, b.parent, p)


def _publish(
    b: _Branch,
    req: Request,
    sig: Any,
    files: Mapping[str, Output],
    p: Plan,
    before_update: Callable[[], None] | None,
) -> Result:
    """Write the tree and its commit, then move the branch by compare-and-swap."""
    content = {k: (v.blob if isinstance(v, Reused) else v) for k, v in files.items()}
    tree = gitstore.graft(b.repo, b.parent_tree, b.target, gitstore.write_files(b.repo, content))
    source = str(b.source.id)
    commit = gitstore.create_commit(b.repo, tree, b.parent, _message(req, source), sig)
    if before_update is not None:
        before_update()
    gitstore.update_branch(
        b.repo,
        b.ref,
        commit,
        b.expected,
        sig=sig,
        message=f"dyn-gitops hydrate: {req.rev} ({source[:12]})",
    )
    return Result(commit, commit, b.parent, p)


def _same_output(new: Mapping[str, str], old: Mapping[str, str]) -> bool:
    """Equal but for the metadata: a new source commit alone is not worth a commit."""
    return {k: v for k, v in new.items() if k != METADATA_FILE} == {
        k: v for k, v in old.items() if k != METADATA_FILE
    }


def _message(req: Request, source: str) -> str:
    where = req.source_path or "."
    subject = req.message or f"dyn-gitops: render {where} at {source[:12]}"
    return (
        f"{subject}\n\nRendered from {source} ({req.rev}) by dyn-gitops {__version__}.\n\n"
        f"Dyn-Gitops-Source-Commit: {source}\nDyn-Gitops-Source-Path: {where}\n"
    )
