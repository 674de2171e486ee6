"""Incremental render for hydrate: reuse the outputs of input files that did not change.

A *unit* is a set of input files rendered together by :func:`~dyn_gitops.pipeline.render`
(usually one file). Units interact only through object identities:

* a **shared** object: the same DGD child produced by several units (the planner RBAC every
  graph of a namespace gets). The pipeline's finalize merges such objects and lists every
  source in their annotations; here units are rendered apart and their shares are merged by
  calling the same :func:`~dyn_gitops.finalize.finalize` on them, so the merged object is
  exactly the full render's.
* any **other** clash (two graphs with one name, a pass-through object colliding with a
  rendered one, differing content): the units are merged and rendered together, so the
  pipeline reports (or resolves) it as in a full render.

A unit's outputs are reused when the previous run rendered the same files (same blob ids)
with the same settings and renderer version, its record is signed with the runner's key
(:mod:`.cachetrust`: the branch, cache included, may have been edited by anyone who can push
to it), and every previous output file still has the SHA-256 that record gives. Anything
unusual (a problem anywhere, the document limit close, an output or a record edited on the
branch) falls back to rendering more, up to one full render: a correct result matters more
than the cache. An output edited on the branch is rendered again and named in a warning.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import json
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .. import __version__, keys, objpath
from ..display import printable
from ..emit import size_problem, to_yaml
from ..errors import Problem, RenderError
from ..expand.stage import Rendered
from ..finalize import finalize
from ..parse import load_bounded
from ..pipeline import render
from ..read import Source, SourceFile
from ..settings import HYDRATE_KEY_ENV, RenderSettings
from .cachetrust import content_digest, key_id, signed, verifies

CACHE_FORMAT = 3
META_DIR = ".dyn-gitops"  # hydrate's own files in the published tree
CACHE_FILE = f"{META_DIR}/cache.json"
_DOC_MARKER = re.compile(r"^(---|\.\.\.)(\s|$)", re.MULTILINE)
#: the annotations finalize stamps; without them, shared children compare equal
_PROVENANCE = (
    keys.ANN_SOURCE_PATH,
    keys.ANN_SOURCE_COMMIT,
    keys.ANN_RENDERER_VERSION,
    keys.ANN_SOURCE_DGD,
)

Obj = dict[str, Any]


@dataclass(frozen=True)
class Reused:
    """An output file kept from the previous run, by its Git blob id (content verified)."""

    blob: str
    size: int


Output = bytes | Reused


@dataclass(frozen=True)
class Previous:
    """The last run's output: its cache, and its files by path (blob id, content)."""

    cache: Any = None
    blob: Callable[[str], str | None] = lambda path: None
    content: Callable[[str], bytes | None] = lambda path: None


@dataclass
class Plan:
    files: dict[str, Output]  # output path -> new content or a reused blob
    cache: dict[str, Any]  # written beside the outputs for the next run
    objects: int
    rendered: list[str] = field(default_factory=list)  # input files rendered this run
    reused: list[str] = field(default_factory=list)  # input files whose outputs were kept
    full: bool = False  # fell back to one full render
    warnings: list[str] = field(default_factory=list)  # outputs edited on the branch
    notes: list[str] = field(default_factory=list)  # why nothing could be reused


