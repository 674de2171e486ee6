"""Kubernetes core types as they appear inside Dynamo resources.

Only the field *names* are checked (an unknown name is a typo the API server would
silently prune); values stay as written and pass through to the rendered objects.
"""

from __future__ import annotations

import re
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, WithJsonSchema, field_validator

from ..display import describe


class Strict(BaseModel):
    """Base for every input model: unknown fields are errors, names are the JSON names."""

    model_config = ConfigDict(extra="forbid", frozen=True)


_QUANTITY = re.compile(
    r"^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+|Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E)?$")


def _quantity(value: Any) -> Any:
    if isinstance(value, bool):
        raise ValueError(
            f"expected a Kubernetes quantity such as '1', '500m' or '8Gi', found {value!r}")
    if isinstance(value, int | float):
        value = str(value)
    if isinstance(value, str) and not _QUANTITY.match(value):
        raise ValueError(
            f"expected a Kubernetes quantity such as '1', '500m' or '8Gi', found {value!r}")
    return value


#: a resource.Quantity: written as a string or a number in YAML, rendered as a string
Quantity = Annotated[str, BeforeValidator(_quantity),
                     WithJsonSchema({"x-kubernetes-int-or-string": True})]


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
            raise ValueError("env values must be strings: quote it, found "
                             f"{describe(v, sensitive=True)}")
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
    resources: dict[str, Any] | None = None
    resizePolicy: list[dict[str, Any]] | None = None
    restartPolicy: str | None = None
    restartPolicyRules: list[dict[str, Any]] | None = None
    volumeMounts: list[dict[str, Any]] | None = None
    volumeDevices: list[dict[str, Any]] | None = None
    livenessProbe: dict[str, Any] | None = None
    readinessProbe: dict[str, Any] | None = None
    startupProbe: dict[str, Any] | None = None
    lifecycle: dict[str, Any] | None = None
    terminationMessagePath: str | None = None
    terminationMessagePolicy: str | None = None
    imagePullPolicy: str | None = None
    securityContext: dict[str, Any] | None = None
    stdin: bool | None = None
    stdinOnce: bool | None = None
    tty: bool | None = None


class PodSpecFields(Strict):
    """Every core/v1 PodSpec field (Kubernetes 1.34), values passed through."""

    volumes: list[dict[str, Any]] | None = None
    initContainers: list[Container] | None = None
    containers: list[Container] | None = None
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

    model_config = ConfigDict(extra="allow", frozen=True)

    name: str
    namespace: str | None = None
    labels: dict[str, str] | None = None
    annotations: dict[str, str] | None = None
