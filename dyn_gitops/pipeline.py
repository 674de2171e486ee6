"""read -> parse -> validate -> expand -> finalize: the one pipeline every entry point uses."""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ValidationError

from . import keys
from .display import describe, is_sensitive
from .errors import NotSupportedError, Problem, RenderError, field_path
from .expand import grove
from .expand.graph import GraphError, expand_graph, is_multinode
from .finalize import Rendered, _identity, finalize
from .models.v1alpha1 import DynamoComponentDeployment, DynamoGraphDeployment
from .models.versions import V1BETA1
from .settings import RenderSettings
from .source import Document, Source, locate, parse_documents
from .validation import limit_checks, object_shape, validate_graph, warn_graph

DYNAMO_KINDS = ("DynamoGraphDeployment", "DynamoComponentDeployment")
Loc = tuple[str | int, ...]


@dataclass
class RenderResult:
    objects: list[dict[str, Any]]
    graphs: int = 0  # DGDs expanded
    problems: list[Problem] = field(default_factory=list)
    #: rendered anyway, but the API server or the workload will not like it
    warnings: list[Problem] = field(default_factory=list)


def _ident(data: Any) -> str:
    if isinstance(data, dict):
        kind = data.get("kind")
        meta = data.get("metadata")
        name = meta.get("name") if isinstance(meta, dict) else None
        # only scalars: a mapping in the wrong place may hold anything, credentials included
        return f"{_scalar(kind)}/{_scalar(name)}"
    return ""


def _scalar(value: Any) -> str:
    return str(value) if isinstance(value, str | int | float) and value != "" else "?"


def _problem(doc: Document, loc: Sequence[str | int], message: str) -> Problem:
    return Problem(doc.file.path, locate(doc, loc), _ident(doc.data), field_path(loc), message)


def _model_at(model: type[BaseModel], loc: Sequence[str | int]) -> type[BaseModel] | None:
    """The model class that holds the field at ``loc`` (for 'did you mean')."""
    import typing

    current: Any = model
    for part in loc:
        while True:  # unwrap Optional / list / dict down to a model class
            origin = typing.get_origin(current)
            if origin in (typing.Union, __import__("types").UnionType):
                args = [a for a in typing.get_args(current) if a is not type(None)]
                current = args[0] if args else None
                continue
            break
        if isinstance(part, int) or typing.get_origin(current) in (list, dict):
            if typing.get_origin(current) in (list, dict):
                current = typing.get_args(current)[-1]
                continue
            return None
        if isinstance(current, type) and issubclass(current, BaseModel):
            f = current.model_fields.get(part)
            if f is None:
                # a dict key (e.g. a service name) addressed by string
                return None
            current = f.annotation
        else:
            return None
    while typing.get_origin(current) is not None:
        args = [a for a in typing.get_args(current) if a is not type(None)]
        current = args[-1] if args else None
    return current if isinstance(current, type) and issubclass(current, BaseModel) else None


def _validation_problems(doc: Document, model: type[BaseModel],
                         exc: ValidationError) -> list[Problem]:
    import difflib  # only for an error (its import costs a render ~1 ms)

    out = []
    for err in exc.errors(include_url=False):
        loc = tuple(err["loc"])
        if err["type"] == "extra_forbidden":
            parent = _model_at(model, loc[:-1])
            hint = ""
            if parent is not None:
                close = difflib.get_close_matches(str(loc[-1]), list(parent.model_fields), n=1)
                if close:
                    hint = f" (did you mean {close[0]!r}?)"
            out.append(_problem(doc, loc, f"unknown field {loc[-1]!r}{hint}"))
            continue
        msg = err["msg"]
        if err["type"] == "missing":
            msg = "required field is missing"
        elif "input" in err and err["type"] not in ("value_error",):
            secret = is_sensitive(loc, kind=_ident(doc.data).partition("/")[0], strict=True)
            msg = f"{msg} (found {describe(err['input'], sensitive=secret)})"
        out.append(_problem(doc, loc, msg.replace("Value error, ", "")))
    return out


def _same_loc(loc: Loc) -> Loc:
    return loc


