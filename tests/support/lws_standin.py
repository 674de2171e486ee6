"""A LeaderWorkerSet controller stand-in that makes real pods (no LWS controller runs in the
realistic cluster; its image is not something the test binaries build).

Per set: ``replicas`` groups of ``size`` pods, named as the LWS controller names them
(leader ``<set>-<group>``, workers ``<set>-<group>-<index>``) and labelled with
``leaderworkerset.sigs.k8s.io/name`` and the group index; each pod carries its template's
labels and annotations (so a ``nvidia.com/restartAt`` stamp reaches the pods, as it does
through the LWS's StatefulSets). The scheduler places the pods on the KWOK nodes and KWOK
makes them Ready: readiness is real. A template change (a restart stamp) rolls the groups
as the LWS's default RollingUpdate does (maxUnavailable 1, maxSurge 0): one outdated group
at a time, highest index first, only while every other group is ready. The status is
the LWS controller's: ``readyReplicas`` counts ready groups of any revision,
``updatedReplicas`` those of the current one, and there is no observedGeneration; so right
after a template change, and between two groups of a rolling update, the status reads
ready while groups still run the old template.
"""

from __future__ import annotations

import contextlib
from typing import Any

from dyn_gitops_operator.errors import ConflictError
from dyn_gitops_operator.kube import LWS, Kube

from dyn_gitops import keys

GROUP = "leaderworkerset.sigs.k8s.io/group-index"
WORKER_INDEX = "leaderworkerset.sigs.k8s.io/worker-index"


def _ann(tmpl: dict[str, Any]) -> dict[str, str]:
    return dict((tmpl.get("metadata") or {}).get("annotations") or {})


class LwsStandIn:
    def __init__(self, k: Kube, api: Any, namespace: str, selector: str = "") -> None:
        self.k, self.api, self.ns, self.selector = k, api, namespace, selector

    def _core(self) -> Any:
        from kubernetes import client

        return client.CoreV1Api(self.api)

    def step(self) -> dict[str, tuple[int, int]]:
        """One pass over every set; {set: (spec groups, ready groups)}."""
        out = {}
        for lws in self.k.list(LWS, self.ns, label_selector=self.selector)[0]:
            out[lws["metadata"]["name"]] = self._one(lws)
        return out

    def _one(self, lws: dict[str, Any]) -> tuple[int, int]:
        from kubernetes.client.exceptions import ApiException

        name = lws["metadata"]["name"]
        spec = lws["spec"]
        replicas = int(spec.get("replicas", 1))
        tmpl = spec["leaderWorkerTemplate"]
        size = int(tmpl.get("size", 1))
        worker_t = tmpl["workerTemplate"]
        leader_t = tmpl.get("leaderTemplate") or worker_t
        core = self._core()
        pods = core.list_namespaced_pod(
            self.ns, label_selector=f"{keys.LABEL_LWS_NAME}={name}"
        ).items
        groups: dict[int, list[Any]] = {}
        for p in pods:
            groups.setdefault(int(p.metadata.labels[GROUP]), []).append(p)

        def wanted(leader: bool) -> dict[str, str]:
            return _ann(leader_t if leader else worker_t)

        def current(p: Any) -> bool:
            leader = WORKER_INDEX not in (p.metadata.labels or {})
            ann = p.metadata.annotations or {}
            return ann.get(keys.ANN_RESTART_AT) == wanted(leader).get(keys.ANN_RESTART_AT)

        def ready(g: int) -> bool:
            members = [p for p in groups.get(g, []) if not p.metadata.deletion_timestamp]
            return len(members) == size and all(
                any(c.type == "Ready" and c.status == "True" for c in p.status.conditions or [])
                for p in members
            )

        def delete(ps: list[Any]) -> None:
            for p in ps:
                if not p.metadata.deletion_timestamp:
                    with contextlib.suppress(ApiException):
                        core.delete_namespaced_pod(p.metadata.name, self.ns, grace_period_seconds=0)

        for g in [g for g in groups if g >= replicas]:  # scaled down
            delete(groups[g])
        outdated = sorted(
            (g for g in groups if g < replicas and not all(current(p) for p in groups[g])),
            reverse=True,
        )
        others_ready = all(ready(g) for g in range(replicas) if g not in outdated)
        if outdated and others_ready:
            delete(groups[outdated[0]])  # one group at a time (maxUnavailable 1)
        for g in range(replicas):  # create what is missing, from the current templates
            have = {p.metadata.name for p in groups.get(g, [])}
            for i in range(size):
                pod = f"{name}-{g}" if i == 0 else f"{name}-{g}-{i}"
                if pod not in have:
                    body = self._pod(lws, pod, g, i, leader_t if i == 0 else worker_t)
                    with contextlib.suppress(ApiException):  # the old one still terminating
                        core.create_namespaced_pod(self.ns, body)
        ready_groups = sum(1 for g in range(replicas) if ready(g))
        updated = sum(1 for g in range(replicas) if g in groups and all(map(current, groups[g])))
        status = {
            "replicas": replicas,
            "readyReplicas": ready_groups,
            "updatedReplicas": updated,
            "conditions": [
                {"type": "Available", "status": "True" if ready_groups >= replicas else "False"}
            ],
        }
        if status != lws.get("status"):
            with contextlib.suppress(ConflictError):  # resized meanwhile: next step
                self.k.request("PUT", LWS.path(self.ns, name), None, {**lws, "status": status})
        return replicas, ready_groups

    def _pod(
        self, lws: dict[str, Any], pod: str, group: int, index: int, tmpl: dict[str, Any]
    ) -> dict[str, Any]:
        meta = tmpl.get("metadata") or {}
        labels = {
            **(meta.get("labels") or {}),
            keys.LABEL_LWS_NAME: lws["metadata"]["name"],
            GROUP: str(group),
        }
        if index:
            labels[WORKER_INDEX] = str(index)
        main = tmpl["spec"]["containers"][0]
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": pod,
                "labels": labels,
                "annotations": dict(meta.get("annotations") or {}),
            },
            # no requests: the stand-in's pods fit anywhere (the template's are not needed)
            "spec": {"containers": [{"name": "main", "image": main["image"]}]},
        }
