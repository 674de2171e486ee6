"""Real Argo CD for end-to-end tests, as processes beside the realistic cluster.

What runs (docs/argocd.md, "Tested end to end"; the recipe of ``shared/spec/e2e-infra.md`` §2):

* a loopback Git server (:mod:`support.gitserver`, shared with the Flux tests);
* Redis (Debian's ``redis-server``): repo-server and application-controller have no in-memory
  cache;
* Argo CD's ``argocd-repo-server`` and ``argocd-application-controller``: the multi-call
  ``argocd`` binary of ``tools/test-bins/build.sh`` with ``ARGOCD_BINARY_NAME``, in Argo's
  local-dev mode (``ARGOCD_FAKE_IN_CLUSTER=true``: the in-cluster destination
  ``https://kubernetes.default.svc`` is the kubeconfig's cluster);
* the project's sidecar image (``--target cmp``) under podman, with the same binary mounted as
  ``/var/run/argocd/argocd-cmp-server``, exactly as the chart's repo-server runs it: its plugin
  socket lands in a directory shared with the repo-server.

With ``hydrator=True`` (the Source Hydrator, beta in 3.5; docs/argocd.md section 11) the same
binary also runs as ``argocd-commit-server`` on a free loopback port, and the
application-controller gets ``ARGOCD_HYDRATOR_ENABLED`` (what Argo's manifests map from
``hydrator.enabled`` of ``argocd-cmd-params-cm``, which :func:`config_objects` sets too) and
``ARGOCD_APPLICATION_CONTROLLER_COMMIT_SERVER`` pointing at it. The commit server's askpass
socket is a fixed path in Argo (``/tmp/commit-server-ask-pass.sock``); the loopback Git server
never asks for credentials, so two runs on one machine do not meet there.

Not run: argocd-server (so the ``default`` AppProject it would create is applied here), dex,
ApplicationSet, notifications. The CRDs, the base ``argocd-*`` ConfigMaps
(they carry the ``app.kubernetes.io/part-of: argocd`` label Argo's informers filter on) and
``hack/git-verify-wrapper.sh`` (repo-server runs it on every generation, even with GPG off; a
missing one fails as a bare "permission denied") come from the pinned argo-cd module in the
Go module cache build.sh filled. Our ``deploy/argocd/kustomize/argocd-cm.yaml`` and
``argocd-cmd-params-cm.yaml`` data (health Lua, ignoreDifferences) are merged in.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import socket
import subprocess
import time
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from support import images
from support.controlplane import BUILD_SCRIPT, _stop, free_port
from support.gitserver import GitServer, git, git_server

REPO = Path(__file__).resolve().parents[2]
DEPLOY = REPO / "deploy" / "argocd"
NAMESPACE = "argocd"
#: the Argo CD objects a test applies (group, version, plural)
APPLICATIONS = ("argoproj.io", "v1alpha1", "applications")
BASE_CONFIG = (
    "argocd-cm.yaml",
    "argocd-rbac-cm.yaml",
    "argocd-secret.yaml",
    "argocd-ssh-known-hosts-cm.yaml",
    "argocd-tls-certs-cm.yaml",
    "argocd-gpg-keys-cm.yaml",
    "argocd-cmd-params-cm.yaml",
)
#: argocd-cmd-params-cm data turning the Source Hydrator on (Argo's manifests pass it to the
#: application-controller and argocd-server as ARGOCD_HYDRATOR_ENABLED)
HYDRATOR_PARAMS = {"hydrator.enabled": "true"}


def argocd_version() -> str:
    text = (BUILD_SCRIPT.parent / "versions.env").read_text()
    m = re.search(r"^argocd-cmp-server=(\S+)", text, re.M)
    assert m, "versions.env pins no argocd-cmp-server"
    return m.group(1)


def module_dir() -> Path:
    """The pinned argo-cd module in build.sh's Go module cache (its manifests and hack/)."""
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    ver = argocd_version()
    major = ver.split(".")[0]
    return cache / "dyn-gitops" / "go-mod" / "github.com" / "argoproj" / f"argo-cd/{major}@{ver}"


