"""A stand-in for the Dynamo 1.5 operator's DGD admission webhooks, served over TLS on
loopback and called by the real kube-apiserver through a Mutating- and a
ValidatingWebhookConfiguration (``url`` + ``caBundle``).

Behaviour ported from ``deploy/operator/internal/webhook`` @ 2a6da14c8 (1.5.0-dev; #12942
73a3fd26f for the provider, #11597 43788706e for the lease-aware defaulter), only what
touches a GitOps apply of a DGD:

* defaulting (``defaulting/dynamographdeployment_handler.go``), every CREATE and UPDATE:
  a component without ``replicas`` gets 1; on CREATE only, ``nvidia.com/workload-provider``
  is set from the routing intent (``grove`` when the Grove gate is on and the DGD does not
  opt out with ``nvidia.com/enable-grove: "false"``, else ``component``), overwriting a
  value the request carries, and ``nvidia.com/dynamo-operator-origin-version`` is stamped
  unless present;
* validation (``validation/dynamographdeployment.go``): the provider must be ``component``
  or ``grove`` and the origin version a semantic version; on UPDATE (unless the DGD is being
  deleted) the provider may not be added by anyone but the operator's principal (when one
  is configured), and once set may be neither changed nor removed;
* both skip (allow, unchanged) a namespace whose ``dynamo-operator-namespace-scope`` Lease is
  live (``webhook/common.go`` ``shouldSkipAdmission``; ``LeaseWatcher.Contains`` re-checks
  expiry on every call, so the stand-in reads the Lease on every request).

The configurations select only namespaces labelled with this instance's id, so the shared
test control plane is unaffected elsewhere. Every request is recorded (``requests``).
"""

from __future__ import annotations

import base64
import contextlib
import json
import re
import ssl
import subprocess
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

Obj = dict[str, Any]

PROVIDER = "nvidia.com/workload-provider"
ORIGIN = "nvidia.com/dynamo-operator-origin-version"
ENABLE_GROVE = "nvidia.com/enable-grove"
PROVIDERS = ("component", "grove")
#: the label the webhook configurations select namespaces by
SELECTOR_LABEL = "dyn-gitops.test/dynamo-webhook"
MUTATING_NAME = "mdynamographdeployment.kb.io"
VALIDATING_NAME = "vdynamographdeployment.kb.io"
_SEMVER = re.compile(r"^v?\d+(\.\d+){0,2}(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?$")


@dataclass
class Seen:
    """One admission request the stand-in answered."""

    webhook: str  # "mutate" | "validate"
    operation: str
    namespace: str
    name: str
    user: str
    skipped: bool  # a live scope lease: allowed unchanged
    allowed: bool
    patched: list[Obj] = field(default_factory=list)


