"""The real LeaderWorkerSet controller (``sigs.k8s.io/lws`` manager, built by
``tools/test-bins/build-lws.sh``) run out of cluster against the realistic cluster's
kube-apiserver.

Its webhooks run for real: the manager serves them on ``https://127.0.0.1:<port>`` with a
certificate made here (openssl: a CA and a serving certificate for IP 127.0.0.1), and the
API server calls them through a Mutating- and a ValidatingWebhookConfiguration by ``url``
(the module's ``config/webhook/manifests.yaml``, written next to the binary, with upstream's
kustomize patch applied: the pod webhooks only for pods labelled with a set's name). The
manager's internal certificate management (cert-controller, which wants a Service and a
Secret in its own namespace) is off in its configuration file, as is leader election.

Ready means: its ``/readyz`` answers 200 and a server-side dry-run create of a
LeaderWorkerSet comes back defaulted by its mutating webhook (the API server reached it).

On exit the webhook configurations are removed first (so nothing waits for a stopped
webhook), then the manager is stopped, then the real CRD is deleted (its sets with it) and
the minimal free-form one of ``support.thirdparty_crds`` put back: tests without the
controller see the cluster as before.
"""

from __future__ import annotations

import contextlib
import copy
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from support.controlplane import REPO, _stop, _tail, _wait, free_port, install_crds

BUILD_SCRIPT = REPO / "tools" / "test-bins" / "build-lws.sh"
BINARY = "lws-controller-manager"
#: files build-lws.sh writes next to the binary, from the same module
CRDS_FILE = "lws-crds.yaml"
WEBHOOKS_FILE = "lws-webhooks.yaml"
GROUP, VERSION, PLURAL = "leaderworkerset.x-k8s.io", "v1", "leaderworkersets"
CRD_NAME = f"{PLURAL}.{GROUP}"
#: upstream's kustomize patch (config/webhook/*-patch.yaml) on the pod webhooks
POD_SELECTOR = {
    "matchExpressions": [{"key": "leaderworkerset.sigs.k8s.io/name", "operator": "Exists"}]
}
#: the names our webhook configurations get (upstream's are generic)
CONFIG_PREFIX = "dyn-gitops-test-lws-"
START_TIMEOUT = 120.0


@dataclass
class LwsController:
    proc: subprocess.Popen[bytes]
    log: Path
    webhook_port: int
    health_port: int
    metrics_port: int
    #: seconds from the process start to ready (readyz + a webhook-defaulted dry run)
    started_in: float


def bin_dir() -> Path | None:
    from support.binaries import built_dir

    return built_dir("DYN_GITOPS_LWS_BINS", BUILD_SCRIPT)


def missing() -> str | None:
    """Why the controller cannot run here, or None."""
    d = bin_dir()
    files = [BINARY, CRDS_FILE, WEBHOOKS_FILE]
    if d is not None and all((d / f).is_file() for f in files) and os.access(d / BINARY, os.X_OK):
        return None
    return (
        f"the LeaderWorkerSet controller is not built: run `bash {BUILD_SCRIPT.relative_to(REPO)}`"
        f" (needs Go and the Go module proxy; bin dir: {d})"
    )


def _certs(d: Path) -> bytes:
    """A CA and a serving certificate for 127.0.0.1 in ``d`` (tls.crt, tls.key, as
    controller-runtime's webhook server reads them); the CA's PEM."""

    def ssl(*args: str) -> None:
        subprocess.run(["openssl", *args], check=True, capture_output=True, cwd=d)

    ssl(
        "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
        "-subj", "/CN=lws-test-ca", "-keyout", "ca.key", "-out", "ca.crt",
    )  # fmt: skip
    ssl(
        "req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=127.0.0.1",
        "-keyout", "tls.key", "-out", "tls.csr",
    )  # fmt: skip
    (d / "san.ext").write_text("subjectAltName=IP:127.0.0.1\n")
    ssl(
        "x509", "-req", "-in", "tls.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
        "-CAcreateserial", "-days", "2", "-extfile", "san.ext", "-out", "tls.crt",
    )  # fmt: skip
    return (d / "ca.crt").read_bytes()


def _config(d: Path, webhook: int, health: int, metrics: int) -> Path:
    cfg = {
        "apiVersion": "config.lws.x-k8s.io/v1alpha1",
        "kind": "Configuration",
        "leaderElection": {"leaderElect": False},
        "internalCertManagement": {"enable": False},
        "webhook": {"host": "127.0.0.1", "port": webhook, "certDir": str(d)},
        "health": {"healthProbeBindAddress": f"127.0.0.1:{health}"},
        "metrics": {"bindAddress": f"127.0.0.1:{metrics}"},
    }
    path = d / "config.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def webhook_configurations(manifests: str, port: int, ca: bytes) -> list[dict[str, Any]]:
    """The module's webhook configurations, served at ``https://127.0.0.1:port`` (their
    service path kept) with our CA; the pod webhooks limited as upstream's patch does."""
    import base64

    out = []
    for doc in yaml.safe_load_all(manifests):
        if not doc:
            continue
        doc = copy.deepcopy(doc)
        kind = doc["kind"]
        doc["metadata"] = {"name": CONFIG_PREFIX + kind.lower()}
        for hook in doc["webhooks"]:
            path = hook["clientConfig"]["service"]["path"]
            hook["clientConfig"] = {
                "url": f"https://127.0.0.1:{port}{path}",
                "caBundle": base64.b64encode(ca).decode(),
            }
            if any(r.get("resources") == ["pods"] for r in hook["rules"]):
                hook["objectSelector"] = POD_SELECTOR
        out.append(doc)
    return out


