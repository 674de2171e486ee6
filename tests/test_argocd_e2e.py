"""The GitOps loop a user runs with Argo CD, end to end, on the realistic cluster.

A commit to a loopback Git repository -> real Argo CD (application-controller + repo-server +
Redis) -> our sidecar image under podman running the real argocd-cmp-server -> server-side
apply onto the realistic cluster (kube-apiserver + kube-controller-manager + scheduler + KWOK
GPU nodes) -> the companion controller as ``charts/dyn-gitops`` installs it -> Ready pods,
and the Application's health through our health Lua (deploy/argocd/kustomize/argocd-cm.yaml),
run by Argo CD's own Lua runtime. What runs and why: ``tests/support/argocd.py``; one Argo CD
per module, one repository, namespace and Application per test.

The companion controller: ``helm install`` of the chart with its default values (cluster
mode, leader election, scope Lease, DynamoModels) but ``controller.replicas=0`` and a free
``controller.port``; the installed Deployment's container (command, args, env) runs as a
local process authenticated as the chart's ServiceAccount with a TokenRequest token
(``tests/support/chart_controller.py``), one for the module. So every case also shows the
chart's RBAC suffices; at the end, RBAC may have refused none of the controller's requests.

Argo CD runs with its Source Hydrator on (the commit server beside it; apps without
``spec.sourceHydrator`` are untouched by it): one case hydrates through the commit server.

Figures (``pytest -s``): commit -> Synced+Healthy, image change -> last old worker gone,
dry commit -> hydrated commit -> Synced; quoted in docs/argocd.md.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from dyn_gitops_operator.errors import NotFoundError
from dyn_gitops_operator.kube import DEPLOYMENTS, DGDS, DGDSAS, Kube, Resource
from dyn_gitops_operator.testing import hpa_scale
from support import argocd as argo_support
from support import chart_controller, images
from support.adoption import EXAMPLES
from support.binaries import missing_component
from support.cli import run_cli
from support.cluster import is_ready, pods
from support.controlplane import install_crds
from support.gitserver import git
from support.graphs import IMAGE, WORKER, rollout_graph
from support.objwatch import ObjectStates
from support.operator_live import AGG, ARGOCD, NS, cleanup, migrate, settings_file
from support.podwatch import ReadyPods

pytestmark = pytest.mark.realk8s

SAMPLES = Path(__file__).resolve().parent.parent / "samples"
APPS = Resource("argoproj.io", "v1alpha1", "applications", "Application")
RESOURCES = {
    "Namespace": Resource("", "v1", "namespaces", "Namespace"),
    "ConfigMap": Resource("", "v1", "configmaps", "ConfigMap"),
    "Secret": Resource("", "v1", "secrets", "Secret"),
    "AppProject": Resource("argoproj.io", "v1alpha1", "appprojects", "AppProject"),
    "Application": APPS,
}
ADMIN = "argocd-e2e-admin"
NEW_IMAGE = "nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.2.0"
WORKER_PODS = f"nvidia.com/dynamo-component={WORKER}"
#: where the Source Hydrator case's commit server writes (never the repository root)
HYDRATED_BRANCH = "environments/e2e"
HYDRATED_PATH = "rendered"
#: the DGD as committed to Git (the controller's DGDS is the v1beta1 view)
DGDS_V1ALPHA1 = Resource(
    "nvidia.com", "v1alpha1", "dynamographdeployments", "DynamoGraphDeployment"
)


# --------------------------------------------------------------------------- fixtures
@pytest.fixture(scope="module")
def argo(
    cluster: Any, cluster_kube: Any, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Any]:
    """Argo CD against the session's realistic cluster, for this module."""
    for tool in ("redis-server", "redis-cli", "git"):
        if shutil.which(tool) is None:
            missing_component(f"{tool} is missing: run tools/images/deps.sh as root")
    why = images.deps_missing()
    if why:
        missing_component(f"the image tools are missing ({why}): run tools/images/deps.sh as root")
    from support.binaries import need_binaries

    server = need_binaries("argocd-cmp-server")["argocd-cmp-server"]
    multicall = server.parent / "argocd"
    if not multicall.exists() or not argo_support.module_dir().is_dir():
        missing_component(
            f"{multicall} or {argo_support.module_dir()} is missing: the full argocd binary of "
            "tools/test-bins/build.sh (argocd-build=multicall) has not been built"
        )
    built = images.build()
    print(f"\nargocd e2e: images built or reused in {built.build_seconds:.1f}s")
    install_crds(cluster_kube, argo_support.crds())
    admin = Kube(cluster_kube, field_manager=ADMIN)
    for obj in argo_support.config_objects(hydrator=True):
        res = RESOURCES[obj["kind"]]
        admin.apply(res, obj)
    with argo_support.argo_cd(
        multicall, built.cmp, cluster.kubeconfig, tmp_path_factory.mktemp("argocd"), hydrator=True
    ) as a:
        print(
            "argocd e2e: redis + sidecar + repo-server + commit-server + controller started in "
            f"{a.started_in:.1f}s"
        )
        yield a


