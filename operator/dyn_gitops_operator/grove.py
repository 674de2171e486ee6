"""The Grove path: a DGD rendered as one PodCliqueSet (PCS), which Grove expands.

The renderer stamps ``dyn-gitops.io/podcliqueset: <pcs>`` on such a DGD. Grove creates, for
PCS replica 0, a PodClique ``<pcs>-0-<lower(service)>`` per single-node service and a
PodCliqueScalingGroup (PCSG) of the same name per multinode service (``dynamo-objects.md``
7.4). Neither carries our labels for sure, so they are found by namespace and name, and a
DGD index of those names maps their events back to the graph.

Readiness and the per-service status follow the Dynamo operator's
``CheckPodCliqueReady`` / ``CheckPCSGReady`` (``internal/dynamo/grove.go``): observed
generation caught up, then desired (``spec.replicas``) equal to ready (PodClique) or
available (PCSG) replicas, to updated replicas and to ``status.replicas``; desired 0 is
ready. The controller scales the PodClique / PCSG through ``/scale``, as the operator does.
The PCS is Git's: the controller writes into it only the ``nvidia.com/restartAt``
annotations of the cliques it restarts (server-side apply, see ``restart_apply``), and only
when the CRD declares ``cliques`` a map list keyed by ``name`` (``cliques_map_list``).
"""

from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass, field
from typing import Any

from dyn_gitops import keys
from dyn_gitops_operator import FIELD_MANAGER
from dyn_gitops_operator import objects as o
from dyn_gitops_operator.dgdview import component_names
from dyn_gitops_operator.resources import PCSGS, PODCLIQUES, PODCLIQUESETS, Resource

Obj = dict[str, Any]

#: the PCS replica whose children carry the services (the renderer emits replicas: 1)
PCS_REPLICA = 0


def pcs_name(dgd: Obj | None) -> str | None:
    """The PodCliqueSet name stamped by the renderer (None: not rendered on Grove)."""
    return o.annotations_of(dgd or {}).get(keys.ANN_PODCLIQUESET) or None


def component_name(pcs: str, service: str) -> str:
    """Grove's name for a service's PodClique or PCSG: ``<pcs>-<replica>-<clique>``."""
    return f"{pcs}-{PCS_REPLICA}-{service.lower()}"


def child_keys(dgd: Obj) -> list[str]:
    """``namespace/name`` of every PodClique / PCSG the DGD's components map to (an index)."""
    pcs = pcs_name(dgd)
    if pcs is None:
        return []
    ns = o.meta(dgd).get("namespace") or ""
    return [f"{ns}/{component_name(pcs, s)}" for s in component_names(dgd)]


def trim(raw: Obj) -> Obj:
    """Only what readiness and scaling read (PodCliques carry a whole pod spec)."""
    m = o.meta(raw)
    st = raw.get("status") or {}
    meta = {
        k: m.get(k)
        for k in (
            "name",
            "namespace",
            "uid",
            "resourceVersion",
            "generation",
            "creationTimestamp",
            "deletionTimestamp",
        )
    }
    template_hash = (m.get("labels") or {}).get(keys.LABEL_GROVE_POD_TEMPLATE_HASH)
    if template_hash:
        meta["labels"] = {keys.LABEL_GROVE_POD_TEMPLATE_HASH: template_hash}
    return {
        "metadata": meta,
        "spec": {"replicas": (raw.get("spec") or {}).get("replicas")},
        "status": {
            k: st[k]
            for k in (
                "observedGeneration",
                "replicas",
                "readyReplicas",
                "availableReplicas",
                "updatedReplicas",
                "scheduledReplicas",
                "scheduleGatedReplicas",
                "conditions",
                "currentPodTemplateHash",
                "updateProgress",
            )
            if k in st
        },
    }


