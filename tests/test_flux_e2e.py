"""The Flux loop end to end: a commit of a DGD -> `dyn-gitops hydrate` -> a loopback Git
server (smart HTTP) or OCI registry (`flux push artifact`) -> real source-controller and
kustomize-controller -> the realistic cluster (real kcm, scheduler, KWOK GPU nodes), with
the companion controller running and the project's CEL health checks
(samples/flux/*/flux-kustomization.yaml) evaluated by the real kustomize-controller.

One Flux (two controllers, Git server, registry) per module; each test has its own
namespace, repository, artifact, GitRepository/OCIRepository and Kustomization. A push is
followed by the ``reconcile.fluxcd.io/requestedAt`` annotation on the source, which is what
a notification-controller Receiver does on a Git webhook (``flux reconcile`` does the same).
Each case runs on both transports (``git``: the `rendered` branch; ``oci``: the artifact).
Figures (commit -> Ready, image change -> last old worker gone) are printed (`-s`).
"""

from __future__ import annotations

import contextlib
import datetime
import hashlib
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import yaml
from dyn_gitops_operator.kube import Kube
from dyn_gitops_operator.resources import DEPLOYMENTS, DGDS
from dyn_gitops_operator.settings import RenderedArtifactSettings
from dyn_gitops_operator.testing import running, settings_for_tests, wait_for
from kubernetes.client.exceptions import ApiException
from support import flux as fx
from support.adoption import EXAMPLES
from support.binaries import missing_component
from support.cli import run_cli
from support.cluster import is_ready, pods
from support.controlplane import free_port
from support.gitserver import git
from support.inputs import small_dgd
from support.operator_live import FLUX, NS, SGLANG, cleanup, migrate, settings_file
from support.podwatch import ReadyPods

from dyn_gitops import keys

pytestmark = pytest.mark.realk8s

SAMPLES = Path(__file__).resolve().parent.parent / "samples" / "flux"
TRANSPORTS = ["git", "oci"]
#: the sources themselves, rendered in the cluster by the companion controller into an
#: ExternalArtifact (samples/flux/incluster)
INCLUSTER = "incluster"
WORKER_PODS = "nvidia.com/dynamo-component-type=worker"
GRAPH_LABEL = "nvidia.com/dynamo-graph-deployment-name"
#: generous: the machine is shared and loaded
TIMEOUT = 180


@pytest.fixture(scope="module")
def flux(request: pytest.FixtureRequest) -> Any:
    why = fx.missing()
    if why:
        missing_component(why)  # before starting the cluster
    cluster = request.getfixturevalue("cluster")
    cluster_kube = request.getfixturevalue("cluster_kube")
    d = fx.bin_dir()
    assert d is not None
    bins = {name: d / name for name in fx.BINARIES}
    with fx.flux(bins, d / fx.CRDS_FILE, cluster_kube, cluster.kubeconfig) as f:
        yield f


def dgd(name: str, image: str = "example.com/dynamo:1.1.0") -> str:
    return small_dgd(name).replace("example.com/dynamo:1.1.0", image)


