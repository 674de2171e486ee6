"""Real Flux for end-to-end tests: source-controller + kustomize-controller (built by
``tools/test-bins/build-flux.sh``) against the realistic cluster (``cluster.py``), a loopback
smart-HTTP Git server (``git http-backend`` behind a threaded HTTP server) and a loopback OCI
registry (Debian's ``docker-registry``, installed by ``tools/images/deps.sh``).

Everything started here is stopped in reverse order and its scratch directory removed.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from support.controlplane import _stop, _tail, _wait, free_port
from support.gitserver import GitServer, git_server

REPO = Path(__file__).resolve().parents[2]
BUILD_SCRIPT = REPO / "tools" / "test-bins" / "build-flux.sh"
#: binaries ``build-flux.sh`` builds, and the CRD file it writes next to them
BINARIES = ("source-controller", "kustomize-controller", "flux")
CRDS_FILE = "flux-crds.yaml"
#: Debian's OCI registry (package docker-registry)
REGISTRY_BINARY = "docker-registry"
#: the namespace the controllers believe they run in (no object lives there)
RUNTIME_NAMESPACE = "flux-system"
SOURCE_GROUP, SOURCE_VERSION = "source.toolkit.fluxcd.io", "v1"
KUSTOMIZE_GROUP, KUSTOMIZE_VERSION = "kustomize.toolkit.fluxcd.io", "v1"
#: what ``flux reconcile`` (and a notification-controller Receiver) sets to sync at once
REQUESTED_AT = "reconcile.fluxcd.io/requestedAt"
#: kustomize-controller's feature gate for ``sourceRef.kind: ExternalArtifact`` (v1.7+,
#: default off: internal/features/features.go)
EXTERNAL_ARTIFACT_GATE = "ExternalArtifact"
#: the annotation ``flux push artifact --revision`` sets (copied to the artifact's metadata)
OCI_REVISION = "org.opencontainers.image.revision"


def bin_dir() -> Path | None:
    """Directory of the Flux binaries for the pinned versions, if it can be named."""
    from support.binaries import built_dir

    return built_dir("DYN_GITOPS_FLUX_BINS", BUILD_SCRIPT)


def missing() -> str | None:
    """Why the Flux tests cannot run here (None: everything is present)."""
    d = bin_dir()
    for name in BINARIES:
        if d is None or not os.access(d / name, os.X_OK):
            return (
                f"{name} is not built: run `bash tools/test-bins/build-flux.sh` "
                f"(needs Go and the Go module proxy; bin dir: {d})"
            )
    assert d is not None
    if not (d / CRDS_FILE).is_file():
        return f"{d / CRDS_FILE} is missing: run `bash tools/test-bins/build-flux.sh`"
    if shutil.which(REGISTRY_BINARY) is None:
        return (
            f"{REGISTRY_BINARY} is not installed: run `bash tools/images/deps.sh` (Debian packages)"
        )
    if shutil.which("git") is None:
        return "git is not installed"
    return None


# ---------------------------------------------------------------------------- OCI registry
@contextlib.contextmanager
def registry(d: Path) -> Iterator[str]:
    """Debian's docker-registry (distribution 2.8) on loopback; yields ``127.0.0.1:<port>``."""
    d.mkdir(parents=True, exist_ok=True)
    port = free_port()
    config = {
        "version": 0.1,
        "log": {"level": "warn"},
        "storage": {"filesystem": {"rootdirectory": str(d / "data")}},
        "http": {"addr": f"127.0.0.1:{port}"},
    }
    (d / "config.yml").write_text(yaml.safe_dump(config))
    log = d / "registry.log"
    with open(log, "wb") as logf:
        p = subprocess.Popen(
            [shutil.which(REGISTRY_BINARY) or REGISTRY_BINARY, "serve", str(d / "config.yml")],
            stdout=logf,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        _wait(f"http://127.0.0.1:{port}/v2/", lambda s, b: s == 200, 60, [p], log)
        yield f"127.0.0.1:{port}"
    finally:
        _stop(p)


# ------------------------------------------------------------------------- the controllers
@dataclass
class Flux:
    """The running controllers and what the tests need around them."""

    bins: dict[str, Path]
    dir: Path
    kubeconfig: Path
    git: GitServer
    registry: str
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)
    log: Path = Path()

    def logs(self, namespace: str = "") -> str:
        """The controllers' last log lines; only those naming ``namespace`` if given, and
        the registry's last lines (they serve every namespace)."""
        if not namespace:
            return _tail(self.log, 60)
        try:
            lines = self.log.read_text(errors="replace").splitlines()
        except OSError:
            lines = []
        mine = [line for line in lines if f'"{namespace}"' in line][-40:]
        registry = _tail(self.dir / "registry" / "registry.log", 20)
        return "\n".join(mine) + f"\nregistry:\n{registry}"

    def push_artifact(self, url: str, path: Path, source: str, revision: str) -> str:
        """``flux push artifact`` of ``path`` to ``url`` (oci://...); its output."""
        proc = subprocess.run(
            [
                str(self.bins["flux"]),
                "push",
                "artifact",
                url,
                f"--path={path}",
                f"--source={source}",
                f"--revision={revision}",
                "--insecure-registry",
            ],
            capture_output=True,
            text=True,
            timeout=120,
            env={**os.environ, "HOME": str(self.dir)},
        )
        if proc.returncode != 0:
            raise RuntimeError(f"flux push artifact failed:\n{proc.stdout}{proc.stderr}")
        return proc.stdout + proc.stderr


