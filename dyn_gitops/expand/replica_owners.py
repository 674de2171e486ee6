"""Replicas a Planner writes into the DGD: which components, and the emitted DGD without them.

The Dynamo 1.5 Planner scales a component through its scaling adapter's ``/scale`` and,
when that answers 404 (no adapter), patches the DGD instead: a JSON patch ``add`` of
``/spec/components/<i>/replicas`` (``KubernetesAPI.update_service_replicas`` and
``_update_dgd_replicas``, components/src/dynamo/planner/connectors/clients/kubernetes_api.py
@ 2a6da14c8). A GitOps sync that applies Git's ``replicas`` there would take the field back
on every sync, so the emitted DGD leaves it out; the Git value reaches the workload as the
seed annotation, and the companion controller writes it into the DGD once (docs/operator.md,
*Replica ownership*).
"""

from __future__ import annotations

from typing import Any

from .. import keys, naming
from .components import GraphComponents


def planner_scaled(graph: GraphComponents | None, name: str) -> bool:
    """Component ``name`` of ``graph`` (its v1beta1 components; None: a standalone DCD,
    which has no Planner beside it) is a worker with no scaling adapter in a graph that runs
    a Planner."""
    if graph is None or not graph.has_type(naming.PLANNER):
        return False
    component = graph.get(name)
    return (
        component is not None
        and naming.is_worker(component.type)
        and component.scalingAdapter is None  # v1beta1: present = enabled
    )


def seeded_components(children: list[dict[str, Any]]) -> frozenset[str]:
    """Components whose rendered workload carries the seed annotation."""
    return frozenset(
        str(((c.get("metadata") or {}).get("labels") or {}).get(keys.LABEL_COMPONENT))
        for c in children
        if keys.ANN_SEED_REPLICAS in ((c.get("metadata") or {}).get("annotations") or {})
    )


def without_replicas(doc: dict[str, Any], components: frozenset[str]) -> None:
    """Drop ``replicas`` of those components from an emitted DGD, v1alpha1 (``services``
    map) or v1beta1 (``components`` list), in place."""
    spec = doc.get("spec") or {}
    services = spec.get("services")
    if isinstance(services, dict):
        for name in components:
            if isinstance(services.get(name), dict):
                services[name].pop("replicas", None)
    comps = spec.get("components")
    if isinstance(comps, list):
        for comp in comps:
            if isinstance(comp, dict) and comp.get("name") in components:
                comp.pop("replicas", None)
