"""The companion controller as ``charts/dyn-gitops`` installs it, on the realistic cluster.

``helm install`` (the real helm of ``tools/test-bins/build.sh``) puts the chart's objects into
the cluster: its CRDs (helm leaves CRDs that exist alone; the session already installed the
same generated ones, ``tests/test_operator_chart.py`` checks they are equal), the
ServiceAccount, the RBAC, the metrics Service and the controller Deployment. KWOK pods run no
containers, so the chart is installed with ``controller.replicas=0``: the Deployment exists as
the chart writes it but gets no pod (a KWOK pod would look Running with nothing behind it).
Its one container is run here as a local process, read back from the installed Deployment,
not written down again:

* the argv is the container's ``command`` + ``args``. The image (``Dockerfile`` target
  ``controller``) has the same ``dyn-gitops-operator`` as its ENTRYPOINT (``command`` overrides
  it, ``args`` its CMD; ``tests/test_operator_chart.py`` checks they agree); the executable is
  that console script of this checkout's ``pyproject.toml``, run by this interpreter on this
  checkout's code;
* the environment is the container's ``env`` (``fieldRef`` values resolved as the kubelet
  does: ``metadata.name`` -> the pod name below, ``metadata.namespace`` -> the release
  namespace), the image's ``PYTHONUNBUFFERED``, and ``KUBECONFIG``; nothing of the test
  process's own environment but ``PATH``;
* the identity is the chart's ServiceAccount: a token from the TokenRequest API
  (``serviceaccounts/<sa>/token``; the test API server signs them, ``controlplane.py``) in a
  kubeconfig pointing at the test API server. In-cluster config is not found (no
  ``KUBERNETES_SERVICE_HOST``), so the controller falls back to ``$KUBECONFIG``. Every request
  it makes is authorized by the chart's RBAC and nothing else.

The values other than the chart's defaults: ``controller.replicas=0`` (above) and
``controller.port`` (a free port: the container port becomes a port of this shared host).
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
import tomllib
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from support.controlplane import _stop, _tail, free_port

REPO = Path(__file__).resolve().parents[2]
CHART = REPO / "charts" / "dyn-gitops"
#: the values the e2e installs with (besides ``controller.port``), see the module docstring
VALUES = ("controller.replicas=0",)
#: the pod name the kubelet would give the process (``POD_NAME``, the leader identity)
POD_NAME = "dyn-gitops-controller-e2e"
TOKEN_SECONDS = 3600


@dataclass
class ChartController:
    release: str
    namespace: str
    deployment: dict[str, Any]
    service_account: str
    argv: list[str]
    env: dict[str, str]
    kubeconfig: Path
    log: Path
    port: int
    #: the user name the API server authenticates it as
    user: str = ""
    proc: subprocess.Popen[bytes] | None = None
    started_in: float = 0.0

    def metrics(self) -> str:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/metrics", timeout=5) as r:
            return str(r.read().decode())

    def logs(self, tail: int = 60) -> str:
        return _tail(self.log, tail)


def helm(helm_bin: Path, kubeconfig: Path, *args: str) -> str:
    proc = subprocess.run(
        [str(helm_bin), "--kubeconfig", str(kubeconfig), *args],
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert proc.returncode == 0, f"helm {' '.join(args)}:\n{proc.stderr}"
    return proc.stdout


def console_script(name: str) -> tuple[str, str]:
    """(module, function) of ``name`` in this checkout's ``[project.scripts]``."""
    scripts = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]
    assert name in scripts, f"{name!r} is no console script of pyproject.toml ({sorted(scripts)})"
    module, _, func = scripts[name].partition(":")
    return module, func


def container_argv(container: dict[str, Any]) -> list[str]:
    """The container's ``command`` + ``args`` as a local argv: the console script run by
    this interpreter (the image has it on its PATH, /opt/dyn-gitops/bin)."""
    command = list(container.get("command") or [])
    assert len(command) == 1, f"expected the console script as the command, found {command}"
    module, func = console_script(command[0])
    boot = (
        f"import sys; from {module} import {func}; sys.argv[0] = {command[0]!r}; sys.exit({func}())"
    )
    return [sys.executable, "-c", boot, *(container.get("args") or [])]


def container_env(container: dict[str, Any], pod_name: str, namespace: str) -> dict[str, str]:
    """The container's ``env`` as the kubelet resolves it (only what the chart uses)."""
    fields = {"metadata.name": pod_name, "metadata.namespace": namespace}
    out: dict[str, str] = {}
    for e in container.get("env") or []:
        if "value" in e:
            out[e["name"]] = str(e["value"])
            continue
        ref = ((e.get("valueFrom") or {}).get("fieldRef") or {}).get("fieldPath")
        assert ref in fields, f"env {e['name']}: unsupported source {e.get('valueFrom')}"
        out[e["name"]] = fields[ref]
    return out


def code_path() -> str:
    """PYTHONPATH that imports this checkout's packages (as the test process does)."""
    import dyn_gitops_operator

    import dyn_gitops

    dirs = [
        str(Path(m.__file__ or "").resolve().parent.parent)
        for m in (dyn_gitops, dyn_gitops_operator)
    ]
    return os.pathsep.join(dict.fromkeys(dirs))