def desired(obj: Obj) -> int:
    """``spec.replicas`` (an int32 in Grove's types: absent reads as 0, as in Go)."""
    return int((obj.get("spec") or {}).get("replicas") or 0)


@dataclass(frozen=True)
class Component:
    """The Grove object standing for one service (``obj`` None: not found)."""

    resource: Resource
    name: str
    obj: Obj | None

    @property
    def is_pcsg(self) -> bool:
        return self.resource is PCSGS

    @property
    def prefix(self) -> str:
        """How the operator names it in a not-ready message."""
        return f"{'pcsg' if self.is_pcsg else 'podclique'}/{self.name}"


@dataclass
class GroveChildren:
    """The graph's PodCliqueSet name and the Grove objects named after its services."""

    pcs: str
    podcliques: dict[str, Obj] = field(default_factory=dict)
    pcsgs: dict[str, Obj] = field(default_factory=dict)

    def component(self, service: str, multinode: bool) -> Component:
        name = component_name(self.pcs, service)
        if multinode:
            return Component(PCSGS, name, self.pcsgs.get(name))
        if name not in self.podcliques and name in self.pcsgs:
            # a single-node service in its own scaling group (v1beta1
            # experimental.grove.forceScalingGroup, or inter-pod GMS)
            return Component(PCSGS, name, self.pcsgs[name])
        return Component(PODCLIQUES, name, self.podcliques.get(name))


#: DGD Ready reasons (``DGDReadyReason*``, api/v1beta1/dynamographdeployment_types.go @
#: 2a6da14c8, fine-grained since #11057 / #11131): what a not-ready component implies
ALL_READY = "all_resources_are_ready"
INSUFFICIENT_CAPACITY = "insufficient_capacity"
PODS_NOT_READY = "pods_not_ready"
UPDATING = "updating"
MIXED = "mixed_not_ready_reasons"
NOT_READY = "some_resources_are_not_ready"
#: Grove's scheduling signals (grove operator/api common/constants, v0.1.0-alpha.12-rc1)
_PODCLIQUE_SCHEDULED = "PodCliqueScheduled"
_INSUFFICIENT_SCHEDULED_PODS = "InsufficientScheduledPods"
_MIN_AVAILABLE_BREACHED = "MinAvailableBreached"
_INSUFFICIENT_SCHEDULED_PCSG = "InsufficientScheduledPodCliqueScalingGroupReplicas"


@dataclass(frozen=True)
class Readiness:
    ready: bool
    why: str = ""
    #: the DGD Ready reason this component implies when not ready ("" when ready)
    reason: str = ""


def _condition(st: Obj, kind: str) -> Obj:
    return next((c for c in st.get("conditions") or [] if c.get("type") == kind), {})


def readiness(c: Component) -> tuple[bool, str]:
    """(ready, the operator's message): see :func:`classify`."""
    r = classify(c)
    return r.ready, r.why