def blob_id(data: bytes) -> str:
    """The Git blob id of ``data`` (computed here so this module needs no Git library)."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def output_ids(files: Mapping[str, Output]) -> dict[str, str]:
    """Blob id of every output, sorted by path."""
    return {p: (o.blob if isinstance(o, Reused) else blob_id(o)) for p, o in sorted(files.items())}


def settings_digest(settings: RenderSettings) -> str:
    data = json.dumps(dataclasses.asdict(settings), sort_keys=True, default=str)
    return hashlib.sha256(data.encode()).hexdigest()


# ---------------------------------------------------------------------------- units
@dataclass
class ObjInfo:
    key: str  # coarse identity (kind and name), hashed
    digest: str  # SHA-256 of the unit's own rendering of the object (the file's bytes)
    sig: str | None = None  # digest without provenance, when it may be shared
    paths: list[str] = field(default_factory=list)  # provenance, when it may be shared
    dgds: list[str] = field(default_factory=list)


@dataclass
class Unit:
    files: dict[str, str]  # input path -> blob id
    graphs: list[str]  # "ns/name" of the graphs it expands
    objects: dict[str, ObjInfo]  # output path -> info
    rendered: dict[str, Obj] | None = None  # output path -> object, if rendered this run


def _hash(text: str) -> str:
    return hashlib.sha1(text.encode()).hexdigest()[:16]


def _sig(obj: Obj) -> str:
    """Digest of a shareable object without its provenance: a merged file on the branch is
    checked against it, so it is a full SHA-256, not a short key."""
    return content_digest(json.dumps(obj, sort_keys=True, default=str).encode())


def _coarse_key(obj: Obj, default_ns: str) -> str:
    """Coarser than finalize's (group, kind, namespace, name) on purpose (no group, any case
    of kind): a false match only renders two units together, a missed one would be wrong."""
    meta = obj.get("metadata") or {}
    ns = meta.get("namespace") or default_ns
    # folded as file names are compared (objpath.fold): objects that would share a file on
    # a case-insensitive disk are rendered together, and finalize reports them
    return _hash(objpath.fold(f"{obj.get('kind', '')!s}/{ns}/{meta.get('name')}"))


def _annotations(obj: Obj) -> dict[str, Any]:
    return dict((obj.get("metadata") or {}).get("annotations") or {})


def strip(obj: Obj) -> Obj:
    """``obj`` as expansion produced it, before finalize stamped its provenance."""
    out = copy.deepcopy(obj)
    ann = out["metadata"]["annotations"]
    for k in _PROVENANCE:
        ann.pop(k, None)
    return out


def _unit(files: list[SourceFile], objects: list[Obj], default_ns: str) -> Unit:
    graphs: set[str] = set()
    infos: dict[str, ObjInfo] = {}
    rendered: dict[str, Obj] = {}
    for path, obj in _assign(objects, files[0].path).items():
        ann = _annotations(obj)
        dgds = [d for d in str(ann.get(keys.ANN_SOURCE_DGD, "")).split(",") if d]
        graphs.update(dgds)
        info = ObjInfo(_coarse_key(obj, default_ns), content_digest(_text(obj)))
        if dgds and keys.ANN_RENDERER_VERSION in ann:  # a graph's child: may be shared
            info.sig = _sig(strip(obj))
            info.paths = str(ann.get(keys.ANN_SOURCE_PATH, "")).split(",")
            info.dgds = dgds
        infos[path] = info
        rendered[path] = obj
    return Unit({f.path: blob_id(f.text.encode()) for f in files}, sorted(graphs), infos, rendered)


def _assign(objects: list[Obj], where: str) -> dict[str, Obj]:
    """Objects by output path (finalize has refused what would clash; checked again)."""
    try:
        return objpath.assign(objects)
    except objpath.PathError as exc:
        raise RenderError([Problem(where, 0, message=str(exc))]) from None


def _text(obj: Obj) -> bytes:
    return to_yaml([obj]).encode("utf-8")


def _unit_json(u: Unit) -> dict[str, Any]:
    return {
        "files": dict(sorted(u.files.items())),
        "graphs": u.graphs,
        "objects": {
            p: {k: v for k, v in dataclasses.asdict(i).items() if v}
            for p, i in sorted(u.objects.items())
        },
    }


def _records(cache: Any, head: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The previous run's unit records if written for this format, version and settings
    (the cache lives on a branch people can edit: nothing here is trusted yet)."""
    if not isinstance(cache, Mapping) or any(cache.get(k) != v for k, v in head.items()):
        return []
    units = cache.get("units")
    return [u for u in units if isinstance(u, Mapping)] if isinstance(units, list) else []


def _parse_unit(record: Mapping[str, Any]) -> Unit | None:
    """A signed record as a unit; None if malformed (only a bug of ours could sign one)."""
    try:
        u = Unit(
            _strs(record["files"]),
            _strs(record["graphs"]),
            {str(p): _info(i) for p, i in record["objects"].items()},
        )
    except (KeyError, TypeError, AttributeError):
        return None
    # only the shape objpath produces is a safe output path
    return u if all(objpath.is_object_path(p) for p in u.objects) else None


def _strs(value: Any) -> Any:
    items = value.values() if isinstance(value, dict) else value
    if not isinstance(value, dict | list) or not all(isinstance(v, str) for v in items):
        raise TypeError("expected strings")
    return value


