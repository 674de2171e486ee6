"""The expand stage: validated documents -> what they render to (:class:`Rendered`).

An object passed through is itself. A DynamoGraphDeployment is every object the Dynamo
operator would create for it (:mod:`.graph`), plus the DGD itself as emitted (settings
emit-source and nvidia-objects) with the markers the companion controller reads. The setting
max-objects is counted while expanding, so an expansion bomb is stopped before it is made.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from .. import admission, coexistence, keys
from ..errors import NotSupportedError, Problem, RenderError
from ..hubform import Graph
from ..merge import data_copy
from ..models.versions import V1ALPHA1, V1BETA1
from ..parse import Document, located
from ..settings import RenderSettings
from ..validate import Validated
from . import replica_owners
from .graph import expand_component_deployment, expand_graph


@dataclass
class Rendered:
    """One object the expansion made (or passed through), and where it comes from."""

    obj: dict[str, Any]
    path: str  # source file
    dgd: str | None = None  # "ns/name" of the DGD it came from
    passthrough: bool = False
    source_dgd: bool = False
    doc: Document | None = None  # the document it comes from (the DGD, for its children)


def identity(obj: dict[str, Any], default_ns: str) -> tuple[str, str, str, str]:
    """(group, kind, namespace, name): what the API server tells objects apart by."""
    meta = obj.get("metadata")
    meta = meta if isinstance(meta, dict) else {}
    group = str(obj.get("apiVersion", "")).rpartition("/")[0]
    return (
        group,
        str(obj.get("kind")),
        str(meta.get("namespace") or default_ns),
        str(meta.get("name")),
    )


@dataclass
class Expanded:
    rendered: list[Rendered] = field(default_factory=list)
    graphs: int = 0  # DGDs expanded


def expand(
    items: Iterable[Validated], settings: RenderSettings, problems: list[Problem]
) -> Expanded:
    """Expand every item, in order, until the output is over the setting max-objects (what
    is after that is not expanded); problems are appended."""
    out = Expanded()
    budget = _Budget(settings)
    for item in items:
        try:
            made = expand_one(item, settings)
        except RenderError as exc:
            problems.extend(exc.problems)
            continue
        out.rendered.extend(made)
        if item.graph is not None:
            out.graphs += 1
        over = budget.spend(item, made)
        if over is not None:
            problems.append(over)
            break
    return out


def expand_one(item: Validated, settings: RenderSettings) -> list[Rendered]:
    """What one validated document renders to; :class:`RenderError` with the problems
    located in its document."""
    doc, graph = item.doc, item.graph
    if graph is None:
        return [Rendered(doc.data, doc.file.path, passthrough=True, doc=doc)]
    try:
        if item.standalone_dcd:  # its one component, in the one-component DGD named like it
            children = expand_component_deployment(graph, settings)
        else:
            children = expand_graph(graph, settings)
    except NotSupportedError as exc:
        raise RenderError([item.located(Problem.at(("spec",), str(exc)))]) from None
    except RenderError as exc:  # its paths are the form's fields
        raise RenderError([item.located(p) for p in exc.problems]) from None
    ref = f"{graph.namespace or settings.namespace}/{graph.name}"
    out = [Rendered(child, doc.file.path, dgd=ref, doc=doc) for child in children]
    # a standalone DCD is rendered, not emitted: the companion controller manages DGDs
    if coexistence.emits_source(settings) and not item.standalone_dcd:
        try:
            emitted = _source_to_emit(item, graph, children, settings)
        except RenderError as exc:
            raise RenderError([item.located(p) for p in exc.problems]) from None
        out.append(Rendered(emitted, doc.file.path, dgd=ref, source_dgd=True, doc=doc))
    return out


class _Budget:
    """Setting max-objects, counted as objects are made: what finalize will output (an
    object several graphs share counts once). No object count grows with a replica count
    (one LeaderWorkerSet per multinode service since #9612), so nothing is refused before
    it is made; the settings max-replicas and max-node-count bound the rest up front."""

    def __init__(self, settings: RenderSettings) -> None:
        self.settings = settings
        self.outputs: set[tuple[str, str, str, str]] = set()

    def spend(self, item: Validated, made: list[Rendered]) -> Problem | None:
        """After expanding: a problem if the output is now over the limit."""
        self.outputs.update(identity(r.obj, self.settings.namespace) for r in made)
        limit = self.settings.max_objects
        if len(self.outputs) <= limit:
            return None
        return located(
            item.doc,
            Problem.at(
                (),
                (
                    f"the output reaches {len(self.outputs)} objects here, more than the {limit} "
                    "allowed (setting max-objects); the rest was not expanded"
                ),
            ),
        )


def _markers(children: list[dict[str, Any]]) -> dict[str, str]:
    """What the companion controller reads on the emitted DGD, taken from what was rendered:
    the Grove PodCliqueSet's name and update strategy, or the worker hash the workers are
    named with."""
    for child in children:
        if child["kind"] == "PodCliqueSet":
            out = {keys.ANN_PODCLIQUESET: child["metadata"]["name"]}
            strategy = ((child.get("spec") or {}).get("updateStrategy") or {}).get("type")
            if strategy:
                out[keys.ANN_GROVE_RENDERED_STRATEGY] = str(strategy)
            return out
    for child in children:
        whash = (child["metadata"].get("labels") or {}).get(keys.LABEL_WORKER_HASH)
        if whash:
            return {keys.ANN_WORKER_HASH: whash, keys.ANN_CURRENT_WORKER_HASH_V2: whash}
    return {}


def _source_to_emit(
    item: Validated, graph: Graph, children: list[dict[str, Any]], settings: RenderSettings
) -> dict[str, Any]:
    """The source DGD as admitted (as written plus the Dynamo 1.5 defaulting webhook's
    stamps, :mod:`dyn_gitops.admission`, which the applier then owns) in the API version of
    the setting source-api-version: a v1alpha1 one as the operator's conversion webhook
    stores it in v1beta1 (its form, :meth:`.hubform.Graph.as_v1beta1`), or a v1beta1 one
    as the v1alpha1 DGD it was rendered from; with the markers the companion controller
    reads (worker hash, or the Grove PodCliqueSet)."""
    data = admission.admitted_document(item.doc.data, graph.metadata)
    stamps = _markers(children)
    version = data.get("apiVersion")
    if version == V1BETA1 and settings.source_api_version == "v1alpha1":
        out: dict[str, Any] = _as_v1alpha1(graph)
        stamps[keys.ANN_SOURCE_API_VERSION] = V1BETA1
    elif version == V1ALPHA1 and settings.source_api_version == "v1beta1":
        if keys.ANN_DGD_SPEC in (graph.metadata.annotations or {}):
            # the operator's ConvertTo would restore v1beta1-only fields from it: not ported
            raise RenderError(
                [
                    Problem.at(
                        ("metadata", "annotations", keys.ANN_DGD_SPEC),
                        "the operator's conversion payload on a v1alpha1 DGD is not "
                        "supported: write the DGD in v1beta1 (kubectl get "
                        "dynamographdeployments.v1beta1.nvidia.com), or remove the annotation",
                    )
                ]
            )
        out = graph.as_v1beta1(data.get("metadata") or {})
    else:
        out = data_copy(data)
    replica_owners.without_replicas(out, replica_owners.seeded_components(children))
    if stamps:
        meta = out.setdefault("metadata", {})
        meta["annotations"] = {**(meta.get("annotations") or {}), **stamps}
    return out


def _as_v1alpha1(graph: Graph) -> dict[str, Any]:
    """The admitted v1beta1 DGD ``graph`` emitted in v1alpha1, as the v1alpha1 DGD it renders
    like (the operator's ``ConvertFrom``): the only down-conversion, an output one, made
    only for this setting (:func:`.convert.to_v1alpha1`, :class:`RenderError` with v1beta1
    paths for what it cannot say)."""
    from ..models import v1beta1
    from ..models.convert import to_v1alpha1

    if keys.ANN_DGD_SPEC in (graph.metadata.annotations or {}):
        # ConvertFrom would restore the v1alpha1 fields kept there: not ported
        raise RenderError(
            [
                Problem.at(
                    ("metadata", "annotations", keys.ANN_DGD_SPEC),
                    "a v1beta1 DGD converted from v1alpha1 (it carries the operator's "
                    "conversion payload) is not yet emitted as v1alpha1: emit it as v1beta1 "
                    "(setting source-api-version), or write the DGD in v1alpha1",
                )
            ]
        )
    beta = v1beta1.DynamoGraphDeployment(
        apiVersion=V1BETA1,
        kind="DynamoGraphDeployment",
        metadata=graph.metadata,
        spec=graph.written_spec(),
    )
    return to_v1alpha1(beta).model_dump(mode="json", exclude_unset=True)