def classify(c: Component) -> Readiness:
    """``observePodCliqueReadiness`` / ``observePCSGReadiness`` (internal/dynamo/grove.go
    @ 2a6da14c8): the operator's message and the Ready reason it classifies."""
    obj = c.obj
    if obj is None:
        return Readiness(False, "resource not found", NOT_READY)
    st = obj.get("status") or {}
    observed = st.get("observedGeneration")
    if observed is None:
        return Readiness(False, "observedGeneration is nil", NOT_READY)
    generation = int(o.meta(obj).get("generation") or 0)
    if int(observed) < generation:
        why = f"spec not yet processed: generation={generation}, observedGeneration={int(observed)}"
        return Readiness(False, why, NOT_READY)
    want = desired(obj)
    if want == 0:
        return Readiness(True)
    field, word = ("availableReplicas", "available") if c.is_pcsg else ("readyReplicas", "ready")
    counted = int(st.get(field) or 0)
    updated = int(st.get("updatedReplicas") or 0)
    replicas = int(st.get("replicas") or 0)
    scheduled = int(st.get("scheduledReplicas") or 0)
    if replicas == want and updated == want and counted == want:
        return Readiness(True)  # checked first: Grove may leave scheduledReplicas unset
    if c.is_pcsg:
        cond = _condition(st, _MIN_AVAILABLE_BREACHED)
        # Grove alpha.8 polarity: the scheduling shortfall comes with status False
        if cond.get("status") == "False" and cond.get("reason") == _INSUFFICIENT_SCHEDULED_PCSG:
            why = f"min-available breached ({cond['reason']}): {cond.get('message', '')}"
            return Readiness(False, why, INSUFFICIENT_CAPACITY)
    else:
        gated = int(st.get("scheduleGatedReplicas") or 0)
        if gated > 0:
            return Readiness(False, f"schedule-gated replicas: {gated}", INSUFFICIENT_CAPACITY)
        cond = _condition(st, _PODCLIQUE_SCHEDULED)
        if cond.get("status") == "False" and cond.get("reason") == _INSUFFICIENT_SCHEDULED_PODS:
            why = f"scheduling condition {cond['reason']}: {cond.get('message', '')}"
            return Readiness(False, why, INSUFFICIENT_CAPACITY)
    if 0 < scheduled < want:
        why = f"insufficient scheduled replicas: scheduled={scheduled}/{want}"
        return Readiness(False, why, INSUFFICIENT_CAPACITY)
    if want != updated:
        return Readiness(False, f"desired={want}, updated={updated}", UPDATING)
    if replicas != want:
        why = f"performing rolling update: desired={want}, replicas={replicas}"
        return Readiness(False, why, UPDATING)
    return Readiness(False, f"scheduled but {word}={counted}/{want}", PODS_NOT_READY)


def aggregate(reasons: list[str]) -> str:
    """One reason for the not-ready components: theirs when they agree, else mixed
    (``evaluateGroveComponents``)."""
    distinct = set(reasons)
    if not distinct:
        return ALL_READY
    return distinct.pop() if len(distinct) == 1 else MIXED


def component_status(c: Component) -> Obj:
    """The DGD ``status.components`` entry (``ComponentReplicaStatus``): for a missing
    object its kind and expected name only; ``scheduledReplicas`` once its generation is
    observed; ready replicas for a PodClique, available ones for a PCSG."""
    kind = c.resource.kind
    out: Obj = {"componentKind": kind, "componentNames": [c.name]}
    if c.obj is None:
        out.update(replicas=0, updatedReplicas=0)
        return out
    st = c.obj.get("status") or {}
    out["replicas"] = int(st.get("replicas") or 0)
    out["updatedReplicas"] = int(st.get("updatedReplicas") or 0)
    if c.is_pcsg:
        out["availableReplicas"] = int(st.get("availableReplicas") or 0)
    else:
        out["readyReplicas"] = int(st.get("readyReplicas") or 0)
    observed = st.get("observedGeneration")
    if observed is not None and int(observed) >= int(o.meta(c.obj).get("generation") or 0):
        out["scheduledReplicas"] = int(st.get("scheduledReplicas") or 0)
    return out


# ------------------------------------------------------------------ OnDelete: surge
ON_DELETE = "OnDelete"


def on_delete(dgd: Obj | None) -> bool:
    """The graph's PodCliqueSet was rendered with ``spec.updateStrategy.type: OnDelete``:
    Grove then replaces no pod on a template change, and the controller drives the
    replacement of standalone PodCliques (``surge``). Read from the renderer's stamp
    ``dyn-gitops.io/grove-update-strategy`` (what the PodCliqueSet says, whether the DGD's
    ``nvidia.com/grove-update-strategy`` or the setting grove-safe-rollout chose it); a DGD
    rendered before that stamp existed: from the annotation the renderer copied."""
    ann = o.annotations_of(dgd or {})
    rendered = ann.get(keys.ANN_GROVE_RENDERED_STRATEGY)
    if rendered is not None:
        return rendered == ON_DELETE
    return ann.get(keys.ANN_GROVE_UPDATE_STRATEGY) == ON_DELETE


