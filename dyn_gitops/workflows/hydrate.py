"""Hydrate: render the tree at a commit and publish it as a commit on a branch (or a directory).

The published tree (at ``target_path`` of the branch, the rest of the branch is kept)::

    kustomization.yaml              lists every object file (so Flux, kubectl -k and
                                    Argo CD apply exactly these, never the metadata)
    <namespace>/<kind>.<group>_<name>.yaml   one object per file, as `render --out-dir`
    .dyn-gitops/metadata.yaml       source commit, renderer version, settings
    .dyn-gitops/cache.json          what the next run may reuse (input blob ids -> outputs)

Objects carry no source-commit annotation here (the metadata does): otherwise every commit
would rewrite every file, and a one-file change could not stay a one-file diff.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import yaml

from .. import __version__, objpath
from ..errors import UsageError
from ..parse import json_loads_bounded
from ..read import Source
from ..settings import REGISTRY, RenderSettings
from . import gitstore
from .incremental import Output, Plan, Previous, Reused, output_ids, plan

META_DIR = ".dyn-gitops"
METADATA_FILE = f"{META_DIR}/metadata.yaml"
CACHE_FILE = f"{META_DIR}/cache.json"
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
    source = gitstore.commit_of(repo, src.commit)  # what was read, even if --rev moved since
    _check_rewind(repo, req, old, str(source.id))
    try:
        sig = gitstore.signature(repo, req.author, source)
    except ValueError as exc:
        raise HydrateUsageError(str(exc)) from None
    old_ids = dict(gitstore.walk_blobs(repo, old))
    cache = gitstore.read_blob(repo, old, CACHE_FILE, limit=CACHE_MAX_BYTES)
    previous = Previous(
        load_cache(cache), old_ids.get, lambda path: gitstore.read_blob(repo, old, path)
    )
    p = plan(src, settings, previous if req.use_cache else None)
    files = tree_content(p, metadata_text(str(source.id), req.rev, req.source_path, settings))
    if parent is not None and _same_output(output_ids(files), old_ids):
        if expected != parent:  # up to date, but the local branch does not exist yet
            gitstore.update_branch(
                repo,
                ref,
                parent,
                expected,
                sig=sig,
                message=f"dyn-gitops hydrate: from origin/{req.branch}",
            )
        return Result(None, parent, parent, p)
    content = {k: (v.blob if isinstance(v, Reused) else v) for k, v in files.items()}
    tree = gitstore.graft(repo, parent_tree, target, gitstore.write_files(repo, content))
    commit = gitstore.create_commit(repo, tree, parent, _message(req, str(source.id)), sig)
    if before_update is not None:
        before_update()
    gitstore.update_branch(
        repo,
        ref,
        commit,
        expected,
        sig=sig,
        message=f"dyn-gitops hydrate: {req.rev} ({str(source.id)[:12]})",
    )
    return Result(commit, commit, parent, p)


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