def _info(data: Any) -> ObjInfo:
    info = ObjInfo(**data)
    if not (
        isinstance(info.key, str)
        and isinstance(info.digest, str)
        and isinstance(info.sig, str | None)
    ):
        raise TypeError("malformed object entry")
    _strs(info.paths)
    _strs(info.dgds)
    return info


# ---------------------------------------------------------------------------- trust
class _Stale(Exception):
    """An output of the previous run is not what its record says (edited on the branch)."""

    def __init__(self, path: str) -> None:
        super().__init__(path)
        self.path = path


class _Trust:
    """What this run may take from the previous one: the units whose records carry the
    runner's MAC and whose outputs on the branch still have the recorded SHA-256."""

    def __init__(self, previous: Previous, head: dict[str, Any], key: bytes | None) -> None:
        self.previous, self.head, self.key = previous, head, key
        self.records = _records(previous.cache, head)  # for warnings only, never trusted
        self.units: list[Unit] = []
        self.forged: list[Mapping[str, Any]] = []  # records that carry no valid MAC
        self.stale: list[str] = []  # outputs found edited while merging
        self.verified: dict[str, Reused] = {}  # output path -> the checked previous file
        self.notes: list[str] = []
        if self.records and key is None:
            self.notes.append(
                f"the cache on the branch is not trusted without the runner's key "
                f"({HYDRATE_KEY_ENV}): every input file was rendered"
            )
        elif self.records and previous.cache.get("key") != key_id(key or b""):
            self.notes.append(
                "the cache on the branch was written without this runner's key (another "
                "key, or none): every input file was rendered; the next run reuses them"
            )
        elif key is not None:
            for record in self.records:
                u = _parse_unit(record) if verifies(key, head, record) else None
                if u is None:
                    self.forged.append(record)
                else:
                    self.units.append(u)

    def distrust(self, path: str) -> None:
        """A merged output did not match: render everything, and say which file."""
        self.stale.append(path)
        self.units, self.verified = [], {}

    def intact(self, u: Unit) -> bool:
        """Every output of ``u`` on the branch has the digest its record gives (a merged
        share is checked by :func:`_merge`, against its provenance-free digest)."""
        found: dict[str, Reused] = {}
        for path, info in u.objects.items():
            data, blob = self.previous.content(path), self.previous.blob(path)
            if data is not None and blob is not None and content_digest(data) == info.digest:
                found[path] = Reused(blob, len(data))
            elif info.sig is None or data is None:
                return False
        self.verified.update(found)
        return True

    def reusable(self, blobs: Mapping[str, str]) -> list[Unit]:
        """Trusted, intact units whose input files are unchanged (each file in one unit)."""
        units: list[Unit] = []
        covered: set[str] = set()
        for u in self.units:
            if (
                u.files
                and all(blobs.get(p) == b for p, b in u.files.items())
                and not covered & set(u.files)
                and self.intact(u)
            ):
                units.append(u)
                covered.update(u.files)
        return units

    def warnings(
        self, files: Mapping[str, Output], units: list[Unit], inputs: set[str]
    ) -> list[str]:
        """Each output rendered again that differs from the previous file although the same
        input files (same blob ids) produced it: edited on the branch; and each record that
        does not verify. Only paths of this run's input and output are named."""
        out = [f"{p}: edited on the branch; rendered again" for p in self.stale]
        before = _owners(self.records)
        now = _owners([{"files": u.files, "objects": u.objects} for u in units])
        for path, data in sorted(files.items()):
            old = self.previous.blob(path)
            if (
                isinstance(data, bytes)
                and path not in self.stale
                and old not in (None, blob_id(data))
                and before.get(path) == now.get(path)
            ):
                out.append(
                    f"{path}: edited on the branch (not the render of its unchanged input); "
                    "rendered again"
                )
        for record in self.forged:
            named = sorted(inputs & _owner(record).keys())
            which = ", ".join(printable(p) for p in named) or "a removed input file"
            out.append(
                f"{CACHE_FILE}: the record of {which} does not verify with {HYDRATE_KEY_ENV} "
                "(edited on the branch?); rendered again"
            )
        return out


def _owner(record: Mapping[str, Any]) -> dict[str, str]:
    """The input files (path -> blob id) a record says it rendered; read leniently."""
    files = record.get("files")
    return {str(k): str(v) for k, v in files.items()} if isinstance(files, Mapping) else {}


