"""Every tunable of the controller, with its default, in one place.

The command line (``__main__``) and the Helm chart only map onto these fields.
"""

from __future__ import annotations

import os
import re
import socket
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from dyn_gitops.settings import BY_NAME, LIMIT_MAX, OPERATOR_MAX_REPLICAS_ENV

Mode = Literal["cluster", "namespace"]

#: the Lease the Dynamo operator's namespace-restricted mode uses (runtime spec 4.1)
SCOPE_LEASE_NAME = "dynamo-operator-namespace-scope"
#: set on our scope lease by a clean shutdown: the lease stays live (the Dynamo operator stays
#: out) and the next dyn-gitops controller may take it over at once
SCOPE_LEASE_HANDOVER_ANNOTATION = "dyn-gitops.io/scope-lease-handover"
#: every dyn-gitops scope-lease holder identity starts with this (any version)
SCOPE_HOLDER_PREFIX = "dyn-gitops-controller-"
DEFAULT_LEADER_LEASE_NAME = "dyn-gitops-controller"
#: seconds a worker generation newer than the DGD's current one, and never sized by the
#: controller, is left alone: the GitOps tool applies Deployments before the DGD that names
#: them (Argo CD's kind order), so it is the next generation, not an abandoned one
UNNAMED_GENERATION_GRACE = 120.0
#: seconds between two looks at a Grove OnDelete PodClique being replaced (its pods are
#: read, not watched; the PodClique's own status events come on top)
GROVE_SURGE_POLL = 1.0
#: seconds between two looks at an old LeaderWorkerSet's pods while Recreate waits for them
#: to go (they are read, not watched, and their going changes nothing in the set's status)
LWS_PODS_POLL = 1.0
#: the most replicas the controller applies to a workload by default: the renderer's own
#: max-replicas default, so a count the renderer lets through is applied (docs/operator.md)
DEFAULT_MAX_REPLICAS: int = BY_NAME["max-replicas"].default
#: the environment variable that sets it (the --max-replicas flag wins); not a render
#: setting, so the renderer's DYN_GITOPS_* reader leaves it alone (RESERVED_ENV)
MAX_REPLICAS_ENV = OPERATOR_MAX_REPLICAS_ENV


def limit_from_env(name: str, environ: Mapping[str, str] | None = None) -> int | None:
    """A limit set in the environment (None: unset or empty); digits only, bounded before
    conversion. The range is checked where the settings are built."""
    raw = (os.environ if environ is None else environ).get(name, "").strip()
    if not raw:
        return None
    if not re.fullmatch(r"[0-9]{1,10}", raw):
        raise ValueError(f"{name}: expected a whole number from 1 to {LIMIT_MAX}")
    return int(raw)


def default_identity(environ: Mapping[str, str] | None = None) -> str:
    """The pod's name (``POD_NAME``, from the downward API) when set: stable across restarts
    of the container, so a restarted process renews its own leader lease at once instead of
    waiting out its predecessor's (``leader`` says why that is safe). Elsewhere
    ``<host name>_<random>`` as client-go: a host name alone is shared by every process on a
    machine (and by hostNetwork pods on one node), which must never share an identity."""
    pod = (os.environ if environ is None else environ).get("POD_NAME", "").strip()
    if pod:
        return pod
    return f"{socket.gethostname()}_{uuid.uuid4().hex[:8]}"


@dataclass(frozen=True)
class LeaderSettings:
    enabled: bool = True
    #: Lease name; every replica of one installation must share it
    lease_name: str = DEFAULT_LEADER_LEASE_NAME
    #: namespace of the Lease; empty means the controller's own (POD_NAMESPACE) or the
    #: watched namespace in namespace mode
    namespace: str = ""
    #: seconds a follower waits after the last observed renewal before taking over
    #: (controller-runtime defaults: 15 s / 10 s / 2 s)
    lease_duration: float = 15.0
    #: seconds the leader keeps acting without a successful renewal; must be < duration so
    #: a leader always stops before anybody else may start
    renew_deadline: float = 10.0
    #: seconds between attempts to acquire or renew
    retry_period: float = 2.0

    @property
    def call_timeout(self) -> tuple[float, float]:
        """(connect, read) seconds of one lease call: a get and an update together stay
        within the renew deadline, so a stalled API server cannot hold a renewal past it."""
        part = self.renew_deadline / 5
        return (part, part)


