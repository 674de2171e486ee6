"""Migration from the Dynamo operator to dyn-gitops with zero restarts (docs/migration.md), on
the realistic cluster: real kube-controller-manager (Deployments, ReplicaSets, the garbage
collector), scheduler and KWOK (pods Ready).

The live state is what the operator created for an upstream example (its own output,
``conformance/operator-output``, its reconcilers at 2a6da14c8), created with its field
manager and owner references (``support/adoption.py`` cites the upstream code), its pods
Ready; the operator itself is not running (migration step 1: scaled to zero). Then the
documented order: ``adopt --check`` on the live objects, the render applied as Argo CD and
Flux apply it (server-side apply, ``--force-conflicts``, their field manager), the
references to the DCDs removed, the companion controller started, the operator's DCDs
deleted. A pod watch over all of it sees no pod deleted and no new one.

The operator's output is for namespace ``default`` (its labels and env name it), so these
tests work there, each on its own graph, and delete what they created.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from dyn_gitops_operator.errors import ConflictError, NotFoundError
from dyn_gitops_operator.kube import DEPLOYMENTS, DGDS, Kube
from dyn_gitops_operator.resources import SERVICES, Resource
from dyn_gitops_operator.testing import as_served, running, settings_for_tests, wait_for
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
from support.pain import baseline, check
from support.parity import SETTINGS as PARITY
from support.podwatch import ReadyPods
from support.rendering import render

from dyn_gitops import keys

pytestmark = pytest.mark.realk8s

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


def rendered(example: str) -> list[dict[str, Any]]:
    """The render of ``example`` with the operator's configuration, the DGD included."""
    settings: dict[str, Any] = {k.replace("-", "_"): v for k, v in PARITY.items()}
    settings.update(SETTINGS)
    return render(EXAMPLES / example, **settings)


def graph_of(example: str) -> str:
    return str(next(o["metadata"]["name"] for o in rendered(example) if o["kind"] == DGDS.kind))


#: the order the objects are created in: a pod's ServiceAccount before its Deployment
ORDER = ("ServiceAccount", "Role", "RoleBinding", "Service", "Deployment")


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

    def ready() -> bool:
        items = core.list_namespaced_pod(NS, label_selector=selector(graph)).items
        return (
            sum(
                any(c.type == "Ready" and c.status == "True" for c in (p.status.conditions or []))
                if p.status
                else False
                for p in items
            )
            == pods
        )

    def why() -> str:
        apps = client.AppsV1Api(api)
        deps: list[Any] = apps.list_namespaced_deployment(NS, label_selector=selector(graph)).items
        found: list[Any] = core.list_namespaced_pod(NS, label_selector=selector(graph)).items
        return (
            f"{pods} pods of {graph} Ready; pods: "
            f"{[(p.metadata.name, p.status.phase, p.status.conditions) for p in found]}; "
            f"deployments: {[(d.metadata.name, d.status.conditions) for d in deps]}"
        )

    wait_for(ready, SLOW, why)


