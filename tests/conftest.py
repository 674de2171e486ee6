"""Shared test helpers. Golden files are refreshed only with ``--update-golden``."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

import pytest

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))  # tests/support
SAMPLES = REPO / "samples"
CONFORMANCE = REPO.parent / "shared" / "conformance" / "dynamo-examples"
#: render a DGD as applied, without the Dynamo 1.5 webhooks: no runtime-version admission
#: (placeholder images such as ``test-image``, ``${VERSION}`` or ``my-tag`` are accepted) and
#: no origin-version stamp. The upstream examples were rendered so by the oracle
#: (conformance/operator-output/README.md), and the operator's Go tests, which many tests
#: port, call its reconcilers without the webhooks. The 1.5 defaults: tests/test_gates.py.
AS_APPLIED: dict[str, str] = {"runtime_version_admission": "lenient", "origin_version": "none"}
#: the same as CLI flags
AS_APPLIED_FLAGS = ("--runtime-version-admission", "lenient", "--origin-version", "none")


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


@dataclass
class CliResult:
    code: int
    stdout: str
    stderr: str


def run_cli(
    *args: str, stdin: str | None = None, cwd: Path | None = None, env: dict[str, str] | None = None
) -> CliResult:
    """Run the real ``dyn-gitops`` entry point in a subprocess."""
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("DYN_GITOPS_")}
    full_env.update(env or {})
    proc = subprocess.run(
        [sys.executable, "-c", "from dyn_gitops.oneshot import main; main()", *args],
        input=stdin,
        capture_output=True,
        text=True,
        cwd=cwd,
        env=full_env,
        timeout=120,
    )
    return CliResult(proc.returncode, proc.stdout, proc.stderr)


def invoke_cli(
    *args: str, stdin: str | None = None, env: dict[str, str] | None = None
) -> CliResult:
    """The CLI in-process (fast); only the DYN_GITOPS_* variables given in ``env`` are set.
    ``run_cli`` runs the real entry point in a subprocess."""
    from click.testing import CliRunner

    from dyn_gitops.cli import main

    clean: dict[str, str | None] = {k: None for k in os.environ if k.startswith("DYN_GITOPS_")}
    clean.update(env or {})
    res = CliRunner().invoke(main, list(args), input=stdin, env=clean)
    if res.exception is not None and not isinstance(res.exception, SystemExit):
        raise AssertionError(f"the CLI raised {res.exception!r}") from res.exception
    return CliResult(res.exit_code, res.stdout, res.stderr)


@pytest.fixture
def cli() -> Any:
    return run_cli


def render_objects(path: str | Path, **settings: Any) -> list[dict[str, Any]]:
    """Render in-process and return the objects (raises RenderError on bad input)."""
    from dyn_gitops import context

    flags = {k.replace("_", "-"): v for k, v in settings.items()}
    ctx = context.open_path(str(path), runner=context.Runner(flags=flags))
    return context.render(ctx).objects


# ---------------------------------------------------------------------------- real Kubernetes
def missing_component(message: str) -> NoReturn:
    """A real component a test needs is absent: a failure under CI (where scripts/test
    must provide it), a skip with the reason elsewhere (e.g. a machine without Go)."""
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"CI=true and {message}")
    pytest.skip(message)


def need_binaries(*names: str) -> dict[str, Path]:
    """The named test binaries, or fail (CI) / skip (elsewhere) with the reason."""
    from support.controlplane import find_binary, missing_binary_message

    found: dict[str, Path] = {}
    for name in names:
        path = find_binary(name)
        if path is None:
            missing_component(missing_binary_message(name))
        found[name] = path
    return found


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
    from support.dynamo_crds import dynamo_crds
    from support.thirdparty_crds import thirdparty_crds

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
def cluster() -> Any:
    """The realistic cluster for the session (tests/support/cluster.py): etcd,
    kube-apiserver, kube-controller-manager, kube-scheduler and KWOK with fake GPU nodes;
    Deployments get real ReplicaSets and Ready pods. A separate API server from
    ``control_plane`` (there, status-writing simulators must not race a real controller)."""
    from support.cluster import BINARIES, STAGES_FILE, realistic_cluster

    bins = need_binaries(*BINARIES)
    stages = bins["kwok"].parent / STAGES_FILE
    if not stages.is_file():
        missing_component(f"{stages} is missing: rebuild kwok with tools/test-bins/build.sh")
    with realistic_cluster(bins, stages) as c:
        yield c


@pytest.fixture(scope="session")
def cluster_kube(cluster: Any) -> Any:
    """An ApiClient for the realistic cluster with our CRDs (and minimal third-party ones)."""
    from support.controlplane import install_crds
    from support.dynamo_crds import dynamo_crds
    from support.thirdparty_crds import thirdparty_crds

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


@pytest.fixture
def cluster_k(cluster_kube: Any) -> Any:
    """The companion controller's API client, on the realistic cluster."""
    from dyn_gitops_operator.kube import Kube

    return Kube(cluster_kube)


def small_dgd(name: str) -> str:
    """A two-service DGD (frontend with 2 replicas, a 1-GPU worker with 3), as YAML text."""
    return f"""\
apiVersion: nvidia.com/v1alpha1
kind: DynamoGraphDeployment
metadata:
  name: {name}
spec:
  services:
    Frontend:
      componentType: frontend
      replicas: 2
      extraPodSpec:
        mainContainer:
          image: example.com/dynamo:1.1.0
    VllmWorker:
      componentType: worker
      replicas: 3
      resources:
        limits:
          gpu: "1"
      extraPodSpec:
        mainContainer:
          image: example.com/dynamo:1.1.0
"""


def resource_list(items: list[dict[str, Any]], config: dict[str, Any] | None = None) -> str:
    """A KRM ResourceList of ``items`` (and a functionConfig), as YAML text."""
    import yaml

    rl: dict[str, Any] = {
        "apiVersion": "config.kubernetes.io/v1",
        "kind": "ResourceList",
        "items": items,
    }
    if config is not None:
        rl["functionConfig"] = config
    return yaml.safe_dump(rl, sort_keys=False)