def _owners(records: list[Mapping[str, Any]]) -> dict[str, set[frozenset[tuple[str, str]]]]:
    """Output path -> the input files (with blob ids) of every unit that produced it."""
    out: dict[str, set[frozenset[tuple[str, str]]]] = {}
    for record in records:
        objects, owner = record.get("objects"), frozenset(_owner(record).items())
        if isinstance(objects, Mapping) and owner:
            for path in objects:
                out.setdefault(str(path), set()).add(owner)
    return out


# ---------------------------------------------------------------------------- planning
class _Renderer:
    def __init__(self, source: Source, settings: RenderSettings) -> None:
        self.source, self.settings = source, settings
        # units are rendered apart: an empty unit is fine, the total is checked once
        self.unit_settings = dataclasses.replace(settings, allow_empty=True)
        self.by_path = {f.path: f for f in source.files}
        self.rendered: list[str] = []

    def unit(self, paths: Iterable[str]) -> Unit:
        files = [self.by_path[p] for p in sorted(paths)]
        src = Source(
            files=files,
            root=self.source.root,
            settings_file=self.source.settings_file,
            subtrees=self.source.subtrees,
        )
        self.rendered.extend(f.path for f in files)
        return _unit(files, render(src, self.unit_settings).objects, self.settings.namespace)

    def full(self) -> list[Obj]:
        src = Source(
            files=list(self.source.files),
            root=self.source.root,
            settings_file=self.source.settings_file,
            problems=list(self.source.problems),
            subtrees=self.source.subtrees,
        )
        return render(src, self.settings).objects


def plan(
    source: Source,
    settings: RenderSettings,
    previous: Previous | None = None,
    *,
    key: bytes | None = None,
) -> Plan:
    """Outputs for ``source``, reusing what the previous run allows and ``key`` (the
    runner's cache key; None: nothing is reused) verifies.

    Raises :class:`RenderError` with every problem, exactly as a full render would.
    """
    p = _any_plan(source, settings, previous or Previous(), key)
    _check_totals(p, settings, source.root)
    return p


def _check_totals(p: Plan, settings: RenderSettings, root: str) -> None:
    """max-objects and max-output-bytes for the whole tree (units are rendered apart)."""
    problems: list[Problem] = []
    if len(p.files) > settings.max_objects:
        problems.append(
            Problem(
                root,
                0,
                message=f"the output is {len(p.files)} objects, more "
                f"than the {settings.max_objects} allowed (setting "
                "max-objects); nothing written",
            )
        )
    size = sum(out.size if isinstance(out, Reused) else len(out) for out in p.files.values())
    too_big = size_problem(size, settings, root)
    if too_big is not None:
        problems.append(too_big)
    if problems:
        raise RenderError(problems)


def _head(source: Source, settings: RenderSettings) -> dict[str, Any]:
    """What a record is valid for: cache format, renderer version, every setting."""
    digest = settings_digest(settings)
    if source.subtrees:  # subtrees with their own settings: keyed by all of them, never reused
        digest = _hash(
            digest + "".join(settings_digest(s) for _d, s in sorted(source.subtrees.items()))
        )
    return {"format": CACHE_FORMAT, "renderer": __version__, "settings": digest}


def _cache(head: dict[str, Any], key: bytes | None, units: list[Unit]) -> dict[str, Any]:
    signer = {} if key is None else {"key": key_id(key)}
    return {
        **head,
        **signer,
        "units": [signed(key, head, _unit_json(u)) for u in units],
    }


def _any_plan(
    source: Source, settings: RenderSettings, previous: Previous, key: bytes | None
) -> Plan:
    head = _head(source, settings)
    bound = sum(1 + len(_DOC_MARKER.findall(f.text)) for f in source.files)
    if source.problems or source.subtrees or bound >= settings.max_documents:
        return _full_plan(_Renderer(source, settings), head, key)
    trust = _Trust(previous, head, key)
    for _attempt in range(2):  # a merged output edited on the branch: once more, trusting none
        try:
            return _plan(_Renderer(source, settings), trust)
        except _Stale as exc:
            trust.distrust(exc.path)
        except RenderError:
            break
    return _full_plan(_Renderer(source, settings), head, key)  # reports every problem


