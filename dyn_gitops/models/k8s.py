"""Kubernetes core types as they appear inside Dynamo resources.

Field *names* are checked (an unknown name is a typo the API server would silently prune),
and the *shapes* the renderer reads (names of containers, volumes and mounts, resources,
probe handlers); values stay as written and pass through to the rendered objects.
"""

import re
from typing import Annotated, Any

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    ValidatorFunctionWrapHandler,
    WithJsonSchema,
    WrapValidator,
    field_validator,
    model_validator,
    with_config,
)
from typing_extensions import TypedDict

from ..display import describe


class Strict(BaseModel):
    """Base for every input model: unknown fields are errors, names are the JSON names."""

    # built on first use, not at import: a run needs few of these (see v1alpha1.py)
    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)


_QUANTITY = re.compile(  # ASCII digits only: ``\d`` would take any script's
    r"^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+|Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E)?$", re.ASCII
)


def _quantity(value: Any) -> Any:
    if isinstance(value, bool):
        raise ValueError(
            f"expected a Kubernetes quantity such as '1', '500m' or '8Gi', found {value!r}"
        )
    if isinstance(value, int | float):
        value = str(value)
    if isinstance(value, str) and not _QUANTITY.match(value):
        raise ValueError(
            f"expected a Kubernetes quantity such as '1', '500m' or '8Gi', found {value!r}"
        )
    return value


#: a resource.Quantity: written as a string or a number in YAML, rendered as a string
Quantity = Annotated[
    str, BeforeValidator(_quantity), WithJsonSchema({"x-kubernetes-int-or-string": True})
]


#: the schema of a free-form object: the CRDs stay as they were when only names were checked
#: (what pydantic gives ``dict[str, Any]``, written out: asking it costs every import ~2 ms)
OBJECT_SCHEMA: dict[str, Any] = {"additionalProperties": True, "type": "object"}
_OBJECT_SCHEMA = WithJsonSchema(OBJECT_SCHEMA)


def _named(value: dict[str, Any]) -> dict[str, Any]:
    name = value.get("name")
    if not isinstance(name, str) or not name:
        raise ValueError("needs a name (a non-empty string)")
    return value


#: a list entry the renderer finds by name (volume, volume mount, port-less container ...)
Named = Annotated[dict[str, Any], AfterValidator(_named), _OBJECT_SCHEMA]


def _quantity_as_written(value: Any) -> Any:
    if not isinstance(value, str | int | float) or isinstance(value, bool):
        raise ValueError(
            f"expected a Kubernetes quantity such as '1', '500m' or '8Gi', found {_kind(value)}"
        )
    _quantity(value)
    return value


def _kind(value: Any) -> str:
    return {list: "a list", dict: "a mapping", bool: "a boolean", type(None): "null"}.get(
        type(value), type(value).__name__
    )


def _whole(value: Any) -> Any:
    if not isinstance(value, int) or isinstance(value, bool):
        raise ValueError(f"expected a whole number, found {_kind(value)}")
    return value


_QuantityAsWritten = Annotated[Any, AfterValidator(_quantity_as_written)]
_Whole = Annotated[Any, AfterValidator(_whole)]


def _as_written(value: Any, check: ValidatorFunctionWrapHandler) -> Any:
    """Checked by the typed shape, kept as written (key order and all)."""
    check(value)
    return value


@with_config(ConfigDict(extra="forbid"))
class _ResourceRequirements(TypedDict, total=False):
    limits: dict[str, _QuantityAsWritten] | None
    requests: dict[str, _QuantityAsWritten] | None
    claims: list[Named] | None


#: core/v1 ResourceRequirements, checked, kept as written
ResourceRequirements = Annotated[_ResourceRequirements, WrapValidator(_as_written), _OBJECT_SCHEMA]


@with_config(ConfigDict(extra="forbid"))
class _Probe(TypedDict, total=False):
    exec: dict[str, Any] | None
    httpGet: dict[str, Any] | None
    tcpSocket: dict[str, Any] | None
    grpc: dict[str, Any] | None
    initialDelaySeconds: _Whole
    timeoutSeconds: _Whole
    periodSeconds: _Whole
    successThreshold: _Whole
    failureThreshold: _Whole
    terminationGracePeriodSeconds: _Whole


#: core/v1 Probe: one handler (a mapping) and whole numbers, kept as written
Probe = Annotated[_Probe, WrapValidator(_as_written), _OBJECT_SCHEMA]


