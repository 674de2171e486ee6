"""Validate: each parsed document becomes a :class:`Validated` item, or problems.

An object that is not a Dynamo kind is passed through as written (its shape checked only). A
DynamoGraphDeployment becomes its typed model: ``nvidia.com/v1alpha1`` as written,
``v1beta1`` converted to the v1alpha1 shape (with the mapping of field paths back to the
document), checked by the pydantic models ("did you mean" for unknown fields), the rules of
:mod:`dyn_gitops.rules` and the runner's limits; two DGDs may not share a namespace and name.
"""

from __future__ import annotations

import types
import typing
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, replace
from typing import Any

from pydantic import BaseModel, ValidationError

from . import admission, coexistence, keys
from .display import describe, is_sensitive
from .errors import FieldPath, Problem, RenderError
from .models.v1alpha1 import DynamoGraphDeployment, DynamoModel
from .models.versions import V1BETA1
from .parse import Document, located, object_label
from .rules import (
    MODEL_FIELD_HINTS,
    limit_checks,
    object_shape,
    removed_kind,
    runtime_version_admission,
    validate_graph,
    validate_model,
    warn_graph,
    workload_provider_checks,
)
from .settings import RenderSettings

DYNAMO_KINDS = ("DynamoGraphDeployment", "DynamoComponentDeployment")


def same_path(path: FieldPath) -> FieldPath:
    return path


@dataclass(frozen=True)
class Validated:
    """A document that may be expanded: a DGD's model, or (``dgd`` None) an object to pass
    through as written."""

    doc: Document
    dgd: DynamoGraphDeployment | None = None
    #: a field path of the model -> the same field in the document (they differ for v1beta1)
    to_doc_path: Callable[[FieldPath], FieldPath] = same_path
    #: a standalone DynamoComponentDeployment, as the one-service DGD named like it
    #: (:func:`dcd_as_graph`): expanded as the operator's DCD controller renders it
    standalone_dcd: bool = False

    def located(self, problem: Problem) -> Problem:
        """``problem``, whose path is a field of the model, in the document."""
        return located(self.doc, replace(problem, path=self.to_doc_path(problem.path)))


def validate(
    docs: Iterable[Document], settings: RenderSettings, problems: list[Problem]
) -> Iterator[Validated]:
    """The validate stage, one document at a time (what the expansion does not reach, once
    it has stopped, is not validated either); problems and warnings are appended."""
    names: dict[tuple[str, str, str], Document] = {}
    for doc in docs:
        item = _validated(doc, settings, problems)
        if item is None:
            continue
        if item.dgd is not None:
            ns = item.dgd.metadata.namespace or settings.namespace
            kind = str(doc.data.get("kind")) if isinstance(doc.data, dict) else ""
            first = names.setdefault((kind, ns, item.dgd.metadata.name), doc)
            if first is not doc:
                problems.append(
                    located(
                        doc,
                        Problem.at(
                            ("metadata", "name"),
                            (
                                f"{kind} {ns}/{item.dgd.metadata.name} is "
                                f"also defined at {first.file.path}:{first.line}"
                            ),
                        ),
                    )
                )
                continue
        yield item


def _validated(
    doc: Document, settings: RenderSettings, problems: list[Problem]
) -> Validated | None:
    data = doc.data
    if not isinstance(data, dict) or not data.get("apiVersion") or not data.get("kind"):
        problems.append(
            Problem(
                doc.file.path,
                doc.line,
                message="not a Kubernetes object (needs apiVersion and kind)",
            )
        )
        return None
    shape = [located(doc, p) for p in (*object_shape(data), *removed_kind(data))]
    if shape:
        problems.extend(shape)
        return None
    api, kind = str(data["apiVersion"]), str(data["kind"])
    if api.startswith("nvidia.com/") and kind == "DynamoModel":
        found = _model_problems(doc, data)
        found += [located(doc, p) for p in coexistence.passthrough_checks(data, settings)]
        problems.extend(found)
        return None if found else Validated(doc)  # passed through unchanged
    if not (api.startswith("nvidia.com/") and kind in DYNAMO_KINDS):
        omitted = [located(doc, p) for p in coexistence.passthrough_checks(data, settings)]
        problems.extend(omitted)
        return None if omitted else Validated(doc)
    typed = _typed(doc, data, api, kind, problems)
    if typed is None:
        return None
    dgd, to_doc_path = typed
    standalone = kind == "DynamoComponentDeployment"
    item = Validated(doc, dgd, to_doc_path, standalone_dcd=standalone)
    strict = settings.runtime_version_admission == "strict"
    found = [
        *limit_checks(
            dgd, max_replicas=settings.max_replicas, max_node_count=settings.max_node_count
        ),
        *validate_graph(dgd),
        *workload_provider_checks(dgd, settings.grove),
        *coexistence.graph_checks(dgd, settings),
        *(runtime_version_admission(dgd) if strict else ()),
    ]
    if found:
        problems.extend(item.located(p) for p in found)
        return None
    problems.extend(item.located(p) for p in warn_graph(dgd, image_required=strict))
    # admitted: with the defaulting webhook's stamps, which the expansion reads
    return Validated(doc, admission.stamp(dgd, settings), to_doc_path, standalone_dcd=standalone)


