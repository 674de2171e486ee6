"""Readers for the few fields the controller uses, and the trims that keep the cache small.

Pure functions over plain dicts (no API calls).
"""

from __future__ import annotations

import contextlib
import json
import math
from dataclasses import dataclass
from typing import Any

from dyn_gitops import keys, naming
from dyn_gitops_operator import FIELD_MANAGER

Obj = dict[str, Any]

LWS_KIND = "LeaderWorkerSet"

#: annotation prefixes worth caching (others, e.g. last-applied-configuration, are large)
_KEPT_ANNOTATION_PREFIXES = ("dyn-gitops.io/", "nvidia.com/")


def meta(obj: Obj) -> Obj:
    m: Obj = obj.get("metadata") or {}
    return m


def labels(obj: Obj) -> dict[str, str]:
    return meta(obj).get("labels") or {}


def annotations_of(obj: Obj) -> dict[str, str]:
    return meta(obj).get("annotations") or {}


def name(obj: Obj) -> str:
    return str(meta(obj)["name"])


def conditions(obj: Obj) -> dict[str, Obj]:
    return {c.get("type", ""): c for c in (obj.get("status") or {}).get("conditions") or []}


# ------------------------------------------------------------------------ trims
def _kept_annotations(m: Obj) -> dict[str, str]:
    return {
        k: v
        for k, v in (m.get("annotations") or {}).items()
        if k.startswith(_KEPT_ANNOTATION_PREFIXES)
    }


def _our_fields(m: Obj) -> Obj:
    """Our manager's Apply entry on the main resource (its fieldsV1), else {}."""
    for entry in m.get("managedFields") or []:
        if (
            entry.get("manager") == FIELD_MANAGER
            and entry.get("operation") == "Apply"
            and not entry.get("subresource")
        ):
            fields: Obj = entry.get("fieldsV1") or {}
            return fields
    return {}


def trim_deployment(raw: Obj) -> Obj:
    m = meta(raw)
    spec = raw.get("spec") or {}
    tmpl_ann = ((spec.get("template") or {}).get("metadata") or {}).get("annotations") or {}
    trimmed_spec: Obj = {"replicas": spec.get("replicas"), "strategy": spec.get("strategy")}
    if spec.get("paused"):
        trimmed_spec["paused"] = True
    if keys.ANN_RESTART_AT in tmpl_ann:
        trimmed_spec["restartAt"] = tmpl_ann[keys.ANN_RESTART_AT]
    return {
        "metadata": {
            "name": m["name"],
            "namespace": m.get("namespace"),
            "uid": m.get("uid"),
            "resourceVersion": m.get("resourceVersion"),
            "generation": m.get("generation"),
            "creationTimestamp": m.get("creationTimestamp"),
            "labels": m.get("labels") or {},
            "annotations": _kept_annotations(m),
            "ourFields": _our_fields(m),
            "deletionTimestamp": m.get("deletionTimestamp"),
            "ownerReferences": m.get("ownerReferences") or [],
        },
        "spec": trimmed_spec,
        "status": raw.get("status") or {},
    }


def trim_custom(raw: Obj) -> Obj:
    """DGD / DGDSA: everything but managedFields and large annotations."""
    m = meta(raw)
    return {
        **raw,
        "metadata": {k: v for k, v in m.items() if k not in ("managedFields", "annotations")}
        | {"annotations": _kept_annotations(m)},
    }


def trim_lws(raw: Obj) -> Obj:
    """LeaderWorkerSet: what readiness, sizing and the rolling update need (the templates
    are large). ``kind`` is kept: the rolling update handles both kinds of workload."""
    m = meta(raw)
    return {
        "kind": LWS_KIND,
        "metadata": {
            "name": m["name"],
            "namespace": m.get("namespace"),
            "uid": m.get("uid"),
            "resourceVersion": m.get("resourceVersion"),
            "generation": m.get("generation"),
            "creationTimestamp": m.get("creationTimestamp"),
            "labels": m.get("labels") or {},
            "annotations": _kept_annotations(m),
            "ourFields": _our_fields(m),
            "deletionTimestamp": m.get("deletionTimestamp"),
            "ownerReferences": m.get("ownerReferences") or [],
        },
        "spec": _lws_spec(raw.get("spec") or {}),
        "status": raw.get("status") or {},
    }


