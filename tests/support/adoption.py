"""A cluster as the Dynamo operator left it, for the migration tests (``adopt --check``,
docs/migration.md): the operator's own output for an upstream example
(``conformance/operator-output``, its reconcilers run at 2a6da14c8), created with the
operator's field manager and owner references.

Upstream, at 2a6da14c8: ``internal/controller_common/resource.go`` ``SyncObservedResource``
creates and updates with ``r.Create``/``r.Update`` (no field manager given: the API server
takes client-go's user agent, the binary ``manager`` of ``deploy/operator/Dockerfile``;
operation ``Update``) after ``ctrl.SetControllerReference(parent, ...)``; the parent of a
Deployment, LeaderWorkerSet or Service is its DynamoComponentDeployment
(``dynamocomponentdeployment_controller.go``), that of a DCD and of the discovery
ServiceAccount, Role and RoleBinding the DGD (``dgd_component_workloads_reconciler.go``,
``dgd_discovery_reconciler.go``); a DCD is named ``<dgd>-<component>[-<worker hash>]``
(``internal/dynamo/graph.go`` ``GetDCDResourceName``), as its workload.
"""

from __future__ import annotations

from typing import Any

import yaml

from support.parity import SETTINGS
from support.paths import REPO

Obj = dict[str, Any]
OUTPUT = REPO.parent / "shared" / "conformance" / "operator-output"
EXAMPLES = REPO.parent / "shared" / "conformance" / "dynamo-examples"
#: the field manager of the operator's writes
OPERATOR_MANAGER = "manager"
#: the field manager of the user's first ``kubectl apply`` of the DGD
USER_MANAGER = "kubectl-client-side-apply"
#: what the DCD owns (the rest of the operator's output is the DGD's)
DCD_OWNED = ("Deployment", "LeaderWorkerSet", "Service")


def flags(settings: dict[str, Any]) -> list[str]:
    """Render settings (by their names) as CLI flags."""
    out: list[str] = []
    for name, value in settings.items():
        if isinstance(value, bool):
            out.append(f"--{name}" if value else f"--no-{name}")
        else:
            out += [f"--{name}", str(value)]
    return out


#: the operator-output README's operator configuration as flags
AS_OPERATOR = flags(SETTINGS)


def operator_output(example: str) -> list[Obj]:
    """What the operator created for ``example`` (namespace ``default``), in its order."""
    objs = [
        o
        for o in yaml.safe_load_all((OUTPUT / example).read_text())
        if isinstance(o, dict) and o.get("kind") != "OracleReport"
    ]
    for o in objs:
        o["metadata"].setdefault("namespace", "default")
    return objs


def owner_ref(owner: Obj) -> Obj:
    """The operator's controller reference to ``owner`` (``SetControllerReference``)."""
    return {
        "apiVersion": owner["apiVersion"],
        "kind": owner["kind"],
        "name": owner["metadata"]["name"],
        "uid": owner["metadata"]["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }


def stand_in_dcd(workload: Obj, dgd: Obj) -> Obj:
    """The DCD the operator made for ``workload`` (named as it), owned by the DGD."""
    labels = workload["metadata"].get("labels") or {}
    return {
        "apiVersion": "nvidia.com/v1beta1",
        "kind": "DynamoComponentDeployment",
        "metadata": {
            "name": workload["metadata"]["name"],
            "namespace": workload["metadata"]["namespace"],
            "labels": {
                k: v for k, v in labels.items() if k == "nvidia.com/dynamo-graph-deployment-name"
            },
            "ownerReferences": [owner_ref(dgd)],
        },
        "spec": {"name": str(labels.get("nvidia.com/dynamo-component", ""))},
    }
