"""docs/install.md followed step by step on the realistic cluster, with the wall time of each.

    python tools/install_walkthrough.py [--work DIR] [--keep]

A new adopter's path from a fresh clone to a running graph: the shell blocks of
docs/install.md are read from the clone and run by bash (variables carry over from block to
block as in one terminal), each block timed. What this machine cannot do as written is
replaced, and said so in the output (the ``Step.note``); nothing else is changed:

* the clone URL is a bare copy of this checkout (nothing is published); the registry is a
  loopback one (Debian's ``docker-registry``, plain HTTP: ``podman push --tls-verify=false``),
  standing for ``registry.example.com/platform``; ``sudo`` is dropped (this runs as root);
* the Docker block is skipped (no Docker engine here): the podman block builds the images;
* the cluster is the realistic one of the tests (kube-apiserver, kube-controller-manager,
  kube-scheduler, KWOK GPU nodes; ``tests/support/cluster.py``). KWOK pods run no
  containers, so once the chart's controller pod is Ready this script runs the pod's
  container from the pushed image under podman, as its kubelet would: the pod's command,
  args, env and user, in-cluster credentials (a TokenRequest token of the pod's
  ServiceAccount, the API server's CA), the host network standing for the pod network (so
  ``controller.port`` is set to a free port);
* Argo CD cannot come from the argo-cd Helm chart (not downloadable here): Argo CD v3.5.3
  runs as processes (``tests/support/argocd.py``: application-controller, repo-server,
  Redis) with our ``deploy/argocd/kustomize`` config, and the sidecar is the image the
  values file of step 4a names, pulled from the registry, running the real
  argocd-cmp-server;
* the graph is ``samples/vllm-agg/input`` committed to a loopback Git repository, synced by
  ``deploy/argocd/application.yaml`` (the plugin with its version) pointed at it.

The run ends when the Application is Synced and Healthy, every pod of the graph is Ready
and the DGD's status (written by the controller from the image) is ``successful``.
tests/test_install_walkthrough.py checks that every block of docs/install.md is one of the
steps below, so the walkthrough cannot drift from the page.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

REPO = Path(__file__).resolve().parent.parent
PAGE = Path("docs/install.md")
DOC_REGISTRY = "registry.example.com/platform"
DOC_CLONE_URL = "https://github.com/dyn-gitops/dyn-gitops"
SAMPLE = Path("samples/vllm-agg/input")
APP_NAME = "walkthrough"
WAIT_S = 600.0


@dataclass(frozen=True)
class Step:
    """How one shell block of docs/install.md is taken: ``run`` (by bash, with ``edits``),
    ``skip`` or ``instead`` (what the note says is done instead)."""

    starts_with: str  # the block's first command line, which names it
    title: str
    how: str  # run | skip | instead
    note: str = ""
    edits: tuple[tuple[str, str], ...] = ()


STEPS = (
    Step("git clone", "1. the source", "run", "clone of this checkout", ()),
    Step("for target in cmp controller", "1. images (Docker)", "skip", "no Docker engine here"),
    Step(
        "sudo tools/images/build.sh",
        "1. images (podman) + push",
        "run",
        "no sudo (root already); the loopback registry is plain HTTP",
        (("sudo ", ""), ("podman push ", "podman push --tls-verify=false ")),
    ),
    Step("kubectl apply --server-side", "2. CRDs", "run"),
    Step(
        "helm upgrade --install dg",
        "3. companion controller",
        "run",
        "controller.port set to a free port (the host network stands for the pod network); "
        "the pod's container is then run from the pushed image under podman",
    ),
    Step("REG=registry.example.com/platform VERSION", "4a. argo-cd values", "run"),
    Step(
        "helm repo add argo",
        "4a. Argo CD",
        "instead",
        "argo-cd chart not downloadable here: Argo CD v3.5.3 as processes with "
        "deploy/argocd/kustomize config and the sidecar image of argocd-values.yaml",
    ),
    Step(
        "flux create source git",
        "4b. Flux",
        "skip",
        "this run takes the Argo CD path (4a); Flux end to end: tests/test_flux_e2e.py",
    ),
)


def step_of(body: str) -> Step | None:
    first = next((ln.strip() for ln in body.splitlines() if ln.strip()), "")
    return next((s for s in STEPS if first.startswith(s.starts_with)), None)


# --------------------------------------------------------------------------- the shell
@dataclass
class Shell:
    """bash blocks run one after another, as in one terminal: ``set -a`` exports every
    variable a block sets, and the next block starts from the previous one's variables and
    directory."""

    cwd: Path
    env: dict[str, str]
    log: Path
    state: Path = field(init=False)

    def __post_init__(self) -> None:
        self.state = self.log.parent / "shell-state.json"

    def run(self, script: str) -> None:
        dump = (
            f"{sys.executable} -c \"import json,os; print(json.dumps({{'cwd': os.getcwd(), "
            f"'env': dict(os.environ)}}))\" > {self.state}"
        )
        full = f"set -euo pipefail\nset -a\n{script}\n{dump}\n"
        with open(self.log, "a") as f:
            f.write(f"\n$ {script}\n")
            f.flush()
            proc = subprocess.run(
                ["bash", "-c", full], cwd=self.cwd, env=self.env, stdout=f, stderr=f, check=False
            )
        if proc.returncode != 0:
            raise SystemExit(f"block failed (exit {proc.returncode}); see {self.log}:\n{script}")
        st = json.loads(self.state.read_text())
        self.cwd, self.env = Path(st["cwd"]), dict(st["env"])


def sh(*argv: str, env: dict[str, str] | None = None) -> str:
    proc = subprocess.run(list(argv), capture_output=True, text=True, env=env, check=False)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(argv)}: exit {proc.returncode}\n{proc.stderr[-3000:]}")
    return proc.stdout


def wait_for(
    cond: Callable[[], Any], what: str, why: Callable[[], str] = str, timeout: float = WAIT_S
) -> Any:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        value = cond()
        if value:
            return value
        time.sleep(0.5)
    raise SystemExit(f"timed out after {timeout:.0f} s waiting for {what}: {why()}")


# ------------------------------------------------------------------- the kubelet stand-in
def run_controller_pod(kube: Any, plane: Any, work: Path, port: int) -> str:
    """Run the chart's controller pod's container from its image under podman, as a kubelet
    would (see the module docstring); returns the container name."""
    from dyn_gitops_operator.kube import Resource
    from support import images

    pods_res = Resource("", "v1", "pods", "Pod")
    items, _ = kube.list(pods_res, "dyn-gitops", label_selector="app.kubernetes.io/name=dyn-gitops")
    pod = next(p for p in items if p["status"].get("phase") == "Running")
    spec = pod["spec"]
    (container,) = spec["containers"]
    sa = spec["serviceAccountName"]
    review = kube.request(
        "POST",
        f"/api/v1/namespaces/dyn-gitops/serviceaccounts/{sa}/token",
        None,
        {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}},
    )
    secrets = work / "serviceaccount"
    secrets.mkdir(mode=0o755, exist_ok=True)
    (secrets / "token").write_text(review["status"]["token"])
    shutil.copy(plane.dir / "certs" / "apiserver.crt", secrets / "ca.crt")
    (secrets / "namespace").write_text("dyn-gitops")
    for f in secrets.iterdir():
        f.chmod(0o644)
    fields = {"metadata.name": pod["metadata"]["name"], "metadata.namespace": "dyn-gitops"}
    env = [
        "-e",
        "KUBERNETES_SERVICE_HOST=127.0.0.1",
        "-e",
        f"KUBERNETES_SERVICE_PORT={urlsplit(plane.url).port}",
    ]
    for e in container.get("env") or []:
        value = e.get(
            "value",
            fields.get(((e.get("valueFrom") or {}).get("fieldRef") or {}).get("fieldPath", "")),
        )
        env += ["-e", f"{e['name']}={value}"]
    user = spec.get("securityContext") or {}
    name = f"walkthrough-controller-{os.getpid()}"
    argv = [
        "run", "-d", "--name", name, "--network=host", "--tls-verify=false",
        f"--user={user.get('runAsUser', 65532)}:{user.get('runAsGroup', 65532)}",
        "--read-only", "--tmpfs=/tmp:rw,mode=1777", "--cap-drop=all",
        "--security-opt=no-new-privileges",
        "-v", f"{secrets}:/var/run/secrets/kubernetes.io/serviceaccount:ro",
        *env, "--entrypoint", container["command"][0], container["image"], *container["args"],
    ]  # fmt: skip
    proc = images.podman(*argv)
    if proc.returncode != 0:
        raise SystemExit(f"podman run of the controller failed:\n{proc.stderr}")

    def ready() -> bool:
        url = f"http://127.0.0.1:{port}/readyz"
        with contextlib.suppress(OSError), urllib.request.urlopen(url, timeout=2) as r:
            return bool(r.status == 200)
        return False

    wait_for(ready, "the controller container's /readyz")
    return name


# ----------------------------------------------------------------------------- the run
@dataclass
class Timings:
    rows: list[tuple[str, str, float | None, str]] = field(default_factory=list)

    @contextlib.contextmanager
    def step(self, title: str, how: str, note: str = "") -> Iterator[None]:
        start = time.monotonic()
        yield
        self.rows.append((title, how, time.monotonic() - start, note))

    def skip(self, title: str, note: str) -> None:
        self.rows.append((title, "skip", None, note))

    def print(self) -> None:
        total = sum(t for _, _, t, _ in self.rows if t is not None)
        print(f"\n{'step':<34} {'how':<8} {'wall s':>8}  note")
        for title, how, t, note in self.rows:
            shown = "-" if t is None else f"{t:8.1f}"
            print(f"{title:<34} {how:<8} {shown:>8}  {note}")
        print(f"{'total':<34} {'':<8} {total:8.1f}")


def blocks_of(clone: Path) -> list[Any]:
    from support.docblocks import blocks

    return [b for b in blocks(clone) if b.path == PAGE]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--work", type=Path, help="working directory (default: a new temp dir)")
    parser.add_argument("--keep", action="store_true", help="keep the working directory")
    args = parser.parse_args()
    work = (args.work or Path(tempfile.mkdtemp(prefix="dyn-gitops-walkthrough-"))).resolve()
    work.mkdir(parents=True, exist_ok=True)
    try:
        walk(work)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    return 0


def walk(work: Path) -> None:
    timings = Timings()
    bins = Path(sh("bash", str(REPO / "tools/test-bins/build.sh"), "--print-dir").strip())
    with contextlib.ExitStack() as stack:
        # the registry and the cluster an adopter already has (not timed as steps)
        sys.path.insert(0, str(REPO / "tests"))
        from support.cluster import realistic_cluster
        from support.flux import registry

        reg = stack.enter_context(registry(work / "registry"))
        t0 = time.monotonic()
        cluster = stack.enter_context(
            realistic_cluster(
                {n: bins / n for n in ("etcd", "kube-apiserver", "kube-controller-manager",
                                       "kube-scheduler", "kwok")},
                bins / "kwok-stages.yaml",
            )
        )  # fmt: skip
        print(f"the realistic cluster (4 KWOK GPU nodes) ready in {time.monotonic() - t0:.1f} s")
        from support.controlplane import free_port

        port = free_port()
        shell = Shell(
            work,
            {
                "PATH": f"{bins}:{os.environ['PATH']}",
                "HOME": os.environ.get("HOME", str(work)),
                "KUBECONFIG": str(cluster.kubeconfig),
                "CONTAINERS_CONF": str(REPO / "tools/images/containers.conf"),
                # a cache of its own measures a build from scratch (docs/images.md)
                **{k: v for k, v in os.environ.items() if k == "DYN_GITOPS_IMAGES_CACHE"},
            },
            work / "shell.log",
        )
        clone = work / "dyn-gitops"
        # the published repository, standing for github.com/dyn-gitops/dyn-gitops
        origin = work / "origin" / "dyn-gitops.git"
        sh("git", "clone", "-q", "--bare", str(REPO), str(origin))
        for block in blocks_of(REPO):
            step = step_of(block.body)
            if step is None:
                raise SystemExit(f"{PAGE}:{block.line}: a block this walkthrough does not know")
            if step.how == "skip":
                timings.skip(step.title, step.note)
                continue
            if step.how == "instead":
                with timings.step(step.title, step.how, step.note):
                    argo = argo_cd(stack, clone, bins, cluster, work)
                continue
            body = block.body.replace(DOC_CLONE_URL, f"file://{origin}")
            body = body.replace(DOC_REGISTRY, f"{reg}/platform")
            for old, new in step.edits:
                body = body.replace(old, new)
            if step.title.startswith("3."):
                body = body.replace(
                    '--set image.tag="$VERSION"',
                    f'--set image.tag="$VERSION" --set controller.port={port}',
                )
            with timings.step(step.title, step.how, step.note):
                shell.run(body)
            if step.title.startswith("3."):
                with timings.step("3. controller container ready", "kubelet", "podman, see doc"):
                    from dyn_gitops_operator.kube import Kube

                    kube = Kube(cluster.client(), field_manager="walkthrough")
                    stack.callback(_podman_rm, run_controller_pod(kube, cluster.plane, work, port))
        with timings.step("graph: commit -> Synced+Healthy", "argocd", str(SAMPLE)):
            sync_graph(argo, clone, cluster)
    timings.print()


def _podman_rm(name: str) -> None:
    from support import images

    images.podman("rm", "-f", "-t", "5", name)


def argo_cd(stack: contextlib.ExitStack, clone: Path, bins: Path, cluster: Any, work: Path) -> Any:
    """Argo CD with the sidecar image named in argocd-values.yaml (pulled from the registry)."""
    import yaml
    from dyn_gitops_operator.kube import Kube, Resource
    from support import argocd as argo_support
    from support import images
    from support.controlplane import install_crds

    values = yaml.safe_load((clone / "argocd-values.yaml").read_text())
    sidecars = values["repoServer"]["extraContainers"]
    image = next(c["image"] for c in sidecars if "dyn-gitops" in c["name"])
    pulled = images.podman("pull", "--tls-verify=false", image)
    if pulled.returncode != 0:
        raise SystemExit(f"podman pull {image}:\n{pulled.stderr}")
    api = cluster.client()
    install_crds(api, argo_support.crds())
    admin = Kube(api, field_manager="walkthrough")
    kinds = {
        "Namespace": Resource("", "v1", "namespaces", "Namespace"),
        "ConfigMap": Resource("", "v1", "configmaps", "ConfigMap"),
        "Secret": Resource("", "v1", "secrets", "Secret"),
        "AppProject": Resource("argoproj.io", "v1alpha1", "appprojects", "AppProject"),
    }
    for obj in argo_support.config_objects():
        admin.apply(kinds[obj["kind"]], obj)
    return stack.enter_context(
        argo_support.argo_cd(bins / "argocd", image, cluster.kubeconfig, work / "argocd")
    )


def sync_graph(argo: Any, clone: Path, cluster: Any) -> None:
    """Commit the sample graph, apply the Application, wait for Synced+Healthy, Ready pods
    and the controller's status."""
    from dyn_gitops_operator.kube import Kube, Resource
    from support import argocd as argo_support
    from support.cluster import is_ready, pods

    apps = Resource("argoproj.io", "v1alpha1", "applications", "Application")
    dgds = Resource("nvidia.com", "v1beta1", "dynamographdeployments", "DynamoGraphDeployment")
    import yaml

    # the namespace the sample's dyn-gitops.yaml renders into: the Application's destination,
    # so that CreateNamespace=true makes it
    namespace = yaml.safe_load((clone / SAMPLE / "dyn-gitops.yaml").read_text())["namespace"]
    repo = argo_support.new_repo(argo.git, argo.dir, "inference")
    files = {f"graph/{p.name}": p.read_text() for p in sorted((clone / SAMPLE).glob("*.yaml"))}
    revision = repo.commit(files, "a graph")
    api = cluster.client()
    k = Kube(api, field_manager="walkthrough")
    k.apply(apps, argo_support.application(APP_NAME, repo.url, "graph", namespace))

    def state() -> tuple[str, str, str]:
        st = k.get(apps, argo_support.NAMESPACE, APP_NAME).get("status") or {}
        return (
            (st.get("sync") or {}).get("status", ""),
            (st.get("sync") or {}).get("revision", ""),
            (st.get("health") or {}).get("status", ""),
        )

    def operation() -> str:
        st = k.get(apps, argo_support.NAMESPACE, APP_NAME).get("status") or {}
        return str((st.get("operationState") or {}).get("message", ""))

    wait_for(lambda: state() == ("Synced", revision, "Healthy"), "Synced+Healthy", operation)
    all_pods = pods(api, namespace)
    ready = sum(is_ready(p) for p in all_pods)
    items, _ = k.list(dgds, namespace)
    states = {d["metadata"]["name"]: (d.get("status") or {}).get("state") for d in items}
    print(f"Application {APP_NAME}: {state()}; pods Ready {ready}/{len(all_pods)}; DGD {states}")
    if ready != len(all_pods) or not all_pods or set(states.values()) != {"successful"}:
        raise SystemExit("the graph is not running")


if __name__ == "__main__":
    sys.exit(main())
