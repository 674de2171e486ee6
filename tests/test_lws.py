"""Multinode services on the LeaderWorkerSet path, as the Dynamo operator 1.5 renders them.

Sources: native LWS scaling (#5468 / #9612, v1.2; ``generateLeaderWorkerSet`` /
``leaderWorkerSetName`` in internal/controller/dynamocomponentdeployment_controller.go
@ 2a6da14c8), the pod-spec order of ``GenerateBasePodSpec`` (internal/dynamo/graph.go
@ 2a6da14c8), ERRATA 3 and 4, and the objects the operator made for the upstream examples
(``../shared/conformance/operator-output``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from support.parity import SETTINGS as PARITY_SETTINGS
from support.paths import CONFORMANCE
from support.rendering import AS_APPLIED, render

from dyn_gitops import keys
from dyn_gitops.expand import multinode

Obj = dict[str, Any]

OPERATOR_OUTPUT = CONFORMANCE.parent / "operator-output"
WITH_LWS = sorted(
    p.name
    for p in OPERATOR_OUTPUT.glob("*.yaml")
    if "\nkind: LeaderWorkerSet\n" in p.read_text(encoding="utf-8")
)

DGD = """\
apiVersion: nvidia.com/v1alpha1
kind: DynamoGraphDeployment
metadata:
  name: mn
  namespace: demo{annotations}
spec:
  services:
    decode:
      componentType: worker
      replicas: 3
      multinode:
        nodeCount: 2
      resources:
        limits:
          gpu: "{gpus}"
      extraPodSpec:
        mainContainer:
          image: nvcr.io/nvidia/ai-dynamo/{image}:1.1.0
          command: [python3, -m, {module}]
          args: [--model, Qwen/Qwen3-32B{extra}]
