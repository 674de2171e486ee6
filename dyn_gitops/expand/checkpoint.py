"""Checkpoint/restore in Dynamo 1.5: what a renderer can and cannot produce.

Since #14076 / #13177 (v1.5.0) the DynamoCheckpoint CRD is gone: ``checkpointRef`` names a
``PodSnapshot`` of the standalone Snapshot operator, and without it the DGD controller
runs a DGD-scoped SnapshotJob. Restore shaping (restore labels and annotations, the
checkpoint volume and control directory, the restore startup probe, the held replicas of
``startupPolicy: WaitForCheckpoint``) depends on that snapshot being Ready in the cluster,
and part of it is applied by the operator's Pod-create webhook: none of it can be rendered
from Git. dyn-gitops never emitted DynamoCheckpoint objects nor
``DYN_SNAPSHOT_RESTORE_STANDBY`` (removed upstream), and refuses an enabled checkpoint.
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


def not_supported(loc: FieldPath, cfg: dict[str, Any]) -> Problem:
    """The problem for an enabled checkpoint (its block ``cfg``), naming what 1.5 would do
    with it."""
    why = (
        "the operator shapes restored pods only once the snapshot is Ready in the cluster "
        "(and partly in its Pod-create webhook), which a renderer cannot see; with GitOps, "
        "remove checkpoint (or set enabled: false) and the pods start cold, or leave this "
        "graph to the Dynamo operator (render the rest of the folder without it)"
    )
    ref = cfg.get("checkpointRef")
    if ref:
        return Problem.at(
            (*loc, "checkpointRef"),
            f"restoring from the PodSnapshot {ref!r} (checkpointRef, Dynamo 1.5) "
            f"is not yet supported: {why}",
        )
    return Problem.at(
        (*loc, "enabled"),
        "automatic checkpointing (a DGD-managed SnapshotJob and PodSnapshot, Dynamo 1.5) is "
        f"not yet supported: {why}",
    )