def _lws_spec(spec: Obj) -> Obj:
    """replicas (groups), the group size, whether a leader template exists, and the restart
    stamp of the worker template (where the controller stamps it: see ``apply``)."""
    tmpl = spec.get("leaderWorkerTemplate") or {}
    worker_ann = ((tmpl.get("workerTemplate") or {}).get("metadata") or {}).get("annotations") or {}
    out: Obj = {
        "replicas": spec.get("replicas"),
        "size": tmpl.get("size"),
        "leaderTemplate": tmpl.get("leaderTemplate") is not None,
    }
    if keys.ANN_RESTART_AT in worker_ann:
        out["restartAt"] = worker_ann[keys.ANN_RESTART_AT]
    return out


def lws_size(lws: Obj) -> int:
    """Pods per group (leader included); 1 when unset (the LeaderWorkerSet default). Only
    counted against, never applied; the LeaderWorkerSet API takes an int32 of at least 1,
    anything else reads as the default rather than failing the reconcile."""
    value = (lws.get("spec") or {}).get("size")
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 1


def has_leader_template(lws: Obj) -> bool:
    return bool((lws.get("spec") or {}).get("leaderTemplate"))


def is_lws(workload: Obj) -> bool:
    """A multinode service's LeaderWorkerSet (else a Deployment)."""
    return workload.get("kind") == LWS_KIND


def lws_ready(lws: Obj) -> tuple[bool, str]:
    """Every group ready (``LeaderWorkerSetReady`` in the operator's words)."""
    want = replicas(lws)
    ready = status_count(lws, "readyReplicas")
    if ready < want:
        return False, f"{ready}/{want} groups ready"
    avail = conditions(lws).get("Available")
    if avail is not None and avail.get("status") != "True":
        return False, "condition Available is not True"
    return True, ""


def trim_lease(raw: Obj) -> Obj:
    m = meta(raw)
    return {
        "metadata": {
            "name": m["name"],
            "namespace": m.get("namespace"),
            "uid": m.get("uid"),
            "resourceVersion": m.get("resourceVersion"),
        },
        "spec": raw.get("spec") or {},
    }


# ------------------------------------------------------------------------ Deployments
def replicas(dep: Obj) -> int:
    value = (dep.get("spec") or {}).get("replicas")
    return 1 if value is None else int(value)


def status_count(dep: Obj, field: str) -> int:
    return int((dep.get("status") or {}).get(field) or 0)


def available(workload: Obj) -> int:
    """Serving replicas: a Deployment's available pods, a LeaderWorkerSet's ready groups
    (its status has no available count; the operator's DCD status reads ready groups)."""
    return status_count(workload, "readyReplicas" if is_lws(workload) else "availableReplicas")


def restart_at(dep: Obj) -> str | None:
    value = (dep.get("spec") or {}).get("restartAt")
    return None if value is None else str(value)


def worker_hash(dep: Obj) -> str | None:
    return labels(dep).get(keys.LABEL_WORKER_HASH)


def component(dep: Obj) -> str | None:
    return labels(dep).get(keys.LABEL_COMPONENT)


def is_managed(dep: Obj) -> bool:
    """Rendered with managed replicas: the controller sizes, drains and removes it."""
    return annotations_of(dep).get(keys.ANN_MANAGED_REPLICAS) == "true"


def owns_replicas(dep: Obj) -> bool:
    return "f:replicas" in (meta(dep).get("ourFields") or {}).get("f:spec", {})


def owned_owner_uids(dep: Obj) -> set[str]:
    """uids of the ownerReferences our field manager applied (a list keyed by uid)."""
    refs = (meta(dep).get("ourFields") or {}).get("f:metadata", {}).get("f:ownerReferences", {})
    out = set()
    for key in refs:
        if key.startswith("k:"):
            with contextlib.suppress(ValueError, AttributeError):
                out.add(str(json.loads(key[2:])["uid"]))
    return out


def owner_refs(dep: Obj) -> list[Obj]:
    return list(meta(dep).get("ownerReferences") or [])


def owns_restart_at(dep: Obj) -> bool:
    spec = (meta(dep).get("ourFields") or {}).get("f:spec", {})
    tmpl = spec.get("f:template", {})
    if is_lws(dep):
        tmpl = spec.get("f:leaderWorkerTemplate", {}).get("f:workerTemplate", {})
    ann = tmpl.get("f:metadata", {}).get("f:annotations", {})
    return f"f:{keys.ANN_RESTART_AT}" in ann


