"""What every reconciler gets, and the shape it has."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol

from dyn_gitops_operator.errors import StandbyError
from dyn_gitops_operator.graph import Graph
from dyn_gitops_operator.kubeapi import KubeApi
from dyn_gitops_operator.metrics import Metrics
from dyn_gitops_operator.plan import Plan
from dyn_gitops_operator.resources import Resource

Obj = dict[str, Any]


def utc_now() -> datetime:
    return datetime.now(UTC)


def timestamp(t: datetime) -> str:
    """RFC 3339 in whole seconds, as metav1.Time serialises."""
    return t.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class Context:
    kube: KubeApi
    metrics: Metrics
    #: puts a write's response into the local cache so the next pass sees our own write
    remember: Callable[[Resource, Obj], None]
    now: Callable[[], datetime] = utc_now
    #: whether this replica may write now (the leader, its scope lease held): checked
    #: before every write, so a leadership that ends mid-reconcile sends nothing more
    acting: Callable[[], bool] = lambda: True

    def may_write(self) -> None:
        if not self.acting():
            raise StandbyError("not acting (leadership or scope lease lost): write not sent")

    def apply(self, res: Resource, obj: Obj, *, subresource: str | None = None) -> Obj:
        self.may_write()
        out = self.kube.apply(res, obj, subresource=subresource)
        self.metrics.writes.labels(
            res.kind, "apply" + (f"/{subresource}" if subresource else "")
        ).inc()
        self.remember(res, out)
        return out

    def patch(self, res: Resource, obj: Obj, *, subresource: str | None = None) -> Obj:
        """A merge patch (not remembered: a /scale answer is not the object itself; the
        object's watch event brings the new state)."""
        meta = obj["metadata"]
        self.may_write()
        out = self.kube.patch(
            res, meta.get("namespace"), meta["name"], obj, subresource=subresource
        )
        self.metrics.writes.labels(
            res.kind, "patch" + (f"/{subresource}" if subresource else "")
        ).inc()
        return out

    def delete(self, res: Resource, obj: Obj) -> None:
        meta = obj["metadata"]
        self.may_write()
        self.kube.delete(
            res,
            meta.get("namespace"),
            meta["name"],
            uid=meta.get("uid"),
            resource_version=meta.get("resourceVersion"),
        )
        self.metrics.writes.labels(res.kind, "delete").inc()


class Reconciler(Protocol):
    #: value of the ``reconciler`` metric label
    name: str

    def reconcile(self, graph: Graph, plan: Plan, ctx: Context) -> None:
        """Decide (into ``plan``) and write what this concern owns; raise to retry."""