def _read_v1beta1(doc: Document, data: dict[str, Any], problems: list[Problem]) -> tuple[
        DynamoGraphDeployment, Callable[[Loc], Loc]] | None:
    """A v1beta1 DGD converted to the v1alpha1 shape, and its field-path mapping back."""
    # imported (and built) only when a v1beta1 DGD is present
    from .models import v1beta1
    from .models.convert import ConversionError, loc_in_v1beta1, to_v1alpha1

    try:
        beta = v1beta1.DynamoGraphDeployment.model_validate(data)
    except ValidationError as exc:
        problems.extend(_validation_problems(doc, v1beta1.DynamoGraphDeployment, exc))
        return None
    try:
        return to_v1alpha1(beta), loc_in_v1beta1(beta)
    except ConversionError as exc:
        problems.extend(_problem(doc, loc, msg) for loc, msg in exc.problems)
        return None


def _markers(children: list[dict[str, Any]]) -> dict[str, str]:
    """What the companion controller reads on the emitted DGD, taken from what was rendered:
    the Grove PodCliqueSet's name, or the worker hash the workers are named with."""
    for child in children:
        if child["kind"] == "PodCliqueSet":
            return {keys.ANN_PODCLIQUESET: child["metadata"]["name"]}
    for child in children:
        whash = (child["metadata"].get("labels") or {}).get(keys.LABEL_WORKER_HASH)
        if whash:
            return {keys.ANN_WORKER_HASH: whash}
    return {}


def _source_to_emit(data: dict[str, Any], obj: DynamoGraphDeployment,
                    children: list[dict[str, Any]], settings: RenderSettings) -> dict[str, Any]:
    """The source DGD as written, or a v1beta1 one as the v1alpha1 DGD it was rendered from
    (what the dyn-gitops CRDs serve and the controller reads); with the markers the
    companion controller reads (worker hash, or the Grove PodCliqueSet)."""
    stamps = _markers(children)
    if data.get("apiVersion") == V1BETA1 and settings.source_api_version == "v1alpha1":
        out: dict[str, Any] = obj.model_dump(mode="json", exclude_unset=True)
        stamps[keys.ANN_SOURCE_API_VERSION] = V1BETA1
    else:
        out = copy.deepcopy(data)
    if stamps:
        meta = out.setdefault("metadata", {})
        meta["annotations"] = {**(meta.get("annotations") or {}), **stamps}
    return out


def _per_replica_objects(dgd: DynamoGraphDeployment, settings: RenderSettings) -> int:
    """What the expansion makes per replica: a LeaderWorkerSet and a PodGroup for each
    replica of a multinode service outside Grove (known before making them)."""
    if grove.is_grove(dgd, settings):
        return 0
    return sum(2 * (1 if s.replicas is None else s.replicas)
               for s in (dgd.spec.services or {}).values() if is_multinode(s))