Typed = tuple[DynamoGraphDeployment, Callable[[FieldPath], FieldPath]]


def _model_problems(doc: Document, data: dict[str, Any]) -> list[Problem]:
    """A DynamoModel (``nvidia.com/v1alpha1`` only, as the operator serves it): its shape
    and the webhook's rules; a missing field's error says what it is for."""
    if data.get("apiVersion") != "nvidia.com/v1alpha1":
        return [
            located(
                doc,
                Problem.at(
                    ("apiVersion",),
                    f"DynamoModel is served as nvidia.com/v1alpha1 only "
                    f"(found {str(data.get('apiVersion'))[:60]!r})",
                ),
            )
        ]
    try:
        model = DynamoModel.model_validate(data)
    except ValidationError as exc:
        out = []
        for p in _validation_problems(doc, DynamoModel, exc):
            hint = MODEL_FIELD_HINTS.get(str(p.path[-1])) if p.path else None
            if hint and p.message == "required field is missing":
                p = replace(p, message=f"required field is missing: {hint}")
            out.append(p)
        return out
    return [located(doc, p) for p in validate_model(model)]


def _typed(
    doc: Document, data: dict[str, Any], api: str, kind: str, problems: list[Problem]
) -> Typed | None:
    """The DGD's model by apiVersion and kind, and the mapping of its field paths back to
    the document."""
    if kind == "DynamoComponentDeployment" and api in (V1BETA1, "nvidia.com/v1alpha1"):
        return _component_deployment(doc, data, problems)
    if api == V1BETA1 and kind == "DynamoGraphDeployment":
        return _v1beta1(doc, data, problems)
    if api != "nvidia.com/v1alpha1":
        problems.append(
            located(
                doc,
                Problem.at(
                    ("apiVersion",),
                    (
                        f"{api} {kind} is not yet supported (only nvidia.com/v1alpha1 and v1beta1 "
                        "DynamoGraphDeployments are rendered)"
                    ),
                ),
            )
        )
        return None
    return _v1alpha1(doc, data, problems)


def _v1alpha1(doc: Document, data: dict[str, Any], problems: list[Problem]) -> Typed | None:
    try:
        parsed = DynamoGraphDeployment.model_validate(data)
    except ValidationError as exc:
        problems.extend(_validation_problems(doc, DynamoGraphDeployment, exc))
        return None
    return parsed, same_path