# --------------------------------------------------------------------------- loopback Git
@dataclass
class Checkout:
    """A working copy of one repository of the server; :meth:`commit` pushes to ``main``."""

    dir: Path
    url: str

    def git(self, *args: str) -> str:
        env = {
            **os.environ,
            "GIT_AUTHOR_NAME": "test",
            "GIT_AUTHOR_EMAIL": "test@example.com",
            "GIT_COMMITTER_NAME": "test",
            "GIT_COMMITTER_EMAIL": "test@example.com",
        }
        proc = subprocess.run(
            ["git", "-C", str(self.dir), *args], capture_output=True, text=True, env=env
        )
        assert proc.returncode == 0, f"git {' '.join(args)}: {proc.stderr}"
        return proc.stdout.strip()

    def commit(self, files: Mapping[str, str | None], message: str) -> str:
        """Write (or, for None, delete) ``files``, commit, push; returns the commit SHA."""
        for rel, text in files.items():
            path = self.dir / rel
            if text is None:
                path.unlink()
            else:
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(text)
        self.git("add", "-A")
        self.git("commit", "-q", "--allow-empty", "-m", message)
        self.git("push", "-q", "origin", "HEAD:main")
        return self.git("rev-parse", "HEAD")


def new_repo(server: GitServer, work: Path, name: str) -> Checkout:
    url = server.create(name)
    d = work / name
    git("init", "-q", "-b", "main", str(d))
    co = Checkout(d, url)
    co.git("remote", "add", "origin", url)
    return co


# --------------------------------------------------------------------------- Argo CD objects
def config_objects(hydrator: bool = False) -> list[dict[str, Any]]:
    """Namespace, base config (with our argocd-cm / cmd-params data, and
    :data:`HYDRATOR_PARAMS` when ``hydrator``) and the default project."""
    base = module_dir() / "manifests" / "base" / "config"
    ours = DEPLOY / "kustomize"
    out: list[dict[str, Any]] = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}
    ]
    for f in BASE_CONFIG:
        d = yaml.safe_load((base / f).read_text())
        d["metadata"]["namespace"] = NAMESPACE
        if f in ("argocd-cm.yaml", "argocd-cmd-params-cm.yaml"):
            d.setdefault("data", {}).update(yaml.safe_load((ours / f).read_text())["data"])
        if hydrator and f == "argocd-cmd-params-cm.yaml":
            d["data"].update(HYDRATOR_PARAMS)
        out.append(d)
    out.append(
        {
            "apiVersion": "argoproj.io/v1alpha1",
            "kind": "AppProject",
            "metadata": {"name": "default", "namespace": NAMESPACE},
            "spec": {
                "sourceRepos": ["*"],
                "destinations": [{"server": "*", "namespace": "*"}],
                "clusterResourceWhitelist": [{"group": "*", "kind": "*"}],
            },
        }
    )
    return out


def crds() -> list[dict[str, Any]]:
    d = module_dir() / "manifests" / "crds"
    return [
        yaml.safe_load((d / f).read_text()) for f in ("application-crd.yaml", "appproject-crd.yaml")
    ]


def application(
    name: str, repo_url: str, path: str, namespace: str, parameters: dict[str, str] | None = None
) -> dict[str, Any]:
    """deploy/argocd/application.yaml, pointed at the loopback repository and ``namespace``."""
    app: dict[str, Any] = yaml.safe_load((DEPLOY / "application.yaml").read_text())
    app["metadata"]["name"] = name
    app["spec"]["source"].update({"repoURL": repo_url, "path": path, "targetRevision": "main"})
    app["spec"]["destination"]["namespace"] = namespace
    for k, v in (parameters or {}).items():
        app["spec"]["source"]["plugin"].setdefault("parameters", []).append(
            {"name": k, "string": v}
        )
    return app


