"""The in-memory API server (``dyn_gitops_operator.fakekube``) against the real one: every
check runs on both, so the fake-driven reconciler tests rest on behaviour the real
kube-apiserver has (the ``real`` cases need the test binaries, as the other operator tests).
What the fake does more simply is listed in its docstring; nothing here relies on it."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

import pytest
from dyn_gitops_operator import FIELD_MANAGER, grove
from dyn_gitops_operator.errors import ConflictError, GoneError, InvalidError, NotFoundError
from dyn_gitops_operator.fakekube import PCS_ATOMIC_LIST, FakeKube
from dyn_gitops_operator.resources import DEPLOYMENTS, DGDS, DGDSAS, LEASES, PODCLIQUESETS

Obj = dict[str, Any]
GITOPS = "argocd-controller"


@dataclass
class Api:
    """One API server (real or fake) and a client per field manager."""

    ns: str
    fake: FakeKube | None = None
    api_client: Any = None

    def client(self, manager: str = FIELD_MANAGER) -> Any:
        if self.fake is not None:
            return self.fake.as_manager(manager)
        from dyn_gitops_operator.kube import Kube

        return Kube(self.api_client, field_manager=manager)

    def put_status(self, res: Any, obj: Obj, manager: str) -> Obj:
        """PUT /status, as kube-controller-manager writes a Deployment's status."""
        meta = obj["metadata"]
        if self.fake is not None:
            return self.fake.as_manager(manager).update(res, obj, subresource="status")
        return dict(
            self.client(manager).request(
                "PUT",
                res.path(meta["namespace"], meta["name"], "status"),
                [("fieldManager", manager)],
                obj,
            )
        )

    def get_scale(self, res: Any, name: str) -> Obj:
        if self.fake is not None:
            return self.fake.get(res, self.ns, name, subresource="scale")
        return dict(self.client().request("GET", res.path(self.ns, name, "scale")))


@pytest.fixture(params=["fake", pytest.param("real", marks=pytest.mark.realk8s)])
def api(request: pytest.FixtureRequest) -> Api:
    if request.param == "fake":
        return Api("ns", fake=FakeKube())
    return Api(request.getfixturevalue("namespace"), api_client=request.getfixturevalue("kube"))


def deployment(ns: str, name: str = "d", **labels: str) -> Obj:
    sel = {"app": name}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": ns, "labels": {**sel, **labels}},
        "spec": {
            "selector": {"matchLabels": sel},
            "template": {
                "metadata": {"labels": sel},
                "spec": {
                    "containers": [
                        {"name": "main", "image": "img:1", "env": [{"name": "A", "value": "1"}]}
                    ]
                },
            },
        },
    }


def ours(obj: Obj, subresource: str = "") -> Obj:
    """Our manager's Apply entry (what ``objects.trim_deployment`` keeps as ourFields)."""
    return next(
        (
            m["fieldsV1"]
            for m in obj["metadata"].get("managedFields") or []
            if m["manager"] == FIELD_MANAGER
            and m["operation"] == "Apply"
            and m.get("subresource", "") == subresource
        ),
        {},
    )


def entries(obj: Obj) -> set[tuple[str, str, str]]:
    return {
        (m["manager"], m["operation"], m.get("subresource", ""))
        for m in obj["metadata"].get("managedFields") or []
    }