def _plan(r: _Renderer, trust: _Trust) -> Plan:
    blobs = {f.path: blob_id(f.text.encode()) for f in r.source.files}
    units = trust.reusable(blobs)
    covered = {p for u in units for p in u.files}
    units += [r.unit([p]) for p in sorted(blobs) if p not in covered]
    units = [
        units[g[0]] if len(g) == 1 else r.unit(p for i in g for p in units[i].files)
        for g in _clashing(units)
    ]
    units.sort(key=lambda u: sorted(u.files))  # stable cache, stable diffs
    files = _outputs(units, trust, r.settings)
    folded = {objpath.fold(p) for p in files}
    if len(folded) != len(files):  # units rendered apart clash on a file: render it all
        raise RenderError([])
    if not files and not r.settings.allow_empty:
        r.full()  # raises the pipeline's own "renders to nothing" problem
    rendered = sorted(set(r.rendered))
    return Plan(
        files,
        _cache(trust.head, trust.key, units),
        len(files),
        rendered,
        sorted(p for p in blobs if p not in set(rendered)),
        warnings=trust.warnings(files, units, set(blobs)),
        notes=trust.notes,
    )


def _clashing(units: list[Unit]) -> list[list[int]]:
    """Units that must be rendered together (union-find over clashes other than shares)."""
    parent = list(range(len(units)))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    def union(group: list[int]) -> None:
        roots = sorted({find(i) for i in group})
        for i in roots[1:]:
            parent[i] = roots[0]

    by_key: dict[str, list[tuple[int, str, str | None]]] = {}
    by_graph: dict[str, list[int]] = {}
    for i, u in enumerate(units):
        for path, info in u.objects.items():
            by_key.setdefault(info.key, []).append((i, path, info.sig))
        for g in u.graphs:
            by_graph.setdefault(g, []).append(i)
    for entries in by_key.values():
        owners = sorted({i for i, _, _ in entries})
        shared = len({(path, sig) for _, path, sig in entries}) == 1 and entries[0][2]
        if len(owners) > 1 and not shared:
            union(owners)
    for owners in by_graph.values():
        union(owners)
    groups: dict[int, list[int]] = {}
    for i in range(len(units)):
        groups.setdefault(find(i), []).append(i)
    return sorted(groups.values())


def _outputs(units: list[Unit], trust: _Trust, settings: RenderSettings) -> dict[str, Output]:
    owners: dict[str, list[Unit]] = {}
    for u in units:
        for path in u.objects:
            owners.setdefault(path, []).append(u)
    out: dict[str, Output] = {}
    for path, us in sorted(owners.items()):
        first = us[0].objects[path]
        if len(us) == 1 and us[0].rendered is not None:
            out[path] = _text(us[0].rendered[path])
        elif len(us) == 1 and path in trust.verified:
            out[path] = trust.verified[path]
        elif first.sig is None:
            raise _Stale(path)
        else:
            out[path] = _text(_merge(path, us, trust.previous, settings))
    return out


def _merge(path: str, units: list[Unit], previous: Previous, settings: RenderSettings) -> Obj:
    """The shared object as the full render's finalize would write it."""
    base = next((strip(u.rendered[path]) for u in units if u.rendered is not None), None)
    if base is None:  # no contributor rendered this run: the previous output, unstamped
        try:  # read back from the branch: bounded like any input
            text = (previous.content(path) or b"").decode("utf-8")
            base = strip(
                load_bounded(
                    text, max_depth=settings.max_depth, max_nodes=settings.max_yaml_nodes, what=path
                )
            )
        except (ValueError, KeyError, TypeError, AttributeError):
            raise _Stale(path) from None
        if _sig(base) != units[0].objects[path].sig:
            raise _Stale(path)
    items = []
    for u in units:
        info = u.objects[path]
        for i in range(max(len(info.paths), len(info.dgds))):
            items.append(
                Rendered(
                    copy.deepcopy(base),
                    info.paths[min(i, len(info.paths) - 1)],
                    dgd=info.dgds[i] if i < len(info.dgds) else None,
                )
            )
    problems: list[Problem] = []
    merged = finalize(items, settings=settings, commit=None, problems=problems)
    if problems or len(merged) != 1:
        raise RenderError(problems)
    return merged[0]


def _full_plan(r: _Renderer, head: dict[str, Any], key: bytes | None) -> Plan:
    files: dict[str, Output] = {
        path: _text(obj) for path, obj in _assign(r.full(), r.source.root).items()
    }
    # no per-unit identities are known: the next run starts cold
    return Plan(files, _cache(head, key, []), len(files), sorted(r.by_path), full=True)