def service_account_kubeconfig(admin: Any, plane: Any, namespace: str, sa: str, path: Path) -> Path:
    """A kubeconfig for the test API server with a TokenRequest token of ``namespace/sa``."""
    review = admin.request(
        "POST",
        f"/api/v1/namespaces/{namespace}/serviceaccounts/{sa}/token",
        None,
        {
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenRequest",
            "spec": {"expirationSeconds": TOKEN_SECONDS},
        },
    )
    token = review["status"]["token"]
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [
                    {
                        "name": "test",
                        "cluster": {
                            "server": plane.url,
                            "certificate-authority": str(plane.dir / "certs" / "apiserver.crt"),
                        },
                    }
                ],
                "users": [{"name": sa, "user": {"token": token}}],
                "contexts": [{"name": sa, "context": {"cluster": "test", "user": sa}}],
                "current-context": sa,
            }
        )
    )
    path.chmod(0o600)
    return path


def whoami(kubeconfig: Path) -> str:
    """The user name the API server authenticates ``kubeconfig`` as (SelfSubjectReview)."""
    from dyn_gitops_operator.kube import Kube, make_api_client

    review = Kube(make_api_client(str(kubeconfig))).request(
        "POST",
        "/apis/authentication.k8s.io/v1/selfsubjectreviews",
        None,
        {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"},
    )
    return str(review["status"]["userInfo"]["username"])


def _leading(c: ChartController) -> bool:
    with contextlib.suppress(OSError):
        with urllib.request.urlopen(f"http://127.0.0.1:{c.port}/readyz", timeout=2) as r:
            if r.status != 200:
                return False
        return any(
            line.split()[-1] in ("1.0", "1")
            for line in c.metrics().splitlines()
            if line.startswith("dyn_gitops_controller_leader")
        )
    return False


@contextlib.contextmanager
def chart_controller(
    helm_bin: Path, plane: Any, admin: Any, work: Path, timeout: float = 120
) -> Iterator[ChartController]:
    """``helm install`` the chart, run its controller container as a local process
    authenticated as its ServiceAccount; on exit stop it and ``helm uninstall``."""
    from dyn_gitops_operator.kube import DEPLOYMENTS

    start = time.monotonic()
    work.mkdir(parents=True, exist_ok=True)
    suffix = uuid.uuid4().hex[:6]
    release, namespace, port = f"e2e-{suffix}", f"dyn-gitops-{suffix}", free_port()
    sets = [a for s in (*VALUES, f"controller.port={port}") for a in ("--set", s)]
    helm(
        helm_bin, plane.kubeconfig,
        "install", release, str(CHART), "--namespace", namespace, "--create-namespace", *sets,
    )  # fmt: skip
    try:
        manifest = helm(
            helm_bin, plane.kubeconfig, "get", "manifest", release, "--namespace", namespace
        )
        objs = [d for d in yaml.safe_load_all(manifest) if d]
        (dep_name,) = [o["metadata"]["name"] for o in objs if o["kind"] == "Deployment"]
        dep = admin.get(DEPLOYMENTS, namespace, dep_name)
        assert dep["spec"]["replicas"] == 0, dep["spec"]
        pod = dep["spec"]["template"]["spec"]
        (container,) = pod["containers"]
        sa = pod["serviceAccountName"]
        kubeconfig = service_account_kubeconfig(admin, plane, namespace, sa, work / "sa.kubeconfig")
        user = whoami(kubeconfig)
        assert user == f"system:serviceaccount:{namespace}:{sa}", user
        env = {
            "PATH": os.environ["PATH"],
            "HOME": str(work),
            "PYTHONPATH": code_path(),
            "PYTHONUNBUFFERED": "1",  # the image's ENV
            "KUBECONFIG": str(kubeconfig),
            **container_env(container, POD_NAME, namespace),
        }
        c = ChartController(
            release, namespace, dep, sa, container_argv(container), env, kubeconfig,
            work / "companion-controller.log", port, user,
        )  # fmt: skip
        with open(c.log, "ab") as f:
            c.proc = subprocess.Popen(
                c.argv, env=env, cwd=work, stdout=f, stderr=subprocess.STDOUT,
                start_new_session=True,
            )  # fmt: skip
        try:
            end = time.monotonic() + timeout
            while not _leading(c):
                assert c.proc.poll() is None, (
                    f"the chart's controller exited with {c.proc.returncode}:\n{c.logs()}"
                )
                assert time.monotonic() < end, (
                    f"the chart's controller is not leading after {timeout} s:\n{c.logs()}"
                )
                time.sleep(0.25)
            c.started_in = time.monotonic() - start
            yield c
        finally:
            _stop(c.proc)
    finally:
        with contextlib.suppress(AssertionError):
            helm(helm_bin, plane.kubeconfig, "uninstall", release, "--namespace", namespace)


def rbac_denials(log: Path, user: str) -> list[str]:
    """Log lines of requests RBAC refused ``user`` (``... is forbidden: User "<user>" cannot
    <verb> resource ...``): RBAC the chart lacks. Other 403s (e.g. creating in a namespace
    being terminated, as a test's namespace is while the controller still runs) are not."""
    return [
        line
        for line in log.read_text(errors="replace").splitlines()
        if "forbidden" in line.lower() and user in line and " cannot " in line
    ]