# ------------------------------------------------------------------ versions and errors
def test_resource_version_and_generation(api: Api) -> None:
    gitops = api.client(GITOPS)
    first = gitops.apply(DEPLOYMENTS, deployment(api.ns))
    assert first["metadata"]["generation"] == 1
    assert first["spec"]["replicas"] == 1  # defaulted
    again = gitops.apply(DEPLOYMENTS, deployment(api.ns))
    assert again["metadata"]["resourceVersion"] == first["metadata"]["resourceVersion"]
    labelled = gitops.apply(DEPLOYMENTS, deployment(api.ns, extra="x"))
    assert int(labelled["metadata"]["resourceVersion"]) > int(first["metadata"]["resourceVersion"])
    assert labelled["metadata"]["generation"] == 1  # metadata only
    scaled = api.client().apply(
        DEPLOYMENTS,
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "d", "namespace": api.ns},
            "spec": {"replicas": 3},
        },
    )
    assert scaled["metadata"]["generation"] == 2
    status = api.put_status(DEPLOYMENTS, {**scaled, "status": {"replicas": 3}}, "kcm")
    assert status["metadata"]["generation"] == 2
    assert int(status["metadata"]["resourceVersion"]) > int(scaled["metadata"]["resourceVersion"])


def test_error_classes(api: Api) -> None:
    me = api.client()
    with pytest.raises(NotFoundError):
        me.get(DEPLOYMENTS, api.ns, "missing")
    with pytest.raises(NotFoundError):
        me.patch(DGDS, api.ns, "missing", {"spec": {}})
    with pytest.raises(NotFoundError):
        me.delete(DEPLOYMENTS, api.ns, "missing")
    with pytest.raises(NotFoundError):  # a status write never creates
        me.apply(
            DGDS,
            {
                "apiVersion": DGDS.api_version,
                "kind": DGDS.kind,
                "metadata": {"name": "missing", "namespace": api.ns},
                "status": {"state": "pending"},
            },
            subresource="status",
        )
    live = me.create(DEPLOYMENTS, deployment(api.ns))
    with pytest.raises(ConflictError, match="already exists"):
        me.create(DEPLOYMENTS, deployment(api.ns))
    me.apply(
        DEPLOYMENTS,
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "d", "namespace": api.ns},
            "spec": {"replicas": 2},
        },
    )
    with pytest.raises(ConflictError, match="modified"):  # stale resourceVersion
        me.apply(
            DEPLOYMENTS,
            {
                "apiVersion": "apps/v1",
                "kind": "Deployment",
                "metadata": {
                    "name": "d",
                    "namespace": api.ns,
                    "resourceVersion": live["metadata"]["resourceVersion"],
                },
                "spec": {"replicas": 3},
            },
        )
    with pytest.raises(ConflictError, match="UID in the precondition"):
        me.delete(DEPLOYMENTS, api.ns, "d", uid="not-its-uid")
    with pytest.raises(ConflictError, match="ResourceVersion in the precondition"):
        me.delete(DEPLOYMENTS, api.ns, "d", resource_version=live["metadata"]["resourceVersion"])
    lease = me.create(
        LEASES,
        {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": "l", "namespace": api.ns},
            "spec": {"holderIdentity": "a"},
        },
    )
    with pytest.raises(InvalidError, match="must be specified"):
        me.update(LEASES, {**lease, "metadata": {"name": "l", "namespace": api.ns}})
    with pytest.raises(ConflictError):
        me.update(LEASES, {**lease, "metadata": {**lease["metadata"], "resourceVersion": "1"}})
    with pytest.raises(InvalidError):
        me.list(DEPLOYMENTS, api.ns, label_selector="app in x")
    me.delete(DEPLOYMENTS, api.ns, "d", uid=live["metadata"]["uid"])
    with pytest.raises(NotFoundError):
        me.get(DEPLOYMENTS, api.ns, "d")