class App:
    """One test's GitOps setup: sources on `main` under dgd/, published by hydrate on
    ``transport``, applied by a Kustomization in ``ns`` (the objects' namespace too)."""

    def __init__(
        self, flux: fx.Flux, k: Kube, ns: str, tmp: Path, transport: str, render_ns: str = ""
    ) -> None:
        self.flux, self.k, self.ns, self.transport = flux, k, ns, transport
        #: the namespace the objects are rendered for (``ns`` unless given)
        self.render_ns = render_ns or ns
        self.url = flux.git.create(ns)
        self.work = tmp / "work"
        git("clone", "--quiet", self.url, str(self.work))
        git("checkout", "--quiet", "-b", "main", cwd=self.work)
        self.oci = f"oci://{flux.registry}/{ns}-rendered"
        self.kind = "OCIRepository" if transport == "oci" else "GitRepository"
        self.plural = "ocirepositories" if transport == "oci" else "gitrepositories"
        self.source_name = yaml.safe_load(self._sample_source())["metadata"]["name"]
        self.source_created = False

    # ---- Git side
    def commit(self, files: dict[str, str | None], message: str) -> str:
        """Write (or, for None, delete) dgd/<name>.yaml files, commit and push `main`."""
        d = self.work / "dgd"
        d.mkdir(exist_ok=True)
        for name, text in files.items():
            p = d / f"{name}.yaml"
            if text is None:
                p.unlink()
            else:
                p.write_text(text)
        git("add", "-A", cwd=self.work)
        git("commit", "--quiet", "-m", message, cwd=self.work)
        git("push", "--quiet", "origin", "main", cwd=self.work)
        return git("rev-parse", "HEAD", cwd=self.work)

    def publish(self) -> str:
        """What CI does on a push to main: hydrate and publish. The revision published:
        the `rendered` commit, or the source revision annotated on the OCI artifact."""
        sha = git("rev-parse", "HEAD", cwd=self.work)
        if self.transport == INCLUSTER:  # nothing to publish: the controller renders
            revision = f"main@sha1:{sha}"
        elif self.transport == "git":
            res = run_cli("hydrate", "dgd", "--namespace", self.render_ns, cwd=self.work)
            assert res.code == 0, res.stderr
            git("push", "--quiet", "origin", "rendered", cwd=self.work)
            revision = git("rev-parse", "rendered", cwd=self.work)
        else:
            out = self.work.parent / "rendered"
            res = run_cli(
                "hydrate",
                "dgd",
                "--namespace",
                self.render_ns,
                "--out-dir",
                str(out),
                cwd=self.work,
            )
            assert res.code == 0, res.stderr
            revision = f"main@sha1:{sha}"
            self.flux.push_artifact(f"{self.oci}:main", out, self.url, revision)
        if self.source_created:
            self.request_reconcile()
        return revision

    # ---- cluster side
    def create_flux_objects(self) -> None:
        """The project's samples, pointed at the loopback server and this namespace."""
        src = yaml.safe_load(self._sample_source())
        src["metadata"]["namespace"] = self.ns
        src["spec"]["interval"] = "1m"
        if self.transport == INCLUSTER:
            src["spec"]["url"] = self.url
            src["metadata"]["annotations"][keys.ANN_RENDER_PATH] = "dgd"
            src["metadata"]["annotations"][keys.ANN_RENDER_NAMESPACE] = self.ns
        elif self.transport == "git":
            src["spec"]["url"] = self.url
        else:
            src["spec"]["url"] = self.oci
            src["spec"]["insecure"] = True
        ks = yaml.safe_load((SAMPLES / self.transport / "flux-kustomization.yaml").read_text())
        ks["metadata"]["namespace"] = self.ns
        ks["spec"]["interval"] = "1m"
        ks["spec"]["retryInterval"] = "5s"
        ks["spec"]["timeout"] = "3m"
        for obj, plural, group in (
            (src, self.plural, fx.SOURCE_GROUP),
            (ks, "kustomizations", fx.KUSTOMIZE_GROUP),
        ):
            self.custom().create_namespaced_custom_object(group, "v1", self.ns, plural, obj)
        self.source_created = True

    def _sample_source(self) -> str:
        name = "ocirepository.yaml" if self.transport == "oci" else "gitrepository.yaml"
        return (SAMPLES / self.transport / name).read_text()

    def custom(self) -> Any:
        from kubernetes import client

        return client.CustomObjectsApi(self.k.api)

    def request_reconcile(self) -> None:
        now = datetime.datetime.now(datetime.UTC).isoformat()
        self.custom().patch_namespaced_custom_object(
            fx.SOURCE_GROUP,
            "v1",
            self.ns,
            self.plural,
            self.source_name,
            {"metadata": {"annotations": {fx.REQUESTED_AT: now}}},
        )

    def request_reconcile_kustomization(self) -> str:
        """A sync now (what ``flux reconcile kustomization`` does); its token, which the
        Kustomization's ``status.lastHandledReconcileAt`` shows once handled."""
        now = datetime.datetime.now(datetime.UTC).isoformat()
        self.custom().patch_namespaced_custom_object(
            fx.KUSTOMIZE_GROUP,
            "v1",
            self.ns,
            "kustomizations",
            "dynamo-apps",
            {"metadata": {"annotations": {fx.REQUESTED_AT: now}}},
        )
        return now

    def source(self) -> dict[str, Any]:
        return dict(
            self.custom().get_namespaced_custom_object(
                fx.SOURCE_GROUP, "v1", self.ns, self.plural, self.source_name
            )
        )

    def external_artifact(self) -> dict[str, Any]:
        """The ExternalArtifact the controller keeps for the source (same name)."""
        return dict(
            self.custom().get_namespaced_custom_object(
                fx.SOURCE_GROUP, "v1", self.ns, "externalartifacts", self.source_name
            )
        )

    def kustomization(self) -> dict[str, Any]:
        return dict(
            self.custom().get_namespaced_custom_object(
                fx.KUSTOMIZE_GROUP, "v1", self.ns, "kustomizations", "dynamo-apps"
            )
        )

    def applied(self, revision: str) -> bool:
        """The Kustomization is Ready, having applied what :meth:`publish` returned."""
        ks = self.kustomization()
        st = ks.get("status") or {}
        cond = fx.ready(ks)
        if cond is None or cond[0] != "True":
            return False
        if (st.get("observedGeneration") or 0) < ks["metadata"]["generation"]:
            return False
        applied = st.get("lastAppliedRevision") or ""
        if self.transport == INCLUSTER:
            return applied == revision
        if self.transport == "git":
            return revision in applied
        artifact = (self.source().get("status") or {}).get("artifact") or {}
        source_revision = (artifact.get("metadata") or {}).get(fx.OCI_REVISION)
        return source_revision == revision and applied == artifact.get("revision")

    def explain(self) -> str:
        rendered = ""
        if self.transport == INCLUSTER:
            with contextlib.suppress(ApiException):
                rendered = f"\nexternal artifact: {self.external_artifact().get('status')}"
        return (
            f"source: {(self.source().get('status') or {})}{rendered}"
            f"\nkustomization: {(self.kustomization().get('status') or {})}"
            f"\n{self.flux.logs(self.ns)}"
        )

    # ---- workloads
    def deployments(self, graph: str) -> dict[str, Any]:
        items, _ = self.k.list(DEPLOYMENTS, self.ns, label_selector=f"{GRAPH_LABEL}={graph}")
        return {d["metadata"]["name"]: d for d in items}

    def serving(self, graph: str) -> bool:
        """Every Deployment of ``graph`` rolled out, its pods Ready on KWOK GPU nodes, and
        the DGD reported successful by the companion controller."""
        deps = self.deployments(graph)
        if len(deps) < 2:
            return False
        for d in deps.values():
            st, want = d.get("status") or {}, d["spec"].get("replicas")
            if not want or st.get("readyReplicas") != want or st.get("updatedReplicas") != want:
                return False
            if st.get("replicas") != want:
                return False
        ps = pods(self.k.api, self.ns, f"{GRAPH_LABEL}={graph}")
        if not ps or not all(is_ready(p) for p in ps):
            return False
        assert all(p.spec.node_name.startswith("kwok-gpu-") for p in ps)
        status = self.k.get(DGDS, self.ns, graph).get("status") or {}
        return status.get("state") == "successful"

    def workers(self, graph: str) -> list[str]:
        return sorted(n for n in self.deployments(graph) if n.startswith(f"{graph}-vllmworker-"))


