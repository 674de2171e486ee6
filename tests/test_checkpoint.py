"""Checkpoint/restore against Dynamo 1.5: DynamoCheckpoint is gone, ``checkpointRef`` names a
PodSnapshot, and restore shaping needs live state, so an enabled checkpoint is refused with
a message that says so; no DynamoCheckpoint object or ``DYN_SNAPSHOT_RESTORE_STANDBY`` is
ever rendered.

Upstream sources: #14076 / #13177 (v1.5.0 release notes: DynamoCheckpoint CRD removed,
checkpointRef -> PodSnapshot, DYN_SNAPSHOT_RESTORE_STANDBY removed); the checkpoint fields
of ``api/v1alpha1/common.go`` ServiceCheckpointConfig and the CEL rule of
``api/v1beta1/common.go`` ComponentCheckpointConfig ("checkpoint.job cannot be set when
checkpointRef is specified"); restore shaping in ``internal/checkpoint/podspec.go`` and
``internal/checkpointjob/restore.go`` @ 2a6da14c8.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from support.rendering import AS_APPLIED, renderer

from dyn_gitops.errors import RenderError

Obj = dict[str, Any]


def dgd(checkpoint: Obj | None) -> Obj:
    worker: Obj = {
        "componentType": "worker",
        "extraPodSpec": {
            "mainContainer": {"image": "nvcr.io/dynamo:1.5.1", "command": ["python3"]}
        },
    }
    if checkpoint is not None:
        worker["checkpoint"] = checkpoint
    return {
        "apiVersion": "nvidia.com/v1alpha1",
        "kind": "DynamoGraphDeployment",
        "metadata": {"name": "cp", "namespace": "ns"},
        "spec": {"services": {"VllmWorker": worker}},
    }


render = renderer(file="in.yaml", **AS_APPLIED)


def errors(tmp_path: Path, *docs: Obj) -> str:
    with pytest.raises(RenderError) as info:
        render(tmp_path, *docs)
    return "\n".join(str(p) for p in info.value.problems)


def test_checkpoint_ref_to_a_pod_snapshot_is_refused_clearly(tmp_path: Path) -> None:
    """#14076: checkpointRef names a PodSnapshot; restoring needs its readiness."""
    text = errors(tmp_path, dgd({"enabled": True, "checkpointRef": "qwen-snap"}))
    assert "checkpoint.checkpointRef: restoring from the PodSnapshot 'qwen-snap'" in text
    assert "which a renderer cannot see" in text


def test_automatic_checkpoint_is_refused_clearly(tmp_path: Path) -> None:
    """#13177: without checkpointRef the DGD controller runs a SnapshotJob."""
    text = errors(tmp_path, dgd({"enabled": True, "startupPolicy": "WaitForCheckpoint"}))
    assert "checkpoint.enabled: automatic checkpointing (a DGD-managed SnapshotJob" in text


def test_disabled_checkpoint_renders_without_snapshot_objects_or_env(tmp_path: Path) -> None:
    """#14076: no DynamoCheckpoint and no DYN_SNAPSHOT_RESTORE_STANDBY in the output."""
    objs = render(tmp_path, dgd({"enabled": False, "checkpointRef": "qwen-snap"}))
    assert not [o for o in objs if o["kind"] in ("DynamoCheckpoint", "PodSnapshot")]
    children = [o for o in objs if o["kind"] != "DynamoGraphDeployment"]
    assert "DYN_SNAPSHOT_RESTORE_STANDBY" not in json.dumps(children)


def test_job_with_checkpoint_ref_is_refused(tmp_path: Path) -> None:
    """CEL on ComponentCheckpointConfig (api/v1beta1/common.go): job excludes checkpointRef."""
    doc = dgd({"enabled": False, "checkpointRef": "snap", "job": {"podTemplate": {}}})
    assert "checkpoint.job: cannot be set when checkpointRef is specified" in errors(tmp_path, doc)


def test_unknown_checkpoint_field_is_an_error(tmp_path: Path) -> None:
    """ServiceCheckpointConfig's fields @ 2a6da14c8 are typed now (was a free mapping)."""
    assert "checkpoint.checkpointName" in errors(tmp_path, dgd({"checkpointName": "x"}))


def test_dynamo_checkpoint_objects_are_refused(tmp_path: Path) -> None:
    """#14076: the DynamoCheckpoint CRD is removed in 1.5; applying one would fail."""
    obj = {
        "apiVersion": "nvidia.com/v1alpha1",
        "kind": "DynamoCheckpoint",
        "metadata": {"name": "old", "namespace": "ns"},
        "spec": {},
    }
    text = errors(tmp_path, dgd(None), obj)
    assert "DynamoCheckpoint was removed in Dynamo 1.5" in text
    assert "PodSnapshot" in text
