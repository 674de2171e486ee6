"""Cluster-wide mode and API-server faults, on a private control plane.

A cluster-wide controller would also act on every other test's namespace, and these
tests stop and restart the API server, so they get their own etcd + kube-apiserver
(``plane``); the API-server crash test gets its own realistic cluster (``rplane``: with
kube-controller-manager, scheduler and KWOK, which reconnect after the crash too).
"""

from __future__ import annotations

import base64
import json
import signal
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from dyn_gitops_operator import FIELD_MANAGER
from dyn_gitops_operator.kube import (
    DEPLOYMENTS,
    DGDS,
    LEASES,
    Kube,
    Resource,
    make_api_client,
)
from dyn_gitops_operator.leases import micro_time
from dyn_gitops_operator.settings import SCOPE_LEASE_NAME
from dyn_gitops_operator.testing import (
    gitops_apply,
    running,
    settings_for_tests,
    wait_for,
)
from support.rendering import render

pytestmark = pytest.mark.realk8s
CONFIGMAPS = Resource("", "v1", "configmaps", "ConfigMap")
SAMPLES = Path(__file__).resolve().parent.parent / "samples"
CHART = Path(__file__).resolve().parent.parent / "charts" / "dyn-gitops"
IMAGE = "nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.1.0"


class Plane:
    """The private control plane, with a stop/start of the API server."""

    def __init__(self, cp: Any) -> None:
        self.cp = cp
        self.args = list(cp.apiserver.args)
        self.proc: subprocess.Popen[bytes] = cp.apiserver
        self.extra: list[subprocess.Popen[bytes]] = []

    def stop_apiserver(self) -> None:
        # SIGKILL: a crash. (A graceful SIGTERM waits 60 s for open watches to drain.)
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(30)

    def start_apiserver(self) -> None:
        with open(self.cp.dir / "apiserver-restarted.log", "ab") as log:
            self.proc = subprocess.Popen(
                self.args, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
        self.extra.append(self.proc)
        k = Kube(make_api_client(str(self.cp.kubeconfig)))
        wait_for(
            lambda: k.request("GET", "/api/v1/namespaces/default"),
            timeout=60,
            interval=0.2,
            what="API server back",
        )

    def compact_etcd(self) -> int:
        """Compact etcd at its head revision: every older resourceVersion is gone (410)."""
        url = next(
            a.split("=", 1)[1]
            for a in self.cp.etcd.args
            if str(a).startswith("--listen-client-urls=")
        )
        head = _etcd(url, "/v3/kv/range", {"key": base64.b64encode(b"/").decode()})
        rev = int(head["header"]["revision"])
        _etcd(url, "/v3/kv/compaction", {"revision": rev, "physical": True})
        return rev

    def close(self) -> None:
        for p in self.extra:
            if p.poll() is None:
                p.terminate()
                try:
                    p.wait(20)
                except subprocess.TimeoutExpired:
                    p.kill()


def _etcd(url: str, path: str, body: dict[str, Any]) -> dict[str, Any]:
    req = urllib.request.Request(
        url + path,
        data=json.dumps(body).encode(),
        method="POST",
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(req, timeout=10) as r:
        return dict(json.loads(r.read()))


@pytest.fixture(scope="module")
def plane(test_binaries: Any) -> Iterator[Plane]:
    from support.controlplane import control_plane, install_crds

    from dyn_gitops.crds import crds as dynamo_crds

    bins = test_binaries("etcd", "kube-apiserver")
    with control_plane(bins["etcd"], bins["kube-apiserver"]) as cp:
        install_crds(cp.client(), dynamo_crds())
        p = Plane(cp)
        try:
            yield p
        finally:
            p.close()


@pytest.fixture(scope="module")
def rplane(cluster_binaries: Any) -> Iterator[Plane]:
    """A private realistic cluster (tests/support/cluster.py) whose API server can crash."""
    from support.cluster import realistic_cluster
    from support.controlplane import install_crds

    from dyn_gitops.crds import crds as dynamo_crds

    with realistic_cluster(*cluster_binaries) as c:
        install_crds(c.client(), dynamo_crds())
        p = Plane(c.plane)
        try:
            yield p
        finally:
            p.close()


@pytest.fixture
def pk(plane: Plane) -> Kube:
    return Kube(make_api_client(str(plane.cp.kubeconfig)))


def new_namespace(k: Kube, name: str) -> str:
    k.request("POST", "/api/v1/namespaces", body={"metadata": {"name": name}})
    return name


def cluster_settings(**kw: Any) -> Any:
    from dyn_gitops_operator.settings import LeaderSettings

    # the renew deadline outlasts the outage (as the 10 s default outlasts a short one)
    return settings_for_tests(
        "",
        mode="cluster",
        leader=LeaderSettings(
            namespace="default", lease_duration=20, renew_deadline=15, retry_period=0.5
        ),
        **kw,
    )


def test_cluster_mode_leaves_a_claimed_namespace_alone_until_its_lease_expires(pk: Kube) -> None:
    claimed = new_namespace(pk, "claimed")
    free = new_namespace(pk, "free")
    for ns in (claimed, free):
        gitops_apply(pk, render(SAMPLES / "vllm-agg" / "input", ns))
    now = micro_time(datetime.now(UTC))
    pk.create(
        LEASES,
        {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": SCOPE_LEASE_NAME, "namespace": claimed},
            "spec": {
                "holderIdentity": "namespace-restricted-operator-1.1.0",
                "leaseDurationSeconds": 3,
                "acquireTime": now,
                "renewTime": now,
            },
        },
    )
    with running(cluster_settings(), pk) as m:
        wait_for(lambda: pk.get(DGDS, free, "vllm-agg").get("status"), what="free reconciled")
        # (other tests' namespace-mode controllers leave their leases live, handed over)
        assert m.exclusions is not None and m.exclusions.excluded(claimed)
        assert not m.exclusions.excluded(free)
        assert m.metrics.value("dyn_gitops_controller_namespaces_excluded") >= 1
        # the foreign operator keeps renewing: we keep out
        for _ in range(3):
            lease = pk.get(LEASES, claimed, SCOPE_LEASE_NAME)
            last_renewal = datetime.now(UTC)
            lease["spec"]["renewTime"] = micro_time(last_renewal)
            pk.update(LEASES, lease)
            time.sleep(1)
        assert not pk.get(DGDS, claimed, "vllm-agg").get("status")
        for d in pk.list(DEPLOYMENTS, claimed)[0]:
            assert FIELD_MANAGER not in {f["manager"] for f in d["metadata"]["managedFields"]}
        # it stops renewing (crashed): resumed after expiry, without any event on our objects
        # (the hang guard stays far below the 300 s resync: the expiry timer resumes it)
        wait_for(
            lambda: pk.get(DGDS, claimed, "vllm-agg").get("status"),
            timeout=120,
            what="claimed namespace resumed",
        )
        # never before the lease expired (same machine, same wall clock)
        assert datetime.now(UTC) >= last_renewal + timedelta(seconds=3)
        assert not m.exclusions.excluded(claimed)


def restart_graph(restart: dict[str, Any] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "services": {
            name: {
                "componentType": "worker" if name != "Frontend" else "frontend",
                "replicas": 2,
                "extraPodSpec": {"mainContainer": {"image": IMAGE}},
            }
            for name in ("Frontend", "a", "b")
        }
    }
    if restart:
        spec["restart"] = restart
    return {
        "apiVersion": "nvidia.com/v1alpha1",
        "kind": "DynamoGraphDeployment",
        "metadata": {"name": "faulty"},
        "spec": spec,
    }


def test_api_server_restart_mid_restart_loses_and_duplicates_nothing(rplane: Plane) -> None:
    """The pods are real and held by a scheduling gate: a service restarted by a stamp is
    ready again once the test releases its new pods."""
    from support.cluster import hold, release, release_deployment

    plane = rplane
    pk = Kube(make_api_client(str(plane.cp.kubeconfig)))
    ns = new_namespace(pk, "faults")
    gitops_apply(pk, hold(render([restart_graph()], ns)))

    def deps() -> dict[str, dict[str, Any]]:
        return {
            d["metadata"]["labels"]["nvidia.com/dynamo-component"]: d
            for d in pk.list(DEPLOYMENTS, ns)[0]
        }

    def stamp(d: dict[str, Any]) -> str | None:
        return (d["spec"]["template"]["metadata"].get("annotations") or {}).get(
            "nvidia.com/restartAt"
        )

    with running(cluster_settings(), pk) as m:
        wait_for(lambda: all(d["spec"]["replicas"] == 2 for d in deps().values()), what="sized")
        wait_for(
            lambda: (
                release(pk.api, ns) is not None
                and pk.get(DGDS, ns, "faulty").get("status", {}).get("state") == "successful"
            ),
            timeout=90,
            what="ready",
        )
        before = {c: d["metadata"]["generation"] for c, d in deps().items()}
        order = ["b", "Frontend", "a"]
        gitops_apply(
            pk,
            [
                o
                for o in render(
                    [
                        restart_graph(
                            {"id": "fault-1", "strategy": {"type": "Sequential", "order": order}}
                        )
                    ],
                    ns,
                )
                if o["kind"] == "DynamoGraphDeployment"
            ],
        )
        wait_for(lambda: stamp(deps()["b"]) == "fault-1", what="first service stamped")

        time.sleep(0.3)  # let the controller settle (it waits for "b" to be ready) ...
        pk.create(CONFIGMAPS, {"metadata": {"name": "tick", "namespace": ns}})  # ... move on
        plane.stop_apiserver()
        # while it is down, etcd compacts its history (every 5 min in a real cluster):
        # the controller's resourceVersions are now expired whatever serves the watch
        compacted = plane.compact_etcd()
        assert int(m.deployments.resource_version) < compacted
        time.sleep(2)  # the controller keeps retrying against a dead server
        assert m.healthy()
        relists = m.metrics.value(
            "dyn_gitops_controller_watch_relists_total", {"resource": "deployments"}
        )
        plane.start_apiserver()

        for service in order:
            wait_for(
                lambda s=service: stamp(deps()[s]) == "fault-1",
                timeout=60,
                what=f"{service} stamped after the restart",
            )
            release_deployment(pk.api, ns, deps()[service]["metadata"]["name"])
        wait_for(
            lambda: (
                pk.get(DGDS, ns, "faulty")["status"].get("restart")
                == {"observedID": "fault-1", "phase": "Completed"}
            ),
            timeout=60,
            what="restart completed",
        )
        after = {c: d["metadata"]["generation"] for c, d in deps().items()}
        assert {c: after[c] - before[c] for c in after} == {"a": 1, "b": 1, "Frontend": 1}
        # resuming from the pre-restart resourceVersion failed with 410: re-listed
        assert (
            m.metrics.value(
                "dyn_gitops_controller_watch_relists_total", {"resource": "deployments"}
            )
            > relists
        )
        assert m.healthy()


# ------------------------------------------------------------------------------ the Helm chart
API_PATHS: dict[str, tuple[str, str]] = {  # kind -> (group/version path prefix, plural)
    "ServiceAccount": ("/api/v1", "serviceaccounts"),
    "Service": ("/api/v1", "services"),
    "ConfigMap": ("/api/v1", "configmaps"),
    "Deployment": ("/apis/apps/v1", "deployments"),
    "Role": ("/apis/rbac.authorization.k8s.io/v1", "roles"),
    "RoleBinding": ("/apis/rbac.authorization.k8s.io/v1", "rolebindings"),
    "ClusterRole": ("/apis/rbac.authorization.k8s.io/v1", "clusterroles"),
    "ClusterRoleBinding": ("/apis/rbac.authorization.k8s.io/v1", "clusterrolebindings"),
    "CustomResourceDefinition": ("/apis/apiextensions.k8s.io/v1", "customresourcedefinitions"),
    "ServiceMonitor": ("/apis/monitoring.coreos.com/v1", "servicemonitors"),
}


def apply_object(k: Kube, obj: dict[str, Any], *, dry_run: bool) -> dict[str, Any]:
    prefix, plural = API_PATHS[obj["kind"]]
    ns = obj["metadata"].get("namespace")
    path = f"{prefix}/namespaces/{ns}/{plural}" if ns else f"{prefix}/{plural}"
    query = [("fieldManager", "helm"), ("force", "true")]
    if dry_run:
        query.append(("dryRun", "All"))
    return k.request(
        "PATCH", f"{path}/{obj['metadata']['name']}", query, obj, "application/apply-patch+yaml"
    )


@pytest.fixture(scope="module")
def helm(test_binaries: Any) -> Path:
    return Path(test_binaries("helm")["helm"])


CHART_MODES = {
    "cluster": [],
    "namespace": ["controller.mode=namespace", "controller.watchNamespace=team"],
}


@pytest.mark.parametrize("mode", sorted(CHART_MODES))
def test_chart_is_accepted_by_the_api_server(plane: Plane, pk: Kube, helm: Path, mode: str) -> None:
    from dyn_gitops_operator.testing import helm_template
    from support.controlplane import install_crds
    from support.thirdparty_crds import _crd

    install_crds(
        plane.cp.client(),
        [_crd("monitoring.coreos.com", "v1", "ServiceMonitor", "servicemonitors")],
    )
    release_ns = new_namespace(pk, f"ops-{mode}")
    new_namespace(pk, "team") if mode == "namespace" else None
    objs = helm_template(
        helm,
        CHART,
        *CHART_MODES[mode],
        "metrics.serviceMonitor.enabled=true",
        "dashboard.enabled=true",
        namespace=release_ns,
        extra=["--include-crds", "--api-versions", "monitoring.coreos.com/v1"],
    )
    assert {o["kind"] for o in objs} >= {
        "Deployment",
        "ServiceAccount",
        "Service",
        "ServiceMonitor",
        "ConfigMap",
        "Role",
        "RoleBinding",
        "CustomResourceDefinition",
    }
    for obj in objs:
        out = apply_object(pk, obj, dry_run=True)  # raises on any rejection
        assert out["kind"] == obj["kind"]
    # and the real helm's own server-side dry run of the install
    args = [a for s in CHART_MODES[mode] for a in ("--set", s)]
    proc = subprocess.run(
        [
            str(helm),
            "install",
            "dg",
            str(CHART),
            "--namespace",
            release_ns,
            "--dry-run=server",
            "--kubeconfig",
            str(plane.cp.kubeconfig),
            "--set",
            "metrics.serviceMonitor.enabled=true",
            "--set",
            "dashboard.enabled=true",
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert "STATUS: pending-install" in proc.stdout


@pytest.mark.parametrize("mode", sorted(CHART_MODES))
def test_controller_works_with_exactly_the_chart_rbac(
    plane: Plane, pk: Kube, helm: Path, mode: str
) -> None:
    """Install the chart's ServiceAccount and RBAC, then run the controller as that
    ServiceAccount (impersonation): it converges a graph (and a Grove graph: status read
    from a PCSG, a PodClique scaled through /scale), and it cannot do more."""
    from dyn_gitops_operator.errors import ForbiddenError, NotFoundError
    from dyn_gitops_operator.kube import PCSGS, PODCLIQUES
    from dyn_gitops_operator.settings import LeaderSettings
    from dyn_gitops_operator.testing import (
        PODCLIQUESETS,
        grove_children,
        grove_status,
        helm_template,
    )
    from support.controlplane import install_crds
    from support.thirdparty_crds import grove_crds, thirdparty_crds

    release_ns = new_namespace(pk, f"rbac-{mode}")
    work_ns = new_namespace(pk, f"work-{mode}")
    sets = (
        []
        if mode == "cluster"
        else ["controller.mode=namespace", f"controller.watchNamespace={work_ns}"]
    )
    # a release name of its own: the cluster-scoped RBAC applied here stays in the shared
    # control plane, where it would clash with another test's `helm install dg` (any order)
    objs = helm_template(helm, CHART, *sets, namespace=release_ns, release=f"rbac-{mode}")
    for obj in objs:
        if obj["kind"] in (
            "ServiceAccount",
            "Role",
            "RoleBinding",
            "ClusterRole",
            "ClusterRoleBinding",
        ):
            apply_object(pk, obj, dry_run=False)
    (sa,) = [o["metadata"]["name"] for o in objs if o["kind"] == "ServiceAccount"]
    api = make_api_client(str(plane.cp.kubeconfig))
    api.set_default_header("Impersonate-User", f"system:serviceaccount:{release_ns}:{sa}")
    as_sa = Kube(api)

    gitops_apply(pk, render(SAMPLES / "scaling-adapter" / "input", work_ns))
    # Grove installed; a Grove DGD whose Frontend clique Grove seeded at 1 (Git says 2)
    install_crds(
        plane.cp.client(),
        [c for c in thirdparty_crds() if c["spec"]["group"] == "grove.io"] + grove_crds(),
    )
    grove_objs = [
        o
        for o in render(SAMPLES / "grove-multinode" / "input", work_ns)
        if o["metadata"]["name"] == "vllm-agg"
    ]
    gitops_apply(pk, grove_objs, kinds=("DynamoGraphDeployment", "PodCliqueSet"))
    (pcs,) = [o for o in grove_objs if o["kind"] == "PodCliqueSet"]
    for res, child in grove_children(pcs):
        child["spec"]["replicas"] = 1
        pk.create(res, child)
        grove_status(pk, res, work_ns, child["metadata"]["name"])
    leader = LeaderSettings(
        lease_name=sa,
        namespace=release_ns if mode == "cluster" else "",
        lease_duration=4,
        renew_deadline=3,
        retry_period=0.5,
    )
    settings = settings_for_tests(work_ns if mode == "namespace" else "", mode=mode, leader=leader)
    with running(settings, as_sa):
        wait_for(
            lambda: (
                pk.get(DGDS, work_ns, "sglang-disagg")
                .get("status", {})
                .get("components", {})
                .get("decode", {})
                .get("componentNames")
            ),
            what="status written",
        )
        decode = pk.get(DGDS, work_ns, "sglang-disagg")["status"]["components"]["decode"]
        (name,) = decode["componentNames"]  # no rollout: the current generation only
        assert pk.get(DEPLOYMENTS, work_ns, name)["spec"]["replicas"] == 2
        wait_for(
            lambda: pk.get(PODCLIQUES, work_ns, "vllm-agg-0-frontend")["spec"]["replicas"] == 2,
            what="PodClique scaled through /scale",
        )
        wait_for(
            lambda: (
                pk.get(DGDS, work_ns, "vllm-agg")
                .get("status", {})
                .get("components", {})
                .get("VllmDecodeWorker", {})
                .get("componentKind")
                == "PodCliqueScalingGroup"
            ),
            what="Grove status written",
        )
        # a Grove restart: the PCS read (GET) and its clique annotations applied (patch)
        pk.request(
            "PATCH",
            DGDS.path(work_ns, "vllm-agg"),
            None,
            {"spec": {"restart": {"id": "rbac-1", "strategy": {"type": "Parallel"}}}},
            "application/merge-patch+json",
        )
        wait_for(
            lambda: (
                {
                    (c.get("annotations") or {}).get("nvidia.com/restartAt")
                    for c in pk.get(PODCLIQUESETS, work_ns, "vllm-agg")["spec"]["template"][
                        "cliques"
                    ]
                }
                == {"rbac-1"}
            ),
            what="cliques stamped",
        )
        wait_for(
            lambda: (
                pk.get(DGDS, work_ns, "vllm-agg")
                .get("status", {})
                .get("restart", {})
                .get("observedID")
                == "rbac-1"
            ),
            what="restart reported",
        )
        # a DynamoModel: its worker pod read, our finalizer patched on and off, its status
        from dyn_gitops_operator.resources import DYNAMO_MODELS, PODS

        pk.create(
            PODS,
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "name": "rbac-worker",
                    "namespace": work_ns,
                    "labels": {"nvidia.com/dynamo-base-model-hash": "fb68f5a6"},
                },
                "spec": {"containers": [{"name": "main", "image": "vllm-runtime:1.5.1"}]},
            },
        )
        pk.patch(
            PODS,
            work_ns,
            "rbac-worker",
            {"status": {"podIP": "10.1.2.3", "podIPs": [{"ip": "10.1.2.3"}]}},
            subresource="status",
        )
        model = {
            "apiVersion": "nvidia.com/v1alpha1",
            "kind": "DynamoModel",
            "metadata": {"name": "qwen", "namespace": work_ns},
            "spec": {"modelName": "Qwen/Qwen3-0.6B", "baseModelName": "Qwen/Qwen3-0.6B"},
        }
        pk.create(DYNAMO_MODELS, model)
        wait_for(
            lambda: (
                pk.get(DYNAMO_MODELS, work_ns, "qwen").get("status", {}).get("totalEndpoints") == 1
                and "nvidia.com/finalizer"
                in pk.get(DYNAMO_MODELS, work_ns, "qwen")["metadata"].get("finalizers", [])
            ),
            what="DynamoModel status and finalizer written",
        )
        pk.delete(DYNAMO_MODELS, work_ns, "qwen")

        def model_gone() -> bool:
            try:
                pk.get(DYNAMO_MODELS, work_ns, "qwen")
            except NotFoundError:
                return True
            return False

        wait_for(model_gone, what="DynamoModel finalizer removed")
    with pytest.raises(ForbiddenError):  # least privilege: no create ...
        as_sa.apply(
            DEPLOYMENTS,
            {
                "apiVersion": "apps/v1",
                "kind": "Deployment",
                "metadata": {"name": "x", "namespace": work_ns},
                "spec": {
                    "selector": {"matchLabels": {"a": "b"}},
                    "template": {
                        "metadata": {"labels": {"a": "b"}},
                        "spec": {"containers": [{"name": "c", "image": "i"}]},
                    },
                },
            },
        )
    # ... DGDs: Git's. The controller may patch (a Planner-scaled worker's replicas seed,
    # docs/operator.md ownership table) but neither create, replace nor delete them
    with pytest.raises(ForbiddenError):
        as_sa.create(
            DGDS,
            {
                "apiVersion": DGDS.api_version,
                "kind": "DynamoGraphDeployment",
                "metadata": {"name": "not-from-git", "namespace": work_ns},
                "spec": {"components": []},
            },
        )
    with pytest.raises(ForbiddenError):
        as_sa.update(DGDS, pk.get(DGDS, work_ns, "sglang-disagg"))
    with pytest.raises(ForbiddenError):
        as_sa.delete(DGDS, work_ns, "sglang-disagg")
    for res, name in ((PODCLIQUES, "vllm-agg-0-frontend"), (PCSGS, "vllm-agg-0-vllmdecodeworker")):
        with pytest.raises(ForbiddenError):  # Grove's objects: /scale only
            as_sa.patch(res, work_ns, name, {"metadata": {"labels": {"x": "y"}}})
    with pytest.raises(ForbiddenError):  # the PCS: get and patch only (no list / watch)
        as_sa.list(PODCLIQUESETS, work_ns)
    with pytest.raises(ForbiddenError):  # ... and no delete
        as_sa.delete(PODCLIQUESETS, work_ns, "vllm-agg")