def deploy(app: App, graphs: dict[str, str]) -> float:
    """Commit the graphs, publish, create the Flux objects; wait until Flux reports them
    applied and healthy and the pods are Ready. Seconds from the commit."""
    app.commit(graphs, "add graphs")
    t0 = time.monotonic()
    revision = app.publish()
    app.create_flux_objects()
    wait_for(
        lambda: app.applied(revision), TIMEOUT, lambda: f"Kustomization Ready\n{app.explain()}", 0.2
    )
    took = time.monotonic() - t0
    for graph in graphs:
        wait_for(lambda g=graph: app.serving(g), TIMEOUT, f"{graph} serving", 0.2)
    return took


@pytest.fixture
def app(
    flux: fx.Flux, cluster_k: Kube, cluster_namespace: str, tmp_path: Path, request: Any
) -> Any:
    a = App(flux, cluster_k, cluster_namespace, tmp_path, request.param)
    with running(settings_for_tests(cluster_namespace), cluster_k):
        yield a


@pytest.mark.parametrize("app", TRANSPORTS, indirect=True)
def test_a_commit_syncs_to_ready_pods_and_a_ready_kustomization(app: App) -> None:
    took = deploy(app, {"app-a": dgd("app-a")})
    ks = app.kustomization()
    # the CEL health check of the DGD (and kstatus of the rest) passed, in the real controller
    assert "DynamoGraphDeployment" in str(ks["spec"]["healthCheckExprs"])
    inventory = {e["id"] for e in ks["status"]["inventory"]["entries"]}
    assert f"{app.ns}_app-a_nvidia.com_DynamoGraphDeployment" in inventory
    assert any(i.startswith(f"{app.ns}_app-a-vllmworker-") for i in inventory)
    workers = [p for p in pods(app.k.api, app.ns, WORKER_PODS) if is_ready(p)]
    assert len(workers) == 3
    print(f"\n[flux e2e {app.transport}] commit -> Kustomization Ready: {took:.1f} s")