# ------------------------------------------------------------------ server-side apply
def test_apply_merges_owns_and_releases_fields(api: Api) -> None:
    gitops, me = api.client(GITOPS), api.client()
    live = gitops.apply(DEPLOYMENTS, deployment(api.ns))
    owner = {"apiVersion": "v1", "kind": "ConfigMap", "name": "o", "uid": "1234"}
    mine = me.apply(
        DEPLOYMENTS,
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {
                "name": "d",
                "namespace": api.ns,
                "ownerReferences": [owner],
                "resourceVersion": live["metadata"]["resourceVersion"],
            },
            "spec": {
                "replicas": 3,
                "template": {"metadata": {"annotations": {"nvidia.com/restartAt": "r1"}}},
            },
        },
    )
    assert ours(mine) == {
        "f:metadata": {"f:ownerReferences": {'k:{"uid":"1234"}': {}}},
        "f:spec": {
            "f:replicas": {},
            "f:template": {"f:metadata": {"f:annotations": {"f:nvidia.com/restartAt": {}}}},
        },
    }
    assert mine["spec"]["template"]["spec"]["containers"][0]["image"] == "img:1"  # merged
    gitops_fields = next(
        m["fieldsV1"] for m in mine["metadata"]["managedFields"] if m["manager"] == GITOPS
    )
    container = gitops_fields["f:spec"]["f:template"]["f:spec"]["f:containers"]['k:{"name":"main"}']
    assert container["."] == {} and container["f:env"]['k:{"name":"A"}']["f:value"] == {}

    # the GitOps tool re-syncs: what we own stays
    resynced = gitops.apply(DEPLOYMENTS, deployment(api.ns))
    assert resynced["spec"]["replicas"] == 3
    assert resynced["metadata"]["ownerReferences"] == [owner]
    assert resynced["spec"]["template"]["metadata"]["annotations"] == {"nvidia.com/restartAt": "r1"}
    # we stop applying the annotation and the owner: both go (the emptied map too)
    dropped = me.apply(
        DEPLOYMENTS,
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "d", "namespace": api.ns},
            "spec": {"replicas": 3},
        },
    )
    assert "annotations" not in dropped["spec"]["template"]["metadata"]
    assert "ownerReferences" not in dropped["metadata"]
    assert ours(dropped) == {"f:spec": {"f:replicas": {}}}
    # and the replicas: the default comes back, our entry is gone
    gone = me.apply(
        DEPLOYMENTS,
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "d", "namespace": api.ns},
        },
    )
    assert gone["spec"]["replicas"] == 1
    assert (FIELD_MANAGER, "Apply", "") not in entries(gone)


def test_apply_conflicts_with_another_managers_value(api: Api) -> None:
    gitops, me = api.client(GITOPS), api.client()
    gitops.apply(DEPLOYMENTS, deployment(api.ns))

    def image(value: str, force: bool) -> Obj:
        return dict(
            me.apply(
                DEPLOYMENTS,
                {
                    "apiVersion": "apps/v1",
                    "kind": "Deployment",
                    "metadata": {"name": "d", "namespace": api.ns},
                    "spec": {
                        "template": {"spec": {"containers": [{"name": "main", "image": value}]}}
                    },
                },
                force=force,
            )
        )

    with pytest.raises(ConflictError, match=f'conflict with "{GITOPS}"'):
        image("img:2", force=False)
    image("img:1", force=False)  # the same value: shared, no conflict
    taken = image("img:2", force=True)
    gitops_fields = next(
        m["fieldsV1"] for m in taken["metadata"]["managedFields"] if m["manager"] == GITOPS
    )
    assert (
        "f:image"
        not in gitops_fields["f:spec"]["f:template"]["f:spec"]["f:containers"]['k:{"name":"main"}']
    )


def test_map_list_items_merge_and_release(api: Api) -> None:
    gitops, me = api.client(GITOPS), api.client()
    pcs = gitops.apply(
        PODCLIQUESETS,
        {
            "apiVersion": PODCLIQUESETS.api_version,
            "kind": PODCLIQUESETS.kind,
            "metadata": {"name": "pcs", "namespace": api.ns},
            "spec": {
                "replicas": 1,
                "template": {
                    "cliques": [
                        {"name": "a", "spec": {"replicas": 1}},
                        {"name": "b", "annotations": {"x": "y"}, "spec": {"replicas": 1}},
                    ]
                },
            },
        },
    )
    assert grove.cliques_map_list(pcs)
    stamped = me.apply(PODCLIQUESETS, grove.restart_apply(pcs, {"a": "r1"}))
    assert grove.restart_values(stamped) == {"a": "r1", "b": None}
    assert grove.owned_restart_cliques(stamped) == {"a"}
    assert stamped["spec"]["template"]["cliques"][1]["annotations"] == {"x": "y"}
    assert stamped["metadata"]["generation"] == 2
    released = me.apply(PODCLIQUESETS, grove.restart_apply(stamped, {}))
    assert released["spec"]["template"]["cliques"][0] == {"name": "a", "spec": {"replicas": 1}}
    assert grove.owned_restart_cliques(released) == set()


