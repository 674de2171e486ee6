"""The legacy ``DYN_DEPLOYMENT_CONFIG`` env (JSON), parsed and typed once.

The operator reads it as ``ParseDynDeploymentConfig`` does (``internal/dynamo/graph.go``):
Go's ``json.Unmarshal`` into ``map[string]*DynDeploymentServiceConfig``, whose struct fields
(``ServiceArgs``; ``workers``, an ``int32``; ``resources`` with ``cpu``, ``memory``, ``gpu``
strings and a ``custom`` map of strings) match their keys case-insensitively and whose
other keys are ignored. A value of another type anywhere fails the whole config, so every
entry is typed (:class:`DeploymentConfig`), a component's own entry also has its
quantities checked as ``resource.ParseQuantity`` would.

A component rendered from a DCD (not a Grove clique) reads it from its container
``main``'s env, else from the DGD's, the last entry of that name (:func:`find`). The
validate stage checks every entry a component reads, before anything is built
(:func:`checks`): types, quantities, resource names, and ``workers`` (which becomes the
component's replicas) within the setting max-replicas, as ``rules.limit_checks`` bounds
``replicas``. The expansion reads the typed config (:func:`parse`, ``expand/legacy.py``).

A problem names the env entry's value (its file and line) and the path inside the JSON,
never any part of the value, which may be a credential: a key that is not the name of one
of the DGD's components is shown by its position (``<key 2>``), a value by its JSON type.
"""

from __future__ import annotations

import json
import math
from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, RootModel, ValidationError, model_validator

from . import naming
from .bounded import EmbeddedError
from .errors import FieldPath, Problem, field_path
from .models import v1beta1
from .models.k8s import EnvVar
from .parse import json_loads_bounded
from .settings import RenderSettings
from .workerhash.quantity import QuantityError, value_of

ENV_NAME = naming.DYN_DEPLOYMENT_CONFIG
#: the JSON in that variable nests no deeper than a document may
CONFIG_MAX_DEPTH: int = RenderSettings.max_depth
_MAIN = "main"


def go_field(obj: Any, key: str) -> Any:
    """The value of the struct field ``key`` in the JSON object ``obj``: Go's encoding/json
    matches struct fields case-insensitively (the exact key first, then the first key equal
    but for case); None when ``obj`` is no object or has no such key."""
    if not isinstance(obj, dict):
        return None
    if key in obj:
        return obj[key]
    lower = key.lower()
    return next((v for k, v in obj.items() if isinstance(k, str) and k.lower() == lower), None)