def hydrator_application(
    name: str, repo_url: str, path: str, namespace: str, branch: str, hydrated_path: str
) -> dict[str, Any]:
    """deploy/argocd/application-hydrator.yaml, its dry source the loopback repository's
    ``main`` at ``path``, hydrated to ``branch`` at ``hydrated_path`` of the same repository."""
    app: dict[str, Any] = yaml.safe_load((DEPLOY / "application-hydrator.yaml").read_text())
    app["metadata"]["name"] = name
    hydrator = app["spec"]["sourceHydrator"]
    hydrator["drySource"].update({"repoURL": repo_url, "path": path, "targetRevision": "main"})
    hydrator["syncSource"].update({"targetBranch": branch, "path": hydrated_path})
    app["spec"]["destination"]["namespace"] = namespace
    return app


def write_secret(name: str, repo_url: str) -> dict[str, Any]:
    """The push credentials the commit server gets for ``repo_url`` (label
    ``repository-write``); the loopback Git server never challenges them."""
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": name,
            "namespace": NAMESPACE,
            "labels": {"argocd.argoproj.io/secret-type": "repository-write"},
        },
        "stringData": {"url": repo_url, "type": "git", "username": "hydrator", "password": "x"},
    }


# --------------------------------------------------------------------------- the processes
@dataclass
class ArgoCD:
    kubeconfig: Path
    dir: Path
    git: GitServer
    redis_port: int
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)
    sidecar: str = ""
    #: the commit server's address (``hydrator=True``), else ""
    commit_server: str = ""
    started_in: float = 0.0

    def logs(self, tail: int = 4000) -> str:
        out = []
        for f in sorted(self.dir.glob("*.log")):
            out.append(f"--- {f.name}\n{f.read_text(errors='replace')[-tail:]}")
        if self.sidecar:
            out.append("--- sidecar\n" + images.podman("logs", self.sidecar).stderr[-tail:])
        return "\n".join(out)

    def flush_cache(self) -> None:
        subprocess.run(
            ["redis-cli", "-p", str(self.redis_port), "FLUSHALL"], capture_output=True, check=False
        )


def _spawn(
    argv: list[str], env: dict[str, str], log: Path, procs: list[subprocess.Popen[bytes]]
) -> None:
    with open(log, "ab") as f:
        procs.append(
            subprocess.Popen(
                argv, env=env, stdout=f, stderr=subprocess.STDOUT, start_new_session=True
            )
        )


def _start_commit_server(
    argocd: Path, env: dict[str, str], argo: ArgoCD
) -> tuple[int, subprocess.Popen[bytes]]:
    """argocd-commit-server on a free loopback port (its git runs ``argocd`` from ``PATH`` as
    GIT_ASKPASS, as in Argo's image); its port and process."""
    port = free_port()
    _spawn(
        [str(argocd), "--address", "127.0.0.1", "--port", str(port),
         "--metrics-address", "127.0.0.1", "--metrics-port", str(free_port()),
         "--loglevel", "info"],
        {**env, "ARGOCD_BINARY_NAME": "argocd-commit-server"},
        argo.dir / "commit-server.log",
        argo.procs,
    )  # fmt: skip
    return port, argo.procs[-1]


def _wait_listening(port: int, proc: subprocess.Popen[bytes], what: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 1):
            return
        time.sleep(0.1)
    raise AssertionError(f"{what} is not listening on 127.0.0.1:{port} (exit {proc.poll()})")


