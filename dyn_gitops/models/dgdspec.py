"""The ``nvidia.com/dgd-spec`` annotation of a v1beta1 DGD: the sparse v1alpha1 spec the
operator's conversion keeps there (``{"version":1,"spec":{...}}``, ``ConvertTo`` @
2a6da14c8; :func:`dyn_gitops.to_v1beta1.preserved_spec` writes it), read back for what
v1beta1 cannot hold: ``pvcs``, and per service ``ingress``, ``labels``, ``annotations``,
``dynamoNamespace``, ``subComponentType``, ``envFromSecret`` (with ``extraPodSpec``).

It is text from Git inside a string, so it enters like a document: the bounded reader
(:func:`dyn_gitops.bounded.loads_json`), then the v1alpha1 model (:class:`.v1alpha1.GraphSpec`,
strict; what the API server would refuse once it is rendered: ``rules.kept_alpha_checks``).
One function reads it for every reader (:func:`read`: the rules, the expansion, the worker
hash, the companion controller); each problem names the path inside the payload and never
a value of it.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import Field, ValidationError

from .. import keys, memo
from ..bounded import DOCUMENT_BOUNDS, EmbeddedError, loads_json
from ..display import describe
from ..errors import FieldPath, Problem, field_path
from .k8s import Strict
from .preserved import Ingress
from .v1alpha1 import GraphSpec, ServiceSpec

#: where the payload is, in the DGD (every problem of it is reported there)
WHERE: FieldPath = ("metadata", "annotations", keys.ANN_DGD_SPEC)


class Payload(Strict):
    """The annotation's JSON: the conversion's format version and the sparse spec."""

    version: Literal[1]
    spec: GraphSpec = Field(default_factory=GraphSpec)


@dataclass(frozen=True)
class Kept:
    """The payload of one DGD, read: its spec (None: no annotation, or problems), and the
    problems (at :data:`WHERE`, the path inside the payload leading each message)."""

    spec: GraphSpec | None = None
    problems: tuple[Problem, ...] = ()

    def service(self, name: str) -> KeptService:
        """What the payload kept of service ``name`` that the renderer reads."""
        svc = (self.spec.services or {}).get(name) if self.spec is not None else None
        return _kept_service(svc) if svc is not None else NO_SERVICE


@dataclass(frozen=True)
class KeptService:
    """What the payload kept of one service that the renderer reads (typed; the
    expansion and the worker hash read this, not the v1alpha1 model)."""

    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    dynamo_namespace: str | None = None
    sub_component_type: str | None = None
    #: ``envFromSecret``, and whether ``extraPodSpec.mainContainer.envFrom`` is non-empty
    env_from_secret: str | None = None
    main_env_from: bool = False
    ingress: Ingress | None = None


NOTHING_KEPT = Kept()
NO_SERVICE = KeptService()


def _kept_service(svc: ServiceSpec) -> KeptService:
    main = svc.main_container
    return KeptService(
        labels=svc.labels or {},
        annotations=svc.annotations or {},
        dynamo_namespace=svc.dynamoNamespace,
        sub_component_type=svc.subComponentType,
        env_from_secret=svc.envFromSecret,
        main_env_from=bool(main is not None and main.envFrom),
        ingress=svc.ingress,
    )


def read(annotations: Mapping[str, Any] | None) -> Kept:
    """The ``nvidia.com/dgd-spec`` payload of a DGD's ``annotations``: every problem of it
    (one run reports them all), its typed spec when there is none."""
    text = (annotations or {}).get(keys.ANN_DGD_SPEC) if isinstance(annotations, Mapping) else None
    if text is None:
        return NOTHING_KEPT
    if not isinstance(text, str):  # the object's shape is the parse stage's to report
        return Kept(problems=(problem((), "expected a string"),))
    return _read_text(text)


def kept_spec(annotations: Mapping[str, Any] | None) -> GraphSpec | None:
    """:func:`read`'s spec, None when there is no payload or it has problems (the render
    refuses such a DGD before it expands it; the companion controller reads a live DGD as
    it can)."""
    return read(annotations).spec


@memo.by_repr  # a frozen result; the DGDs of a repository (and every reader) repeat it
def _read_text(text: str) -> Kept:
    try:
        data = loads_json(text, DOCUMENT_BOUNDS)
    except EmbeddedError as exc:
        return Kept(problems=(problem(exc.path, exc.reason),))
    if not isinstance(data, dict) or "version" not in data:
        return Kept(problems=(problem((), 'expected a JSON object {"version":1,"spec":{...}}'),))
    try:
        payload = Payload.model_validate(data)
    except ValidationError as exc:
        return Kept(problems=tuple(_validation_problems(exc)))
    return Kept(payload.spec)


def problem(inner: FieldPath, why: str) -> Problem:
    """A problem at the annotation: the path inside the payload (or the payload as a whole)
    and why."""
    return Problem.at(WHERE, f"{field_path(inner) or _WHOLE}: {why}")


_WHOLE = "the operator's conversion payload"


def _validation_problems(exc: ValidationError) -> Iterator[Problem]:
    for err in exc.errors(include_url=False):
        if err["type"] == "missing":
            why = "required field is missing"
        elif err["type"] == "extra_forbidden":
            why = "unknown field"
        else:
            # a validator's message may quote the input: only its first clause is kept
            why = err["msg"].replace("Value error, ", "").split(", found ")[0]
            why += f" (found {describe(err.get('input'), sensitive=True)})"
        yield problem(tuple(err["loc"]), why)


__all__ = [
    "NOTHING_KEPT",
    "NO_SERVICE",
    "WHERE",
    "Kept",
    "KeptService",
    "Payload",
    "kept_spec",
    "problem",
    "read",
]
