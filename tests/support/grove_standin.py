"""A Grove stand-in for standalone PodCliques, with real pods (no Grove operator runs in the
realistic cluster: the Go module proxy serves no version of it, docs/grove-standin.md).

Follows Grove v0.1.0-alpha.12-rc1 (commit 19905d53, the version the Dynamo operator pins),
only as far as the OnDelete / RollingRecreate tests need it; each behaviour, its upstream
file and function, and where the stand-in differs are in docs/grove-standin.md:

* PodCliqueSet -> one PodClique ``<pcs>-0-<clique>`` per clique outside a scaling group
  (``testing.grove_children``); ``spec.replicas`` seeded from the template at creation
  only, the rest of the clique spec synced on every change, labelled with the template's
  hash. Scaling groups are left out.
* Pods ``generateName: <podclique>-`` carry the clique's labels, ``grove.io/podclique`` and
  the PodClique's ``grove.io/pod-template-hash`` (a hash of the template's labels,
  annotations and pod spec, and the PodCliqueSet's priority class). The scheduler places
  them, KWOK makes them Ready; a pod created while ``hold`` says so carries the test's
  scheduling gate until released.
* Scale-out creates pods from the current template (whatever the strategy); scale-in
  deletes by Grove's ``DeletionSorter``: unassigned, then Pending < Unknown < Running, then
  not ready, then an older template, then the newest.
* ``RollingRecreate``: old-template pods that are not ready are deleted at once; ready ones
  one at a time, oldest first, only when the last replacement is Ready and the ready pods
  are at least ``minAvailable`` (so a one-replica clique's only pod goes first).
* ``OnDelete``: no pod is deleted on a template change; a deleted pod comes back from the
  current template (scale-out).
* Status from the pods (``replicas``, ``readyReplicas``, ``updatedReplicas``,
  ``scheduleGatedReplicas``, ``scheduledReplicas``, ``updateProgress.podTemplateHash``,
  ``currentPodTemplateHash``, ``observedGeneration``) and the PodCliqueSet's
  ``observedGeneration`` once its cliques are synced.

Grove behaviours modelled (docs/grove-standin.md): ``pcs-children``, ``template-hash``,
``pod-naming``, ``pod-labels``, ``scale-out``, ``scale-in-order``, ``rolling-recreate``,
``min-available``, ``on-delete``, ``pclq-status``, ``pclq-observed-generation``,
``pcs-observed-generation``.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from typing import Any

from dyn_gitops_operator.errors import ConflictError, NotFoundError
from dyn_gitops_operator.kube import Kube
from dyn_gitops_operator.resources import PODCLIQUES, PODCLIQUESETS
from dyn_gitops_operator.testing import GROVE_MANAGER, grove_children

from dyn_gitops import keys
from support.cluster import GATE, is_ready

PODCLIQUE = keys.LABEL_GROVE_PODCLIQUE
TEMPLATE_HASH = keys.LABEL_GROVE_POD_TEMPLATE_HASH
_PHASE = {"Pending": 0, "Unknown": 1, "Running": 2}


def template_hash(clique: dict[str, Any], priority_class_name: str | None) -> str:
    """The clique's pod template hash from Grove's inputs (``ComputePCLQPodTemplateHash``):
    the template's labels, annotations and pod spec, with the PodCliqueSet template's
    ``priorityClassName`` in the pod spec. So a ``restartAt`` annotation rolls pods as in
    Grove. Not Grove's value (FNV of a Go dump): only equality matters."""
    pod_spec = {**(clique["spec"].get("podSpec") or {}), "priorityClassName": priority_class_name}
    body = {
        "labels": clique.get("labels") or {},
        "annotations": clique.get("annotations") or {},
        "podSpec": pod_spec,
    }
    return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()[:10]