@contextlib.contextmanager
def argo_cd(
    argocd: Path, cmp_image: str, kubeconfig: Path, work: Path, hydrator: bool = False
) -> Iterator[ArgoCD]:
    """Start redis, the sidecar, repo-server and application-controller (and, with
    ``hydrator``, the commit server); stop them after."""
    start = time.monotonic()
    work.mkdir(parents=True, exist_ok=True)
    plugins, home, tmp, bindir = work / "plugins", work / "home", work / "sidecar-tmp", work / "bin"
    for d in (plugins, home, tmp, bindir):
        d.mkdir(exist_ok=True)
    plugins.chmod(0o1777)
    tmp.chmod(0o1777)
    shutil.copy(module_dir() / "hack" / "git-verify-wrapper.sh", bindir / "git-verify-wrapper.sh")
    (bindir / "git-verify-wrapper.sh").chmod(0o755)
    stack = contextlib.ExitStack()
    git = stack.enter_context(git_server(work / "git"))
    rp = free_port()
    argo = ArgoCD(kubeconfig, work, git, rp)
    try:
        _spawn(
            [
                "redis-server",
                "--bind",
                "127.0.0.1",
                "--port",
                str(rp),
                "--save",
                "",
                "--appendonly",
                "no",
            ],
            dict(os.environ),
            work / "redis.log",
            argo.procs,
        )
        name = f"dyn-gitops-argocd-cmp-{uuid.uuid4().hex[:8]}"
        proc = images.podman(
            "run", "-d", "--name", name, "--network=none", "--read-only", "--cap-drop=all",
            "--security-opt=no-new-privileges", "-v", f"{tmp}:/tmp",
            "-e", "ARGOCD_EXEC_TIMEOUT=180s",
            "-v", f"{argocd.resolve()}:/var/run/argocd/argocd-cmp-server:ro",
            "-v", f"{plugins}:/home/argocd/cmp-server/plugins", cmp_image,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        argo.sidecar = name
        deadline = time.monotonic() + 120
        while not list(plugins.glob("*.sock")) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert list(plugins.glob("*.sock")), f"the sidecar made no plugin socket\n{argo.logs()}"
        common = {
            **os.environ,
            "ARGOCD_FAKE_IN_CLUSTER": "true",
            "KUBECONFIG": str(kubeconfig),
            "ARGOCD_PLUGINSOCKFILEPATH": str(plugins),
            "ARGOCD_TLS_DATA_PATH": str(work / "tls"),
            "ARGOCD_SSH_DATA_PATH": str(work / "ssh"),
            "ARGOCD_GPG_ENABLED": "false",
            "HOME": str(home),
        }
        controller_env = {
            **common,
            "ARGOCD_BINARY_NAME": "argocd-application-controller",
            "ARGOCD_APPLICATION_CONTROLLER_REPO_SERVER_TIMEOUT_SECONDS": "180",
        }
        if hydrator:
            (bindir / "argocd").symlink_to(argocd.resolve())
            path = {"PATH": f"{bindir}:{os.environ['PATH']}"}
            cs_port, commit_proc = _start_commit_server(argocd, {**common, **path}, argo)
            argo.commit_server = f"127.0.0.1:{cs_port}"
            controller_env["ARGOCD_HYDRATOR_ENABLED"] = HYDRATOR_PARAMS["hydrator.enabled"]
            controller_env["ARGOCD_APPLICATION_CONTROLLER_COMMIT_SERVER"] = argo.commit_server
        rsp = free_port()
        _spawn(
            [str(argocd), "--port", str(rsp), "--redis", f"127.0.0.1:{rp}",
             "--metrics-port", str(free_port()), "--loglevel", "info"],
            {
                **common,
                "ARGOCD_BINARY_NAME": "argocd-repo-server",
                "PATH": f"{bindir}:{os.environ['PATH']}",
                "ARGOCD_REPO_SERVER_PLUGIN_TAR_EXCLUSIONS": ".git/*",
            },
            work / "repo-server.log",
            argo.procs,
        )  # fmt: skip
        _spawn(
            [str(argocd), "--namespace", NAMESPACE, "--redis", f"127.0.0.1:{rp}",
             "--repo-server", f"127.0.0.1:{rsp}", "--metrics-port", str(free_port()),
             "--loglevel", "info", "--app-resync", "30"],
            controller_env,
            work / "controller.log",
            argo.procs,
        )  # fmt: skip
        if hydrator:
            _wait_listening(cs_port, commit_proc, "argocd-commit-server", 120)
        argo.started_in = time.monotonic() - start
        yield argo
    finally:
        for p in reversed(argo.procs):
            _stop(p)
        if argo.sidecar:
            # the sidecar stops within a second of SIGTERM (its init); no need to wait
            images.podman("rm", "-f", "-t", "0", argo.sidecar)
        stack.close()