def expected_hash(obj: Obj) -> str | None:
    """The pod template hash the PodClique's pods converge to: the PodClique's own
    ``grove.io/pod-template-hash`` label, which Grove's PodCliqueSet controller sets from the
    current template (the one its scale-in falls back to, ``getExpectedPodTemplateHash``,
    and never older than ``status.updateProgress.podTemplateHash``, which it prefers only
    while that progress belongs to the current PodCliqueSet generation); else that
    progress's hash, else ``status.currentPodTemplateHash`` (None: Grove has not said yet)."""
    label = o.labels(obj).get(keys.LABEL_GROVE_POD_TEMPLATE_HASH)
    st = obj.get("status") or {}
    progress = (st.get("updateProgress") or {}).get("podTemplateHash")
    return str(label or progress or st.get("currentPodTemplateHash") or "") or None


def observed(obj: Obj) -> bool:
    """Grove has processed the object's current generation (a /scale write included)."""
    seen = (obj.get("status") or {}).get("observedGeneration")
    return seen is not None and int(seen) >= int(o.meta(obj).get("generation") or 0)


@dataclass(frozen=True)
class CliquePods:
    """A PodClique's live (not terminating) pods by template: the expected one or older."""

    old: int
    new: int
    new_ready: int

    @classmethod
    def of(cls, pods: list[Obj], want_hash: str) -> CliquePods:
        live = [p for p in pods if not o.meta(p).get("deletionTimestamp")]
        new = [p for p in live if o.labels(p).get(keys.LABEL_GROVE_POD_TEMPLATE_HASH) == want_hash]
        return cls(len(live) - len(new), len(new), sum(1 for p in new if o.pod_serving(p)))


def surge_target(base: int, spec: int, pods: CliquePods) -> int:
    """``spec.replicas`` for one step of the controller-driven replacement of an OnDelete
    PodClique whose own count is ``base`` (adapter, else the DGD's replicas). One pod at a
    time: surge to ``base + 1`` (Grove creates the extra pod from the new template), wait
    until every new-template pod is Ready, then back to ``base``: Grove's scale-in deletes
    a not-ready pod first, then one of an older template (``DeletionSorter``, GREP-291), so
    with every new pod ready the pod that goes is an old one and a ready new one stays.
    While a scale-in is not carried out yet (more live pods than ``base``) nothing surges
    again. No old pod left: ``base``."""
    if base < 1 or pods.old == 0:
        return base
    live = pods.old + pods.new
    if spec <= base:
        return base if live > base else base + 1  # Grove still deleting: wait
    if live == base + 1 and pods.new >= 1 and pods.new_ready == pods.new:
        return base  # the surged pod serves: an old one may go
    return base + 1


def scale_patch(c: Component, replicas: int) -> Obj:
    """The /scale merge patch, conditional on the resourceVersion the decision read."""
    obj = c.obj or {}
    return {
        "metadata": {
            "name": c.name,
            "namespace": o.meta(obj).get("namespace"),
            "resourceVersion": o.meta(obj).get("resourceVersion"),
        },
        "spec": {"replicas": max(0, int(replicas))},
    }


# ------------------------------------------------------------------ restarts (the PCS)
def _cliques_fields(entry: Obj) -> Obj | None:
    """``f:spec.f:template.f:cliques`` of one managedFields entry (None: not there)."""
    node: Any = entry.get("fieldsV1") or {}
    for step in ("f:spec", "f:template", "f:cliques"):
        if not isinstance(node, dict) or step not in node:
            return None
        node = node[step]
    return node if isinstance(node, dict) else None