class EnvVar(Strict):
    name: str
    value: str | None = None
    valueFrom: dict[str, Any] | None = None

    @field_validator("value", mode="before")
    @classmethod
    def _scalar_to_str(cls, v: Any) -> Any:
        # the API server rejects non-strings; YAML authors write `value: 1` by accident
        if isinstance(v, bool | int | float):
            # never the value itself: env values may be credentials (display.py)
            raise ValueError(
                f"env values must be strings: quote it, found {describe(v, sensitive=True)}"
            )
        return v


class Container(Strict):
    name: str | None = None
    image: str | None = None
    command: list[str] | None = None
    args: list[str] | None = None
    workingDir: str | None = None
    ports: list[dict[str, Any]] | None = None
    envFrom: list[dict[str, Any]] | None = None
    env: list[EnvVar] | None = None
    resources: ResourceRequirements | None = None
    resizePolicy: list[dict[str, Any]] | None = None
    restartPolicy: str | None = None
    restartPolicyRules: list[dict[str, Any]] | None = None
    volumeMounts: list[Named] | None = None
    volumeDevices: list[dict[str, Any]] | None = None
    livenessProbe: Probe | None = None
    readinessProbe: Probe | None = None
    startupProbe: Probe | None = None
    lifecycle: dict[str, Any] | None = None
    terminationMessagePath: str | None = None
    terminationMessagePolicy: str | None = None
    imagePullPolicy: str | None = None
    securityContext: dict[str, Any] | None = None
    stdin: bool | None = None
    stdinOnce: bool | None = None
    tty: bool | None = None


class NamedContainer(Container):
    """A container of a pod spec (every one but the partial ``mainContainer``)."""

    @field_validator("name", mode="after")
    @classmethod
    def _not_empty(cls, v: str | None) -> str | None:
        if not v:
            raise ValueError("needs a name (a non-empty string)")
        return v

    @model_validator(mode="after")
    def _has_name(self) -> "NamedContainer":
        # checked here, not by typing the field, so that the CRD schema stays as it was
        if self.name is None:
            raise ValueError("a container needs a name")
        return self


class PodSpecFields(Strict):
    """Every core/v1 PodSpec field (Kubernetes 1.34), values passed through."""

    volumes: list[Named] | None = None
    initContainers: list[NamedContainer] | None = None
    containers: list[NamedContainer] | None = None
    ephemeralContainers: list[dict[str, Any]] | None = None
    restartPolicy: str | None = None
    terminationGracePeriodSeconds: int | None = None
    activeDeadlineSeconds: int | None = None
    dnsPolicy: str | None = None
    nodeSelector: dict[str, str] | None = None
    serviceAccountName: str | None = None
    serviceAccount: str | None = None
    automountServiceAccountToken: bool | None = None
    nodeName: str | None = None
    hostNetwork: bool | None = None
    hostPID: bool | None = None
    hostIPC: bool | None = None
    shareProcessNamespace: bool | None = None
    securityContext: dict[str, Any] | None = None
    imagePullSecrets: list[dict[str, Any]] | None = None
    hostname: str | None = None
    hostnameOverride: str | None = None
    subdomain: str | None = None
    affinity: dict[str, Any] | None = None
    schedulerName: str | None = None
    tolerations: list[dict[str, Any]] | None = None
    hostAliases: list[dict[str, Any]] | None = None
    priorityClassName: str | None = None
    priority: int | None = None
    dnsConfig: dict[str, Any] | None = None
    readinessGates: list[dict[str, Any]] | None = None
    runtimeClassName: str | None = None
    enableServiceLinks: bool | None = None
    preemptionPolicy: str | None = None
    overhead: dict[str, Any] | None = None
    topologySpreadConstraints: list[dict[str, Any]] | None = None
    setHostnameAsFQDN: bool | None = None
    os: dict[str, Any] | None = None
    hostUsers: bool | None = None
    schedulingGates: list[dict[str, Any]] | None = None
    resourceClaims: list[dict[str, Any]] | None = None
    resources: dict[str, Any] | None = None


class ExtraPodSpec(PodSpecFields):
    """``extraPodSpec``: an inline PodSpec plus the partial ``mainContainer``."""

    mainContainer: Container | None = None


class ObjectMeta(BaseModel):
    """Metadata of an input object: read leniently, every field passes through."""

    model_config = ConfigDict(extra="allow", frozen=True, defer_build=True)

    name: str
    namespace: str | None = None
    labels: dict[str, str] | None = None
    annotations: dict[str, str] | None = None
