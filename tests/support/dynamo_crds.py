"""The Dynamo CRDs the controller tests install: ``dyn-gitops crds``, with the DGD served as
``nvidia.com/v1beta1`` (the storage version the controller reads) when those CRDs do not
serve it yet. The stand-in v1beta1 schema is free-form; v1alpha1 stays served without a
conversion path, so an object written as v1alpha1 reads back with ``spec.services``, which
the controller's view (``dgdview``) still accepts."""

from __future__ import annotations

import copy
from typing import Any

Obj = dict[str, Any]


def dynamo_crds() -> list[Obj]:
    from dyn_gitops.crds import crds

    return [with_v1beta1(crd) for crd in crds()]


def with_v1beta1(crd: Obj) -> Obj:
    """``crd`` as installed by :func:`dynamo_crds` (the chart's CRDs too: applied over the
    installed ones, they must keep the stored version)."""
    if crd.get("kind") == "CustomResourceDefinition":
        spec = crd["spec"]
        names = [v["name"] for v in spec["versions"]]
        if spec["names"]["kind"] == "DynamoGraphDeployment" and "v1beta1" not in names:
            crd = copy.deepcopy(crd)
            versions = crd["spec"]["versions"]
            for v in versions:
                v["storage"] = False
            beta = copy.deepcopy(versions[0])
            beta.update(name="v1beta1", served=True, storage=True)
            props = beta["schema"]["openAPIV3Schema"]["properties"]
            props["spec"] = {
                "type": "object",
                "x-kubernetes-preserve-unknown-fields": True,
                # a map list keyed by name, as upstream (+listType=map, +listMapKey=name in
                # api/v1beta1 @ 2a6da14c8): one component's replicas has its own owner
                "properties": {
                    "components": {
                        "type": "array",
                        "x-kubernetes-list-type": "map",
                        "x-kubernetes-list-map-keys": ["name"],
                        "items": {
                            "type": "object",
                            "required": ["name"],
                            "properties": {"name": {"type": "string"}},
                            "x-kubernetes-preserve-unknown-fields": True,
                        },
                    }
                },
            }
            versions.append(beta)
    return crd
