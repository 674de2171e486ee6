"""A real etcd + kube-apiserver on loopback for tests (the envtest approach, from Python).

Binaries come from ``tools/test-bins/build.sh`` (built from the Go module proxy, cached
outside the repository). Everything started here is stopped and removed on exit.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import ssl
import subprocess
import tempfile
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[2]
BUILD_SCRIPT = REPO / "tools" / "test-bins" / "build.sh"


def bin_dir() -> Path | None:
    """Directory of the test binaries for the pinned versions, if it can be named."""
    from support.binaries import built_dir

    return built_dir("DYN_GITOPS_TEST_BINS", BUILD_SCRIPT)


def find_binary(name: str) -> Path | None:
    d = bin_dir()
    if d is not None and (d / name).is_file() and os.access(d / name, os.X_OK):
        return d / name
    return None


def missing_binary_message(name: str) -> str:
    return (
        f"{name} is not built: run `bash tools/test-bins/build.sh` "
        f"(needs Go and the Go module proxy; bin dir: {bin_dir()})"
    )


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait(
    url: str,
    ok: Callable[[int, bytes], bool],
    timeout: float,
    procs: list[subprocess.Popen[bytes]],
    log: Path,
    ctx: ssl.SSLContext | None = None,
    headers: dict[str, str] | None = None,
) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        for p in procs:
            if p.poll() is not None:
                raise RuntimeError(f"{p.args[0]} exited with {p.returncode}:\n{_tail(log)}")
        with contextlib.suppress(OSError):
            req = urllib.request.Request(url, headers=headers or {})
            with urllib.request.urlopen(req, context=ctx, timeout=2) as r:
                if ok(r.status, r.read()):
                    return
        time.sleep(0.2)
    raise TimeoutError(f"{url} not ready after {timeout} s:\n{_tail(log)}")


def _tail(log: Path, lines: int = 40) -> str:
    try:
        return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


@dataclass
class ControlPlane:
    dir: Path
    url: str
    token: str
    kubeconfig: Path
    etcd: subprocess.Popen[bytes]
    apiserver: subprocess.Popen[bytes]
    log: Path
    #: the kube-apiserver's command line (``restart_apiserver`` runs it again)
    apiserver_cmd: tuple[str, ...] = ()
    #: every process started, stopped at exit (a restarted kube-apiserver joins it)
    procs: list[subprocess.Popen[bytes]] | None = None

    def client(self) -> Any:
        from kubernetes import config

        return config.new_client_from_config(config_file=str(self.kubeconfig))

    def stop_apiserver(self) -> None:
        """Kill kube-apiserver (SIGKILL: an outage, not a shutdown); etcd keeps running."""
        if self.apiserver.poll() is None:
            self.apiserver.kill()
            self.apiserver.wait(20)

    def restart_apiserver(self, timeout: float = 120) -> None:
        """Run kube-apiserver again on the same port, certificates and etcd (the kubeconfig
        stays valid) and wait until it is ready."""
        self.stop_apiserver()
        with open(self.log, "ab") as logf:
            self.apiserver = subprocess.Popen(
                list(self.apiserver_cmd),
                stdout=logf,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        if self.procs is not None:
            self.procs.append(self.apiserver)
        _wait(
            f"{self.url}/readyz",
            lambda s, b: s == 200,
            timeout,
            [self.apiserver, self.etcd],
            self.log,
            ctx=ssl._create_unverified_context(),
            headers={"Authorization": f"Bearer {self.token}"},
        )


def _stop(p: subprocess.Popen[bytes]) -> None:
    if p.poll() is None:
        p.send_signal(signal.SIGTERM)
        try:
            p.wait(20)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait(5)


@contextlib.contextmanager
def control_plane(etcd_bin: Path, apiserver_bin: Path) -> Iterator[ControlPlane]:
    d = Path(tempfile.mkdtemp(prefix="dyn-gitops-cp-"))
    log = d / "cp.log"
    procs: list[subprocess.Popen[bytes]] = []
    try:
        with open(log, "wb") as logf:
            ep, pp, ap = free_port(), free_port(), free_port()
            etcd = subprocess.Popen(
                [
                    str(etcd_bin),
                    "--name=t",
                    f"--data-dir={d / 'etcd'}",
                    f"--listen-client-urls=http://127.0.0.1:{ep}",
                    f"--advertise-client-urls=http://127.0.0.1:{ep}",
                    f"--listen-peer-urls=http://127.0.0.1:{pp}",
                    f"--initial-advertise-peer-urls=http://127.0.0.1:{pp}",
                    f"--initial-cluster=t=http://127.0.0.1:{pp}",
                    "--unsafe-no-fsync",
                    "--log-level=warn",
                ],
                stdout=logf,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
            procs.append(etcd)
            _wait(f"http://127.0.0.1:{ep}/health", lambda s, b: b'"true"' in b, 30, procs, log)
            subprocess.run(
                ["openssl", "genrsa", "-out", str(d / "sa.key"), "2048"],
                check=True,
                capture_output=True,
            )
            token = "admin-" + os.urandom(12).hex()
            (d / "tokens.csv").write_text(f'{token},admin,admin-uid,"system:masters"\n')
            apiserver_cmd = (
                str(apiserver_bin),
                f"--etcd-servers=http://127.0.0.1:{ep}",
                "--bind-address=127.0.0.1",
                "--advertise-address=127.0.0.1",
                f"--secure-port={ap}",
                f"--cert-dir={d / 'certs'}",
                f"--token-auth-file={d / 'tokens.csv'}",
                "--authorization-mode=RBAC",
                "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
                f"--service-account-key-file={d / 'sa.key'}",
                f"--service-account-signing-key-file={d / 'sa.key'}",
                "--service-cluster-ip-range=10.0.0.0/24",
                "--disable-admission-plugins=ServiceAccount",
                "--allow-privileged=true",
                "--enable-priority-and-fairness=false",
                "--profiling=false",
            )
            apiserver = subprocess.Popen(
                list(apiserver_cmd),
                stdout=logf,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
            procs.append(apiserver)
            url = f"https://127.0.0.1:{ap}"
            # loopback readiness probe: the kubeconfig below verifies against the CA
            _wait(
                f"{url}/readyz",
                lambda s, b: s == 200,
                120,
                procs,
                log,
                ctx=ssl._create_unverified_context(),
                headers={"Authorization": f"Bearer {token}"},
            )
            kubeconfig = d / "kubeconfig"
            kubeconfig.write_text(
                yaml.safe_dump(
                    {
                        "apiVersion": "v1",
                        "kind": "Config",
                        "clusters": [
                            {
                                "name": "t",
                                "cluster": {
                                    "server": url,
                                    "certificate-authority": str(d / "certs" / "apiserver.crt"),
                                },
                            }
                        ],
                        "users": [{"name": "admin", "user": {"token": token}}],
                        "contexts": [{"name": "t", "context": {"cluster": "t", "user": "admin"}}],
                        "current-context": "t",
                    }
                )
            )
            cp = ControlPlane(d, url, token, kubeconfig, etcd, apiserver, log, apiserver_cmd, procs)
            _wait_namespace(cp, "default")
            yield cp
    finally:
        for p in reversed(procs):
            _stop(p)
        shutil.rmtree(d, ignore_errors=True)


def _wait_namespace(cp: ControlPlane, name: str, timeout: float = 30) -> None:
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    api = client.CoreV1Api(cp.client())
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            api.read_namespace(name)
            return
        except ApiException:
            time.sleep(0.2)
    raise TimeoutError(f"namespace {name} never appeared")


def ensure_namespace(api_client: Any, name: str) -> None:
    """Create the namespace unless it exists (a dry-run Namespace would not make it)."""
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    try:
        client.CoreV1Api(api_client).create_namespace({"metadata": {"name": name}})
    except ApiException as exc:
        if exc.status != 409:
            raise


def install_crds(api_client: Any, crds: list[dict[str, Any]], timeout: float = 30) -> None:
    """Create (or replace) CRDs and wait until they are Established and served."""
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    ext = client.ApiextensionsV1Api(api_client)
    for crd in crds:
        try:
            ext.create_custom_resource_definition(crd)
            continue
        except ApiException as exc:
            if exc.status != 409:
                raise
        # it exists: replace it; the apiextensions controller writes the CRD's status at the
        # same time, so a replace can lose the race (409) and is retried on a fresh read
        for attempt in range(10):
            current = ext.read_custom_resource_definition(crd["metadata"]["name"])
            body = {
                **crd,
                "metadata": {
                    **crd["metadata"],
                    "resourceVersion": current.metadata.resource_version,
                },
            }
            try:
                ext.replace_custom_resource_definition(crd["metadata"]["name"], body)
                break
            except ApiException as exc:
                if exc.status != 409 or attempt == 9:
                    raise
                time.sleep(0.1)
    end = time.monotonic() + timeout
    for crd in crds:
        name = crd["metadata"]["name"]
        group = crd["spec"]["group"]
        plural = crd["spec"]["names"]["plural"]
        version = crd["spec"]["versions"][0]["name"]
        while True:
            obj = ext.read_custom_resource_definition(name)
            conds = {c.type: c.status for c in (obj.status.conditions or [])}
            if conds.get("Established") == "True" and conds.get("NamesAccepted") == "True":
                try:
                    res = client.CustomObjectsApi(api_client).get_api_resources(group, version)
                    if any(r.name == plural for r in res.resources):
                        break
                except ApiException:
                    pass
            if time.monotonic() > end:
                raise TimeoutError(f"CRD {name} not served after {timeout} s")
            time.sleep(0.1)
