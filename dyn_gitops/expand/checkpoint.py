"""Checkpoint/restore in Dynamo 1.5: what a renderer can and cannot produce.

Since #14076 / #13177 (v1.5.0) the DynamoCheckpoint CRD is gone: ``checkpointRef`` names a
``PodSnapshot`` of the standalone Snapshot operator, and without it the DGD controller
runs a SnapshotJob per worker generation. What the operator then writes into the pod
template (``ApplyRestoreCandidateMetadata``, ``internal/checkpoint`` of the 1.5 line) pins
cluster objects by identity: the PodSnapshot's UID, its bound PodSnapshotContent, GMS mode
and compatibility version, written only once it is Ready; or the SnapshotJob's UID. The
Pod-create webhook then shapes each pod from that snapshot. None of it is known from Git,
so an enabled checkpoint is refused, with what to do instead. dyn-gitops never emitted
DynamoCheckpoint objects nor ``DYN_SNAPSHOT_RESTORE_STANDBY`` (removed upstream).
"""

from __future__ import annotations

from typing import Any

from ..errors import FieldPath, Problem
from ..models import v1beta1
from .components import GraphComponents


def enabled(component: v1beta1.Component, *, alpha: bool) -> dict[str, Any] | None:
    """The component's ``experimental.checkpoint`` if it is enabled, else None.

    Both forms carry ``enabled``: a v1alpha1 ``checkpoint`` converts into that block as
    written (``ConvertTo`` copies it, disabled or not; the CRD default ``enabled: false``
    filled in), so there ``enabled`` decides (``alpha``); in a v1beta1 block written without
    ``enabled`` the block's presence decides, as the v1beta1 reading always did
    (``models/convert.py``)."""
    exp = component.experimental
    block = exp.checkpoint if exp is not None else None
    if not isinstance(block, dict):
        return None
    return block if block.get("enabled", not alpha) else None


def problem(graph: GraphComponents, name: str) -> Problem | None:
    """The "not yet supported" problem of component ``name``'s checkpoint, at its
    ``experimental.checkpoint`` (a v1alpha1 service's ``checkpoint``), or None when it has
    no enabled checkpoint."""
    component = graph.get(name)
    block = enabled(component, alpha=graph.alpha) if component is not None else None
    if block is None:
        return None
    return not_supported(graph.path(name, "experimental", "checkpoint"), block)


#: what to do instead of rendering a restore, for both refusals
_INSTEAD = (
    "instead, either set checkpoint.enabled: false (or remove checkpoint), and the pods "
    "start cold; or keep this DGD out of the folder dyn-gitops renders and "
    "apply it unrendered to a cluster whose Dynamo operator runs with checkpointing and the "
    "Snapshot operator, which shape the pods there"
)


def not_supported(loc: FieldPath, cfg: dict[str, Any]) -> Problem:
    """The problem for an enabled checkpoint (its block ``cfg``): what 1.5 would write into
    the pod template, why a renderer cannot, and what to do instead."""
    ref = cfg.get("checkpointRef")
    if ref:
        return Problem.at(
            (*loc, "checkpointRef"),
            f"restoring from the PodSnapshot {ref!r} (checkpointRef, Dynamo 1.5) is not "
            "rendered: the operator writes that PodSnapshot's UID, bound PodSnapshotContent "
            "and compatibility version into the pod template, and only once it is Ready, "
            f"which exist only in the cluster (a renderer cannot see them); {_INSTEAD}",
        )
    return Problem.at(
        (*loc, "enabled"),
        "automatic checkpointing (Dynamo 1.5: the operator runs a SnapshotJob for each "
        "worker generation and writes its UID into the pod template) is not rendered: "
        f"that UID exists only in the cluster (a renderer cannot see it); {_INSTEAD}",
    )