@dataclass
class StandIn:
    """The operator's behaviour knobs, and what it saw."""

    operator_version: str = "1.5.1"
    grove_enabled: bool = False
    #: the operator's service-account username (POD_SERVICE_ACCOUNT/POD_NAMESPACE); ""
    #: disables the "only the operator materializes the provider" rule, as upstream does
    operator_principal: str = "system:serviceaccount:dynamo-system:dynamo-operator"
    #: namespace -> is a live scope lease there (None: the lease mechanism is not honoured)
    lease_live: Callable[[str], bool] | None = None
    requests: list[Seen] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    # ------------------------------------------------------------------ admission logic
    def _skipped(self, namespace: str) -> bool:
        return self.lease_live is not None and self.lease_live(namespace)

    def mutate(self, req: Obj) -> tuple[bool, list[Obj], str]:
        """(skipped, JSON patch, "") for an AdmissionRequest."""
        obj = req["object"]
        if self._skipped(req.get("namespace", "")):
            return True, [], ""
        patch: list[Obj] = []
        meta = obj.get("metadata") or {}
        ann = dict(meta.get("annotations") or {})
        for path, comps in _components(obj):
            for key, comp in comps:
                if isinstance(comp, dict) and comp.get("replicas") is None:
                    patch.append({"op": "add", "path": f"{path}/{_esc(key)}/replicas", "value": 1})
        if req["operation"] == "CREATE":
            grove = self.grove_enabled and str(ann.get(ENABLE_GROVE, "")).lower() != "false"
            ann[PROVIDER] = "grove" if grove else "component"
            ann.setdefault(ORIGIN, self.operator_version)
            if ann != (meta.get("annotations") or {}):
                patch.append({"op": "add", "path": "/metadata/annotations", "value": ann})
        return False, patch, ""

    def validate(self, req: Obj) -> tuple[bool, list[Obj], str]:
        """(skipped, [], refusal message or "") for an AdmissionRequest."""
        if self._skipped(req.get("namespace", "")):
            return True, [], ""
        new = req["object"]
        ann = (new.get("metadata") or {}).get("annotations") or {}
        errs: list[str] = []
        deleting = bool((new.get("metadata") or {}).get("deletionTimestamp"))
        if not deleting:  # the stateless rules, on CREATE and UPDATE alike
            if PROVIDER in ann and ann[PROVIDER] not in PROVIDERS:
                errs.append(
                    f'metadata.annotations[{PROVIDER}]: Unsupported value: "{ann[PROVIDER]}": '
                    'supported values: "component", "grove"'
                )
            if ORIGIN in ann and not _SEMVER.match(ann[ORIGIN]):
                errs.append(
                    f'metadata.annotations[{ORIGIN}]: Invalid value: "{ann[ORIGIN]}": '
                    "must be valid semver"
                )
        if req["operation"] == "UPDATE" and not deleting:
            old_ann = ((req.get("oldObject") or {}).get("metadata") or {}).get("annotations") or {}
            user = (req.get("userInfo") or {}).get("username", "")
            if (
                PROVIDER not in old_ann
                and PROVIDER in ann
                and self.operator_principal
                and user != self.operator_principal
            ):
                errs.append(
                    f"metadata.annotations[{PROVIDER}]: Forbidden: may only be materialized "
                    "by the Dynamo operator"
                )
            if PROVIDER in old_ann and ann.get(PROVIDER) != old_ann[PROVIDER]:
                shown = f'"{ann[PROVIDER]}"' if PROVIDER in ann else "null"
                errs.append(
                    f"metadata.annotations[{PROVIDER}]: Invalid value: {shown}: field is immutable"
                )
        if not errs:
            return False, [], ""
        name = (new.get("metadata") or {}).get("name", "")
        return (
            False,
            [],
            f'DynamoGraphDeployment.nvidia.com "{name}" is invalid: '
            + (", ".join(errs) if len(errs) == 1 else "[" + ", ".join(errs) + "]"),
        )

    def answer(self, webhook: str, review: Obj) -> Obj:
        req = review["request"]
        decide = self.mutate if webhook == "mutate" else self.validate
        skipped, patch, refusal = decide(req)
        resp: Obj = {"uid": req["uid"], "allowed": not refusal}
        if refusal:
            resp["status"] = {"code": 422, "reason": "Invalid", "message": refusal}
        if patch:
            resp["patchType"] = "JSONPatch"
            resp["patch"] = base64.b64encode(json.dumps(patch).encode()).decode()
        with self.lock:
            self.requests.append(
                Seen(
                    webhook,
                    req["operation"],
                    req.get("namespace", ""),
                    req.get("name")
                    or ((req.get("object") or {}).get("metadata") or {}).get("name", ""),
                    (req.get("userInfo") or {}).get("username", ""),
                    skipped,
                    not refusal,
                    patch,
                )
            )
        return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": resp}

    def seen(self, namespace: str) -> list[Seen]:
        with self.lock:
            return [s for s in self.requests if s.namespace == namespace]


def _esc(key: str) -> str:
    return key.replace("~", "~0").replace("/", "~1")


def _components(obj: Obj) -> Iterator[tuple[str, list[tuple[str, Any]]]]:
    """(JSON-pointer prefix, [(key, component)]) of the DGD's components: v1alpha1
    ``spec.services`` (a map), v1beta1 ``spec.components`` (a list)."""
    spec = obj.get("spec") or {}
    if isinstance(spec.get("services"), dict):
        yield "/spec/services", list(spec["services"].items())
    if isinstance(spec.get("components"), list):
        yield "/spec/components", [(str(i), c) for i, c in enumerate(spec["components"])]


