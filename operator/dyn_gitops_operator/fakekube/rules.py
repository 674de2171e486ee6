"""Per-resource behaviour of the fake API server: subresources, list types, defaults."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from dyn_gitops import naming
from dyn_gitops_operator.fakekube.fields import ListTypes
from dyn_gitops_operator.resources import (
    DEPLOYMENTS,
    DGDS,
    DGDSAS,
    EVENTS,
    LEASES,
    LWS,
    PCSGS,
    PODCLIQUES,
    PODCLIQUESETS,
    Resource,
)

Obj = dict[str, Any]

#: every object's metadata lists, as the real schema types them
METADATA_LISTS = {"metadata.ownerReferences": ("uid",)}
#: the keyed lists of a pod template (under ``prefix``) the rendered workloads use
_POD_LISTS = {
    "containers": ("name",),
    "initContainers": ("name",),
    "volumes": ("name",),
    "containers[].env": ("name",),
    "initContainers[].env": ("name",),
    "containers[].volumeMounts": ("mountPath",),
    "initContainers[].volumeMounts": ("mountPath",),
}


def pod_template_lists(prefix: str) -> dict[str, tuple[str, ...]]:
    return {f"{prefix}.{k}": v for k, v in _POD_LISTS.items()}


def list_types(keys: Mapping[str, tuple[str, ...]] | None = None) -> ListTypes:
    """The object's metadata lists plus ``keys`` (ownerReference items are atomic)."""
    return ListTypes({**METADATA_LISTS, **(keys or {})}, frozenset({"metadata.ownerReferences"}))


@dataclass(frozen=True)
class KindRules:
    #: has the status subresource: the main resource ignores ``status``, ``/status`` ignores
    #: everything else
    status: bool = True
    #: has the scale subresource (``spec.replicas``), whose status shows this selector path
    scale_selector: str | None = None
    lists: ListTypes = field(default_factory=list_types)
    #: PUT without metadata.resourceVersion is allowed (built-in workloads); otherwise 422
    unconditional_update: bool = False
    #: fills what the real server's defaulting would (on every write of the main resource)
    defaults: Callable[[Obj], None] | None = None


def deployment_defaults(obj: Obj) -> None:
    """Those of ``apps/v1`` defaulting the controller reads: replicas and the strategy."""
    spec = obj.setdefault("spec", {})
    spec.setdefault("replicas", 1)
    strategy = spec.setdefault("strategy", {})
    strategy.setdefault("type", "RollingUpdate")
    if strategy["type"] == "RollingUpdate":
        ru = strategy.setdefault("rollingUpdate", {})
        ru.setdefault("maxUnavailable", naming.DEFAULT_ROLLOUT_PERCENT)
        ru.setdefault("maxSurge", naming.DEFAULT_ROLLOUT_PERCENT)


#: the PodCliqueSet CRD of a current Grove: ``cliques`` a map list keyed by name
PCS_MAP_LIST = KindRules(lists=list_types({"spec.template.cliques": ("name",)}))
#: an older Grove's: ``cliques`` an atomic list (a restart must not write it)
PCS_ATOMIC_LIST = KindRules()

DEFAULT_RULES: dict[Resource, KindRules] = {
    DEPLOYMENTS: KindRules(
        lists=list_types(pod_template_lists("spec.template.spec")),
        unconditional_update=True,
        defaults=deployment_defaults,
    ),
    DGDS: KindRules(),
    DGDSAS: KindRules(scale_selector="status.selector"),
    LWS: KindRules(
        lists=list_types(
            pod_template_lists("spec.leaderWorkerTemplate.workerTemplate.spec")
            | pod_template_lists("spec.leaderWorkerTemplate.leaderTemplate.spec")
        )
    ),
    PODCLIQUES: KindRules(scale_selector="status.hpaPodSelector"),
    PCSGS: KindRules(scale_selector="status.selector"),
    PODCLIQUESETS: PCS_MAP_LIST,
    LEASES: KindRules(status=False),
    EVENTS: KindRules(status=False),
}

__all__ = [
    "DEFAULT_RULES",
    "PCS_ATOMIC_LIST",
    "PCS_MAP_LIST",
    "KindRules",
    "deployment_defaults",
    "list_types",
    "pod_template_lists",
]