@pytest.fixture(scope="module")
def companion(argo: Any, cluster: Any, cluster_kube: Any) -> Iterator[Any]:
    """The chart-installed companion controller (cluster mode) for this module; its log
    lands beside Argo CD's (in a timeout's diagnosis). After the module: none of its
    requests was refused by RBAC (the chart's RBAC covered every case)."""
    from support.binaries import need_binaries

    helm = need_binaries("helm")["helm"]
    admin = Kube(cluster_kube, field_manager=ADMIN)
    with chart_controller.chart_controller(helm, cluster.plane, admin, argo.dir) as c:
        print(
            f"\nargocd e2e: chart installed, controller leading as "
            f"{c.namespace}/{c.service_account} in {c.started_in:.1f}s"
        )
        yield c
    assert c.proc is not None and c.proc.returncode == 0, (
        f"the controller exited with {c.proc and c.proc.returncode}:\n{c.logs()}"
    )
    denied = chart_controller.rbac_denials(c.log, c.user)
    assert not denied, "the chart's RBAC refused the controller:\n" + "\n".join(denied[:20])


class App:
    """One test's repository, Application and controller; see :func:`app`."""

    def __init__(self, argo: Any, k: Kube, namespace: str, work: Path) -> None:
        self.argo, self.k, self.ns = argo, k, namespace
        self.name = f"e2e-{namespace}"
        self.repo = argo_support.new_repo(argo.git, work, self.name)
        self.push_secret = f"{self.name}-push"
        self.admin = Kube(k.api, field_manager=ADMIN)

    def create(self, parameters: dict[str, str] | None = None, allow_empty: bool = False) -> None:
        app = argo_support.application(self.name, self.repo.url, "dgd", self.ns, parameters)
        if allow_empty:  # Argo CD's own guard: auto-sync never prunes every resource
            app["spec"]["syncPolicy"]["automated"]["allowEmpty"] = True
        self.admin.apply(APPS, app)

    def status(self) -> dict[str, Any]:
        try:
            return dict(self.k.get(APPS, argo_support.NAMESPACE, self.name).get("status") or {})
        except NotFoundError:
            return {}

    def state(self) -> tuple[str, str, str]:
        st = self.status()
        return (
            (st.get("sync") or {}).get("status", ""),
            (st.get("sync") or {}).get("revision", ""),
            (st.get("health") or {}).get("status", ""),
        )

    def refresh(self, hard: bool = True) -> None:
        self.admin.request(
            "PATCH",
            APPS.path(argo_support.NAMESPACE, self.name),
            [("fieldManager", ADMIN)],
            {
                "metadata": {
                    "annotations": {"argocd.argoproj.io/refresh": "hard" if hard else "normal"}
                }
            },
            "application/merge-patch+json",
        )

    def wait(self, cond: Callable[[], Any], what: str, timeout: float = 180) -> Any:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            value = cond()
            if value:
                return value
            time.sleep(0.25)
        st = self.status()
        raise AssertionError(
            f"timed out after {timeout} s waiting for {what}; app state {self.state()}, "
            f"conditions {st.get('conditions')}, "
            f"operation {(st.get('operationState') or {}).get('message')}"
            f"\n{self.argo.logs()}"
        )

    def wait_healthy(self, revision: str, timeout: float = 180) -> float:
        start = time.monotonic()
        self.wait(
            lambda: self.state() == ("Synced", revision, "Healthy"),
            f"Synced+Healthy at {revision[:8]}",
            timeout,
        )
        return time.monotonic() - start

    # ----------------------------------------------------------------- Source Hydrator
    def create_hydrated(self) -> None:
        """deploy/argocd/application-hydrator.yaml on ``dgd`` of ``main``, hydrated to
        :data:`HYDRATED_BRANCH` at :data:`HYDRATED_PATH`, with a push Secret for the repo."""
        secret = argo_support.write_secret(self.push_secret, self.repo.url)
        self.admin.apply(RESOURCES["Secret"], secret)
        app = argo_support.hydrator_application(
            self.name, self.repo.url, "dgd", self.ns, HYDRATED_BRANCH, HYDRATED_PATH
        )
        self.admin.apply(APPS, app)

    def hydrate(self) -> None:
        """What a dry-source webhook does: ask for a hydration, past the revision cache."""
        self.admin.request(
            "PATCH",
            APPS.path(argo_support.NAMESPACE, self.name),
            [("fieldManager", ADMIN)],
            {"metadata": {"annotations": {"argocd.argoproj.io/hydrate": "normal"}}},
            "application/merge-patch+json",
        )

    def hydration(self) -> dict[str, Any]:
        """status.sourceHydrator.currentOperation (phase, drySHA, hydratedSHA, message)."""
        return dict((self.status().get("sourceHydrator") or {}).get("currentOperation") or {})

    def wait_hydrated(self, dry_sha: str, timeout: float = 180) -> str:
        """The hydrated commit of ``dry_sha``, once the hydrator reports it."""

        def done() -> str:
            op = self.hydration()
            ok = op.get("phase") == "Hydrated" and op.get("drySHA") == dry_sha
            return str(op.get("hydratedSHA") or "") if ok else ""

        return str(self.wait(done, f"the hydration of {dry_sha[:8]}", timeout))

    def hydrated_git(self, *args: str) -> str:
        """``git`` in the server's bare repository (what the commit server pushed)."""
        return git("--git-dir", str(self.argo.git.root / f"{self.name}.git"), *args)

    def deployments(self, selector: str = "") -> dict[str, dict[str, Any]]:
        items, _ = self.k.list(DEPLOYMENTS, self.ns, label_selector=selector)
        return {d["metadata"]["name"]: d for d in items}

    def ready_workers(self) -> int:
        return sum(is_ready(p) for p in pods(self.k.api, self.ns, WORKER_PODS))