# ---------------------------------------------------------------------- TLS and serving
def _certs(d: Path) -> tuple[Path, Path, bytes]:
    """A CA and a server certificate for IP 127.0.0.1: (cert, key, CA PEM)."""

    def run(args: str) -> None:
        subprocess.run(["openssl", *args.split()], check=True, capture_output=True, cwd=d)

    run("req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=standin-ca -keyout ca.key -out ca.crt")
    (d / "ext.cnf").write_text("subjectAltName=IP:127.0.0.1\n")
    run("req -newkey rsa:2048 -nodes -subj /CN=127.0.0.1 -keyout tls.key -out tls.csr")
    run(
        "x509 -req -in tls.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 1 "
        "-extfile ext.cnf -out tls.crt"
    )
    return d / "tls.crt", d / "tls.key", (d / "ca.crt").read_bytes()


def _handler(standin: StandIn) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            webhook = "mutate" if self.path.startswith("/mutate") else "validate"
            out = json.dumps(standin.answer(webhook, json.loads(body))).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(out)))
            self.end_headers()
            self.wfile.write(out)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    return Handler


@dataclass
class Served:
    standin: StandIn
    label_value: str
    url: str
    ca: bytes

    def configurations(self) -> tuple[Obj, Obj]:
        """The Mutating- and ValidatingWebhookConfiguration, shaped like the operator's
        chart (``webhook-configuration.yaml`` @ 2a6da14c8): CREATE and UPDATE of
        dynamographdeployments, failurePolicy Fail; every served version is sent as is (the
        dyn-gitops CRDs serve v1alpha1; the operator's webhook is at v1beta1 behind its
        conversion webhook, which only changes the spec's shape)."""

        def hook(name: str, path: str) -> Obj:
            return {
                "name": name,
                "admissionReviewVersions": ["v1"],
                "sideEffects": "None",
                "failurePolicy": "Fail",
                "timeoutSeconds": 10,
                "clientConfig": {
                    "url": f"{self.url}{path}",
                    "caBundle": base64.b64encode(self.ca).decode(),
                },
                "namespaceSelector": {"matchLabels": {SELECTOR_LABEL: self.label_value}},
                "rules": [
                    {
                        "apiGroups": ["nvidia.com"],
                        "apiVersions": ["*"],
                        "operations": ["CREATE", "UPDATE"],
                        "resources": ["dynamographdeployments"],
                    }
                ],
            }

        base = {"metadata": {"name": f"dyn-gitops-standin-{self.label_value}"}}
        mutating = {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "MutatingWebhookConfiguration",
            **base,
            "webhooks": [hook(MUTATING_NAME, "/mutate/nvidia.com/dynamographdeployments")],
        }
        validating = {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingWebhookConfiguration",
            **base,
            "webhooks": [hook(VALIDATING_NAME, "/validate/nvidia.com/dynamographdeployments")],
        }
        return mutating, validating


@contextlib.contextmanager
def serve(standin: StandIn) -> Iterator[Served]:
    """Serve ``standin`` over TLS on a free loopback port until the block ends."""
    with tempfile.TemporaryDirectory(prefix="dyn-gitops-webhook-") as tmp:
        cert, key, ca = _certs(Path(tmp))
        server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(standin))
        server.daemon_threads = True
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(cert, key)
        server.socket = ctx.wrap_socket(server.socket, server_side=True)
        thread = threading.Thread(target=server.serve_forever, name="dynamo-webhook", daemon=True)
        thread.start()
        try:
            port = server.server_address[1]
            yield Served(standin, uuid.uuid4().hex[:10], f"https://127.0.0.1:{port}", ca)
        finally:
            server.shutdown()
            server.server_close()


def wait_active(probe: Callable[[], None], seen: Callable[[], bool], timeout: float = 60) -> None:
    """The API server picks webhook configurations up asynchronously: call ``probe`` (a
    dry-run write that the webhooks would see) until ``seen`` says they did."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        probe()
        if seen():
            return
        time.sleep(0.2)
    raise TimeoutError(f"the webhook stand-in was not called within {timeout} s")
