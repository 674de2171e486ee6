"""Validate: each parsed document becomes a :class:`Validated` item, or problems.

An object that is not a Dynamo kind is passed through as written (its shape checked only). A
DynamoGraphDeployment is checked by the pydantic model of the version it is written in ("did
you mean" for unknown fields) and becomes its one typed form (:class:`.hubform.Graph`: a
v1beta1 DGD as written, a v1alpha1 DGD converted up as the operator does), built and
validated here once, which the rules of :mod:`dyn_gitops.rules`, the admission stamps, the
runner's limits and then the expansion, the worker hash and the emitted DGD read; every
problem names the field the user wrote (:meth:`.hubform.Graph.written_path`). Nothing is
converted down. Two DGDs may not share a namespace and name.
"""

from __future__ import annotations

import types
import typing
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, replace
from typing import Any

from pydantic import BaseModel, ValidationError

from . import admission, coexistence, hubform, keys, naming, rules
from .display import describe, is_sensitive
from .errors import FieldPath, Problem
from .hubform import Graph, dcd_path
from .models import v1beta1
from .models.v1alpha1 import DynamoGraphDeployment, DynamoModel
from .models.versions import V1BETA1
from .parse import Document, located, object_label
from .rules import MODEL_FIELD_HINTS, object_shape, removed_kind, validate_model
from .settings import RenderSettings

DYNAMO_KINDS = ("DynamoGraphDeployment", "DynamoComponentDeployment")


def same_path(path: FieldPath) -> FieldPath:
    return path