def test_atomic_cliques_list_is_told_apart() -> None:
    """(fake only: the real atomic case has its own control plane in test_operator_grove)"""
    gitops = FakeKube(GITOPS, rules={PODCLIQUESETS: PCS_ATOMIC_LIST})
    pcs = gitops.apply(
        PODCLIQUESETS,
        {
            "apiVersion": PODCLIQUESETS.api_version,
            "kind": PODCLIQUESETS.kind,
            "metadata": {"name": "pcs", "namespace": "ns"},
            "spec": {"template": {"cliques": [{"name": "a", "spec": {"replicas": 1}}]}},
        },
    )
    assert not grove.cliques_map_list(pcs)


# ------------------------------------------------------------------ subresources
def test_status_subresource(api: Api) -> None:
    gitops, me = api.client(GITOPS), api.client()
    dgd = {
        "apiVersion": DGDS.api_version,
        "kind": DGDS.kind,
        "metadata": {"name": "g", "namespace": api.ns},
        "spec": {"components": [{"name": "F", "type": "frontend", "replicas": 1}]},
    }
    gitops.apply(DGDS, dgd)
    out = me.apply(
        DGDS,
        {**dgd, "spec": {"components": []}, "status": {"state": "pending"}},
        subresource="status",
    )
    assert out["spec"] == dgd["spec"] and out["status"] == {"state": "pending"}
    assert out["metadata"]["generation"] == 1
    assert set(ours(out, "status")) == {"f:status"}
    ignored = gitops.apply(DGDS, {**dgd, "status": {"state": "failed"}})
    assert ignored["status"] == {"state": "pending"}
    dep = gitops.apply(DEPLOYMENTS, deployment(api.ns))
    put = api.put_status(
        DEPLOYMENTS,
        {**dep, "spec": {**dep["spec"], "replicas": 9}, "status": {"replicas": 1}},
        "kcm",
    )
    assert put["spec"]["replicas"] == 1 and put["status"]["replicas"] == 1
    assert ("kcm", "Update", "status") in entries(put)


def test_scale_subresource(api: Api) -> None:
    gitops, hpa = api.client(GITOPS), api.client("hpa")
    adapter = gitops.apply(
        DGDSAS,
        {
            "apiVersion": DGDSAS.api_version,
            "kind": DGDSAS.kind,
            "metadata": {"name": "s", "namespace": api.ns},
            "spec": {"replicas": 2, "dgdRef": {"name": "g", "serviceName": "F"}},
        },
    )
    api.client().apply(
        DGDSAS,
        {
            "apiVersion": DGDSAS.api_version,
            "kind": DGDSAS.kind,
            "metadata": {"name": "s", "namespace": api.ns},
            "status": {"replicas": 2, "selector": "a=b"},
        },
        subresource="status",
    )
    scale = hpa.patch(DGDSAS, api.ns, "s", {"spec": {"replicas": 5}}, subresource="scale")
    assert (scale["kind"], scale["spec"]) == ("Scale", {"replicas": 5})
    with pytest.raises(ConflictError):
        hpa.patch(
            DGDSAS,
            api.ns,
            "s",
            {
                "metadata": {"resourceVersion": adapter["metadata"]["resourceVersion"]},
                "spec": {"replicas": 6},
            },
            subresource="scale",
        )
    live = gitops.get(DGDSAS, api.ns, "s")
    assert live["spec"]["replicas"] == 5 and live["metadata"]["generation"] == 2
    assert ("hpa", "Update", "scale") in entries(live)
    gitops_fields = next(
        m["fieldsV1"] for m in live["metadata"]["managedFields"] if m["manager"] == GITOPS
    )
    assert "f:replicas" not in gitops_fields["f:spec"]  # the autoscaler took it over
    assert api.get_scale(DGDSAS, "s")["status"] == {"replicas": 2, "selector": "a=b"}


