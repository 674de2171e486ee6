"""What one reconcile pass intends to write, gathered from every reconciler.

Server-side apply removes a field its manager owned and no longer sends, so all the
controller's fields of one Deployment (replicas, the restart annotation and the owner
reference to the DGD) must go out in one apply. Reconcilers record decisions here;
``reconcilers.apply`` writes them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from dyn_gitops_operator import objects as o
from dyn_gitops_operator.resources import Resource

Obj = dict[str, Any]


@dataclass
class DeploymentIntent:
    """The controller-owned fields of one Deployment: carried over, then overridden."""

    live: Obj
    replicas: int | None = None
    restart_at: str | None = None
    #: ownerReference to the DGD (garbage collection when the DGD is deleted)
    owner: Obj | None = None

    @classmethod
    def from_live(cls, dep: Obj) -> DeploymentIntent:
        ours = o.owned_owner_uids(dep)
        owner = next((r for r in o.owner_refs(dep) if r.get("uid") in ours), None)
        return cls(
            live=dep,
            replicas=o.replicas(dep) if o.owns_replicas(dep) else None,
            restart_at=o.restart_at(dep) if o.owns_restart_at(dep) else None,
            owner=owner,
        )

    def changed(self) -> bool:
        """A value differs from the live one. (An equal value is not re-applied just to take
        ownership: a field nobody else sets needs no owner, and it saves a write per
        Deployment at start-up.)"""
        return (
            (self.replicas is not None and self.replicas != o.replicas(self.live))
            or (self.restart_at is not None and self.restart_at != o.restart_at(self.live))
            or (
                self.owner is not None
                and self.owner.get("uid") not in {r.get("uid") for r in o.owner_refs(self.live)}
            )
        )


@dataclass(frozen=True)
class Write:
    """A server-side apply another reconciler decided on (sent by the apply step)."""

    resource: Resource
    body: Obj
    subresource: str | None = None
    #: a JSON merge patch instead (the /scale subresource of a custom resource refuses
    #: server-side apply); ``body.metadata.resourceVersion`` still makes it conditional
    merge: bool = False


@dataclass
class Plan:
    intents: dict[str, DeploymentIntent] = field(default_factory=dict)
    #: other objects' writes (scaling-adapter status, Grove /scale), sent with the
    #: Deployment applies
    writes: list[Write] = field(default_factory=list)
    #: old worker generations to delete (uid and resourceVersion preconditions)
    deletions: list[Obj] = field(default_factory=list)
    #: DGD status sections computed by the reconcilers that own them
    rolling_update: Obj | None = None
    restart: Obj | None = None
    #: Ready-condition override from the rollout: (state, reason, message)
    rollout_state: tuple[str, str, str] | None = None
    #: seconds after which the graph wants another look even without events
    requeue_after: float | None = None
    #: Grove PodClique name -> replicas decided by the OnDelete surge (``grove_surge``); the
    #: scaling reconciler writes them through /scale in place of its own value
    grove_replicas: dict[str, int] = field(default_factory=dict)
    #: workloads (Deployments, or Grove PodCliques / PodCliqueScalingGroups through
    #: /scale) were written in this pass: their new state is not known yet
    wrote_deployments: bool = False

    def intent(self, dep: Obj) -> DeploymentIntent:
        dep_name = o.name(dep)
        if dep_name not in self.intents:
            self.intents[dep_name] = DeploymentIntent.from_live(dep)
        return self.intents[dep_name]

    def set_replicas(self, dep: Obj, value: int) -> None:
        self.intent(dep).replicas = max(0, int(value))

    def set_restart(self, dep: Obj, restart_id: str) -> None:
        self.intent(dep).restart_at = restart_id

    def planned_replicas(self, dep: Obj) -> int:
        intent = self.intents.get(o.name(dep))
        if intent is not None and intent.replicas is not None:
            return intent.replicas
        return o.replicas(dep)

    def requeue(self, seconds: float) -> None:
        self.requeue_after = (
            seconds if self.requeue_after is None else min(self.requeue_after, seconds)
        )
