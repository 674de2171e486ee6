"""Minimal CRDs for third-party kinds the renderer emits (Istio VirtualService, Gateway API
Inference Extension InferencePool, LeaderWorkerSet, Volcano PodGroup, Grove PodCliqueSet):
enough for the API server to accept the objects in a server-side dry-run; their schemas are
free-form."""

from __future__ import annotations

from typing import Any


def _crd(group: str, version: str, kind: str, plural: str) -> dict[str, Any]:
    return {
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{group}", "annotations": {
            # *.k8s.io groups are protected; the real CRD carries its KEP approval link
            "api-approved.kubernetes.io": "unapproved, test-only copy"}},
        "spec": {
            "group": group, "scope": "Namespaced",
            "names": {"kind": kind, "plural": plural, "singular": kind.lower(),
                      "listKind": f"{kind}List"},
            "versions": [{"name": version, "served": True, "storage": True,
                          "schema": {"openAPIV3Schema": {
                              "type": "object",
                              "x-kubernetes-preserve-unknown-fields": True}}}],
        },
    }


def thirdparty_crds() -> list[dict[str, Any]]:
    return [
        _crd("networking.istio.io", "v1beta1", "VirtualService", "virtualservices"),
        _crd("inference.networking.k8s.io", "v1", "InferencePool", "inferencepools"),
        _crd("leaderworkerset.x-k8s.io", "v1", "LeaderWorkerSet", "leaderworkersets"),
        _crd("scheduling.volcano.sh", "v1beta1", "PodGroup", "podgroups"),
        _crd("grove.io", "v1alpha1", "PodCliqueSet", "podcliquesets"),
    ]