# ------------------------------------------------------------------ list and watch
def test_label_selectors(api: Api) -> None:
    gitops = api.client(GITOPS)
    for name, tier in (("a", "web"), ("b", "db"), ("c", "")):
        gitops.apply(DEPLOYMENTS, deployment(api.ns, name, **({"tier": tier} if tier else {})))

    def names(selector: str) -> list[str]:
        return sorted(
            d["metadata"]["name"]
            for d in gitops.list(DEPLOYMENTS, api.ns, label_selector=selector)[0]
        )

    assert names("tier") == ["a", "b"]
    assert names("!tier") == ["c"]
    assert names("tier=web") == names("tier==web") == ["a"]
    assert names("tier!=web") == ["b", "c"]
    assert names("tier in (web,db),app notin (b)") == ["a"]
    items, _ = gitops.list(
        DEPLOYMENTS,
        api.ns,
        field_selector="metadata.name=b",
        transform=lambda d: {"n": d["metadata"]["name"]},
    )
    assert items == [{"n": "b"}]


def test_watch_from_a_resource_version(api: Api) -> None:
    gitops = api.client(GITOPS)
    gitops.apply(DEPLOYMENTS, deployment(api.ns, "a", graph="g"))
    _, rv = gitops.list(DEPLOYMENTS, api.ns, label_selector="graph")
    gitops.apply(DEPLOYMENTS, deployment(api.ns, "b", graph="g"))
    gitops.apply(DEPLOYMENTS, deployment(api.ns, "a", graph="g", more="1"))
    gitops.apply(DEPLOYMENTS, deployment(api.ns, "b"))  # leaves the selection
    gitops.delete(DEPLOYMENTS, api.ns, "a")
    seen = [
        (e["type"], e["object"]["metadata"]["name"])
        for e in gitops.watch(DEPLOYMENTS, api.ns, rv, label_selector="graph", timeout_seconds=1)
    ]
    assert seen == [("ADDED", "b"), ("MODIFIED", "a"), ("DELETED", "b"), ("DELETED", "a")]


def test_watch_ends_on_shutdown_and_expires_after_compaction() -> None:
    kube = FakeKube()
    kube.apply(DEPLOYMENTS, deployment("ns", "before"))
    _, rv = kube.list(DEPLOYMENTS, "ns")
    handles: list[Any] = []
    events: list[str] = []

    def run() -> None:
        for e in kube.watch(DEPLOYMENTS, "ns", rv, on_open=handles.append):
            events.append(e["object"]["metadata"]["name"])

    t = threading.Thread(target=run)
    t.start()
    kube.apply(DEPLOYMENTS, deployment("ns", "x"))
    for _ in range(200):
        if events:
            break
        threading.Event().wait(0.01)
    handles[0].shutdown()
    t.join(5)
    assert not t.is_alive() and events == ["x"]
    kube.server.compact()
    with pytest.raises(GoneError):
        next(iter(kube.watch(DEPLOYMENTS, "ns", rv)))


def test_unserved_resources_are_not_found() -> None:
    kube = FakeKube(served=[DEPLOYMENTS])
    kube.check_listable(DEPLOYMENTS, "ns")
    with pytest.raises(NotFoundError):
        kube.check_listable(DGDS, "ns")
