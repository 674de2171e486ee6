"""The LeaderWorkerSet of a multinode DCD and the graph's wait-for-leader ConfigMap.

Native LWS scaling (#5468 / #9612, v1.2; ``generateLeaderWorkerSet`` and
``leaderWorkerSetName`` in internal/controller/dynamocomponentdeployment_controller.go
@ 2a6da14c8): one LeaderWorkerSet per DCD, named ``<dcd>-0`` (the name the first of the
older per-replica sets had, so it adopts that one), ``spec.replicas`` = the DCD's
replicas, ``size`` = its node count, ``startupPolicy: LeaderCreated``. No Volcano
PodGroup, no ``instance-id`` label, no Volcano scheduler or group annotation on the pods.
"""

from __future__ import annotations

from typing import Any

from .. import keys, naming
from . import multinode
from .objects import meta
from .wait_leader import WAIT_FOR_LEADER_SCRIPT

Obj = dict[str, Any]

LWS_API = "leaderworkerset.x-k8s.io/v1"


def wait_leader_config_map_name(dgd_name: str) -> str:
    return f"{dgd_name}-wait-leader-script"


def wait_leader_config_map(dgd_name: str, namespace: str) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": meta(
            wait_leader_config_map_name(dgd_name), namespace, {keys.LABEL_GRAPH_NAME: dgd_name}
        ),
        "data": {multinode.WAIT_LEADER_KEY: WAIT_FOR_LEADER_SCRIPT},
    }


def _template(template_meta: dict[str, Any], pod: Obj, role: str) -> Obj:
    """The DCD's pod template metadata with ``role`` instead of the selector label (the
    LWS selects its own pods; the leader-only Service selects ``role: leader``)."""
    labels = {k: v for k, v in template_meta["labels"].items() if k != keys.LABEL_SELECTOR}
    labels[keys.LABEL_ROLE] = role
    metadata: Obj = {"labels": dict(sorted(labels.items()))}
    if template_meta.get("annotations"):
        metadata["annotations"] = dict(sorted(template_meta["annotations"].items()))
    return {"metadata": metadata, "spec": pod}


def leader_worker_set(
    dcd_name: str,
    namespace: str,
    replicas: int | None,
    nodes: int,
    labels: dict[str, str],
    annotations: dict[str, str],
    template_meta: dict[str, Any],
    leader: Obj,
    worker: Obj,
) -> Obj:
    """``replicas`` None: left out (the companion controller sizes it, as it does a managed
    worker Deployment). ``annotations``: ours only; the operator sets none on the LWS."""
    spec: Obj = {}
    if replicas is not None:
        spec["replicas"] = replicas
    spec["startupPolicy"] = "LeaderCreated"
    spec["leaderWorkerTemplate"] = {
        "size": nodes,
        "leaderTemplate": _template(template_meta, leader, multinode.LEADER),
        "workerTemplate": _template(template_meta, worker, multinode.WORKER),
    }
    return {
        "apiVersion": LWS_API,
        "kind": "LeaderWorkerSet",
        "metadata": meta(naming.leader_worker_set_name(dcd_name), namespace, labels, annotations),
        "spec": spec,
    }
