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

from ..errors import FieldPath, Problem
from ..models.v1alpha1 import CheckpointConfig


def not_supported(loc: FieldPath, cfg: CheckpointConfig) -> Problem:
    """The problem for an enabled checkpoint, naming what 1.5 would do with it."""
    why = (
        "the operator shapes restored pods only once the snapshot is Ready in the cluster "
        "(and partly in its Pod-create webhook), which a renderer cannot see; with GitOps, "
        "remove checkpoint (or set enabled: false) and the pods start cold, or leave this "
        "graph to the Dynamo operator (render the rest of the folder without it)"
    )
    if cfg.checkpointRef:
        return Problem.at(
            (*loc, "checkpointRef"),
            f"restoring from the PodSnapshot {cfg.checkpointRef!r} (checkpointRef, Dynamo 1.5) "
            f"is not yet supported: {why}",
        )
    return Problem.at(
        (*loc, "enabled"),
        "automatic checkpointing (a DGD-managed SnapshotJob and PodSnapshot, Dynamo 1.5) is "
        f"not yet supported: {why}",
    )