@pytest.fixture
def app(
    argo: Any, companion: Any, cluster_k: Kube, cluster_namespace: str, tmp_path: Path
) -> Iterator[App]:
    """A repository and Application for this test's namespace (the module's companion
    controller acts on every namespace); the Application is deleted (no cascade) before the
    namespace is."""
    a = App(argo, cluster_k, cluster_namespace, tmp_path)
    yield a
    with contextlib.suppress(NotFoundError):
        cluster_k.request("DELETE", APPS.path(argo_support.NAMESPACE, a.name))
    with contextlib.suppress(NotFoundError):  # the Source Hydrator case's push credentials
        cluster_k.request("DELETE", RESOURCES["Secret"].path(argo_support.NAMESPACE, a.push_secret))


def graph(image: str = IMAGE, replicas: int = 2) -> str:
    return yaml.safe_dump(rollout_graph(image, replicas), sort_keys=False)


# --------------------------------------------------------------------------- cases
def test_commit_syncs_to_ready_pods_and_healthy(app: App, cluster: Any) -> None:
    sha = app.repo.commit({"dgd/roll.yaml": graph()}, "add the roll graph")
    start = time.monotonic()
    app.create()
    took = app.wait_healthy(sha)
    print(f"\nargocd e2e: commit -> Synced+Healthy {time.monotonic() - start:.1f}s")
    assert took >= 0
    deps = app.deployments()
    assert {n.split("-")[1] for n in deps} == {"frontend", "vllmdecodeworker"}, deps.keys()
    for d in deps.values():
        assert (d.get("status") or {}).get("readyReplicas") == d["spec"]["replicas"], d["metadata"][
            "name"
        ]
    workers = pods(app.k.api, app.ns, WORKER_PODS)
    assert len(workers) == 2 and all(is_ready(p) for p in workers)
    for p in workers:
        assert p.spec.node_name in cluster.nodes
        limits = p.spec.containers[0].resources.limits or {}
        assert limits.get("nvidia.com/gpu") == "1"
    # Healthy came from our DGD health Lua: the controller wrote the graph's state
    dgd = app.k.get(DGDS, app.ns, "roll")
    assert dgd["status"]["state"] == "successful"
    kinds = {r["kind"] for r in app.status()["resources"]}
    assert {"DynamoGraphDeployment", "Deployment", "Service"} <= kinds