def pod_serving(pod: Obj) -> bool:
    """A pod is routable now: Ready and not terminating."""
    if meta(pod).get("deletionTimestamp"):
        return False
    conds = (pod.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conds)


def is_ready(dep: Obj) -> tuple[bool, str]:
    """The DCD controller's ``IsDeploymentReady`` (runtime spec 6.3), with a reason; for a
    LeaderWorkerSet ``IsLeaderWorkerSetReady``."""
    if is_lws(dep):
        return lws_ready(dep)
    if (dep.get("spec") or {}).get("paused"):
        return False, "paused"
    want = replicas(dep)
    if want == 0:
        return True, ""
    st = dep.get("status") or {}
    generation = meta(dep).get("generation") or 0
    if int(st.get("observedGeneration") or 0) < int(generation):
        return False, "spec change not yet observed"
    if status_count(dep, "updatedReplicas") < want:
        return False, f"{status_count(dep, 'updatedReplicas')}/{want} updated"
    if status_count(dep, "availableReplicas") < want:
        return False, f"{status_count(dep, 'availableReplicas')}/{want} available"
    if status_count(dep, "replicas") != want:
        return False, f"{status_count(dep, 'replicas')} replicas, want {want}"
    if conditions(dep).get("Available", {}).get("status") != "True":
        return False, "condition Available is not True"
    return True, ""


def failure(dep: Obj) -> str | None:
    """Why the Deployment controller gave up (a degraded, not merely progressing, state).
    A LeaderWorkerSet has no progress deadline: never."""
    if is_lws(dep):
        return None
    conds = conditions(dep)
    prog = conds.get("Progressing", {})
    if prog.get("status") == "False" and prog.get("reason") == "ProgressDeadlineExceeded":
        return f"ProgressDeadlineExceeded: {prog.get('message', '')}".rstrip(": ")
    rf = conds.get("ReplicaFailure", {})
    if rf.get("status") == "True":
        return f"ReplicaFailure: {rf.get('reason', '')} {rf.get('message', '')}".strip()
    return None


# ------------------------------------------------------------------------ rollout budget
@dataclass(frozen=True)
class Budget:
    max_surge: int
    max_unavailable: int


def _scaled(value: Any, total: int, round_up: bool) -> int:
    """intstr semantics: an int, or a percentage of ``total`` (surge up, unavailable down)."""
    if value is None:
        value = naming.DEFAULT_ROLLOUT_PERCENT
    if isinstance(value, int):
        return max(0, value)
    text = str(value).strip()
    if text.endswith("%"):
        try:
            pct = float(text[:-1])
        except ValueError:  # unparsable: the default, as for an unset value
            return _scaled(None, total, round_up)
        exact = pct * total / 100
        if not math.isfinite(exact):  # "1e999%", "nan%": no whole number of replicas
            return _scaled(None, total, round_up)
        return max(0, math.ceil(exact) if round_up else math.floor(exact))
    try:
        return max(0, int(text))
    except ValueError:
        return 0


def budget(dep: Obj, desired: int, annotations: dict[str, str] | None = None) -> Budget:
    """Max surge / unavailable of the new generation: a Deployment's rendered strategy; a
    LeaderWorkerSet has none, so the component's rolling-update ``annotations`` (the
    operator's ``resolveRollingUpdateParams`` reads those for every kind)."""
    if is_lws(dep):
        ann = annotations or {}
        ru: Obj = {
            "maxSurge": ann.get(keys.ANN_MAX_SURGE),
            "maxUnavailable": ann.get(keys.ANN_MAX_UNAVAILABLE),
        }
    else:
        ru = ((dep.get("spec") or {}).get("strategy") or {}).get("rollingUpdate") or {}
    surge = _scaled(ru.get("maxSurge"), desired, round_up=True)
    unavailable = _scaled(ru.get("maxUnavailable"), desired, round_up=False)
    if surge == 0 and unavailable == 0:
        surge = 1  # as the operator does: a rollout must be able to move
    return Budget(surge, unavailable)


def is_recreate(dep: Obj, annotations: dict[str, str] | None = None) -> bool:
    if is_lws(dep):
        return (annotations or {}).get(keys.ANN_DEPLOYMENT_STRATEGY) == "Recreate"
    return bool(((dep.get("spec") or {}).get("strategy") or {}).get("type") == "Recreate")