@pytest.mark.parametrize("app", TRANSPORTS, indirect=True)
def test_an_image_change_in_git_rolls_the_workers_without_a_moment_of_zero_ready(
    app: App,
) -> None:
    deploy(app, {"app-a": dgd("app-a")})
    (old,) = app.workers("app-a")
    with ReadyPods(app.k.api, app.ns, WORKER_PODS) as watch:
        app.commit({"app-a": dgd("app-a", "example.com/dynamo:1.1.1")}, "new worker image")
        t0 = time.monotonic()
        revision = app.publish()
        wait_for(lambda: old not in app.deployments("app-a"), TIMEOUT, "old generation deleted")
        wait_for(
            lambda: (
                not [
                    p
                    for p in pods(app.k.api, app.ns, WORKER_PODS)
                    if p.metadata.name.startswith(old)
                ]
            ),
            TIMEOUT,
            "old worker pods gone",
            0.1,
        )
        gone = time.monotonic() - t0
        wait_for(lambda: app.applied(revision), TIMEOUT, lambda: f"Ready\n{app.explain()}")
        wait_for(lambda: app.serving("app-a"), TIMEOUT, "app-a serving on the new generation")
        wait_for(lambda: watch.count() == 3, 30, "the pod watch caught up")
    (new,) = app.workers("app-a")
    assert new != old
    template = app.deployments("app-a")[new]["spec"]["template"]["spec"]
    assert template["containers"][0]["image"] == "example.com/dynamo:1.1.1"
    # desired 3, max-unavailable 25 % (rounds down to 0): the floor is 3 ready workers
    assert watch.fewest() >= 3, f"ready workers dropped below 3: {watch.history}"
    print(f"\n[flux e2e {app.transport}] image change -> last old worker gone: {gone:.1f} s")


@pytest.mark.parametrize("app", TRANSPORTS, indirect=True)
def test_removing_a_graph_from_git_prunes_everything_including_its_managed_workers(
    app: App,
) -> None:
    deploy(app, {"app-a": dgd("app-a"), "app-b": dgd("app-b")})
    (worker_b,) = app.workers("app-b")
    b_worker = app.deployments("app-b")[worker_b]
    # Flux does not prune a managed worker generation itself
    assert b_worker["metadata"]["annotations"]["kustomize.toolkit.fluxcd.io/prune"] == "disabled"
    a_pods = {p.metadata.uid for p in pods(app.k.api, app.ns, f"{GRAPH_LABEL}=app-a")}
    app.commit({"app-b": None}, "remove app-b")
    revision = app.publish()

    def b_objects() -> list[str]:
        from kubernetes import client

        core, rbac = client.CoreV1Api(app.k.api), client.RbacAuthorizationV1Api(app.k.api)
        left = [f"Deployment/{n}" for n in app.deployments("app-b")]
        left += [f"Pod/{p.metadata.name}" for p in pods(app.k.api, app.ns, f"{GRAPH_LABEL}=app-b")]
        for kind, items in (
            ("Service", core.list_namespaced_service(app.ns).items),
            ("ServiceAccount", core.list_namespaced_service_account(app.ns).items),
            ("Role", rbac.list_namespaced_role(app.ns).items),
            ("RoleBinding", rbac.list_namespaced_role_binding(app.ns).items),
        ):
            left += [
                f"{kind}/{o.metadata.name}" for o in items if o.metadata.name.startswith("app-b")
            ]
        items, _ = app.k.list(DGDS, app.ns)
        left += [f"DGD/{o['metadata']['name']}" for o in items if o["metadata"]["name"] == "app-b"]
        return left

    wait_for(lambda: app.applied(revision), TIMEOUT, lambda: f"Ready\n{app.explain()}")
    wait_for(lambda: not b_objects(), TIMEOUT, "every object of app-b deleted")
    # the other graph is untouched: same pods, still serving
    assert app.serving("app-a")
    assert {p.metadata.uid for p in pods(app.k.api, app.ns, f"{GRAPH_LABEL}=app-a")} == a_pods


