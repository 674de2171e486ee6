"""Minimal CRDs for third-party kinds the renderer emits (Istio VirtualService, Gateway API
Inference Extension InferencePool, LeaderWorkerSet, Volcano PodGroup, Grove PodCliqueSet):
enough for the API server to accept the objects in a server-side dry-run; their schemas are
free-form, except the PodCliqueSet's by default (``podcliqueset_crd``: ``cliques`` a map list
keyed by ``name``, as Grove's ``+listType=map``, and the status subresource). Plus the two
Grove kinds Grove itself creates from a PodCliqueSet (PodClique,
PodCliqueScalingGroup), with the status and scale subresources the companion controller
uses (``grove_crds``)."""

from __future__ import annotations

from typing import Any


def _crd(group: str, version: str, kind: str, plural: str) -> dict[str, Any]:
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {
            "name": f"{plural}.{group}",
            "annotations": {
                # *.k8s.io groups are protected; the real CRD carries its KEP approval link
                "api-approved.kubernetes.io": "unapproved, test-only copy"
            },
        },
        "spec": {
            "group": group,
            "scope": "Namespaced",
            "names": {
                "kind": kind,
                "plural": plural,
                "singular": kind.lower(),
                "listKind": f"{kind}List",
            },
            "versions": [
                {
                    "name": version,
                    "served": True,
                    "storage": True,
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "x-kubernetes-preserve-unknown-fields": True,
                        }
                    },
                }
            ],
        },
    }


def podcliqueset_crd(map_list: bool = True) -> dict[str, Any]:
    """The PodCliqueSet CRD. ``map_list``: structural where it matters, as Grove's own CRD
    (``spec.template.cliques`` ``x-kubernetes-list-type: map`` keyed by ``name``, each item's
    ``annotations`` a map of strings, everything else preserved unknown) with the status
    subresource; otherwise free-form (``cliques`` an atomic list, as an old Grove)."""
    crd = _crd("grove.io", "v1alpha1", "PodCliqueSet", "podcliquesets")
    if not map_list:
        return crd
    free: dict[str, Any] = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
    clique = {
        **free,
        "required": ["name"],
        "properties": {
            "name": {"type": "string"},
            "annotations": {"type": "object", "additionalProperties": {"type": "string"}},
        },
    }
    cliques = {
        "type": "array",
        "x-kubernetes-list-type": "map",
        "x-kubernetes-list-map-keys": ["name"],
        "items": clique,
    }
    version_spec = crd["spec"]["versions"][0]
    version_spec["schema"]["openAPIV3Schema"] = {
        "type": "object",
        "properties": {
            "apiVersion": {"type": "string"},
            "kind": {"type": "string"},
            "metadata": {"type": "object"},
            "spec": {
                **free,
                "properties": {"template": {**free, "properties": {"cliques": cliques}}},
            },
            "status": free,
        },
    }
    version_spec["subresources"] = {"status": {}}
    return crd


def thirdparty_crds(pcs_map_list: bool = True) -> list[dict[str, Any]]:
    return [
        _crd("networking.istio.io", "v1beta1", "VirtualService", "virtualservices"),
        _crd("inference.networking.k8s.io", "v1", "InferencePool", "inferencepools"),
        _crd("leaderworkerset.x-k8s.io", "v1", "LeaderWorkerSet", "leaderworkersets"),
        _crd("scheduling.volcano.sh", "v1beta1", "PodGroup", "podgroups"),
        podcliqueset_crd(pcs_map_list),
        *grove_crds(),
    ]


def _scalable_crd(
    group: str, version: str, kind: str, plural: str, selector_path: str
) -> dict[str, Any]:
    """Free-form, but with integer replicas and the status and scale subresources (as
    Grove's own CRDs declare them: ``+kubebuilder:subresource:scale``)."""
    crd = _crd(group, version, kind, plural)
    replicas = {
        "type": "object",
        "x-kubernetes-preserve-unknown-fields": True,
        "properties": {"replicas": {"type": "integer"}},
    }
    version_spec = crd["spec"]["versions"][0]
    version_spec["schema"]["openAPIV3Schema"] = {
        "type": "object",
        "properties": {
            "apiVersion": {"type": "string"},
            "kind": {"type": "string"},
            "metadata": {"type": "object"},
            "spec": replicas,
            "status": replicas,
        },
    }
    version_spec["subresources"] = {
        "status": {},
        "scale": {
            "specReplicasPath": ".spec.replicas",
            "statusReplicasPath": ".status.replicas",
            "labelSelectorPath": selector_path,
        },
    }
    return crd


def grove_crds() -> list[dict[str, Any]]:
    """PodClique and PodCliqueScalingGroup (grove.io/v1alpha1; selector paths as Grove's)."""
    return [
        _scalable_crd("grove.io", "v1alpha1", "PodClique", "podcliques", ".status.hpaPodSelector"),
        _scalable_crd(
            "grove.io",
            "v1alpha1",
            "PodCliqueScalingGroup",
            "podcliquescalinggroups",
            ".status.selector",
        ),
    ]