def app_state(app: dict[str, Any]) -> tuple[str, str, str, str]:
    """(sync status, sync revision, health, reconciledAt) of a stored Application."""
    st = app.get("status") or {}
    return (
        (st.get("sync") or {}).get("status", ""),
        (st.get("sync") or {}).get("revision", ""),
        (st.get("health") or {}).get("status", ""),
        st.get("reconciledAt", ""),
    )


def test_image_change_rolls_workers_without_zero_ready_or_flapping(app: App) -> None:
    """Git changes the worker image: the workers roll without ever falling below the floor
    (desired 2 - maxUnavailable 25 %, rounded down to 0: 2 Ready, non-terminating pods;
    every pod change followed through one pod watch), and once synced at the new revision
    the Application never goes OutOfSync again (every stored Application state followed
    through a watch, over two more reconciliations)."""
    sha1 = app.repo.commit({"dgd/roll.yaml": graph()}, "roll at 1.1.0")
    app.create()
    app.wait_healthy(sha1)
    (old,) = app.deployments(WORKER_PODS)
    floor = 2
    states = ObjectStates(app.k, APPS, argo_support.NAMESPACE, app.name, app_state)
    with ReadyPods(app.k.api, app.ns, WORKER_PODS) as watch, states:
        assert watch.count() == 2
        sha2 = app.repo.commit({"dgd/roll.yaml": graph(NEW_IMAGE)}, "roll to 1.2.0")
        start = time.monotonic()
        app.refresh(hard=False)  # what a Git webhook does; without it the 30 s resync would

        def old_gone() -> bool:
            return not [n for n in watch.present() if n.startswith(old + "-")]

        app.wait(old_gone, "the last old worker pod gone", timeout=240)
        gone = time.monotonic() - start
        app.wait_healthy(sha2, timeout=240)

        def rolled() -> bool:
            return old not in app.deployments(WORKER_PODS) and watch.count() == 2

        app.wait(rolled, "one worker generation, 2 ready workers", timeout=240)
        # two more reconciliations after the rollout settled (a re-sync would flap now)
        for _ in range(2):
            reconciled = app.status().get("reconciledAt")
            app.refresh(hard=False)
            app.wait(lambda r=reconciled: app.status().get("reconciledAt") != r, "a reconciliation")
        seen = states.until(app.k.get(APPS, argo_support.NAMESPACE, app.name))
    print(f"\nargocd e2e: image change commit -> last old worker gone {gone:.1f}s")
    new = next(iter(app.deployments(WORKER_PODS)))
    assert new != old
    image = app.deployments(WORKER_PODS)[new]["spec"]["template"]["spec"]["containers"][0]["image"]
    assert image == NEW_IMAGE
    # never fewer Ready, non-terminating workers than the floor
    assert watch.fewest() >= floor, f"below the floor of {floor} ready workers: {watch.history}"
    # once synced at the new revision, the Application never goes OutOfSync again
    first = next(i for i, s in enumerate(seen) if s[:2] == ("Synced", sha2))
    after = {s[0] for s in seen[first:]}
    assert after == {"Synced"}, [s for s in seen[first:] if s[0] != "Synced"][:5]
    assert len({s[3] for s in seen[first:]}) >= 3  # the reconciliations were seen