def test_the_real_kustomize_controller_evaluates_our_cel_failed_expression(
    flux: fx.Flux, cluster_k: Kube, cluster_namespace: str, tmp_path: Path
) -> None:
    """No companion controller: the DGD never gets a successful status, and a failed one
    makes the Kustomization fail on its health check (the `failed` CEL expression)."""
    app = App(flux, cluster_k, cluster_namespace, tmp_path, "git")
    app.commit({"app-a": dgd("app-a")}, "add app-a")
    app.publish()
    app.create_flux_objects()
    wait_for(lambda: app.k.get(DGDS, app.ns, "app-a"), TIMEOUT, lambda: f"applied\n{app.explain()}")
    # waiting on the DGD's health: not Ready
    cond = fx.ready(app.kustomization())
    assert cond is None or cond[0] != "True", cond
    app.k.request(
        "PATCH",
        DGDS.path(app.ns, "app-a", "status"),
        [("fieldManager", "test")],
        {"status": {"state": "failed"}},
        "application/merge-patch+json",
    )

    def failed() -> Any:
        c = fx.ready(app.kustomization())
        return c if c and c[0] == "False" and "DynamoGraphDeployment" in c[2] else None

    _, reason, message = wait_for(failed, TIMEOUT, lambda: f"health check failed\n{app.explain()}")
    assert reason == "HealthCheckFailed", (reason, message)
    assert f"DynamoGraphDeployment/{app.ns}/app-a" in message


# ------------------------------------------------------------- in-cluster rendering (RFC-0012)
@pytest.fixture
def rendering_app(flux: fx.Flux, cluster_k: Kube, cluster_namespace: str, tmp_path: Path) -> Any:
    """The sources on `main` rendered by the companion controller itself (in this process:
    its artifact server on loopback, where the Flux controllers, host processes, reach it)."""
    a = App(flux, cluster_k, cluster_namespace, tmp_path, INCLUSTER)
    artifacts = RenderedArtifactSettings(
        enabled=True,
        address=f"127.0.0.1:{free_port()}",
        storage_dir=str(tmp_path / "artifacts"),
    )
    with running(settings_for_tests(cluster_namespace, artifacts=artifacts), cluster_k):
        yield a


