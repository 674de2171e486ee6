"""The migration from the Dynamo operator to dyn-gitops (docs/migration.md) on the realistic
cluster, for ``test_adopt_e2e.py`` and the real Argo CD and Flux modules: one copy of the live
state the operator leaves and of the documented order around the GitOps tool's apply.

The live state is what the operator created for an upstream example (its own output,
``conformance/operator-output``, its reconcilers at 2a6da14c8), created with its field
manager and owner references (``support/adoption.py`` cites the upstream code), its pods
Ready; the operator itself is not running (migration step 1). :func:`migrate` then runs
steps 3-7 (``adopt --check``, the caller's apply, the hand-over, the graph reported, the
DCDs deleted) under one pod watch and checks nothing restarted, was deleted or replaced.

The operator's output is for namespace ``default`` (its labels and env name it), so every
migration works there, each test on its own graph (example), and :func:`cleanup` deletes
what it created.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import yaml
from dyn_gitops_operator.errors import ConflictError, NotFoundError
from dyn_gitops_operator.kube import DEPLOYMENTS, DGDS, Kube
from dyn_gitops_operator.resources import SERVICES, Resource
from dyn_gitops_operator.testing import as_served, wait_for

from dyn_gitops import keys
from support.adoption import (
    AS_OPERATOR,
    DCD_OWNED,
    EXAMPLES,
    OPERATOR_MANAGER,
    USER_MANAGER,
    operator_output,
    owner_ref,
    stand_in_dcd,
)
from support.cli import run_cli
from support.parity import SETTINGS as PARITY
from support.podwatch import ReadyPods
from support.rendering import render

NS = "default"
#: the field managers of Argo CD's and Flux's server-side applies
ARGOCD, FLUX = "argocd-controller", "kustomize-controller"
SLOW = 180  # seconds a wait may take on a loaded machine; each ends when its state is seen
DCDS = Resource("nvidia.com", "v1beta1", "dynamocomponentdeployments", "DynamoComponentDeployment")
RESOURCES: dict[str, Resource] = {
    "ServiceAccount": Resource("", "v1", "serviceaccounts", "ServiceAccount"),
    "Role": Resource("rbac.authorization.k8s.io", "v1", "roles", "Role"),
    "RoleBinding": Resource("rbac.authorization.k8s.io", "v1", "rolebindings", "RoleBinding"),
    "Service": SERVICES,
    "Deployment": DEPLOYMENTS,
    "DynamoComponentDeployment": DCDS,
    "DynamoGraphDeployment": DGDS,
}
#: over the operator's configuration (the parity settings), dyn-gitops' defaults: the DGD is
#: applied from Git, the companion controller manages the workers' replicas
SETTINGS = {"emit_source": True, "managed_replicas": True}
#: the order the objects are created in: a pod's ServiceAccount before its Deployment
ORDER = ("ServiceAccount", "Role", "RoleBinding", "Service", "Deployment")

AGG = "examples__backends__vllm__deploy__agg.yaml"
SGLANG = "examples__backends__sglang__deploy__agg.yaml"
MOCKER = "examples__backends__mocker__deploy__agg.yaml"
TRTLLM = "examples__backends__trtllm__deploy__agg.yaml"


def settings_file() -> str:
    """``dyn-gitops.yaml`` for a GitOps tool's directory: the operator's configuration
    (namespace ``default`` included) with :data:`SETTINGS` over it."""
    values: dict[str, Any] = dict(PARITY)
    values.update({k.replace("_", "-"): v for k, v in SETTINGS.items()})
    return yaml.safe_dump(values, sort_keys=False)


def rendered(example: str) -> list[dict[str, Any]]:
    """The render of ``example`` with the operator's configuration, the DGD included."""
    settings: dict[str, Any] = {k.replace("-", "_"): v for k, v in PARITY.items()}
    settings.update(SETTINGS)
    return render(EXAMPLES / example, **settings)


def graph_of(example: str) -> str:
    return str(next(o["metadata"]["name"] for o in rendered(example) if o["kind"] == DGDS.kind))


def selector(graph: str) -> str:
    return f"{keys.LABEL_GRAPH_NAME}={graph}"


def as_operator_left_it(k: Kube, example: str) -> list[dict[str, Any]]:
    """Create the DGD (as the user applied it), the operator's DCDs and its output, with the
    operator's field manager and owner references; return the Deployments as created."""
    user = Kube(k.api, k.timeout, field_manager=USER_MANAGER)
    operator = Kube(k.api, k.timeout, field_manager=OPERATOR_MANAGER)
    dgd = next(as_served(o) for o in rendered(example) if o["kind"] == DGDS.kind)
    ann = dgd["metadata"].get("annotations") or {}
    dgd["metadata"]["annotations"] = {
        a: v for a, v in ann.items() if not a.startswith("dyn-gitops.io/")
    }
    dgd = user.create(DGDS, dgd)
    objs = sorted(operator_output(example), key=lambda o: ORDER.index(o["kind"]))
    dcds = {
        o["metadata"]["name"]: operator.create(DCDS, stand_in_dcd(o, dgd))
        for o in objs
        if o["kind"] == "Deployment"
    }
    created = []
    for obj in objs:
        owner = dcds[obj["metadata"]["name"]] if obj["kind"] in DCD_OWNED else dgd
        obj["metadata"]["ownerReferences"] = [owner_ref(owner)]
        created.append(operator.create(RESOURCES[obj["kind"]], obj))
    return [o for o in created if o["kind"] == "Deployment"]


