"""The internal model of a DGD being expanded: its v1beta1 component list.

The operator holds every DGD in v1beta1 (``spec.components``, each with a ``podTemplate``
whose container ``main`` carries the user's overrides) and renders from that. So does the
expansion, module by module: :class:`GraphComponents` is the typed v1beta1 component list
(:class:`.v1beta1.Component`) of the admitted DGD document, whichever version it is
written in:

* ``nvidia.com/v1beta1``: the components as written, in the order written;
* ``nvidia.com/v1alpha1``: converted **up** as the operator's conversion webhook does
  (``ConvertTo`` @ 2a6da14c8; :class:`.hub.AlphaComponents`, the conversion the worker hash
  and the emitted v1beta1 DGD read too): services become the name-sorted component list,
  ``worker`` + ``subComponentType: prefill|decode`` becomes ``type: prefill|decode``, a
  disabled scaling adapter is no scaling adapter. What v1beta1 has no field for
  (``dynamoNamespace``, service labels and annotations, a non-promoted
  ``subComponentType``) stays on the :class:`.hub.HubComponent`.

What reads it today: the order components are expanded in (and Grove cliques listed in),
each component's type (the one the workloads, labels, env and the worker hash's worker
check go by), the EPP components (InferencePool, EPP config and service account, Istio
DestinationRule), whether an EPP keeps the 1.4 Go EPP contract (``eppConfig``), whether
a graph has an EPP (its workers' component-class label), whether any component is
multinode (the wait-for-leader ConfigMap), which workers a Planner scales
(:mod:`.replica_owners`), and each component's runtime version (its container ``main``'s
image tag or ``runtimeVersionOverride``, :func:`.context.component_runtime`). Every
component's :class:`.context.ComponentContext` carries its v1beta1 component
(``component``) beside the v1alpha1 service (``spec``). The rest of the expansion still
reads the v1alpha1 model (``docs/reference-behaviour.md``, *The internal model*).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .. import naming
from ..models import v1beta1
from ..models.versions import V1ALPHA1, V1BETA1
from ..workerhash import hub

Obj = dict[str, Any]


@dataclass(frozen=True)
class GraphComponents:
    """A DGD's components as the operator holds them (v1beta1), in their list order."""

    components: tuple[v1beta1.Component, ...]

    @property
    def names(self) -> list[str]:
        return [c.name for c in self.components]

    def has_type(self, component_type: str) -> bool:
        return any(c.type == component_type for c in self.components)

    def has_workers(self) -> bool:
        return any(naming.is_worker(c.type) for c in self.components)

    def get(self, name: str) -> v1beta1.Component | None:
        return next((c for c in self.components if c.name == name), None)


def is_alpha(source: Obj) -> bool:
    """Whether the DGD document ``source`` is converted as a v1alpha1 DGD (the test of
    :func:`.hub.graph`)."""
    version = source.get("apiVersion")
    return version == V1ALPHA1 or (version != V1BETA1 and "services" in (source.get("spec") or {}))


def of(source: Obj, alpha: hub.AlphaComponents | None = None) -> GraphComponents:
    """The v1beta1 components of the admitted DGD document ``source``; ``alpha``: the
    conversion of its components when already at hand (a v1alpha1 document)."""
    spec = source.get("spec") or {}
    if is_alpha(source):
        converted = (alpha or hub.AlphaComponents(spec)).get()
        written: list[Any] = [c.spec for c in converted]
    else:
        written = [c for c in spec.get("components") or [] if isinstance(c, dict)]
    return GraphComponents(tuple(v1beta1.Component.model_validate(c) for c in written))


__all__ = ["GraphComponents", "is_alpha", "of"]
