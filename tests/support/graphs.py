"""DGDs and scenario steps the operator tests share: the same scenario on the fake API
server (test_operator_reconcilers_fake_*) and on the real one (test_operator_*)."""

from __future__ import annotations

from typing import Any

from dyn_gitops_operator.testing import deployment_status

#: the worker service of :func:`rollout_graph`
WORKER = "VllmDecodeWorker"
IMAGE = "nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.1.0"


def rollout_graph(
    image: str, replicas: int, surge: str | None = None, unavailable: str | None = None
) -> dict[str, Any]:
    worker: dict[str, Any] = {
        "componentType": "worker",
        "replicas": replicas,
        "resources": {"limits": {"gpu": "1"}},
        "extraPodSpec": {
            "mainContainer": {"image": image, "command": ["python3", "-m", "dynamo.vllm"]}
        },
    }
    ann = {}
    if surge is not None:
        ann["nvidia.com/deployment-rolling-update-max-surge"] = surge
    if unavailable is not None:
        ann["nvidia.com/deployment-rolling-update-max-unavailable"] = unavailable
    if ann:
        worker["annotations"] = ann
    return {
        "apiVersion": "nvidia.com/v1alpha1",
        "kind": "DynamoGraphDeployment",
        "metadata": {"name": "roll"},
        "spec": {
            "services": {
                "Frontend": {
                    "componentType": "frontend",
                    "replicas": 1,
                    "extraPodSpec": {
                        "mainContainer": {"image": "nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.1.0"}
                    },
                },
                WORKER: worker,
            }
        },
    }


def restart_graph(restart: dict[str, Any] | None = None) -> dict[str, Any]:
    def worker(sub: str) -> dict[str, Any]:
        return {
            "componentType": "worker",
            "subComponentType": sub,
            "replicas": 1,
            "extraPodSpec": {"mainContainer": {"image": IMAGE}},
        }

    spec: dict[str, Any] = {
        "services": {
            "Frontend": {
                "componentType": "frontend",
                "replicas": 1,
                "extraPodSpec": {"mainContainer": {"image": IMAGE}},
            },
            "decode": worker("decode"),
            "prefill": worker("prefill"),
        }
    }
    if restart:
        spec["restart"] = restart
    return {
        "apiVersion": "nvidia.com/v1alpha1",
        "kind": "DynamoGraphDeployment",
        "metadata": {"name": "rs"},
        "spec": spec,
    }


def worker_name(objs: list[dict[str, Any]]) -> str:
    """The worker Deployment of a rendered :func:`rollout_graph` (its name has the hash)."""
    return next(
        o["metadata"]["name"]
        for o in objs
        if o["kind"] == "Deployment" and o["metadata"]["name"].startswith("roll-vllmdecodeworker-")
    )


def rollout_step(dep: dict[str, Any], *, stuck: set[str], failed: set[str]) -> dict[str, Any]:
    """kube-controller-manager's next status for ``dep`` in the rollout tests: a new pod
    needs one step to become available; a ``stuck`` Deployment gains none; a ``failed`` one
    also reports that its ReplicaSet timed out progressing."""
    name = dep["metadata"]["name"]
    spec = dep["spec"]["replicas"]
    prev = int((dep.get("status") or {}).get("availableReplicas") or 0)
    if name in failed:
        return deployment_status(
            dep,
            available=min(prev, spec),
            replicas=spec,
            failed="ReplicaSet has timed out progressing",
        )
    if name in stuck:
        return deployment_status(dep, available=min(prev, spec), replicas=spec)
    return deployment_status(dep, available=min(spec, prev + 1), replicas=spec)


def component_patch(dgd: dict[str, Any], name: str, **fields: Any) -> dict[str, Any]:
    """A merge patch setting ``fields`` on the v1beta1 component ``name`` of the live
    ``dgd`` (``spec.components`` is a list: a merge patch replaces it whole)."""
    comps = [dict(c) for c in dgd["spec"]["components"]]
    (comp,) = [c for c in comps if c["name"] == name]
    comp.update(fields)
    return {"spec": {"components": comps}}