def serving(api: Any, graph: str, pods: int) -> None:
    from kubernetes import client

    core = client.CoreV1Api(api)

    def found() -> list[Any]:
        return list(core.list_namespaced_pod(NS, label_selector=selector(graph)).items)

    def ready() -> bool:
        return (
            sum(
                any(c.type == "Ready" and c.status == "True" for c in (p.status.conditions or []))
                for p in found()
                if p.status
            )
            == pods
        )

    def why() -> str:
        apps = client.AppsV1Api(api)
        deps: list[Any] = apps.list_namespaced_deployment(NS, label_selector=selector(graph)).items
        return (
            f"{pods} pods of {graph} Ready; pods: "
            f"{[(p.metadata.name, p.status.phase, p.status.conditions) for p in found()]}; "
            f"deployments: {[(d.metadata.name, d.status.conditions) for d in deps]}"
        )

    wait_for(ready, SLOW, why)


def live_objects(k: Kube) -> list[dict[str, Any]]:
    """``kubectl get <kinds> -o yaml`` of the namespace, as one List's items."""
    out = []
    for kind, res in RESOURCES.items():
        for item in k.list(res, NS)[0]:
            out.append({"apiVersion": res.api_version, "kind": kind, **item})
    return out


def adopt_check(k: Kube, tmp_path: Path, example: str, applier: str) -> dict[str, Any]:
    live = tmp_path / "live.yaml"
    live.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": live_objects(k)}))
    res = run_cli(
        "adopt",
        "--check",
        "--live",
        str(live),
        str(EXAMPLES / example),
        *AS_OPERATOR,
        "--emit-source",
        "--managed-replicas",
        "--field-manager",
        applier,
        "-o",
        "json",
    )
    data = json.loads(res.stdout) if res.stdout else {}
    assert res.code in (0, 5), res.stderr
    return {"code": res.code, **data}


def gitops_apply(k: Kube, example: str, applier: str) -> None:
    """A stand-in for Argo CD (``ServerSideApply=true``) or Flux's kustomize-controller: a
    server-side apply of every rendered object with its field manager, conflicts forced."""
    gitops = Kube(k.api, k.timeout, field_manager=applier)
    for obj in rendered(example):
        gitops.apply(RESOURCES[obj["kind"]], as_served(obj), force=True)


def hand_over(k: Kube, obj: dict[str, Any]) -> None:
    """Migration step 5: drop the owner references to the operator's DCDs and the operator's
    managedFields entry, in one merge patch conditional on the resourceVersion read; on a
    conflict (kube-controller-manager wrote the status meanwhile) read and patch again."""
    res = RESOURCES[obj["kind"]]
    for _ in range(20):
        meta = obj["metadata"]
        refs = [r for r in meta.get("ownerReferences") or [] if r.get("kind") != DCDS.kind]
        fields = [
            e for e in meta.get("managedFields") or [] if e.get("manager") != OPERATOR_MANAGER
        ]
        body = {
            "metadata": {
                "resourceVersion": meta["resourceVersion"],
                "ownerReferences": refs or None,
                "managedFields": fields,
            }
        }
        try:
            k.request(
                "PATCH",
                res.path(NS, meta["name"]),
                [("fieldManager", "migration")],
                body,
                "application/merge-patch+json",
            )
            return
        except ConflictError:
            obj = k.get(res, NS, meta["name"])
    raise AssertionError(f"{obj['kind']}/{obj['metadata']['name']}: 20 conflicts in a row")


def hand_over_graph(k: Kube, graph: str) -> None:
    """Step 5 on every object of ``graph``."""
    for obj in live_objects(k):
        if handed_over(obj, graph):
            hand_over(k, obj)


def delete_dcds(k: Kube, graph: str) -> None:
    """Delete the operator's DCDs in the foreground: each goes only after the garbage
    collector has dealt with what it still owns, so its absence means the collector is
    done (no wait for something not to happen)."""
    body = {"apiVersion": "v1", "kind": "DeleteOptions", "propagationPolicy": "Foreground"}
    for dcd in k.list(DCDS, NS, label_selector=selector(graph))[0]:
        k.request("DELETE", DCDS.path(NS, dcd["metadata"]["name"]), None, body)
    wait_for(
        lambda: not k.list(DCDS, NS, label_selector=selector(graph))[0],
        SLOW,
        "the DCDs deleted",
    )