def test_flux_applies_what_the_controller_renders_in_cluster_and_keeps_the_last_good_revision(
    rendering_app: App,
) -> None:
    """A commit of a DGD -> GitRepository (annotated dyn-gitops.io/render-path) -> the
    controller renders its artifact into an ExternalArtifact -> a Kustomization with
    ``sourceRef.kind: ExternalArtifact`` (kustomize-controller v1.9.5, feature gate on) applies
    it: Ready, pods serving. A commit that does not render: the ExternalArtifact reads
    Ready=False with the problem's file:line, keeps (and still serves) the last good
    artifact, and the Kustomization keeps that revision applied. Flux RFC-0012; source-
    controller api v1.9.6 api/v1/externalartifact_types.go."""
    app = rendering_app
    took = deploy(app, {"app-a": dgd("app-a")})
    good = app.kustomization()["status"]["lastAppliedRevision"]
    ea = app.external_artifact()
    assert fx.ready(ea) is not None and fx.ready(ea)[0] == "True", ea.get("status")
    artifact = ea["status"]["artifact"]
    assert artifact["revision"] == good and good.startswith("main@sha1:")
    workers = {n: d["metadata"]["uid"] for n, d in app.deployments("app-a").items()}
    print(f"\n[flux e2e {INCLUSTER}] commit -> Kustomization Ready: {took:.1f} s")

    bad = dgd("app-a", "example.com/dynamo:1.1.1").replace('gpu: "1"', 'gpu: "lots"')
    app.commit({"app-a": bad}, "a quantity that is not one")
    app.publish()

    def refused() -> Any:
        c = fx.ready(app.external_artifact())
        return c if c and c[0] == "False" else None

    _, reason, message = wait_for(refused, TIMEOUT, lambda: f"Ready=False\n{app.explain()}")
    assert reason == "RenderFailed" and "dgd/app-a.yaml:" in message, (reason, message)
    assert app.external_artifact()["status"]["artifact"] == artifact  # the last good one
    served = urllib.request.urlopen(artifact["url"], timeout=30).read()
    assert "sha256:" + hashlib.sha256(served).hexdigest() == artifact["digest"]
    token = app.request_reconcile_kustomization()  # a sync after the bad commit

    def synced_again() -> bool:
        handled = (app.kustomization().get("status") or {}).get("lastHandledReconcileAt")
        return handled == token and app.applied(good)

    wait_for(synced_again, TIMEOUT, lambda: f"synced, still Ready\n{app.explain()}")
    assert app.kustomization()["status"]["lastAppliedRevision"] == good
    now = app.deployments("app-a")
    assert {n: d["metadata"]["uid"] for n, d in now.items()} == workers  # nothing applied
    for d in now.values():
        assert d["spec"]["template"]["spec"]["containers"][0]["image"].endswith(":1.1.0")


# ------------------------------------------------------------- migration from the operator
def test_migration_from_the_operator_to_flux_restarts_and_deletes_nothing(
    flux: fx.Flux, cluster_k: Kube, cluster_kube: Any, cluster_namespace: str, tmp_path: Path
) -> None:
    """docs/migration.md with the real kustomize-controller as step 4: the Dynamo operator's
    own output for the SGLang aggregated example (``conformance/operator-output``, its
    reconcilers at upstream 2a6da14c8; field manager ``manager``, controller references to
    the DCDs, as ``internal/controller_common/resource.go`` ``SyncObservedResource`` leaves
    them) is live and serving in ``default`` (the namespace its labels and env name);
    ``adopt --check`` exits 0; the example and the operator's settings (``dyn-gitops.yaml``)
    are committed, hydrated to the ``rendered`` branch and applied by a Kustomization (in
    the test's namespace, the objects in ``default``): Ready; then the hand-over and the DCDs
    deleted. One pod watch over it all: no pod added or deleted, no restart, the same
    ReplicaSets and Deployment uids, the pod templates owned by ``kustomize-controller``
    alone (``support.operator_live.migrate``; the companion controller in process, for
    ``default``)."""
    k = cluster_k
    app = App(flux, k, cluster_namespace, tmp_path, "git", render_ns=NS)
    files = {
        SGLANG.removesuffix(".yaml"): (EXAMPLES / SGLANG).read_text(),
        "dyn-gitops": settings_file(),
    }

    def sync() -> None:
        app.commit(files, "the graph the operator runs, with its settings")
        start = time.monotonic()
        revision = app.publish()
        app.create_flux_objects()
        wait_for(lambda: app.applied(revision), TIMEOUT, lambda: f"Ready\n{app.explain()}")
        print(
            f"\n[flux e2e] migration, commit -> Kustomization Ready {time.monotonic() - start:.1f}s"
        )

    with (
        cleanup(k, SGLANG),
        kustomization_removed(app),
        running(settings_for_tests(NS), k),
    ):
        migrate(k, cluster_kube, tmp_path, SGLANG, FLUX, sync)


@contextlib.contextmanager
def kustomization_removed(app: App) -> Any:
    """Delete the Kustomization (its finalizer prunes what it applied) and wait until it is
    gone, before the rest is cleaned up: nothing of Flux acts in ``default`` afterwards."""
    try:
        yield
    finally:
        with contextlib.suppress(ApiException):
            app.custom().delete_namespaced_custom_object(
                fx.KUSTOMIZE_GROUP, "v1", app.ns, "kustomizations", "dynamo-apps"
            )

        def gone() -> bool:
            try:
                app.kustomization()
            except ApiException as e:
                return e.status == 404
            return False

        wait_for(gone, TIMEOUT, lambda: f"the Kustomization deleted\n{app.explain()}")