"""


def write_dgd(
    tmp_path: Path,
    *,
    backend: str = "vllm",
    gpus: str = "8",
    extra: str = ", --tensor-parallel-size, '16'",
    annotations: dict[str, str] | None = None,
) -> Path:
    image = {"vllm": "vllm-runtime", "sglang": "sglang-runtime", "trtllm": "tensorrtllm-runtime"}
    ann = ""
    if annotations:
        ann = "\n  annotations:\n" + "".join(f"    {k}: '{v}'\n" for k, v in annotations.items())
        ann = ann.rstrip("\n")
    path = tmp_path / "dgd.yaml"
    path.write_text(
        DGD.format(
            annotations=ann,
            gpus=gpus,
            image=image[backend],
            module=f"dynamo.{backend}",
            extra=extra,
        )
    )
    return path


def kinds(objs: list[Obj], kind: str) -> list[Obj]:
    return [o for o in objs if o["kind"] == kind]


def only_lws(objs: list[Obj]) -> Obj:
    (found,) = kinds(objs, "LeaderWorkerSet")
    return without_provenance(found)


#: what every rendered object carries about its source (not the operator's, not a behaviour)
PROVENANCE = (keys.ANN_SOURCE_PATH, keys.ANN_RENDERER_VERSION, keys.ANN_SOURCE_DGD)


def without_provenance(obj: Obj) -> Obj:
    meta = obj["metadata"]
    ann = {k: v for k, v in (meta.get("annotations") or {}).items() if k not in PROVENANCE}
    if ann:
        meta["annotations"] = ann
    else:
        meta.pop("annotations", None)
    return obj


def role_spec(lws: Obj, role: str) -> Obj:
    return lws["spec"]["leaderWorkerTemplate"][f"{role}Template"]["spec"]  # type: ignore[no-any-return]


# ----------------------------------------------------------------------- the operator's objects
def _normalized(obj: Obj) -> Obj:
    """The operator-output README's normalizations: its bookkeeping annotations, and Go's
    encoding of an unset LWS rolloutStrategy."""
    meta = obj.get("metadata") or {}
    ann = {
        k: v
        for k, v in (meta.get("annotations") or {}).items()
        if not k.startswith("nvidia.com/last-applied-")
    }
    if ann:
        meta["annotations"] = ann
    else:
        meta.pop("annotations", None)
    if (obj.get("spec") or {}).get("rolloutStrategy") == {"type": ""}:
        del obj["spec"]["rolloutStrategy"]
    return obj


def _worker_hash(objs: list[Obj]) -> str:
    (found,) = {
        v
        for o in objs
        if (v := ((o.get("metadata") or {}).get("labels") or {}).get(keys.LABEL_WORKER_HASH))
    }
    return str(found)


def test_the_operator_output_has_leader_worker_sets_to_compare_with() -> None:
    # the parity cases below come from ../shared; an empty list must fail, not pass vacuously
    assert len(WITH_LWS) >= 6, f"no operator output with LeaderWorkerSets in {OPERATOR_OUTPUT}"


@pytest.mark.parametrize("name", WITH_LWS)
def test_leader_worker_sets_and_wait_leader_config_map_equal_the_operators(name: str) -> None:
    """Every LeaderWorkerSet the operator made for an upstream example, and the graph's
    wait-for-leader ConfigMap, rendered identically (the worker hash, which the lead ports
    separately, spelt as the operator's)."""
    theirs = [
        _normalized(d)
        for d in yaml.safe_load_all((OPERATOR_OUTPUT / name).read_text(encoding="utf-8"))
        if d and d.get("kind") != "OracleReport"
    ]
    ours = render(
        CONFORMANCE / name, **{k.replace("-", "_"): v for k, v in PARITY_SETTINGS.items()}
    )
    text = json.dumps(ours).replace(_worker_hash(ours), _worker_hash(theirs))
    ours = [without_provenance(o) for o in json.loads(text)]

    def wanted(objs: list[Obj]) -> dict[str, Obj]:
        return {
            f"{o['kind']}/{o['metadata']['name']}": o
            for o in objs
            if o["kind"] == "LeaderWorkerSet"
            or (o["kind"] == "ConfigMap" and o["metadata"]["name"].endswith("-wait-leader-script"))
        }

    mine, operator = wanted(ours), wanted(theirs)
    assert sorted(mine) == sorted(operator)
    for key, obj in operator.items():
        assert mine[key] == obj, key
    assert not kinds(ours, "PodGroup")


# --------------------------------------------------------------------------- native scaling
def test_one_natively_scaled_leader_worker_set_per_service(tmp_path: Path) -> None:
    """#9612 (v1.2): one LWS ``<dcd>-0`` with the DCD's replicas, ``size`` = nodes,
    ``startupPolicy: LeaderCreated``; no PodGroup, no instance-id, no Volcano scheduling."""
    objs = render(write_dgd(tmp_path), lws=True, managed_replicas=False)
    lws = only_lws(objs)
    (svc,) = kinds(objs, "Service")
    dcd = svc["metadata"]["name"]  # the DCD's name (with the worker hash)
    assert lws["metadata"]["name"] == f"{dcd}-0"
    assert lws["spec"]["replicas"] == 3
    assert lws["spec"]["startupPolicy"] == "LeaderCreated"
    assert lws["spec"]["leaderWorkerTemplate"]["size"] == 2
    assert "annotations" not in lws["metadata"]  # the operator sets only labels
    assert not kinds(objs, "PodGroup") and not kinds(objs, "Deployment")
    assert keys.LABEL_INSTANCE_ID not in lws["metadata"]["labels"]
    for role in (multinode.LEADER, multinode.WORKER):
        template = lws["spec"]["leaderWorkerTemplate"][f"{role}Template"]
        assert template["metadata"]["labels"][keys.LABEL_ROLE] == role
        assert keys.LABEL_INSTANCE_ID not in template["metadata"]["labels"]
        assert keys.ANN_VOLCANO_GROUP not in template["metadata"].get("annotations", {})
        assert "schedulerName" not in template["spec"]


def test_managed_multinode_worker_is_sized_by_the_controller(tmp_path: Path) -> None:
    """Managed replicas (the default): the LWS of a worker carries what a managed worker
    Deployment carries and no ``spec.replicas`` (docs/reference-behaviour.md), so the
    companion controller sizes and rolls it as it does a Deployment."""
    lws = only_lws(render(write_dgd(tmp_path), lws=True))
    assert "replicas" not in lws["spec"]
    assert lws["metadata"]["annotations"] == {
        keys.ANN_MANAGED_REPLICAS: "true",
        keys.ANN_DESIRED_REPLICAS: "3",
        keys.ANN_ARGOCD_SYNC_OPTIONS: keys.ARGOCD_PRUNE_FALSE,
        keys.ANN_ARGOCD_COMPARE_OPTIONS: keys.ARGOCD_IGNORE_EXTRANEOUS,
        keys.ANN_FLUX_PRUNE: keys.FLUX_PRUNE_DISABLED,
    }


def test_cpu_only_multinode_renders(tmp_path: Path) -> None:
    """#11115 (v1.4): the LWS worker GPU pre-validation is gone; without GPUs no
    parallelism is spread over nodes, so the command is left as written."""
    path = write_dgd(tmp_path, gpus="0", extra="")
    lws = only_lws(render(path, lws=True))
    main = role_spec(lws, multinode.LEADER)["containers"][0]
    assert main["command"] == ["python3", "-m", "dynamo.vllm"]
    assert main["args"] == ["--model", "Qwen/Qwen3-32B"]


# ------------------------------------------------------------------------------ vLLM launch
@pytest.mark.parametrize(
    ("annotations", "mp"),
    [
        pytest.param({}, False, id="no origin stamp (as applied): Ray"),
        pytest.param({keys.ANN_OPERATOR_ORIGIN_VERSION: "1.5.1"}, True, id="stamped 1.5.1: mp"),
        pytest.param({keys.ANN_OPERATOR_ORIGIN_VERSION: "0.9.0"}, False, id="stamped 0.9: Ray"),
    ],
)
def test_vllm_multinode_launch_follows_the_origin_version(
    tmp_path: Path, annotations: dict[str, str], mp: bool
) -> None:
    """ERRATA 4 (internal/features/compatibility ``VLLMMultiprocessing`` @ 2a6da14c8): the
    DGD's ``nvidia.com/dynamo-operator-origin-version`` >= 1.0.0 launches with
    multiprocessing, without it (or older) with Ray."""
    lws = only_lws(render(write_dgd(tmp_path, annotations=annotations), lws=True, **AS_APPLIED))
    leader = role_spec(lws, multinode.LEADER)["containers"][0]
    worker_pod = role_spec(lws, multinode.WORKER)
    worker = worker_pod["containers"][0]
    line = " ".join([*leader["command"], *leader["args"]])
    if mp:
        assert "--distributed-executor-backend mp --nnodes 2" in line
        assert "--node-rank 0" in line and "ray start" not in line
        assert [c["name"] for c in worker_pod["initContainers"]] == ["wait-for-leader-mp"]
        assert {
            "name": "VLLM_NIXL_SIDE_CHANNEL_HOST",
            "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}},
        } in worker["env"]
    else:
        assert leader["args"][0].startswith("ray start --head --port=6379 && ")
        assert worker["args"] == ["ray start --address=$(LWS_LEADER_ADDRESS):6379 --block"]
        assert "initContainers" not in worker_pod
        assert "VLLM_NIXL_SIDE_CHANNEL_HOST" not in {e["name"] for e in worker.get("env", [])}


@pytest.mark.parametrize(
    ("origin", "enabled"),
    [
        ("1.0.0", True),
        ("v1.2", True),
        ("1", True),
        ("1.5.1+build.7", True),
        ("2.0.0-dev", True),
        ("1.0.0-rc1", False),
        ("0.9.9", False),
        ("1.0.0.0", False),
        ("latest", False),
        ("", False),
    ],
)
def test_origin_version_gate(origin: str, enabled: bool) -> None:
    """``Gate.Enabled`` (internal/features/compatibility/operator_origin.go @ 2a6da14c8):
    Masterminds semver, lenient parse, compared with 1.0.0; a pre-release is below it."""
    assert multinode.origin_at_least_1_0(origin) is enabled


# ------------------------------------------------------------------------------- pod order
def test_backend_mounts_come_before_shared_memory_and_volumes_follow_mounts(
    tmp_path: Path,
) -> None:
    """GenerateBasePodSpec @ 2a6da14c8: the backend's mounts (TRT-LLM's SSH key) are added
    before ``/dev/shm`` is mounted last, and appendMissingPVCVolumesForMounts then lists the
    volumes in mount order, the others (vLLM's wait-for-leader script) after them."""
    path = write_dgd(tmp_path, backend="trtllm", extra="")
    lws = only_lws(render(path, lws=True, mpi_ssh_secret="ssh-keys"))
    for role in (multinode.LEADER, multinode.WORKER):
        spec = role_spec(lws, role)
        mounts = [m["name"] for m in spec["containers"][0]["volumeMounts"]]
        assert mounts == ["ssh-keys", "shared-memory"]
        assert [v["name"] for v in spec["volumes"]] == mounts
    path = write_dgd(tmp_path, annotations={keys.ANN_OPERATOR_ORIGIN_VERSION: "1.5.0"})
    worker = role_spec(only_lws(render(path, lws=True)), multinode.WORKER)
    assert [v["name"] for v in worker["volumes"]] == ["shared-memory", "wait-leader-script"]
