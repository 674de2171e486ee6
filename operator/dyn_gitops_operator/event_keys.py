"""Which object event enqueues which graph key.

An event never carries work: it only names the ``(namespace, DGD name)`` keys whose graph
it may affect, and every reconcile reads fresh state from the caches (level-triggered).
Events that cannot change a decision (mostly echoes of our own writes) enqueue nothing.
"""

from __future__ import annotations

from collections.abc import Callable

from dyn_gitops import keys
from dyn_gitops_operator import objects as o
from dyn_gitops_operator.informer import Key, Store, obj_key, strip_rv
from dyn_gitops_operator.resources import Obj


def graph_of_workload(obj: Obj) -> list[str]:
    """``namespace/dgd`` of a Deployment or LeaderWorkerSet (by its graph label)."""
    g = o.labels(obj).get(keys.LABEL_GRAPH_NAME)
    return [f"{o.meta(obj).get('namespace')}/{g}"] if g else []


def graph_of_adapter(adapter: Obj) -> list[str]:
    """``namespace/dgd`` of a scaling adapter (by its ``spec.dgdRef``)."""
    ref = ((adapter.get("spec") or {}).get("dgdRef") or {}).get("name")
    return [f"{o.meta(adapter).get('namespace')}/{ref}"] if ref else []


def split(ref: str) -> Key:
    ns, _, name = ref.partition("/")
    return ns, name


def dgd_keys(old: Obj | None, new: Obj | None) -> list[Key]:
    if old is not None and new is not None:
        mo, mn = o.meta(old), o.meta(new)
        if all(
            mo.get(f) == mn.get(f)
            for f in ("generation", "deletionTimestamp", "annotations", "labels")
        ):
            return []  # status-only change (mostly our own writes); resync covers drift
    obj = new if new is not None else old
    return [obj_key(obj)] if obj is not None else []


def workload_keys(old: Obj | None, new: Obj | None) -> list[Key]:
    """A Deployment or LeaderWorkerSet: the graphs it left and joined."""
    if old is not None and new is not None and strip_rv(old) == strip_rv(new):
        return []
    return [split(g) for obj in (old, new) if obj is not None for g in graph_of_workload(obj)]


def adapter_keys(old: Obj | None, new: Obj | None) -> list[Key]:
    """A scaling adapter: only a spec change (its status is ours)."""
    if (
        old is not None
        and new is not None
        and o.meta(old).get("generation") == o.meta(new).get("generation")
    ):
        return []
    return [split(g) for obj in (old, new) if obj is not None for g in graph_of_adapter(obj)]


def grove_keys(old: Obj | None, new: Obj | None, dgds: Store) -> list[Key]:
    """A PodClique / PCSG: the DGDs whose services map to its name (the ``grove`` index)."""
    if old is not None and new is not None and strip_rv(old) == strip_rv(new):
        return []
    obj = new if new is not None else old
    if obj is None:
        return []
    child = f"{o.meta(obj).get('namespace') or ''}/{o.name(obj)}"
    return [obj_key(dgd) for dgd in dgds.by_index("grove", child)]


def known_graph_keys(
    dgds: Store, deployments: Store, adapters: Store, namespace: str | None = None
) -> list[Key]:
    """Every graph a DGD, Deployment or adapter in the caches names (sorted)."""
    found = {obj_key(d) for d in dgds.items()}
    found |= {split(g) for d in deployments.items() for g in graph_of_workload(d)}
    found |= {split(g) for a in adapters.items() for g in graph_of_adapter(a)}
    return sorted(k for k in found if namespace is None or k[0] == namespace)


class Enqueuer:
    """Informer event handlers: each event's keys go into the work queue."""

    def __init__(self, add: Callable[[Key], None], dgds: Store) -> None:
        self.add = add
        self.dgds = dgds

    def on_dgd(self, old: Obj | None, new: Obj | None) -> None:
        self._add(dgd_keys(old, new))

    def on_workload(self, old: Obj | None, new: Obj | None) -> None:
        self._add(workload_keys(old, new))

    def on_adapter(self, old: Obj | None, new: Obj | None) -> None:
        self._add(adapter_keys(old, new))

    def on_grove(self, old: Obj | None, new: Obj | None) -> None:
        self._add(grove_keys(old, new, self.dgds))

    def _add(self, keys_: list[Key]) -> None:
        for key in keys_:
            self.add(key)


__all__ = [
    "Enqueuer",
    "adapter_keys",
    "dgd_keys",
    "graph_of_adapter",
    "graph_of_workload",
    "grove_keys",
    "known_graph_keys",
    "split",
    "workload_keys",
]
