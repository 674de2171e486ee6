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


def line_of(tmp_path: Path, key: str) -> int:
    """The 1-based line of the rendered input file that holds ``key``."""
    lines = (tmp_path / "in.yaml").read_text().splitlines()
    return next(i for i, line in enumerate(lines, 1) if line.strip().startswith(key))


INSTEAD = (
    "instead, either set checkpoint.enabled: false (or remove checkpoint), and the pods "
    "start cold; or keep this DGD out of the folder dyn-gitops renders and "
    "apply it unrendered to a cluster whose Dynamo operator runs with checkpointing and the "
    "Snapshot operator, which shape the pods there"
)


def test_checkpoint_ref_restore_is_refused_with_what_to_do_instead(tmp_path: Path) -> None:
    """#14076 (v1.5.0): ``checkpointRef`` names a PodSnapshot; the 1.5 operator's
    ``ApplyRestoreCandidateMetadata`` (``internal/checkpoint`` of the 1.5 line, read
    through the public index; at 2a6da14c8 the same function in
    ``internal/checkpoint/podspec.go`` pinned a DynamoCheckpoint) writes the PodSnapshot's
    UID, bound PodSnapshotContent, GMS mode and compatibility version into the pod template,
    only once it is Ready: cluster state, so the restore is refused, at the field, with
    the two ways out."""
    text = errors(tmp_path, dgd({"enabled": True, "checkpointRef": "qwen-snap"}))
    assert line_of(tmp_path, "checkpointRef:") == 17
    assert text == (
        "in.yaml:17: DynamoGraphDeployment/cp: spec.services.VllmWorker.checkpoint."
        "checkpointRef: restoring from the PodSnapshot 'qwen-snap' (checkpointRef, Dynamo "
        "1.5) is not rendered: the operator writes that PodSnapshot's UID, bound "
        "PodSnapshotContent and compatibility version into the pod template, and only once "
        "it is Ready, which exist only in the cluster (a renderer cannot see them); " + INSTEAD
    )


def test_automatic_checkpoint_is_refused_with_what_to_do_instead(tmp_path: Path) -> None:
    """#13177 / #14076 (v1.5.0): without ``checkpointRef`` the DGD controller runs a
    SnapshotJob per worker generation and ``ApplyRestoreCandidateMetadata`` (1.5 line) pins
    its UID in the pod template even before capture ends: refused at ``enabled``."""
    text = errors(tmp_path, dgd({"enabled": True, "startupPolicy": "WaitForCheckpoint"}))
    assert line_of(tmp_path, "enabled:") == 16
    assert text == (
        "in.yaml:16: DynamoGraphDeployment/cp: spec.services.VllmWorker.checkpoint.enabled: "
        "automatic checkpointing (Dynamo 1.5: the operator runs a SnapshotJob for each worker "
        "generation and writes its UID into the pod template) is not rendered: that UID "
        "exists only in the cluster (a renderer cannot see it); " + INSTEAD
    )


def test_v1beta1_checkpoint_ref_is_refused_at_its_field(tmp_path: Path) -> None:
    """The same refusal for a v1beta1 component's ``experimental.checkpoint``
    (``ComponentCheckpointConfig``, ``api/v1beta1/common.go`` @ 2a6da14c8)."""
    doc = {
        "apiVersion": "nvidia.com/v1beta1",
        "kind": "DynamoGraphDeployment",
        "metadata": {"name": "cp", "namespace": "ns"},
        "spec": {
            "components": [
                {
                    "name": "VllmWorker",
                    "type": "worker",
                    "podTemplate": {
                        "spec": {
                            "containers": [
                                {
                                    "name": "main",
                                    "image": "nvcr.io/dynamo:1.5.1",
                                    "command": ["python3"],
                                }
                            ]
                        }
                    },
                    "experimental": {"checkpoint": {"checkpointRef": "qwen-snap"}},
                }
            ]
        },
    }
    text = errors(tmp_path, doc)
    line = line_of(tmp_path, "checkpointRef:")
    assert text.startswith(
        f"in.yaml:{line}: DynamoGraphDeployment/cp: spec.components[0].experimental.checkpoint."
        "checkpointRef: restoring from the PodSnapshot 'qwen-snap'"
    )
    assert text.endswith(INSTEAD)


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