@dataclass(frozen=True)
class Validated:
    """A document that may be expanded: a DGD's one typed form, or (``graph`` None) an object
    to pass through as written."""

    doc: Document
    #: the DGD's typed form as admitted (the defaulting webhook's stamps in its metadata)
    graph: Graph | None = None
    #: a standalone DynamoComponentDeployment, as the one-service DGD named like it
    #: (:func:`dcd_as_graph`): expanded as the operator's DCD controller renders it
    standalone_dcd: bool = False

    def located(self, problem: Problem) -> Problem:
        """``problem``, whose path is a field of the form, in the document as written."""
        path = problem.path if self.graph is None else self.graph.written_path(problem.path)
        return located(self.doc, replace(problem, path=path))


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
        if item.graph is not None:
            meta = item.graph.metadata
            ns = meta.namespace or settings.namespace
            kind = str(doc.data.get("kind")) if isinstance(doc.data, dict) else ""
            first = names.setdefault((kind, ns, meta.name), doc)
            if first is not doc:
                problems.append(
                    located(
                        doc,
                        Problem.at(
                            ("metadata", "name"),
                            (
                                f"{kind} {ns}/{meta.name} is "
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
    """One document: its shape, then by kind an object passed through or a DGD's form."""
    refused = _shape_problems(doc)
    if refused:
        problems.extend(refused)
        return None
    data = doc.data
    api, kind = str(data["apiVersion"]), str(data["kind"])
    if not (api.startswith("nvidia.com/") and kind in DYNAMO_KINDS):
        return _passed_through(doc, api, kind, settings, problems)
    typed = _typed(doc, data, api, kind, problems)
    return None if typed is None else _admitted(doc, typed, settings, problems)


def _shape_problems(doc: Document) -> list[Problem]:
    """What every object must be shaped like before anything reads it."""
    data = doc.data
    if not isinstance(data, dict) or not data.get("apiVersion") or not data.get("kind"):
        message = "not a Kubernetes object (needs apiVersion and kind)"
        return [Problem(doc.file.path, doc.line, message=message)]
    return [located(doc, p) for p in (*object_shape(data), *removed_kind(data))]


def _passed_through(
    doc: Document, api: str, kind: str, settings: RenderSettings, problems: list[Problem]
) -> Validated | None:
    """An object that is no DGD, passed through unchanged (a DynamoModel checked first)."""
    data = doc.data
    model = api.startswith("nvidia.com/") and kind == "DynamoModel"
    found = _model_problems(doc, data) if model else []
    found += [located(doc, p) for p in coexistence.passthrough_checks(data, settings)]
    problems.extend(found)
    return None if found else Validated(doc)


def _admitted(
    doc: Document, typed: Typed, settings: RenderSettings, problems: list[Problem]
) -> Validated | None:
    """The DGD's form once every rule passed, as admitted: with the defaulting webhook's
    stamps, which the expansion reads. What only a v1alpha1 document says is checked as
    written first, then the rules read the form."""

    def as_written(problem: Problem) -> Problem:  # a problem of the model as written
        return located(doc, replace(problem, path=typed.to_doc_path(problem.path)))

    alpha_found = (
        [as_written(p) for p in _alpha_problems(typed.dgd, settings)]
        if typed.dgd is not None
        else []
    )
    graph = typed.graph or _alpha_graph(typed, alpha_found, as_written)
    if graph is None:
        problems.extend(alpha_found)
        return None

    def at(problem: Problem) -> Problem:  # a problem of the form, in the document
        return located(doc, replace(problem, path=graph.written_path(problem.path)))

    strict = settings.runtime_version_admission == "strict"
    found = [*alpha_found, *(at(p) for p in _rule_problems(graph, typed, settings))]
    if found:
        problems.extend(found)
        return None
    problems.extend(at(p) for p in rules.warn_graph(graph, image_required=strict))
    if strict:  # what a pre-1.5 origin stamp admits (the errors are among ``found``)
        problems.extend(at(p) for p in _admission(graph, typed) if p.severity == "warning")
    if typed.dgd is not None:
        problems.extend(as_written(p) for p in rules.alpha_warnings(typed.dgd))
    admitted = replace(graph, metadata=admission.stamp(graph.metadata, settings))
    return Validated(doc, admitted, standalone_dcd=typed.dcd_where is not None)


def _rule_problems(graph: Graph, typed: Typed, settings: RenderSettings) -> Iterator[Problem]:
    """The rules, the runner's limits and the coexistence checks on the form."""
    standalone = typed.dcd_where is not None
    yield from rules.limit_checks(
        graph, max_replicas=settings.max_replicas, max_node_count=settings.max_node_count
    )
    grove_pathway = _grove_pathway(graph, standalone, settings)
    yield from _legacy_config_checks(graph, settings, grove_pathway)
    yield from rules.validate_graph(graph)
    yield from rules.pathway_checks(graph, grove_pathway=grove_pathway)
    yield from rules.workload_provider_checks(graph.metadata, settings.grove)
    yield from coexistence.graph_checks(graph, settings)
    if settings.runtime_version_admission == "strict":
        yield from (p for p in _admission(graph, typed) if p.severity == "error")


def _admission(graph: Graph, typed: Typed) -> Iterator[Problem]:
    """The 1.5 runtime-version admission of the DGD or standalone DCD (strict setting)."""
    return rules.runtime_version_admission(graph, standalone=typed.dcd_where is not None)


@dataclass(frozen=True)
class Typed:
    """A DGD document's model as written (v1alpha1 or v1beta1) and the mapping of its field
    paths to the document (a standalone DCD is read as a one-component DGD)."""

    #: a field path of the model as written -> the field in the document
    to_doc_path: Callable[[FieldPath], FieldPath]
    #: the document's spec (a v1alpha1 DGD's form is converted from it)
    spec: dict[str, Any]
    #: the v1alpha1 model of a v1alpha1 document
    dgd: DynamoGraphDeployment | None = None
    #: the form of a v1beta1 document (a v1alpha1 one's is built once its own checks pass)
    graph: Graph | None = None
    #: a standalone DCD: where its one component is in the DGD it is read as
    dcd_where: FieldPath | None = None


def _grove_pathway(graph: Graph, standalone: bool, settings: RenderSettings) -> bool:
    """Whether the 1.5 webhook validates the DGD for the Grove pathway
    (``grovePathwayForDynamoGraphDeployment`` @ 2a6da14c8): its provider is Grove (a provider
    annotation contradicting the settings is refused by ``workload_provider_checks``); a
    standalone DCD never."""
    ann = graph.metadata.annotations or {}
    provider = ann.get(keys.ANN_WORKLOAD_PROVIDER) or naming.workload_provider(ann, settings.grove)
    return not standalone and provider == keys.WORKLOAD_PROVIDER_GROVE


def _legacy_config_checks(
    graph: Graph, settings: RenderSettings, grove_pathway: bool
) -> Iterator[Problem]:
    """The legacy ``DYN_DEPLOYMENT_CONFIG`` (:mod:`.legacyconfig`), with the runner's limits,
    where the expansion reads it: a component rendered from a DCD (a Grove clique does not
    read it); the module is imported only for a DGD that names that env."""
    if grove_pathway or not _names_legacy_config(graph.spec):
        return
    from . import legacyconfig

    yield from legacyconfig.checks(graph.spec, max_replicas=settings.max_replicas)


def _names_legacy_config(spec: v1beta1.GraphSpec) -> bool:
    """Whether an env of the v1beta1 graph ``spec`` (the DGD's, or a container's) is named
    ``DYN_DEPLOYMENT_CONFIG``."""
    envs = [spec.env or []]
    for component in spec.components or []:
        pod = component.podTemplate.spec if component.podTemplate is not None else None
        envs.extend(c.env or [] for c in (pod.containers if pod is not None else None) or [])
    return any(e.name == naming.DYN_DEPLOYMENT_CONFIG for env in envs for e in env)


def _alpha_problems(dgd: DynamoGraphDeployment, settings: RenderSettings) -> list[Problem]:
    """What a v1alpha1 DGD says that its v1beta1 form cannot hold, checked as written."""
    return [
        *rules.alpha_limit_checks(dgd, max_replicas=settings.max_replicas),
        *rules.alpha_checks(dgd),
    ]


def _alpha_graph(
    typed: Typed, alpha_found: list[Problem], as_written: Callable[[Problem], Problem]
) -> Graph | None:
    """The form of a v1alpha1 document, converted up once; None when a v1alpha1 value does
    not fit it (a problem is in ``alpha_found`` then)."""
    assert typed.dgd is not None  # a v1alpha1 document
    try:
        graph = hubform.of_v1alpha1(typed.dgd, typed.spec)
    except ValidationError as exc:
        if not alpha_found:  # pragma: no cover - alpha_checks names what does not fit
            alpha_found.append(
                as_written(
                    Problem.at(
                        ("spec", "services"),
                        "does not convert to nvidia.com/v1beta1: "
                        + "; ".join(e["msg"] for e in exc.errors(include_url=False)),
                    )
                )
            )
        return None
    return graph if typed.dcd_where is None else replace(graph, dcd_where=typed.dcd_where)


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
    return Typed(same_path, data.get("spec") or {}, dgd=parsed)


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


_DGD_SPEC: FieldPath = ("metadata", "annotations", keys.ANN_DGD_SPEC)
_DCD_PAYLOAD = (
    "preserved v1alpha1 fields (written by the conversion webhook) are not yet supported on "
    "a DynamoComponentDeployment; write it as v1alpha1 instead"
)


def _component_deployment(
    doc: Document, data: dict[str, Any], problems: list[Problem]
) -> Typed | None:
    """A standalone DCD (v1alpha1 or v1beta1) as its one-service DGD; problems are located
    at the DCD's own fields."""
    annotations = _mapping(_mapping(data.get("metadata")).get("annotations"))
    if data.get("apiVersion") == V1BETA1 and keys.ANN_DGD_SPEC in annotations:
        # a DCD's own conversion payload (GetDCDPreservedAlphaLabels & co.): not read, so
        # refused before the DGD it is read as would read it as a DGD's
        problems.append(located(doc, Problem.at(_DGD_SPEC, _DCD_PAYLOAD)))
        return None
    graph, where = dcd_as_graph(data)
    found: list[Problem] = []
    shaped = replace(doc, data=graph)
    if data.get("apiVersion") == V1BETA1:
        typed = _v1beta1(shaped, graph, found)
    else:
        typed = _v1alpha1(shaped, graph, found)
    problems.extend(located(doc, replace(p, path=dcd_path(p.path, where))) for p in found)
    if typed is None:
        return None
    to_graph_path = typed.to_doc_path
    form = replace(typed.graph, dcd_where=where) if typed.graph is not None else None
    return replace(
        typed,
        to_doc_path=lambda path: dcd_path(to_graph_path(path), where),
        graph=form,
        dcd_where=where,
    )


def _v1beta1(doc: Document, data: dict[str, Any], problems: list[Problem]) -> Typed | None:
    """A v1beta1 DGD's model and form, once what it may not say is ruled out (what its
    ``nvidia.com/dgd-spec`` annotation holds, :func:`.rules.beta_checks`; v1beta1 paths)."""
    try:
        beta = v1beta1.DynamoGraphDeployment.model_validate(hubform.as_stored(data))
    except ValidationError as exc:
        problems.extend(_validation_problems(doc, v1beta1.DynamoGraphDeployment, exc))
        return None
    graph, refused = hubform.of_v1beta1(beta, data.get("spec") or {})
    refused += rules.kept_alpha_checks(beta.metadata)
    refused += rules.beta_checks(beta)
    if refused:
        problems.extend(located(doc, p) for p in refused)
        return None
    return Typed(same_path, data.get("spec") or {}, graph=graph)


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