def test_scale_through_the_adapter_survives_resyncs(app: App) -> None:
    # the graph only (the sample's dyn-gitops.yaml would send it to another namespace)
    sample = SAMPLES / "scaling-adapter" / "input" / "sglang-disagg.yaml"
    files = {"dgd/sglang-disagg.yaml": sample.read_text()}
    sha1 = app.repo.commit(files, "scaling-adapter sample")
    app.create()
    app.wait_healthy(sha1)
    adapter = "sglang-disagg-decode"
    before = int(app.k.get(DGDSAS, app.ns, adapter)["spec"]["replicas"])
    want = before + 1
    hpa_scale(app.k, app.ns, adapter, want)
    decode = next(n for n in app.deployments() if n.startswith("sglang-disagg-decode-"))

    def scaled() -> bool:
        d = app.k.get(DEPLOYMENTS, app.ns, decode)
        return bool(
            d["spec"]["replicas"] == want and (d.get("status") or {}).get("readyReplicas") == want
        )

    app.wait(scaled, f"{decode} at {want} ready replicas", timeout=120)
    # a new commit (a real sync) and a hard refresh: the scale stays
    sha2 = app.repo.commit({"dgd/NOTES.md": "unrelated change\n"}, "unrelated commit")
    app.refresh()
    app.wait_healthy(sha2)
    app.wait(
        lambda: (
            ((app.status().get("operationState") or {}).get("syncResult") or {}).get("revision")
            == sha2
        ),
        "a sync at the new revision",
    )
    reconciled = app.status().get("reconciledAt")
    app.refresh()
    app.wait(lambda: app.status().get("reconciledAt") != reconciled, "another reconciliation")
    assert app.state() == ("Synced", sha2, "Healthy")
    assert int(app.k.get(DGDSAS, app.ns, adapter)["spec"]["replicas"]) == want
    assert app.k.get(DEPLOYMENTS, app.ns, decode)["spec"]["replicas"] == want
    assert scaled()


def test_broken_dgd_names_file_and_line_and_leaves_workers(app: App) -> None:
    sha1 = app.repo.commit({"dgd/roll.yaml": graph()}, "good graph")
    app.create()
    app.wait_healthy(sha1)
    (worker,) = app.deployments(WORKER_PODS).values()
    dgd_generation = app.k.get(DGDS, app.ns, "roll")["metadata"]["generation"]
    broken = graph().replace("replicas: 2", "replicas: many")
    line = 1 + broken.splitlines().index(
        next(ln for ln in broken.splitlines() if "replicas: many" in ln)
    )
    app.repo.commit({"dgd/roll.yaml": broken}, "broken graph")
    app.refresh(hard=False)

    def error() -> str:
        for c in app.status().get("conditions") or []:
            if "roll.yaml" in c.get("message", ""):
                return str(c["message"])
        return ""

    msg = app.wait(error, "a condition naming roll.yaml", timeout=180)
    print(f"\nargocd e2e: broken DGD condition: ...{msg[msg.index('roll.yaml') :][:200]}")
    assert f"roll.yaml:{line}" in msg, msg
    assert "replicas" in msg and "many" in msg, msg
    # nothing was applied: the running workers are untouched
    (after,) = app.deployments(WORKER_PODS).values()
    assert after["metadata"]["uid"] == worker["metadata"]["uid"]
    assert after["metadata"]["generation"] == worker["metadata"]["generation"]
    assert app.ready_workers() == 2
    assert app.k.get(DGDS, app.ns, "roll")["metadata"]["generation"] == dgd_generation


def test_removing_the_dgd_prunes_everything(app: App) -> None:
    # the directory stays (with a note); the plugin allows an empty render and Argo CD's
    # auto-sync an empty app (docs/argocd.md, section 10)
    sha1 = app.repo.commit({"dgd/roll.yaml": graph(), "dgd/NOTES.md": "graphs\n"}, "graph")
    app.create({"allow-empty": "true"}, allow_empty=True)
    app.wait_healthy(sha1)
    assert app.deployments(WORKER_PODS)
    sha2 = app.repo.commit({"dgd/roll.yaml": None}, "remove the graph")
    app.refresh(hard=False)

    def empty() -> bool:
        if app.deployments() or pods(app.k.api, app.ns):
            return False
        try:
            app.k.get(DGDS, app.ns, "roll")
            return False
        except NotFoundError:
            return True

    app.wait(empty, "every Deployment, pod and the DGD gone", timeout=180)
    app.wait(lambda: app.state()[:2] == ("Synced", sha2), "Synced at the removal")