class GroveStandIn:
    def __init__(self, k: Kube, api: Any, namespace: str, pcs: str) -> None:
        self.grove = Kube(k.api, k.timeout, field_manager=GROVE_MANAGER)
        self.api, self.ns, self.pcs = api, namespace, pcs
        #: new pods are created held (a scheduling gate) while this is true
        self.hold = False

    def _core(self) -> Any:
        from kubernetes import client

        return client.CoreV1Api(self.api)

    def step(self) -> dict[str, tuple[int, int, int]]:
        """One Grove pass; {podclique: (spec replicas, ready pods, updated pods)}."""
        pcs = self.grove.get(PODCLIQUESETS, self.ns, self.pcs)
        strategy = ((pcs["spec"].get("updateStrategy") or {}).get("type")) or "RollingRecreate"
        cliques = {c["name"]: c for c in pcs["spec"]["template"]["cliques"]}
        out = {}
        for res, child in grove_children(pcs):
            if res is not PODCLIQUES:
                continue
            clique = cliques[child["metadata"]["name"].removeprefix(f"{self.pcs}-0-")]
            want = template_hash(clique, pcs["spec"]["template"].get("priorityClassName"))
            pclq = self._sync(child, want)
            out[pclq["metadata"]["name"]] = self._pods(pclq, clique, strategy)
        status = {"observedGeneration": pcs["metadata"]["generation"]}
        if (pcs.get("status") or {}).get("observedGeneration") != status["observedGeneration"]:
            with contextlib.suppress(ConflictError):
                self._put_status(PODCLIQUESETS, {**pcs, "status": status})
        return out

    def _put_status(self, res: Any, obj: dict[str, Any]) -> None:
        path = res.path(self.ns, obj["metadata"]["name"], "status")
        self.grove.request("PUT", path, [("fieldManager", GROVE_MANAGER)], obj)

    def _sync(self, child: dict[str, Any], want: str) -> dict[str, Any]:
        """Create the PodClique, or carry the template's spec into it (not its replicas),
        labelled with the template's hash (``grove.io/pod-template-hash``) as Grove does."""
        name = child["metadata"]["name"]
        child["metadata"]["labels"] = {**child["metadata"]["labels"], TEMPLATE_HASH: want}
        try:
            live = self.grove.get(PODCLIQUES, self.ns, name)
        except NotFoundError:
            return self.grove.create(PODCLIQUES, child)
        spec = {**child["spec"], "replicas": live["spec"].get("replicas")}
        labels = child["metadata"]["labels"]
        if spec != live["spec"] or labels != live["metadata"].get("labels"):
            meta = {**live["metadata"], "labels": labels}
            live = self.grove.update(PODCLIQUES, {**live, "metadata": meta, "spec": spec})
        return live

    def _pods(
        self, pclq: dict[str, Any], clique: dict[str, Any], strategy: str
    ) -> tuple[int, int, int]:
        from kubernetes.client.exceptions import ApiException

        core = self._core()
        name = pclq["metadata"]["name"]
        labels = dict(clique.get("labels") or {})
        want = pclq["metadata"]["labels"][TEMPLATE_HASH]  # what ``_sync`` labelled it with
        replicas = int(pclq["spec"].get("replicas") or 0)
        pods = [
            p
            for p in core.list_namespaced_pod(self.ns, label_selector=f"{PODCLIQUE}={name}").items
            if not p.metadata.deletion_timestamp
        ]

        def old(p: Any) -> bool:
            return (p.metadata.labels or {}).get(TEMPLATE_HASH) != want

        def delete(p: Any) -> None:
            with contextlib.suppress(ApiException):
                core.delete_namespaced_pod(p.metadata.name, self.ns, grace_period_seconds=0)
            pods.remove(p)

        if strategy == "RollingRecreate":
            for p in [p for p in pods if old(p) and not is_ready(p)]:
                delete(p)
            olds = sorted((p for p in pods if old(p)), key=lambda p: p.metadata.creation_timestamp)
            replacing = any(not old(p) and not is_ready(p) for p in pods)
            min_available = int(clique["spec"].get("minAvailable") or replicas)
            if olds and not replacing and sum(map(is_ready, pods)) >= min_available:
                delete(olds[0])
        if len(pods) > replicas:  # scale-in: Grove's DeletionSorter
            for p in sorted(pods, key=lambda p: self._deletion_order(p, want))[
                : len(pods) - replicas
            ]:
                delete(p)
        for _ in range(replicas - len(pods)):  # scale-out (and replacements)
            core.create_namespaced_pod(self.ns, self._pod(name, clique, labels, want))
            pods = [
                p
                for p in core.list_namespaced_pod(
                    self.ns, label_selector=f"{PODCLIQUE}={name}"
                ).items
                if not p.metadata.deletion_timestamp
            ]
        ready = sum(map(is_ready, pods))
        updated = sum(1 for p in pods if not old(p))
        st: dict[str, Any] = {
            "observedGeneration": pclq["metadata"]["generation"],
            "replicas": len(pods),
            "readyReplicas": ready,
            "updatedReplicas": updated,
            "scheduleGatedReplicas": sum(1 for p in pods if p.spec.scheduling_gates),
            "scheduledReplicas": sum(1 for p in pods if p.spec.node_name),
            "updateProgress": {"podTemplateHash": want},
        }
        previous = (pclq.get("status") or {}).get("currentPodTemplateHash")
        if updated == len(pods) or previous:  # ``mutateCurrentHashes``: once all updated
            st["currentPodTemplateHash"] = want if updated == len(pods) else previous
        if st != pclq.get("status"):
            with contextlib.suppress(ConflictError):  # scaled meanwhile: next step
                self._put_status(PODCLIQUES, {**pclq, "status": st})
        return replicas, ready, updated

    @staticmethod
    def _deletion_order(p: Any, want: str) -> tuple[int, int, int, int, float]:
        created = p.metadata.creation_timestamp
        return (
            1 if p.spec.node_name else 0,
            _PHASE.get(p.status.phase or "Pending", 0),
            1 if is_ready(p) else 0,
            1 if (p.metadata.labels or {}).get(TEMPLATE_HASH) == want else 0,
            -(created.timestamp() if created else float("inf")),
        )

    def _pod(
        self, pclq: str, clique: dict[str, Any], labels: dict[str, str], want: str
    ) -> dict[str, Any]:
        main = clique["spec"]["podSpec"]["containers"][0]
        spec: dict[str, Any] = {"containers": [{"name": "main", "image": main["image"]}]}
        if self.hold:
            spec["schedulingGates"] = [{"name": GATE}]
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "generateName": f"{pclq}-",
                "labels": {**labels, PODCLIQUE: pclq, TEMPLATE_HASH: want},
            },
            # no requests: the stand-in's pods fit anywhere (the template's are not needed)
            "spec": spec,
        }
