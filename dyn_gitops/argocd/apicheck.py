"""Compare what a render needs with what the destination cluster serves.

Argo CD passes the destination cluster's version (``KUBE_VERSION``, e.g. ``1.31.2``) and
every group/version and group/version/Kind it serves (``KUBE_API_VERSIONS``,
comma-separated; over a thousand entries on a busy cluster). Syncing an object whose kind
the cluster lacks fails late and tersely, so ``generate`` fails early and says what to
install or which setting to change. Only objects we render are checked (pass-through
objects are the user's business), and CRDs in the same output count as served.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import Any

from .. import keys
from ..errors import Problem

_HINTS = {
    "nvidia.com": "install the Dynamo CRDs (dyn-gitops crds | kubectl apply --server-side -f -)",
    "leaderworkerset.x-k8s.io": "install LeaderWorkerSet, or set the setting lws to false",
    "grove.io": "install Grove, or set the setting grove to false",
    "scheduling.volcano.sh": "install Volcano (LeaderWorkerSet gangs), or set the setting lws "
    "to false",
    "resource.k8s.io": "DRA needs resource.k8s.io/v1 (Kubernetes 1.34+) and a GPU DRA driver; "
    "or set the setting dra to false",
    "networking.istio.io": "install Istio, or leave the setting istio-gateway empty",
    "inference.networking.k8s.io": "install the Gateway API Inference Extension CRDs",
    "inference.networking.x-k8s.io": "install the Gateway API Inference Extension CRDs",
}


def _has_native_sidecar(node: Any) -> bool:
    """Any ``initContainers`` entry with ``restartPolicy: Always``, at any depth."""
    if isinstance(node, dict):
        inits = node.get("initContainers")
        if isinstance(inits, list) and any(
            isinstance(c, dict) and c.get("restartPolicy") == "Always" for c in inits
        ):
            return True
        return any(_has_native_sidecar(v) for v in node.values())
    if isinstance(node, list):
        return any(_has_native_sidecar(v) for v in node)
    return False


#: field-level features: (first minor where they are on by default, what, detector)
FEATURES: tuple[tuple[tuple[int, int], str, Callable[[Any], bool]], ...] = (
    (
        (1, 29),
        "native sidecar containers (initContainers[].restartPolicy: Always)",
        _has_native_sidecar,
    ),
)


def parse_api_versions(raw: str) -> tuple[set[str], dict[str, set[str]]]:
    """``v1,v1/Pod,apps/v1,apps/v1/Deployment`` -> group/versions, kinds by group/version."""
    gvs: set[str] = set()
    kinds: dict[str, set[str]] = {}
    for entry in raw.split(","):
        entry = entry.strip()
        if not entry:
            continue
        head, _, last = entry.rpartition("/")
        if head and last[:1].isupper():  # versions start lower-case, kinds upper-case
            kinds.setdefault(head, set()).add(last)
            gvs.add(head)
        else:
            gvs.add(entry)
    return gvs, kinds


def parse_kube_version(raw: str) -> tuple[int, int] | None:
    """``1.31.2``, ``v1.29.3-eks-abc`` -> (1, 31); None when unreadable (then not checked)."""
    m = re.match(r"v?(\d+)\.(\d+)", raw.strip())
    return (int(m.group(1)), int(m.group(2))) if m else None


def _ours(obj: dict[str, Any]) -> bool:
    ann = (obj.get("metadata") or {}).get("annotations") or {}
    return keys.ANN_RENDERER_VERSION in ann


def _origin(obj: dict[str, Any]) -> Problem:
    """Where an object we rendered comes from: its source files, and its DGD if it has one
    (no line: the output knows none)."""
    meta = obj.get("metadata") or {}
    ann = meta.get("annotations") or {}
    path = str(ann.get(keys.ANN_SOURCE_PATH, "?"))
    dgd = ann.get(keys.ANN_SOURCE_DGD)
    if dgd is None and obj.get("kind") == "DynamoGraphDeployment":
        dgd = f"{meta.get('namespace')}/{meta.get('name')}"
    return Problem(path, None, f"DynamoGraphDeployment {dgd}" if dgd else "")


def _shown(origin: Problem) -> str:
    return f"{origin.file}: {origin.obj}" if origin.obj else origin.file


def _crd_served(objects: Iterable[dict[str, Any]]) -> set[tuple[str, str]]:
    out: set[tuple[str, str]] = set()
    for obj in objects:
        if obj.get("kind") != "CustomResourceDefinition":
            continue
        spec = obj.get("spec") or {}
        kind = str((spec.get("names") or {}).get("kind", ""))
        for v in spec.get("versions") or []:
            if isinstance(v, dict) and v.get("name"):
                out.add((f"{spec.get('group')}/{v['name']}", kind))
    return out


def check(objects: list[dict[str, Any]], *, kube_version: str, api_versions: str) -> list[str]:
    """Every problem of :func:`problems`, one line each."""
    return [str(p) for p in problems(objects, kube_version=kube_version, api_versions=api_versions)]


def problems(
    objects: list[dict[str, Any]], *, kube_version: str, api_versions: str
) -> list[Problem]:
    """Every problem; empty when the cluster has what the output needs."""
    found: list[Problem] = []
    if api_versions.strip():
        gvs, kinds = parse_api_versions(api_versions)
        in_output = _crd_served(objects)
        missing: dict[tuple[Problem, str, str], list[str]] = {}
        for obj in objects:
            if not _ours(obj):
                continue
            gv, kind = str(obj.get("apiVersion", "")), str(obj.get("kind", ""))
            served = gv in gvs and (gv not in kinds or kind in kinds[gv])
            if served or (gv, kind) in in_output:
                continue
            name = str((obj.get("metadata") or {}).get("name", "?"))
            missing.setdefault((_origin(obj), gv, kind), []).append(name)
        for (origin, gv, kind), names in sorted(
            missing.items(), key=lambda m: (_shown(m[0][0]), *m[0][1:])
        ):
            shown = ", ".join(sorted(names)[:3]) + (" ..." if len(names) > 3 else "")
            hint = _HINTS.get(gv.rpartition("/")[0], "install the API that serves it")
            found.append(
                replace(
                    origin,
                    message=(
                        f"renders {kind} {shown} ({gv}), which the destination cluster "
                        f"does not serve (KUBE_API_VERSIONS): {hint}"
                    ),
                )
            )
    have = parse_kube_version(kube_version) if kube_version else None
    if have is not None:
        for need, what, uses in FEATURES:
            for obj in objects:  # Dynamo kinds only describe pods; their children are pods
                if (
                    need > have
                    and _ours(obj)
                    and not str(obj.get("apiVersion", "")).startswith("nvidia.com/")
                    and uses(obj)
                ):
                    meta = obj.get("metadata") or {}
                    found.append(
                        replace(
                            _origin(obj),
                            message=(
                                f"{obj.get('kind')} {meta.get('name')} uses {what}, which "
                                f"needs Kubernetes {need[0]}.{need[1]} or newer; the "
                                f"destination cluster runs {kube_version} (KUBE_VERSION)"
                            ),
                        )
                    )
    return found