def render(source: Source, settings: RenderSettings) -> RenderResult:
    """Render everything in ``source``; raise :class:`RenderError` with every problem."""
    problems = list(source.problems)
    docs = parse_documents(source.files, max_documents=settings.max_documents,
                           max_yaml_nodes=settings.max_yaml_nodes,
                           max_total_yaml_nodes=settings.max_total_yaml_nodes,
                           max_depth=settings.max_depth, problems=problems)
    rendered: list[Rendered] = []
    warnings: list[Problem] = []
    graphs = 0
    dgd_names: dict[tuple[str, str], Document] = {}
    outputs: set[tuple[str, str, str, str]] = set()  # what finalize will output, so far

    def too_many(doc: Document, start: int) -> bool:
        """Setting max-objects, counted as objects are made (a bomb is stopped early)."""
        outputs.update(_identity(r.obj, settings.namespace) for r in rendered[start:])
        if len(outputs) <= settings.max_objects:
            return False
        problems.append(_problem(doc, (), f"the output reaches {len(outputs)} objects here, "
                                          f"more than the {settings.max_objects} allowed "
                                          "(setting max-objects); the rest was not expanded"))
        return True

    for doc in sorted(docs, key=lambda d: (d.file.path, d.index)):
        start = len(rendered)
        data = doc.data
        if not isinstance(data, dict) or not data.get("apiVersion") or not data.get("kind"):
            problems.append(Problem(doc.file.path, doc.line, "", "",
                                    "not a Kubernetes object (needs apiVersion and kind)"))
            continue
        shape = list(object_shape(data))
        if shape:
            problems.extend(_problem(doc, loc, msg) for loc, msg in shape)
            continue
        api, kind = str(data["apiVersion"]), str(data["kind"])
        if not (api.startswith("nvidia.com/") and kind in DYNAMO_KINDS):
            rendered.append(Rendered(data, doc.file.path, passthrough=True, doc=doc))
            if too_many(doc, start):
                break
            continue
        if api == V1BETA1 and kind == "DynamoGraphDeployment":
            parsed = _read_v1beta1(doc, data, problems)
            if parsed is None:
                continue
            obj, to_doc_loc = parsed
        elif api != "nvidia.com/v1alpha1":
            problems.append(_problem(doc, ("apiVersion",),
                                     f"{api} {kind} is not yet supported (only "
                                     "nvidia.com/v1alpha1 and v1beta1 DynamoGraphDeployments "
                                     "are rendered)"))
            continue
        else:
            model: type[BaseModel] = (DynamoGraphDeployment if kind == "DynamoGraphDeployment"
                                      else DynamoComponentDeployment)
            try:
                parsed_obj = model.model_validate(data)
            except ValidationError as exc:
                problems.extend(_validation_problems(doc, model, exc))
                continue
            if isinstance(parsed_obj, DynamoComponentDeployment):
                problems.append(_problem(doc, ("kind",),
                                         "a standalone DynamoComponentDeployment is validated "
                                         "but not yet expanded; put the service in a "
                                         "DynamoGraphDeployment"))
                continue
            assert isinstance(parsed_obj, DynamoGraphDeployment)
            obj, to_doc_loc = parsed_obj, _same_loc
        found = [*limit_checks(obj, max_replicas=settings.max_replicas,
                               max_node_count=settings.max_node_count), *validate_graph(obj)]
        if found:
            problems.extend(_problem(doc, to_doc_loc(loc), msg) for loc, msg in found)
            continue
        warnings.extend(_problem(doc, to_doc_loc(loc), msg) for loc, msg in warn_graph(obj))
        ns = obj.metadata.namespace or settings.namespace
        key = (ns, obj.metadata.name)
        if key in dgd_names:
            first = dgd_names[key]
            problems.append(_problem(doc, ("metadata", "name"),
                                     f"DynamoGraphDeployment {ns}/{obj.metadata.name} is "
                                     f"also defined at {first.file.path}:{first.line}"))
            continue
        dgd_names[key] = doc
        per_replica = _per_replica_objects(obj, settings)
        if len(outputs) + per_replica > settings.max_objects:
            before = f" with the {len(outputs)} before it" if outputs else ""
            problems.append(_problem(doc, to_doc_loc(("spec", "services")), (
                f"its multinode services would make {per_replica} LeaderWorkerSets and "
                f"PodGroups (one each per replica), more than the {settings.max_objects} "
                f"objects allowed{before} (setting max-objects); nothing was expanded")))
            break
        try:
            children = expand_graph(obj, settings)
        except NotSupportedError as exc:
            problems.append(_problem(doc, to_doc_loc(("spec",)), str(exc)))
            continue
        except GraphError as exc:
            problems.extend(_problem(doc, to_doc_loc(p.loc), p.message)
                            for p in exc.problems)
            continue
        graphs += 1
        source_ref = f"{ns}/{obj.metadata.name}"
        for child in children:
            rendered.append(Rendered(child, doc.file.path, dgd=source_ref, doc=doc))
        if settings.emit_source:
            rendered.append(Rendered(_source_to_emit(data, obj, children, settings),
                                     doc.file.path, dgd=source_ref, source_dgd=True,
                                     doc=doc))
        if too_many(doc, start):
            break
    if problems:
        raise RenderError(problems)
    objects = finalize(rendered, settings=settings, commit=source.commit, problems=problems)
    if problems:
        raise RenderError(problems)
    if not objects and not settings.allow_empty:
        raise RenderError([Problem(source.root, 0, "", "",
                                   "the input renders to nothing; refusing empty output "
                                   "(an empty sync with auto-prune deletes workloads); "
                                   "pass --allow-empty if this is intended")])
    return RenderResult(objects, graphs, warnings=warnings)


__all__ = ["RenderResult", "keys", "render"]