# ----------------------------------------------------------------------------- the model
class _GoStruct(BaseModel):
    """A Go struct read by ``json.Unmarshal``: keys matched case-insensitively, other keys
    ignored, every value of its field's JSON type (no coercion: ``"2"`` is no ``int32``)."""

    model_config = ConfigDict(strict=True, frozen=True, extra="ignore", defer_build=True)

    @model_validator(mode="before")
    @classmethod
    def _go_keys(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data  # the model's type error
        out = {}
        for name, field in cls.model_fields.items():
            key = field.alias or name
            value = go_field(data, key)
            if value is not None:
                out[key] = value
        return out


class Resources(_GoStruct):
    """``Resources``: quantities as written (checked where a component reads them)."""

    cpu: str | None = None
    memory: str | None = None
    gpu: str | None = None
    custom: dict[str, str] | None = None


class ServiceArgs(_GoStruct):
    """``ServiceArgs``: ``workers`` sets the component's replicas (never negative)."""

    workers: int | None = Field(default=None, ge=0)
    resources: Resources | None = None


class ServiceConfig(_GoStruct):
    """``DynDeploymentServiceConfig``: one service's entry."""

    service_args: ServiceArgs | None = Field(default=None, alias="ServiceArgs")


class DeploymentConfig(RootModel[dict[str, ServiceConfig | None]]):
    """``DynDeploymentConfig``: the entries, keyed by service name."""

    model_config = ConfigDict(strict=True, frozen=True, defer_build=True)


@dataclass(frozen=True)
class Config:
    """A config as the operator reads it: typed, and the JSON data itself (a frontend's
    config is written back with its port: every key kept)."""

    typed: DeploymentConfig
    data: dict[str, Any]

    def args(self, service: str) -> ServiceArgs | None:
        """The ``ServiceArgs`` of ``service``'s own entry (keyed by its exact name)."""
        entry = self.typed.root.get(service)
        return entry.service_args if entry is not None else None


class ConfigError(ValueError):
    """A config the operator cannot read; the messages hold no part of the value."""

    def __init__(self, messages: list[str]) -> None:
        self.messages = messages
        super().__init__("; ".join(messages))


# ----------------------------------------------------------------------------- reading
@dataclass(frozen=True)
class Found:
    """The env entry a component reads the config from: its value, and the path of that
    value in the DGD's v1beta1 form (from the component when ``own``, else from the root)."""

    raw: str
    path: FieldPath
    own: bool


def _last(env: Sequence[EnvVar] | None) -> tuple[int, EnvVar] | None:
    named = [(j, e) for j, e in enumerate(env or ()) if e.name == ENV_NAME]
    return named[-1] if named else None


def find(component: v1beta1.Component, graph_env: Sequence[EnvVar] | None) -> Found | None:
    """Where ``component`` reads the config: container ``main``'s env wins over the DGD's,
    the last entry of the name wins (``MergeEnvs``); None: no such entry, or one without a
    value (a ``valueFrom``, which the operator cannot read either)."""
    pod = component.podTemplate.spec if component.podTemplate is not None else None
    containers = (pod.containers if pod is not None else None) or []
    k, main = next(((k, c) for k, c in enumerate(containers) if c.name == _MAIN), (0, None))
    own = _last(main.env if main is not None else None)
    if own is not None:
        j, entry = own
        where: FieldPath = ("podTemplate", "spec", "containers", k, "env", j, "value")
        return None if entry.value is None else Found(entry.value, where, own=True)
    graph = _last(graph_env)
    if graph is None or graph[1].value is None:
        return None
    return Found(graph[1].value, ("spec", "env", graph[0], "value"), own=False)


def parse(raw: str, names: Collection[str] = ()) -> Config:
    """The config ``raw`` (an env value) as the operator reads it; :class:`ConfigError`
    when it cannot. ``names``: the DGD's component names, which a message may show."""
    try:
        data = json_loads_bounded(raw, max_depth=CONFIG_MAX_DEPTH)
    except ValueError as exc:
        raise ConfigError([f"{ENV_NAME} is not valid JSON: {_json_error(exc, names)}"]) from None
    if _has_non_finite(data):
        raise ConfigError(
            [f"{ENV_NAME} is not valid JSON: a number is NaN, Infinity or beyond a float64"]
        )
    if not isinstance(data, dict):
        raise ConfigError(
            [f"{ENV_NAME} must be a JSON object keyed by service, found {_kind(data)}"]
        )
    try:
        typed = DeploymentConfig.model_validate(data)
    except ValidationError as exc:
        errors = exc.errors(include_url=False, include_context=False)
        raise ConfigError([_type_problem(e, data, names) for e in errors]) from None
    return Config(typed, data)


def _json_error(exc: ValueError, names: Collection[str] = ()) -> str:
    """What is wrong with the JSON, in words that quote none of it (a key inside it is
    shown only when it names one of the DGD's components)."""
    if isinstance(exc, EmbeddedError):
        if not exc.path:
            return exc.reason
        shown = [
            p
            if isinstance(p, int) or (i == 0 and (p in names or p == naming.FRONTEND))
            else "<a key>"
            for i, p in enumerate(exc.path)
        ]
        return f"{field_path(shown)}: {exc.reason}"
    if isinstance(exc, json.JSONDecodeError):
        return f"{exc.msg} (line {exc.lineno}, column {exc.colno})"
    if "integer string conversion" in str(exc):
        return "a number has too many digits"
    return str(exc)  # the bounded parser's own words (a depth, a size)


def _has_non_finite(data: Any) -> bool:
    """Python's JSON reads ``NaN``, ``Infinity`` and ``1e999`` (as infinity); Go's refuses
    them (and a frontend's config written back would not be JSON)."""
    stack = [data]
    while stack:
        node = stack.pop()
        if isinstance(node, float) and not math.isfinite(node):
            return True
        if isinstance(node, dict):
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return False


def _kind(value: Any) -> str:
    """A JSON value's type, the only thing a message says of a value."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, float):
        return "a number with a fraction or an exponent"
    if isinstance(value, int):
        return "a number"
    if isinstance(value, str):
        return "a string"
    return "an array" if isinstance(value, list) else "an object"


_EXPECTED = {
    "int_type": "must be a whole number",
    "string_type": "must be a string",
    "dict_type": "must be a JSON object",
    "model_type": "must be a JSON object",
    "model_attributes_type": "must be a JSON object",
}


def _type_problem(error: Mapping[str, Any], data: dict[str, Any], names: Collection[str]) -> str:
    """One validation error of the config as a message: the JSON path and what is wrong,
    never the value (pydantic's own message is not used: some quote the input)."""
    where = json_path(error["loc"], data, names)
    if error["type"] == "greater_than_equal":
        return f"{ENV_NAME}: {where}: must not be negative (it sets the replicas)"
    expected = _EXPECTED.get(error["type"], "has the wrong type")
    return f"{ENV_NAME}: {where}: {expected}, found {_kind(error.get('input'))}"


def _shown_key(key: str, node: Any, names: Collection[str], service: bool) -> str:
    """A key of the JSON as a message may show it: a service key that names one of the
    DGD's components (or ``frontend``) as written, any other key by its position."""
    if service and (key in names or key == naming.FRONTEND):
        return key
    keys = list(node) if isinstance(node, dict) else []
    return f"<key {keys.index(key) + 1}>" if key in keys else "<a key>"


def json_path(loc: Sequence[str | int], data: Any, names: Collection[str] = ()) -> str:
    """The path ``loc`` inside the config ``data`` as a message shows it
    (``Frontend.ServiceArgs.resources.custom.<key 2>``): struct fields by their Go JSON
    names, map keys by :func:`_shown_key`."""
    parts: list[str] = []
    node = data
    for depth, step in enumerate(str(s) for s in loc):
        if depth == 0 or (depth == 4 and loc[3] == "custom"):
            parts.append(_shown_key(step, node, names, service=depth == 0))
            node = node.get(step) if isinstance(node, dict) else None
        else:
            parts.append(step)
            node = go_field(node, step)
    return ".".join(parts)


# ----------------------------------------------------------------------------- resources
def resource_values(res: Resources) -> dict[str, str]:
    """``ServiceArgs.resources`` as resource names and quantities, in the order the operator
    sets them (cpu, memory, ``gpu`` as ``nvidia.com/gpu``, then ``custom``; an empty
    dedicated one is skipped, ``applyDynDeploymentResources``)."""
    values: dict[str, str] = {}
    for name, value in (("cpu", res.cpu), ("memory", res.memory), (naming.GPU_RESOURCE, res.gpu)):
        if value:
            values[name] = value
    values.update(res.custom or {})
    return values


def _is_quantity(value: str) -> bool:
    try:
        value_of(value)
    except QuantityError:
        return False
    return value == value.strip()


def resource_problems(service: str, res: Resources, data: dict[str, Any]) -> Iterator[str]:
    """What ``resource.ParseQuantity`` refuses among ``service``'s resources, and custom
    names the API server refuses (``IsQualifiedName``)."""
    base = f"{ENV_NAME}: {service}.ServiceArgs.resources"
    quantity = "is not a Kubernetes quantity (such as '1', '500m' or '8Gi')"
    for name in ("cpu", "memory", "gpu"):
        value = getattr(res, name)
        if value and not _is_quantity(value):
            yield f"{base}.{name}: {quantity}"
    custom = go_field(go_field(go_field(data.get(service), "ServiceArgs"), "resources"), "custom")
    for key, value in (res.custom or {}).items():
        where = f"{base}.custom.{_shown_key(key, custom, (), service=False)}"
        if not naming.QUALIFIED_NAME.fullmatch(key):
            yield f"{where}: its key is not a resource name (such as example.com/device)"
        if not _is_quantity(value):
            yield f"{where}: {quantity}"


# ----------------------------------------------------------------------------- the checks
def problems(
    raw: str, names: Collection[str], readers: Sequence[str], max_replicas: int
) -> list[str]:
    """What is wrong with the config ``raw`` that the components ``readers`` read: its
    JSON and types, every ``workers`` over the setting max-replicas (at most Go's int32,
    as every limit), and the resources of each reader's own entry."""
    try:
        config = parse(raw, names)
    except ConfigError as exc:
        return exc.messages
    out: list[str] = []
    for key, entry in config.typed.root.items():
        args = entry.service_args if entry is not None else None
        if args is not None and args.workers is not None and args.workers > max_replicas:
            where = json_path((key, "ServiceArgs", "workers"), config.data, names)
            out.append(
                f"{ENV_NAME}: {where}: is more than the {max_replicas} replicas allowed "
                "(setting max-replicas)"
            )
    for service in dict.fromkeys(readers):
        args = config.args(service)
        if args is not None and args.resources is not None:
            out.extend(resource_problems(service, args.resources, config.data))
    return out


def checks(spec: v1beta1.GraphSpec, *, max_replicas: int) -> Iterator[Problem]:
    """The config of every component of the v1beta1 graph ``spec`` rendered from a DCD,
    each env entry once, at the path of its value in the v1beta1 form."""
    comps = spec.components or []
    names = frozenset(c.name for c in comps)
    carriers: dict[FieldPath, tuple[str, list[str]]] = {}
    for i, component in enumerate(comps):
        found = find(component, spec.env)
        if found is None:
            continue
        path = ("spec", "components", i, *found.path) if found.own else found.path
        carriers.setdefault(path, (found.raw, []))[1].append(component.name)
    for path, (raw, readers) in carriers.items():
        for message in problems(raw, names, readers, max_replicas):
            yield Problem.at(path, message)


__all__ = [
    "CONFIG_MAX_DEPTH",
    "ENV_NAME",
    "Config",
    "ConfigError",
    "DeploymentConfig",
    "Found",
    "Resources",
    "ServiceArgs",
    "ServiceConfig",
    "checks",
    "find",
    "go_field",
    "json_path",
    "parse",
    "problems",
    "resource_values",
]
