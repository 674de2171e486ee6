"""Finalize: merge objects several graphs share, stamp provenance, order deterministically."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from . import __version__, keys, objpath
from .errors import FieldPath, Problem
from .expand.stage import Rendered, identity
from .parse import locate
from .settings import RenderSettings

# Helm's install order: dependencies before dependents, so a plain `kubectl apply` works too.
KIND_ORDER = (
    "Namespace",
    "NetworkPolicy",
    "ResourceQuota",
    "LimitRange",
    "PodSecurityPolicy",
    "PodDisruptionBudget",
    "ServiceAccount",
    "Secret",
    "SecretList",
    "ConfigMap",
    "StorageClass",
    "PersistentVolume",
    "PersistentVolumeClaim",
    "CustomResourceDefinition",
    "ClusterRole",
    "ClusterRoleList",
    "ClusterRoleBinding",
    "ClusterRoleBindingList",
    "Role",
    "RoleList",
    "RoleBinding",
    "RoleBindingList",
    "Service",
    "DaemonSet",
    "Pod",
    "ReplicationController",
    "ReplicaSet",
    "Deployment",
    "HorizontalPodAutoscaler",
    "StatefulSet",
    "Job",
    "CronJob",
    "IngressClass",
    "Ingress",
    "APIService",
    "MutatingWebhookConfiguration",
    "ValidatingWebhookConfiguration",
)
_KIND_RANK = {k: i for i, k in enumerate(KIND_ORDER)}


def _meta(obj: dict[str, Any]) -> dict[str, Any]:
    meta = obj.get("metadata")
    return meta if isinstance(meta, dict) else {}


def sort_key(obj: dict[str, Any]) -> tuple[int, str, str, str, str]:
    kind = str(obj.get("kind", ""))
    meta = _meta(obj)
    return (
        _KIND_RANK.get(kind, len(KIND_ORDER)),
        kind if kind not in _KIND_RANK else "",
        str(meta.get("namespace") or ""),
        str(meta.get("name") or ""),
        str(obj.get("apiVersion", "")),
    )


def finalize(
    items: list[Rendered], *, settings: RenderSettings, commit: str | None, problems: list[Problem]
) -> list[dict[str, Any]]:
    merged: dict[tuple[str, str, str, str], tuple[dict[str, Any], set[str], Rendered]] = {}
    dgds: dict[tuple[str, str, str, str], set[str]] = {}
    for item in items:
        ident = identity(item.obj, settings.namespace)
        if ident in merged:
            existing, paths, first = merged[ident]
            if existing == item.obj and not item.passthrough and not first.passthrough:
                paths.add(item.path)  # shared object (planner RBAC, model Service)
                if item.dgd:
                    dgds[ident].add(item.dgd)
                continue
            problems.append(
                Problem(
                    item.path,
                    0,
                    f"{ident[1]}/{ident[3]}",
                    message=(
                        f"object {ident[1]} {ident[2]}/{ident[3]} is produced twice (also by "
                        f"{first.path}{' for ' + first.dgd if first.dgd else ''}) with different "
                        "content"
                    ),
                )
            )
            continue
        merged[ident] = (item.obj, {item.path}, item)
        dgds[ident] = {item.dgd} if item.dgd else set()
    out = []
    emitted: list[tuple[dict[str, Any], Rendered]] = []
    for ident, (obj, paths, item) in merged.items():
        if item.passthrough:
            out.append(obj)
            emitted.append((obj, item))
            continue
        if item.source_dgd:  # only its metadata is written below: copied, not the spec
            obj = {**obj, "metadata": dict(obj.get("metadata") or {})}
        meta = obj.setdefault("metadata", {})
        if item.source_dgd and "namespace" not in meta:  # right after the name
            ordered = {k: v for k, v in meta.items() if k == "name"}
            ordered["namespace"] = settings.namespace
            ordered.update((k, v) for k, v in meta.items() if k != "name")
            obj["metadata"] = meta = ordered
        ann = dict(meta.get("annotations") or {})
        ann[keys.ANN_SOURCE_PATH] = ",".join(sorted(paths))
        if commit:
            ann[keys.ANN_SOURCE_COMMIT] = commit
        ann[keys.ANN_RENDERER_VERSION] = __version__
        if dgds[ident] and not item.source_dgd:
            ann[keys.ANN_SOURCE_DGD] = ",".join(sorted(dgds[ident]))
        meta["annotations"] = dict(sorted(ann.items()))
        out.append(obj)
        emitted.append((obj, item))
    clean = [(obj, item) for obj, item in emitted if _check_identity(obj, item, problems)]
    _check_paths(clean, problems)
    out.sort(key=sort_key)
    return out


def _located(problem: Problem, item: Rendered, label: str) -> Problem:
    """``problem`` (a field of the output object) in the source file, on the line of the same
    field of the document the object comes from (for a DGD's child: the DGD's own field)."""
    line = locate(item.doc, problem.path) if item.doc is not None else 0
    return replace(problem, file=item.path, line=line, obj=label)


def _label(obj: dict[str, Any]) -> str:
    return f"{obj.get('kind') or '?'}/{_meta(obj).get('name') or '?'}"


def _check_identity(obj: dict[str, Any], item: Rendered, problems: list[Problem]) -> bool:
    """What the API server would refuse in the object's identity is an input error, for
    every output (a stream too): the same names are file names under --out-dir/hydrate.
    So is what it would refuse in the object's labels and annotations, whatever they come
    from (the rules report each source at its field; this is the last word on every
    object). Whether the identity is clean."""
    found_any = objpath.object_problems(obj)
    meta = _meta(obj)
    for path, why in objpath.metadata_problems(meta.get("labels"), meta.get("annotations")):
        problem = _located(Problem.at(("metadata", *path), why), item, _label(obj))
        if problem not in problems:
            problems.append(problem)
    for path, why in _ingress_host_problems(obj):
        problem = _located(Problem.at(path, why), item, _label(obj))
        if problem not in problems:
            problems.append(problem)
    for found in found_any:
        label = _label(obj)
        if found.path == ("metadata", "namespace") and item.dgd and not item.passthrough:
            label = f"DynamoGraphDeployment/{item.dgd.rpartition('/')[2]}"  # once, not per child
        problem = _located(found, item, label)
        if problem not in problems:
            problems.append(problem)
    return not found_any


def _ingress_host_problems(obj: dict[str, Any]) -> list[tuple[FieldPath, str]]:
    """An Ingress's rule hosts and TLS hosts the API server would refuse (its host is made
    from the service's ``ingress.hostPrefix``, ``host`` and ``hostSuffix``, or the DGD's name
    and the setting ingress-host-suffix)."""
    if obj.get("kind") != "Ingress" or not isinstance(obj.get("spec"), dict):
        return []
    spec = obj["spec"]
    hosts: list[tuple[FieldPath, Any]] = [
        (("spec", "rules", i, "host"), r.get("host"))
        for i, r in enumerate(spec.get("rules") or [])
        if isinstance(r, dict)
    ]
    hosts += [
        (("spec", "tls", i, "hosts", j), h)
        for i, t in enumerate(spec.get("tls") or [])
        if isinstance(t, dict)
        for j, h in enumerate(t.get("hosts") or [])
    ]
    found = []
    for path, host in hosts:
        why = objpath.ingress_host_problem(host) if isinstance(host, str) and host else None
        if why:
            found.append((path, f"the Ingress host {why}"))
    return found


def _check_paths(emitted: list[tuple[dict[str, Any], Rendered]], problems: list[Problem]) -> None:
    """Two objects that would share one output file (also on a case-insensitive file
    system) are refused whatever the output, so every output format agrees. ``emitted``:
    the objects whose identity :func:`_check_identity` found clean."""
    seen: dict[str, tuple[str, dict[str, Any], Rendered]] = {}
    for obj, item in emitted:
        try:
            rel = objpath.relpath(obj, checked=True)
        except objpath.PathError:
            continue  # a generateName object (a stream only)
        first = seen.setdefault(objpath.fold(rel), (rel, obj, item))
        if first[1] is obj:
            continue
        problems.append(
            _located(
                Problem.at(
                    ("metadata", "name"),
                    (
                        f"writes the same output file as {_label(first[1])} from {first[2].path} "
                        f"({first[0]}; file names are compared without case)"
                    ),
                ),
                item,
                _label(obj),
            )
        )