def _mapping(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def dcd_component_name(data: dict[str, Any]) -> str:
    """``GetDCDComponentName`` (``internal/dynamo/v1beta1_helpers.go`` @ 2a6da14c8): the
    spec's component name, the component label, the v1alpha1 ``serviceName``, the DCD's
    name."""
    spec = _mapping(data.get("spec"))
    meta = _mapping(data.get("metadata"))
    labels = _mapping(meta.get("labels"))
    for value in (
        spec.get("name") if data.get("apiVersion") == V1BETA1 else None,
        labels.get(keys.LABEL_COMPONENT),
        spec.get("serviceName"),
        meta.get("name"),
    ):
        if isinstance(value, str) and value:
            return value
    return ""


def dcd_as_graph(data: dict[str, Any]) -> tuple[dict[str, Any], FieldPath]:
    """A standalone DCD as the one-component DGD named like it, and where the component's
    fields are in that DGD. The DCD controller names what it renders after the DCD and, with
    no owning DGD, uses the DCD's name as the parent graph name (Dynamo namespace, discovery
    service account, ``DYN_PARENT_DGD_K8S_NAME``: ``GenerateBasePodSpecForController``)."""
    spec = dict(data.get("spec") or {})
    name = dcd_component_name(data)
    graph_spec: dict[str, Any] = {}
    if "backendFramework" in spec:
        graph_spec["backendFramework"] = spec.pop("backendFramework")
    if data.get("apiVersion") == V1BETA1:
        graph_spec["components"] = [{**spec, "name": name}]
        where: FieldPath = ("spec", "components", 0)
    else:
        spec.pop("serviceName", None)
        graph_spec["services"] = {name: spec}
        where = ("spec", "services", name)
    out = {
        "apiVersion": data.get("apiVersion"),
        "kind": "DynamoGraphDeployment",
        "metadata": data.get("metadata"),
        "spec": graph_spec,
    }
    return out, where


def _component_deployment(
    doc: Document, data: dict[str, Any], problems: list[Problem]
) -> Typed | None:
    """A standalone DCD (v1alpha1 or v1beta1) as its one-service DGD; problems are located
    at the DCD's own fields."""
    graph, where = dcd_as_graph(data)
    found: list[Problem] = []
    shaped = replace(doc, data=graph)
    if data.get("apiVersion") == V1BETA1:
        typed = _v1beta1(shaped, graph, found)
    else:
        typed = _v1alpha1(shaped, graph, found)
    problems.extend(located(doc, replace(p, path=_dcd_path(p.path, where))) for p in found)
    if typed is None:
        return None
    dgd, to_graph_path = typed
    return dgd, lambda path: _dcd_path(to_graph_path(path), where)


def _dcd_path(path: FieldPath, where: FieldPath) -> FieldPath:
    """A field of the DCD's one-service DGD, in the DCD."""
    n = len(where)
    if tuple(path[:n]) == where:
        return ("spec", *path[n:])
    return path


def _v1beta1(doc: Document, data: dict[str, Any], problems: list[Problem]) -> Typed | None:
    """A v1beta1 DGD converted to the v1alpha1 shape, and its field-path mapping back."""
    # imported (and their models built) only when a v1beta1 DGD is present
    from .models import v1beta1
    from .models.convert import loc_in_v1beta1, to_v1alpha1

    try:
        beta = v1beta1.DynamoGraphDeployment.model_validate(data)
    except ValidationError as exc:
        problems.extend(_validation_problems(doc, v1beta1.DynamoGraphDeployment, exc))
        return None
    try:
        return to_v1alpha1(beta), loc_in_v1beta1(beta)
    except RenderError as exc:  # paths of the v1beta1 document already
        problems.extend(located(doc, p) for p in exc.problems)
        return None


def _validation_problems(
    doc: Document, model: type[BaseModel], exc: ValidationError
) -> list[Problem]:
    out = []
    for err in exc.errors(include_url=False):
        loc = tuple(err["loc"])
        if err["type"] == "extra_forbidden":
            parent = _model_at(model, loc[:-1])
            hint = ""
            if parent is not None:
                import difflib  # only for a did-you-mean (its import costs every run ~1 ms)

                close = difflib.get_close_matches(str(loc[-1]), list(parent.model_fields), n=1)
                if close:
                    hint = f" (did you mean {close[0]!r}?)"
            out.append(located(doc, Problem.at(loc, f"unknown field {loc[-1]!r}{hint}")))
            continue
        msg = err["msg"]
        if err["type"] == "missing":
            msg = "required field is missing"
        elif "input" in err and err["type"] not in ("value_error",):
            secret = is_sensitive(loc, kind=object_label(doc.data).partition("/")[0], strict=True)
            msg = f"{msg} (found {describe(err['input'], sensitive=secret)})"
        out.append(located(doc, Problem.at(loc, msg.replace("Value error, ", ""))))
    return out


def _model_at(model: type[BaseModel], loc: FieldPath) -> type[BaseModel] | None:
    """The model class that holds the field at ``loc`` (for 'did you mean')."""
    current: Any = model
    for part in loc:
        while True:  # unwrap Optional / list / dict down to a model class
            origin = typing.get_origin(current)
            if origin in (typing.Union, types.UnionType):
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