def cliques_map_list(pcs: Obj) -> bool:
    """The CRD merges ``spec.template.cliques`` entry by entry (``listType=map``, key
    ``name``), read from the live object's managedFields without any CRD access: another
    manager's fieldsV1 holds ``k:{"name":...}`` keys for a map list, ``{}`` for an atomic
    list. Undecidable (no other manager owns the list) counts as atomic: never risk
    replacing a list we do not own."""
    seen_map = False
    for entry in o.meta(pcs).get("managedFields") or []:
        if entry.get("manager") == FIELD_MANAGER:
            continue
        node = _cliques_fields(entry)
        if node is None:
            continue
        if not node or not any(k.startswith("k:") for k in node):
            return False
        seen_map = True
    return seen_map


def _clique_key(key: str) -> str | None:
    if not key.startswith("k:"):
        return None
    with contextlib.suppress(ValueError, AttributeError, KeyError, TypeError):
        return str(json.loads(key[2:])["name"])
    return None


def owned_restart_cliques(pcs: Obj) -> set[str]:
    """Cliques whose ``nvidia.com/restartAt`` annotation our field manager applied."""
    out: set[str] = set()
    for entry in o.meta(pcs).get("managedFields") or []:
        if entry.get("manager") != FIELD_MANAGER or entry.get("operation") != "Apply":
            continue
        for key, sub in (_cliques_fields(entry) or {}).items():
            name = _clique_key(key)
            ann = (sub or {}).get("f:annotations") or {} if isinstance(sub, dict) else {}
            if name is not None and f"f:{keys.ANN_RESTART_AT}" in ann:
                out.add(name)
    return out


def restart_values(pcs: Obj) -> dict[str, str | None]:
    """clique name -> its live ``nvidia.com/restartAt`` (None: not set)."""
    cliques = ((pcs.get("spec") or {}).get("template") or {}).get("cliques") or []
    return {
        str(c.get("name")): (c.get("annotations") or {}).get(keys.ANN_RESTART_AT)
        for c in cliques
        if isinstance(c, dict) and c.get("name")
    }


def pcs_observed(pcs: Obj) -> bool:
    """Grove has processed the PCS's current generation."""
    observed = (pcs.get("status") or {}).get("observedGeneration")
    generation = int(o.meta(pcs).get("generation") or 0)
    return observed is not None and int(observed) >= generation


def restart_apply(pcs: Obj, values: dict[str, str]) -> Obj:
    """The server-side apply body: ONLY the restartAt annotation of each clique (entries
    identified by ``name``), conditional on the resourceVersion read. Every clique the
    controller keeps a value on must be in it (an apply drops the fields it leaves out)."""
    meta = o.meta(pcs)
    body: Obj = {
        "apiVersion": PODCLIQUESETS.api_version,
        "kind": PODCLIQUESETS.kind,
        "metadata": {
            "name": meta.get("name"),
            "namespace": meta.get("namespace"),
            "resourceVersion": meta.get("resourceVersion"),
        },
    }
    if values:  # nothing to keep: no spec at all, so every field we owned is released
        body["spec"] = {
            "template": {
                "cliques": [
                    {"name": name, "annotations": {keys.ANN_RESTART_AT: value}}
                    for name, value in sorted(values.items())
                ]
            }
        }
    return body


__all__ = [
    "ALL_READY",
    "INSUFFICIENT_CAPACITY",
    "MIXED",
    "NOT_READY",
    "ON_DELETE",
    "PODS_NOT_READY",
    "UPDATING",
    "CliquePods",
    "Component",
    "GroveChildren",
    "Readiness",
    "aggregate",
    "child_keys",
    "classify",
    "cliques_map_list",
    "component_name",
    "component_status",
    "desired",
    "expected_hash",
    "observed",
    "on_delete",
    "owned_restart_cliques",
    "pcs_name",
    "pcs_observed",
    "readiness",
    "restart_apply",
    "restart_values",
    "scale_patch",
    "surge_target",
    "trim",
]