def local_render(app: App, dry_sha: str) -> list[dict[str, Any]]:
    """What the sidecar's ``dyn-gitops cmp generate`` prints for the dry source at
    ``dry_sha``: the same command on the checkout, in the environment Argo CD gives it
    (the hydrator Application's plugin env and parameters, destination namespace, revision)."""
    plugin = argo_support.hydrator_application(
        app.name, app.repo.url, "dgd", app.ns, HYDRATED_BRANCH, HYDRATED_PATH
    )["spec"]["sourceHydrator"]["drySource"]["plugin"]
    env = {f"ARGOCD_ENV_{e['name']}": e["value"] for e in plugin.get("env", [])}
    env.update(
        ARGOCD_APP_PARAMETERS=json.dumps(plugin.get("parameters", [])),
        ARGOCD_APP_NAMESPACE=app.ns,
        ARGOCD_APP_REVISION=dry_sha,
        ARGOCD_APP_SOURCE_PATH="dgd",
    )
    res = run_cli("cmp", "generate", "--server", "off", cwd=app.repo.dir / "dgd", env=env)
    assert res.code == 0, res.stderr
    return [d for d in yaml.safe_load_all(res.stdout) if d]


def canonical(objects: list[dict[str, Any]]) -> list[str]:
    return sorted(json.dumps(o, sort_keys=True) for o in objects)


def test_source_hydrator_commits_the_render_then_syncs_it(app: App) -> None:
    """Argo CD's Source Hydrator (v3.5.3, beta) with our plugin as its dry source
    (``DrySource.Plugin``, pkg/apis/application/v1alpha1/types.go; controller/hydrator/
    hydrator.go; commitserver/commit/commit.go): a DGD committed to ``main`` becomes a
    commit of the rendered objects on the hydrated branch, pushed by the commit server,
    which the Application then syncs. A broken DGD: the hydration fails in the
    Application's status naming ``file:line``, and the hydrated branch keeps its commit."""
    dry1 = app.repo.commit({"dgd/roll.yaml": graph()}, "add the roll graph")
    start = time.monotonic()
    app.create_hydrated()
    hydrated1 = app.wait_hydrated(dry1)
    hydrated_at = time.monotonic() - start
    app.wait_healthy(hydrated1)
    print(
        f"\nargocd e2e: hydrator, new Application: -> hydrated commit {hydrated_at:.1f}s, "
        f"-> Synced+Healthy {time.monotonic() - start:.1f}s"
    )
    # the hydrated branch: the commit server's commit holding exactly what dyn-gitops renders
    assert app.hydrated_git("rev-parse", f"refs/heads/{HYDRATED_BRANCH}") == hydrated1
    files = set(app.hydrated_git("ls-tree", "-r", "--name-only", hydrated1).splitlines())
    assert {f"{HYDRATED_PATH}/manifest.yaml", f"{HYDRATED_PATH}/README.md"} <= files, files
    assert not any(f.startswith("dgd/") for f in files), files  # an orphan branch: no dry tree
    manifest = app.hydrated_git("show", f"{hydrated1}:{HYDRATED_PATH}/manifest.yaml")
    objects = [d for d in yaml.safe_load_all(manifest) if d]
    assert canonical(objects) == canonical(local_render(app, dry1))
    kinds = {o["kind"] for o in objects}
    assert {"DynamoGraphDeployment", "Deployment", "Service"} <= kinds, kinds
    metadata = json.loads(app.hydrated_git("show", f"{hydrated1}:hydrator.metadata"))
    assert metadata["drySha"] == dry1
    assert app.hydrated_git("log", "-1", "--format=%an", hydrated1) == "Argo CD"
    deps = app.deployments()
    assert {n.split("-")[1] for n in deps} == {"frontend", "vllmdecodeworker"}, deps.keys()

    # a second dry commit, with the Application running: a webhook's hydrate request
    dry2 = app.repo.commit({"dgd/roll.yaml": graph(replicas=3)}, "three workers")
    start = time.monotonic()
    app.hydrate()
    hydrated2 = app.wait_hydrated(dry2)
    hydrated_at = time.monotonic() - start
    app.wait_healthy(hydrated2)
    app.wait(lambda: app.ready_workers() == 3, "3 ready workers")
    print(
        f"argocd e2e: hydrator, dry commit -> hydrated commit {hydrated_at:.1f}s, "
        f"-> Synced+Healthy with 3 workers {time.monotonic() - start:.1f}s"
    )
    assert app.hydrated_git("rev-parse", f"{hydrated2}^") == hydrated1

    # a broken DGD: no hydrated commit; the error, with file:line, in the Application status
    (worker,) = app.deployments(WORKER_PODS).values()
    broken = graph(replicas=3).replace("replicas: 3", "replicas: many")
    line = 1 + broken.splitlines().index(
        next(ln for ln in broken.splitlines() if "replicas: many" in ln)
    )
    app.repo.commit({"dgd/roll.yaml": broken}, "broken graph")
    app.hydrate()

    def failed() -> str:
        op = app.hydration()
        return str(op.get("message", "")) if op.get("phase") == "Failed" else ""

    msg = app.wait(failed, "a failed hydration", timeout=180)
    print(f"argocd e2e: hydrator, broken DGD: {msg[:400]}")
    assert f"roll.yaml:{line}" in msg and "many" in msg, msg
    assert app.hydrated_git("rev-parse", f"refs/heads/{HYDRATED_BRANCH}") == hydrated2
    last = (app.status().get("sourceHydrator") or {}).get("lastSuccessfulOperation") or {}
    assert (last.get("drySHA"), last.get("hydratedSHA")) == (dry2, hydrated2)
    assert app.state() == ("Synced", hydrated2, "Healthy")
    (after,) = app.deployments(WORKER_PODS).values()
    assert after["metadata"]["uid"] == worker["metadata"]["uid"]
    assert after["metadata"]["generation"] == worker["metadata"]["generation"]
    assert app.ready_workers() == 3