def selector(graph: str) -> str:
    return f"{keys.LABEL_GRAPH_NAME}={graph}"


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
    """What Argo CD (``ServerSideApply=true``) or Flux's kustomize-controller does: a
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
def cleanup(k: Kube, example: str, graph: str) -> Iterator[None]:
    """Delete what the test created (``default`` outlives the test): the operator's output
    by name (some names, such as the planner's ServiceAccount, are the same in every
    example), the DCDs and the DGD."""
    try:
        yield
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


AGG = "examples__backends__vllm__deploy__agg.yaml"
SGLANG = "examples__backends__sglang__deploy__agg.yaml"
TRTLLM = "examples__backends__trtllm__deploy__agg.yaml"


@pytest.mark.parametrize(("example", "applier"), [(AGG, ARGOCD), (SGLANG, FLUX)])
def test_migration_from_the_operator_restarts_and_deletes_nothing(
    cluster_k: Kube, cluster_kube: Any, tmp_path: Path, example: str, applier: str
) -> None:
    """The documented order moves an aggregated example (a frontend and a GPU worker
    Deployment; vLLM applied as Argo CD does, SGLang as Flux does) from the operator to
    GitOps: ``adopt --check`` sees no restart or deletion on the live objects (server
    defaults and all), the apply changes no pod template (the same ReplicaSets), the
    companion controller reports the graph, the DCDs are deleted after the owner references
    to them, and the pod watch over the whole migration saw no pod deleted or added, no
    container restarted; the workloads keep their uids and their pod templates belong to the
    applier's field manager alone."""
    k, graph = cluster_k, graph_of(example)
    with cleanup(k, example, graph):
        workloads = as_operator_left_it(k, example)
        serving(cluster_kube, graph, 2)
        uids = {d["metadata"]["name"]: d["metadata"]["uid"] for d in workloads}
        sets = replica_sets(cluster_kube, graph)
        with ReadyPods(cluster_kube, NS, selector(graph)) as watch:
            first = watch.present()
            report = adopt_check(k, tmp_path, example, applier)
            assert report["code"] == 0 and not report["disruptive"], report
            assert {f"Deployment/{n}" for n in uids} <= {
                f"{f['kind']}/{f['name']}"
                for f in report["findings"]
                if f["effect"] == "handover" and "DynamoComponentDeployment" in f["message"]
            }
            gitops_apply(k, example, applier)
            for obj in live_objects(k):
                if handed_over(obj, graph):
                    hand_over(k, obj)
            with running(settings_for_tests(NS), k):
                wait_for(
                    lambda: k.get(DGDS, NS, graph).get("status", {}).get("state") == "successful",
                    SLOW,
                    "the companion controller reports the graph successful",
                )
            delete_dcds(k, graph)
            after = adopt_check(k, tmp_path, example, applier)
            watch.check_alive()
            assert watch.deleted_while_serving == [], watch.history
            assert [e for e in watch.history if e[0] in ("ADDED", "DELETED")] == []
            assert watch.present() == first and watch.count() == 2, watch.history
        assert after["code"] == 0 and operator_traces(after) == [], after
        assert replica_sets(cluster_kube, graph) == sets  # no new template hash
        assert restarts(cluster_kube, graph) == 0
        for name, uid in uids.items():
            dep = k.get(DEPLOYMENTS, NS, name)
            assert dep["metadata"]["uid"] == uid
            owners = {r["kind"] for r in dep["metadata"].get("ownerReferences") or []}
            assert DCDS.kind not in owners, owners  # the DGD's, set by the controller, may stay
            managers = {e["manager"] for e in dep["metadata"]["managedFields"]}
            assert OPERATOR_MANAGER not in managers and applier in managers, managers
            template_owners = {
                e["manager"]
                for e in dep["metadata"]["managedFields"]
                if "f:template" in (e.get("fieldsV1") or {}).get("f:spec", {})
            }
            assert template_owners == {applier}


@baseline("a naive migration deletes the operator's DCDs with the workloads still theirs")
def test_naive_migration_deleting_the_dcds_first_deletes_the_workloads(
    cluster_k: Kube, cluster_kube: Any
) -> None:
    """The pain the documented order avoids: the render applied as GitOps does, then the
    operator's DCDs deleted (uninstalling the operator's objects) while the workloads still
    carry the operator's controller references to them: the garbage collector deletes the
    Deployments and their serving pods."""
    k, graph = cluster_k, graph_of(TRTLLM)
    with cleanup(k, TRTLLM, graph):
        workloads = as_operator_left_it(k, TRTLLM)
        serving(cluster_kube, graph, len(workloads))
        with ReadyPods(cluster_kube, NS, selector(graph)) as watch:
            gitops_apply(k, TRTLLM, ARGOCD)
            delete_dcds(k, graph)
            watch.check_alive()
            remaining = {d["metadata"]["name"] for d in k.list(DEPLOYMENTS, NS)[0]}
            check(
                {d["metadata"]["name"] for d in workloads} <= remaining,
                f"the garbage collector deleted the workloads; pods deleted while serving: "
                f"{watch.deleted_while_serving}",
            )