def _health_addr() -> list[str]:
    return [
        f"--metrics-addr=127.0.0.1:{free_port()}",
        f"--health-addr=127.0.0.1:{free_port()}",
    ]


@contextlib.contextmanager
def flux(bins: dict[str, Path], crds: Path, kube: Any, kubeconfig: Path) -> Iterator[Flux]:
    """Install the Flux CRDs on ``kube``'s cluster and run the two controllers (all
    namespaces, no leader election), a Git server and a registry; yields once both
    controllers report healthy."""
    from support.controlplane import install_crds

    install_crds(kube, [d for d in yaml.safe_load_all(crds.read_text()) if d], timeout=60)
    d = Path(tempfile.mkdtemp(prefix="dyn-gitops-flux-"))
    procs: list[subprocess.Popen[bytes]] = []
    log = d / "flux.log"
    try:
        with git_server(d / "git") as gs, registry(d / "registry") as reg:
            storage = d / "storage"
            storage.mkdir()  # source-controller refuses a missing storage dir
            sp = free_port()
            env = {
                **os.environ,
                "RUNTIME_NAMESPACE": RUNTIME_NAMESPACE,
                "HOME": str(d),
                "KUBECONFIG": str(kubeconfig),  # they have no --kubeconfig flag
            }
            common = ["--watch-all-namespaces", "--enable-leader-election=false"]
            health = []
            with open(log, "wb") as logf:
                for name, extra in (
                    (
                        "source-controller",
                        [
                            f"--storage-path={storage}",
                            f"--storage-addr=127.0.0.1:{sp}",
                            f"--storage-adv-addr=127.0.0.1:{sp}",
                        ],
                    ),
                    # ExternalArtifact sources (in-cluster rendering) are off by default
                    ("kustomize-controller", [f"--feature-gates={EXTERNAL_ARTIFACT_GATE}=true"]),
                ):
                    addrs = _health_addr()
                    health.append(addrs[1].split("=", 1)[1])
                    procs.append(
                        subprocess.Popen(
                            [
                                str(bins[name]),
                                *common,
                                *extra,
                                *addrs,
                                "--log-level=info",
                            ],
                            stdout=logf,
                            stderr=subprocess.STDOUT,
                            env=env,
                            start_new_session=True,
                        )
                    )
            for addr in health:
                _wait(f"http://{addr}/readyz", lambda s, b: s == 200, 120, procs, log)
            yield Flux(bins, d, kubeconfig, gs, reg, procs, log)
    finally:
        for p in reversed(procs):
            _stop(p)
        shutil.rmtree(d, ignore_errors=True)


# ------------------------------------------------------------------------ object helpers
def ready(obj: dict[str, Any] | None) -> tuple[str, str, str] | None:
    """(status, reason, message) of the Ready condition, if any."""
    for c in ((obj or {}).get("status") or {}).get("conditions") or []:
        if c.get("type") == "Ready":
            return c.get("status", ""), c.get("reason", ""), c.get("message", "")
    return None
