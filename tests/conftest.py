"""Pytest hooks and fixtures only; the helpers tests import live in ``tests/support``
(``from support.cli import run_cli``). Golden files are refreshed only with
``--update-golden`` (support.golden)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the support package

from support.binaries import missing_component, need_binaries
from support.cli import run_cli


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--update-golden",
        action="store_true",
        default=False,
        help="rewrite golden files from the current output (review the diff!)",
    )


@pytest.fixture
def update_golden(request: pytest.FixtureRequest) -> bool:
    return bool(request.config.getoption("--update-golden"))


@pytest.fixture
def cli() -> Any:
    return run_cli


# ---------------------------------------------------------------------------- real Kubernetes
@pytest.fixture(scope="session")
def test_binaries() -> Any:
    """``test_binaries("helm", "kustomize")`` -> {name: path}; fails under CI when missing."""
    return need_binaries


@pytest.fixture(scope="session")
def control_plane() -> Any:
    """A real etcd + kube-apiserver for the whole session (started once, stopped at exit)."""
    from support.controlplane import control_plane as start

    bins = need_binaries("etcd", "kube-apiserver")
    with start(bins["etcd"], bins["kube-apiserver"]) as cp:
        yield cp


@pytest.fixture(scope="session")
def kube(control_plane: Any) -> Any:
    """An ApiClient for the control plane with our CRDs (and minimal third-party ones)."""
    from support.controlplane import install_crds
    from support.thirdparty_crds import thirdparty_crds

    from dyn_gitops.crds import crds as dynamo_crds

    client = control_plane.client()
    install_crds(client, dynamo_crds() + thirdparty_crds())
    return client


@pytest.fixture
def namespace(kube: Any) -> str:
    """A fresh namespace per test (namespaces never finish deleting without a controller)."""
    import uuid

    from kubernetes import client as k8s

    name = f"t-{uuid.uuid4().hex[:10]}"
    k8s.CoreV1Api(kube).create_namespace({"metadata": {"name": name}})
    return name


@pytest.fixture
def k(kube: Any) -> Any:
    """The companion controller's own small API client, on the test control plane."""
    from dyn_gitops_operator.kube import Kube

    return Kube(kube)


@pytest.fixture(scope="session")
def cluster_binaries() -> tuple[dict[str, Path], Path]:
    """(binaries, KWOK stage file) of the realistic cluster; fails under CI when missing."""
    from support.cluster import BINARIES, STAGES_FILE

    bins = need_binaries(*BINARIES)
    stages = bins["kwok"].parent / STAGES_FILE
    if not stages.is_file():
        missing_component(f"{stages} is missing: rebuild kwok with tools/test-bins/build.sh")
    return bins, stages


@pytest.fixture(scope="session")
def cluster(cluster_binaries: tuple[dict[str, Path], Path]) -> Any:
    """The realistic cluster for the session (tests/support/cluster.py): etcd,
    kube-apiserver, kube-controller-manager, kube-scheduler and KWOK with fake GPU nodes;
    Deployments get real ReplicaSets and Ready pods. A separate API server from
    ``control_plane`` (there, status-writing simulators must not race a real controller)."""
    from support.cluster import realistic_cluster

    with realistic_cluster(*cluster_binaries) as c:
        yield c


@pytest.fixture(scope="session")
def cluster_kube(cluster: Any) -> Any:
    """An ApiClient for the realistic cluster with our CRDs (and minimal third-party ones)."""
    from support.controlplane import install_crds
    from support.thirdparty_crds import thirdparty_crds

    from dyn_gitops.crds import crds as dynamo_crds

    client = cluster.client()
    install_crds(client, dynamo_crds() + thirdparty_crds())
    return client


@pytest.fixture
def cluster_namespace(cluster_kube: Any) -> Any:
    """A fresh namespace per test on the realistic cluster, deleted afterwards (the
    namespace controller deletes its pods, freeing the nodes' GPUs; not waited for)."""
    import uuid

    from kubernetes import client as k8s

    name = f"c-{uuid.uuid4().hex[:10]}"
    core = k8s.CoreV1Api(cluster_kube)
    core.create_namespace({"metadata": {"name": name}})
    yield name
    core.delete_namespace(name)


@pytest.fixture(scope="module")
def lws_controller(request: pytest.FixtureRequest) -> Any:
    """The real LeaderWorkerSet controller (``sigs.k8s.io/lws``, tools/test-bins/build-lws.sh)
    on the realistic cluster, for one module: its CRD, its webhooks for real, the manager out
    of cluster (tests/support/lws_controller.py); afterwards the minimal CRD again. Fails
    under CI when not built."""
    from support.lws_controller import lws_controller as start
    from support.lws_controller import missing

    why = missing()
    if why is not None:  # before the cluster is started for nothing
        missing_component(why)
    cluster, api = request.getfixturevalue("cluster"), request.getfixturevalue("cluster_kube")
    with start(cluster.kubeconfig, api) as ctl:
        yield ctl


@pytest.fixture
def cluster_k(cluster_kube: Any) -> Any:
    """The companion controller's API client, on the realistic cluster."""
    from dyn_gitops_operator.kube import Kube

    return Kube(cluster_kube)