@dataclass(frozen=True)
class ScopeSettings:
    #: namespace mode: hold the scope lease; cluster mode: honour other holders' leases
    enabled: bool = True
    #: ``spec.leaseDurationSeconds`` written on our scope lease (runtime spec 4.1: 30 s)
    lease_duration: int = 30
    #: seconds between renewals (10 s); failure budget = floor(duration / interval) - 1
    renew_interval: float = 10.0


@dataclass(frozen=True)
class ModelSettings:
    """The DynamoModel controller (LoRA adapters loaded into the workers of a base model).
    Timeouts and concurrency are the Dynamo operator's (``internal/modelendpoint``); the
    retry is per endpoint and exponential where the operator requeues the whole model
    every 30 s (docs/operator.md)."""

    #: watch DynamoModels (when their API is served) and manage their adapters
    enabled: bool = True
    #: the workers' system port, where ``/v1/loras`` is served (the operator's fixed 9090)
    port: int = 9090
    #: seconds for one load / unload call, whole: connect, send and every read of the
    #: answer (a worker that trickles its answer fails then, like one that never answers)
    request_timeout: float = 15.0
    #: seconds for the whole batch of unload calls when a model is deleted (loads are not
    #: waited for: each answer is recorded when it comes)
    total_timeout: float = 30.0
    #: load (or unload) calls in flight at once for one model
    concurrency: int = 10
    #: threads reconciling DynamoModels (separate from the graph workers)
    workers: int = 2
    #: first and largest delay before a failed endpoint is called again, seconds
    retry_base: float = 2.0
    retry_max: float = 30.0

    @property
    def pool_size(self) -> int:
        """Load / unload calls in flight at once in the whole controller (one thread each,
        none kept idle)."""
        return self.concurrency * self.workers

    @property
    def namespace_calls(self) -> int:
        """The most of them one namespace's calls take: half the pool, so that slow workers
        of one namespace leave the other half to everyone else's LoRA loads."""
        return max(1, self.pool_size // 2)


@dataclass(frozen=True)
class RenderedArtifactSettings:
    """In-cluster rendering for Flux (``renderloop``): GitRepositories and OCIRepositories
    annotated with ``dyn-gitops.io/render-path`` are rendered into ExternalArtifacts whose
    ``.tar.gz`` the controller serves itself (docs/flux.md, *In-cluster rendering*)."""

    #: off by default: it needs Flux >= 2.7 and the kustomize-controller feature gate
    enabled: bool = False
    #: ``host:port`` the artifact server listens on
    address: str = ":9797"
    #: base of the artifact URLs written in ExternalArtifact status, as kustomize-controller
    #: reaches the server (the chart's Service); empty: ``http://<address>``
    advertised_url: str = ""
    #: where artifacts are kept (an emptyDir: a restart renders them again)
    storage_dir: str = "/tmp/dyn-gitops-artifacts"
    #: bytes: the largest source artifact downloaded (and unpacked), and the largest
    #: rendered artifact stored; a larger one is refused (Ready=False)
    max_size: int = 50 * 1024 * 1024
    #: rendered artifacts kept per ExternalArtifact (the one in status and older ones, so a
    #: kustomize-controller fetching the previous URL still finds it); the others are deleted
    keep: int = 2
    #: seconds one render (a ``dyn-gitops render`` child process) may take
    render_timeout: float = 120.0
    #: seconds for the download of a source artifact, whole
    fetch_timeout: float = 60.0
    #: threads rendering (each render is a child process)
    workers: int = 1

    def url_base(self) -> str:
        if self.advertised_url:
            return self.advertised_url.rstrip("/")
        host, _, port = self.address.rpartition(":")
        return f"http://{host or 'localhost'}:{port}"


@dataclass(frozen=True)
class OperatorSettings:
    mode: Mode = "cluster"
    #: the one watched namespace in namespace mode
    namespace: str = ""
    kubeconfig: str | None = None
    identity: str = field(default_factory=default_identity)
    #: reconcile worker threads (reconciles are I/O bound: status and apply calls). Two,
    #: because measured against a real API server on 2 CPUs (bench/operator_converge.py,
    #: 1,000 graphs) four converged ~5 s sooner but put reconcile p95 over 50 ms; raise it
    #: for large clusters with a multi-core API server.
    workers: int = 2
    #: seconds between full re-enqueues of every known graph (drift correction)
    resync_period: float = 300.0
    #: server-side watch timeout; the watch is reopened from the last resourceVersion
    watch_timeout: int = 290
    #: seconds for one ordinary API request (connect, read)
    request_timeout: tuple[float, float] = (5.0, 30.0)
    #: first and largest delay of the per-key exponential retry backoff, seconds
    backoff_base: float = 0.02
    backoff_max: float = 60.0
    #: seconds between two checks of an optional API (LeaderWorkerSet, PodClique,
    #: PodCliqueScalingGroup, DynamoModel) found not served or forbidden: a CRD installed
    #: later is watched from the next check on
    optional_api_recheck: float = 60.0
    #: first and largest delay between checks of an optional API whose state is unknown (an
    #: error other than 404 / 403); the controller is not ready meanwhile
    optional_api_retry_base: float = 1.0
    optional_api_retry_max: float = 30.0
    #: ``host:port`` of /metrics, /healthz and /readyz; empty disables the server
    http_address: str = ":8080"
    #: the ceiling of every replica count read from Git (an annotation, a DGD's or a scaling
    #: adapter's replicas): a count above it, negative or not an integer is not applied
    max_replicas: int = DEFAULT_MAX_REPLICAS
    leader: LeaderSettings = field(default_factory=LeaderSettings)
    scope: ScopeSettings = field(default_factory=ScopeSettings)
    models: ModelSettings = field(default_factory=ModelSettings)
    artifacts: RenderedArtifactSettings = field(default_factory=RenderedArtifactSettings)

    def __post_init__(self) -> None:
        if self.mode == "namespace" and not self.namespace:
            raise ValueError("namespace mode needs a namespace (--namespace)")
        if self.leader.renew_deadline >= self.leader.lease_duration:
            raise ValueError("leader renew deadline must be shorter than the lease duration")
        if not 0 < self.scope.renew_interval < self.scope.lease_duration:
            raise ValueError("scope lease renew interval must be > 0 and < the duration")
        if not 1 <= self.max_replicas <= LIMIT_MAX:
            raise ValueError(
                f"max replicas (--max-replicas, {MAX_REPLICAS_ENV}) must be from 1 to {LIMIT_MAX}"
            )
        if not 0 < self.optional_api_retry_base <= self.optional_api_retry_max:
            raise ValueError("optional API retry base must be > 0 and <= the retry max")
        if self.optional_api_recheck <= 0:
            raise ValueError("optional API re-check interval must be > 0")
        m = self.models
        if m.concurrency < 1 or m.workers < 1:
            raise ValueError("model concurrency and workers must be at least 1")
        if m.request_timeout <= 0 or m.total_timeout <= 0:
            raise ValueError("model request and total timeouts must be > 0")
        if not 0 < m.retry_base <= m.retry_max:
            raise ValueError("model retry base must be > 0 and <= the retry max")
        a = self.artifacts
        if a.keep < 1 or a.workers < 1 or a.max_size < 1:
            raise ValueError("artifacts kept, render workers and max size must be at least 1")
        if a.render_timeout <= 0 or a.fetch_timeout <= 0:
            raise ValueError("render and fetch timeouts must be > 0")

    @property
    def watch_namespace(self) -> str | None:
        """None means all namespaces."""
        return self.namespace if self.mode == "namespace" else None

    @property
    def leader_namespace(self) -> str:
        if self.leader.namespace:
            return self.leader.namespace
        if self.mode == "namespace":
            return self.namespace
        return os.environ.get("POD_NAMESPACE", "default")
