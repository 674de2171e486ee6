"""The one pipeline every entry point uses; emitting the objects is the caller's part.

    Source -parse-> list[Document] -validate-> Iterator[Validated] -expand-> Expanded
           -finalize-> Objects

``read`` made the Source; ``parse``, ``validate``, ``expand`` and ``finalize`` are each one
module (``expand`` a package), and each appends what it finds to one list of problems
(errors and warnings) and goes on, so one run reports every problem. Documents are validated
as the expansion asks for them: the setting max-objects stops a bomb while it expands, and
what comes after it is neither validated nor expanded.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from . import keys, lifetime, naming
from .errors import Problem, RenderError
from .expand.stage import Expanded, expand, identity
from .finalize import finalize
from .parse import Document, parse
from .read import Source, SourceFile
from .settings import RenderSettings
from .validate import Validated, validate

Objects = list[dict[str, Any]]


@dataclass
class RenderResult:
    objects: Objects
    graphs: int = 0  # DGDs expanded
    problems: list[Problem] = field(default_factory=list)
    #: rendered anyway, but the API server or the workload will not like it
    warnings: list[Problem] = field(default_factory=list)


def render(source: Source, settings: RenderSettings) -> RenderResult:
    """Render everything in ``source``; raise :class:`RenderError` with every problem.

    A subtree with its own ``dyn-gitops.yaml`` (``source.subtrees``) is rendered with its
    own settings; the results are joined, and an object produced by two subtrees is refused
    unless both produce it identically (then it is emitted once)."""
    if source.subtrees:
        return _render_subtrees(source, settings)
    problems: list[Problem] = list(source.problems)  # every stage appends to it
    docs: list[Document] = parse(source, settings, problems)
    valid: Iterator[Validated] = validate(docs, settings, problems)  # as expand asks
    expanded: Expanded = expand(valid, settings, problems)
    _raise_errors(problems)
    objects: Objects = finalize(
        expanded.rendered, settings=settings, commit=source.commit, problems=problems
    )
    lifetime.keep(docs, expanded)  # freed with a one-shot process, not object by object
    _raise_errors(problems)
    if settings.namespace_shared != "emit":  # one owner per namespace (docs/argocd.md)
        keep = settings.namespace_shared == "only"
        objects = [o for o in objects if naming.is_namespace_shared(o) == keep]
    if not objects and not settings.allow_empty:
        raise RenderError(
            [
                Problem(
                    source.root,
                    0,
                    message=(
                        "the input renders to nothing; refusing empty output (an empty sync with "
                        "auto-prune deletes workloads); pass --allow-empty if this is intended"
                    ),
                )
            ]
        )
    warnings = [p for p in problems if p.severity == "warning"]
    return RenderResult(objects, expanded.graphs, warnings=warnings)


def _render_subtrees(source: Source, settings: RenderSettings) -> RenderResult:
    import dataclasses

    from .finalize import sort_key
    from .read import subtree_of

    groups: dict[str, list[SourceFile]] = {d: [] for d in ("", *source.subtrees)}
    for f in source.files:
        groups[subtree_of(f.path, source.subtrees)].append(f)
    problems: list[Problem] = list(source.problems)
    objects: Objects = []
    seen: dict[tuple[str, str, str, str], tuple[dict[str, Any], str]] = {}
    graphs = 0
    warnings: list[Problem] = []
    for d in sorted(groups):
        own = source.subtrees.get(d, settings)
        part = Source(files=groups[d], root=source.root, commit=source.commit)
        try:
            result = render(part, dataclasses.replace(own, allow_empty=True))
        except RenderError as exc:
            problems.extend(exc.problems)
            continue
        graphs += result.graphs
        warnings += result.warnings
        for obj in result.objects:
            ident = identity(obj, own.namespace)
            if ident in seen:
                first, where = seen[ident]
                if _same_but_provenance(first, obj):  # shared: one object, both provenances
                    _join_provenance(first, obj)
                    continue
                problems.append(
                    Problem(
                        d or ".",
                        0,
                        f"{ident[1]}/{ident[3]}",
                        message=(
                            f"object {ident[1]} {ident[2]}/{ident[3]} is produced twice (also "
                            f"in {where or '.'}, a subtree with other settings) with different "
                            "content"
                        ),
                    )
                )
                continue
            seen[ident] = (obj, d)
            objects.append(obj)
    _raise_errors(problems)
    if not objects and not settings.allow_empty:
        render(Source(files=[], root=source.root), settings)  # raises: empty output
    objects.sort(key=sort_key)
    return RenderResult(objects, graphs, warnings=warnings)


_PROVENANCE = (keys.ANN_SOURCE_PATH, keys.ANN_SOURCE_DGD)


def _same_but_provenance(a: dict[str, Any], b: dict[str, Any]) -> bool:
    def strip(o: dict[str, Any]) -> Any:
        meta = dict(o.get("metadata") or {})
        ann = {k: v for k, v in (meta.get("annotations") or {}).items() if k not in _PROVENANCE}
        return {**o, "metadata": {**meta, "annotations": ann}}

    return bool(strip(a) == strip(b))


def _join_provenance(into: dict[str, Any], other: dict[str, Any]) -> None:
    ann = into.get("metadata", {}).get("annotations")
    more = other.get("metadata", {}).get("annotations") or {}
    if not isinstance(ann, dict):
        return
    for key in _PROVENANCE:
        joined = {v for x in (ann.get(key), more.get(key)) if x for v in str(x).split(",")}
        if joined:
            ann[key] = ",".join(sorted(joined))


def _raise_errors(problems: list[Problem]) -> None:
    errors = [p for p in problems if p.severity == "error"]
    if errors:
        raise RenderError(errors)


__all__ = ["RenderResult", "render"]