def test_migration_from_the_operator_to_argo_cd_restarts_and_deletes_nothing(
    argo: Any, companion: Any, cluster_k: Kube, cluster_kube: Any, tmp_path: Path
) -> None:
    """docs/migration.md with the real Argo CD as step 4: the Dynamo operator's own output for
    the vLLM aggregated example (``conformance/operator-output``, its reconcilers at upstream
    2a6da14c8; field manager ``manager``, controller references to the DCDs, as
    ``internal/controller_common/resource.go`` ``SyncObservedResource`` leaves them) is live
    and serving in ``default``; ``adopt --check`` exits 0; the example and the operator's
    settings (``dyn-gitops.yaml``) are committed and the Application of
    deploy/argocd/application.yaml (``ServerSideApply=true``, destination ``default``: the
    namespace the operator's labels and env name) syncs them: Synced+Healthy; then the
    hand-over and the DCDs deleted. One pod watch over it all: no pod added or deleted, no
    restart, the same ReplicaSets and Deployment uids, the pod templates owned by
    ``argocd-controller`` alone (``support.operator_live.migrate``)."""
    k = cluster_k
    a = App(argo, k, NS, tmp_path)  # Application e2e-default; the one test in ``default``
    files = {f"dgd/{AGG}": (EXAMPLES / AGG).read_text(), "dgd/dyn-gitops.yaml": settings_file()}

    def sync() -> None:
        sha = a.repo.commit(files, "the graph the operator runs, with its settings")
        start = time.monotonic()
        a.create()
        a.wait_healthy(sha)
        print(
            f"\nargocd e2e: migration, Application -> Synced+Healthy "
            f"{time.monotonic() - start:.1f}s"
        )

    with cleanup(k, AGG), application_removed(k, a.name):
        migrate(k, cluster_kube, tmp_path, AGG, ARGOCD, sync)


@contextlib.contextmanager
def application_removed(k: Kube, name: str) -> Iterator[None]:
    """Delete the Application (no cascade: no finalizer) before what it applied is cleaned
    up, so that its self-heal re-creates none of it."""
    try:
        yield
    finally:
        with contextlib.suppress(NotFoundError):
            k.request("DELETE", APPS.path(argo_support.NAMESPACE, name))