@contextlib.contextmanager
def cleanup(k: Kube, example: str) -> Iterator[str]:
    """The graph of ``example``; afterwards, delete what the test created (``default``
    outlives the test): the operator's output by name (some names, such as the planner's
    ServiceAccount, are the same in every example), the DCDs and the DGD. A GitOps tool's
    own objects go first (the caller's inner ``with``), so none re-creates what this deletes."""
    graph = graph_of(example)
    try:
        yield graph
    finally:
        made = [(RESOURCES[o["kind"]], o["metadata"]["name"]) for o in operator_output(example)]
        made += [
            (DCDS, d["metadata"]["name"])
            for d in k.list(DCDS, NS, label_selector=selector(graph))[0]
        ]
        for res, name in [*made, (DGDS, graph)]:
            with contextlib.suppress(NotFoundError):
                k.request("DELETE", res.path(NS, name))


def handed_over(obj: dict[str, Any], graph: str) -> bool:
    """An object the operator wrote for ``graph``: its label, or owned by the graph's DGD or
    one of its DCDs."""
    meta = obj["metadata"]
    if (meta.get("labels") or {}).get(keys.LABEL_GRAPH_NAME) == graph:
        return True
    return any(
        r["name"] == graph or r["name"].startswith(graph + "-")
        for r in meta.get("ownerReferences") or []
    )


def operator_traces(report: dict[str, Any]) -> list[dict[str, Any]]:
    """The handover findings about the operator: a reference to a DCD, its field manager."""
    return [
        f
        for f in report["findings"]
        if f["effect"] == "handover"
        and (
            DCDS.kind in f["message"]
            or OPERATOR_MANAGER
            in f["message"].removeprefix("fields managed by ").split(":")[0].split(", ")
        )
    ]


def restarts(api: Any, graph: str) -> int:
    """Container restarts of the graph's pods."""
    from kubernetes import client

    found = client.CoreV1Api(api).list_namespaced_pod(NS, label_selector=selector(graph)).items
    return sum(
        c.restart_count for p in found if p.status for c in p.status.container_statuses or []
    )


def replica_sets(api: Any, graph: str) -> dict[str, str]:
    from kubernetes import client

    items = client.AppsV1Api(api).list_namespaced_replica_set(NS, label_selector=selector(graph))
    return {str(rs.metadata.name): str(rs.metadata.uid) for rs in items.items if rs.metadata}


def migrate(
    k: Kube, api: Any, tmp_path: Path, example: str, applier: str, apply: Callable[[], None]
) -> None:
    """The documented order (docs/migration.md, steps 3-7) on the operator's live output of
    ``example``, ``apply`` being step 4 (the GitOps tool's apply, returning once applied),
    with the companion controller already running (step 2). One pod watch over all of it:
    no pod deleted or added; then no container restarted, the same ReplicaSets (no new
    template hash) and workload uids, no reference to a DCD or ``manager`` field left, each
    pod template owned by ``applier`` alone. The caller holds :func:`cleanup`."""
    graph = graph_of(example)
    workloads = as_operator_left_it(k, example)
    serving(api, graph, len(workloads))
    uids = {d["metadata"]["name"]: d["metadata"]["uid"] for d in workloads}
    sets = replica_sets(api, graph)
    with ReadyPods(api, NS, selector(graph)) as watch:
        first = watch.present()
        report = adopt_check(k, tmp_path, example, applier)
        assert report["code"] == 0 and not report["disruptive"], report
        assert {f"Deployment/{n}" for n in uids} <= {
            f"{f['kind']}/{f['name']}"
            for f in report["findings"]
            if f["effect"] == "handover" and DCDS.kind in f["message"]
        }
        apply()
        hand_over_graph(k, graph)
        wait_for(
            lambda: k.get(DGDS, NS, graph).get("status", {}).get("state") == "successful",
            SLOW,
            "the companion controller reports the graph successful",
        )
        delete_dcds(k, graph)
        after = adopt_check(k, tmp_path, example, applier)
        watch.check_alive()
        assert watch.deleted_while_serving == [], watch.history
        assert [e for e in watch.history if e[0] in ("ADDED", "DELETED")] == [], watch.history
        assert watch.present() == first and watch.count() == len(uids), watch.history
    assert after["code"] == 0 and operator_traces(after) == [], after
    assert replica_sets(api, graph) == sets  # no new template hash
    assert restarts(api, graph) == 0
    for name, uid in uids.items():
        assert_taken_over(k.get(DEPLOYMENTS, NS, name), uid, applier)


def assert_taken_over(dep: dict[str, Any], uid: str, applier: str) -> None:
    """The workload kept its uid, lost its reference to a DCD (the DGD's, set by the
    companion controller, may stay) and the operator's fields; its pod template is
    ``applier``'s alone."""
    meta = dep["metadata"]
    assert meta["uid"] == uid, meta["name"]
    owners = {r["kind"] for r in meta.get("ownerReferences") or []}
    assert DCDS.kind not in owners, owners
    managers = {e["manager"] for e in meta["managedFields"]}
    assert OPERATOR_MANAGER not in managers and applier in managers, managers
    template_owners = {
        e["manager"]
        for e in meta["managedFields"]
        if "f:template" in (e.get("fieldsV1") or {}).get("f:spec", {})
    }
    assert template_owners == {applier}, (meta["name"], template_owners)