def _probe_set() -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "LeaderWorkerSet",
        "metadata": {"name": "readiness-probe"},
        "spec": {
            "leaderWorkerTemplate": {
                "workerTemplate": {"spec": {"containers": [{"name": "c", "image": "probe"}]}}
            }
        },
    }


def _webhook_answers(api: Any) -> bool:
    """A dry-run create of a set comes back defaulted by the mutating webhook."""
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    try:
        got = client.CustomObjectsApi(api).create_namespaced_custom_object(
            GROUP, VERSION, "default", PLURAL, _probe_set(), dry_run="All"
        )
    except ApiException as exc:
        if exc.status == 500 or "failed calling webhook" in str(exc.body):
            return False  # not serving yet
        raise
    return "rolloutStrategy" in got["spec"]  # set by the defaulting webhook, not the schema


def _apply_webhooks(api: Any, configs: list[dict[str, Any]]) -> None:
    from kubernetes import client

    adm = client.AdmissionregistrationV1Api(api)
    for cfg in configs:
        _delete_webhooks(api, [cfg])
        if cfg["kind"] == "MutatingWebhookConfiguration":
            adm.create_mutating_webhook_configuration(cfg)
        else:
            adm.create_validating_webhook_configuration(cfg)


def _delete_webhooks(api: Any, configs: list[dict[str, Any]]) -> None:
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    adm = client.AdmissionregistrationV1Api(api)
    for cfg in configs:
        delete = (
            adm.delete_mutating_webhook_configuration
            if cfg["kind"] == "MutatingWebhookConfiguration"
            else adm.delete_validating_webhook_configuration
        )
        with contextlib.suppress(ApiException):
            delete(cfg["metadata"]["name"])


def _wait_ready(api: Any, ctl: LwsController, t0: float) -> float:
    _wait(
        f"http://127.0.0.1:{ctl.health_port}/readyz",
        lambda s, b: s == 200,
        START_TIMEOUT,
        [ctl.proc],
        ctl.log,
    )
    end = t0 + START_TIMEOUT
    while not _webhook_answers(api):
        if ctl.proc.poll() is not None:
            raise RuntimeError(f"{BINARY} exited with {ctl.proc.returncode}:\n{_tail(ctl.log)}")
        if time.monotonic() > end:
            raise TimeoutError(f"{BINARY} webhooks not answering:\n{_tail(ctl.log)}")
        time.sleep(0.2)
    return time.monotonic() - t0


def _restore_minimal_crd(api: Any) -> None:
    """Delete the real CRD (its sets and, through them, their pods go) and put back the
    minimal one the realistic cluster starts with."""
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    from support.thirdparty_crds import thirdparty_crds

    ext = client.ApiextensionsV1Api(api)
    with contextlib.suppress(ApiException):
        ext.delete_custom_resource_definition(CRD_NAME)
    end = time.monotonic() + 60
    while time.monotonic() < end:
        try:
            ext.read_custom_resource_definition(CRD_NAME)
        except ApiException as exc:
            if exc.status == 404:
                break
            raise
        time.sleep(0.2)
    minimal = [c for c in thirdparty_crds() if c["metadata"]["name"] == CRD_NAME]
    install_crds(api, minimal)


@contextlib.contextmanager
def lws_controller(kubeconfig: Path, api: Any) -> Iterator[LwsController]:
    """Install the real CRD and webhooks, run the manager until ready; undo on exit."""
    d = bin_dir()
    assert d is not None and missing() is None, missing()
    crds = [c for c in yaml.safe_load_all((d / CRDS_FILE).read_text()) if c]
    tmp = Path(tempfile.mkdtemp(prefix="dyn-gitops-lws-"))
    configs: list[dict[str, Any]] = []
    try:
        ca = _certs(tmp)
        ports = (free_port(), free_port(), free_port())
        configs = webhook_configurations((d / WEBHOOKS_FILE).read_text(), ports[0], ca)
        install_crds(api, crds)
        _apply_webhooks(api, configs)
        log = tmp / "lws.log"
        with open(log, "wb") as logf:
            t0 = time.monotonic()
            proc = subprocess.Popen(
                [
                    str(d / BINARY),
                    f"--config={_config(tmp, *ports)}",
                    f"--kubeconfig={kubeconfig}",
                ],
                stdout=logf,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        ctl = LwsController(proc, log, *ports, started_in=0.0)
        try:
            ctl.started_in = _wait_ready(api, ctl, t0)
            yield ctl
        finally:
            _delete_webhooks(api, configs)
            _stop(proc)
    finally:
        _delete_webhooks(api, configs)
        _restore_minimal_crd(api)
        shutil.rmtree(tmp, ignore_errors=True)
