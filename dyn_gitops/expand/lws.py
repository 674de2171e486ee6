"""LeaderWorkerSet and Volcano PodGroup objects of a multinode DCD
(``spec/dynamo-objects.md`` 6): one pair per replica, named ``<dcd>-<i>``."""

from __future__ import annotations

from typing import Any

from .. import keys
from . import multinode
from .objects import meta

Obj = dict[str, Any]

LWS_API = "leaderworkerset.x-k8s.io/v1"
PODGROUP_API = "scheduling.volcano.sh/v1beta1"
SCHEDULER = "volcano"


def wait_leader_config_map_name(dgd_name: str) -> str:
    return f"{dgd_name}-wait-leader-script"


def wait_leader_config_map(dgd_name: str, namespace: str) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": meta(
            wait_leader_config_map_name(dgd_name), namespace, {keys.LABEL_GRAPH_NAME: dgd_name}
        ),
        "data": {multinode.WAIT_LEADER_KEY: multinode.WAIT_FOR_LEADER_SCRIPT},
    }


def _template(template_meta: dict[str, Any], pod: Obj, role: str, index: int, group: str) -> Obj:
    labels = {k: v for k, v in template_meta["labels"].items() if k != keys.LABEL_SELECTOR}
    labels.update({keys.LABEL_ROLE: role, keys.LABEL_INSTANCE_ID: str(index)})
    annotations = dict(template_meta.get("annotations") or {})
    annotations[keys.ANN_VOLCANO_GROUP] = group
    return {
        "metadata": {
            "labels": dict(sorted(labels.items())),
            "annotations": dict(sorted(annotations.items())),
        },
        "spec": {**pod, "schedulerName": SCHEDULER},
    }


def leader_worker_sets(
    name: str,
    namespace: str,
    replicas: int,
    nodes: int,
    labels: dict[str, str],
    annotations: dict[str, str],
    template_meta: dict[str, Any],
    leader: Obj,
    worker: Obj,
) -> list[Obj]:
    out: list[Obj] = []
    for i in range(replicas):
        lws_name = f"{name}-{i}"
        out.append(
            {
                "apiVersion": PODGROUP_API,
                "kind": "PodGroup",
                "metadata": meta(lws_name, namespace, {keys.LABEL_INSTANCE_ID: str(i)}),
                "spec": {"minMember": nodes},
            }
        )
        out.append(
            {
                "apiVersion": LWS_API,
                "kind": "LeaderWorkerSet",
                "metadata": meta(
                    lws_name, namespace, {**labels, keys.LABEL_INSTANCE_ID: str(i)}, annotations
                ),
                "spec": {
                    "replicas": 1,
                    "startupPolicy": "LeaderCreated",
                    "leaderWorkerTemplate": {
                        "size": nodes,
                        "leaderTemplate": _template(
                            template_meta, leader, multinode.LEADER, i, lws_name
                        ),
                        "workerTemplate": _template(
                            template_meta, worker, multinode.WORKER, i, lws_name
                        ),
                    },
                },
            }
        )
    return out
