"""Prometheus metrics and the /metrics, /healthz, /readyz HTTP server.

Names follow controller-runtime: a common prefix, ``_total`` counters, ``_seconds``
histograms, few labels, and every known label value pre-set to 0 so dashboards and alerts
see a series from the first scrape. No ``*_created`` series (below), and
``dyn_gitops_controller_build_info{version}`` names the package version (``--version``'s).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    disable_created_metrics,
    generate_latest,
)

from dyn_gitops_operator import __version__
from dyn_gitops_operator.reachability import Reachability

log = logging.getLogger(__name__)

# The one place: every counter and histogram would otherwise export a ``*_created`` series
# per label set (a third of all series), which no dashboard or alert reads; controller-
# runtime exports none. Process-wide, so set before any metric is made.
disable_created_metrics()  # type: ignore[no-untyped-call]

PREFIX = "dyn_gitops_controller"
#: the graph chain's reconcilers (each runs on every graph)
RECONCILERS = ("grove_surge", "scaling_adapter", "rollout", "restart", "apply", "status")
#: the DynamoModel loop's reconciler (runs only where DynamoModels exist)
MODEL_RECONCILERS = ("dynamo_model",)
LORA_OPERATIONS = ("load", "unload")
RESULTS = ("success", "error", "conflict")
DGD_STATES = ("initializing", "pending", "successful", "failed")
ERROR_TYPES = (
    "not_found",
    "conflict",
    "gone",
    "validation",
    "forbidden",
    "unavailable",
    "internal",
    "standby",
)
#: the error types a graph reconcile does not retry (``ApiError.terminal``)
TERMINAL_ERROR_TYPES = ("validation", "forbidden")
DURATION_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)


class Metrics:
    """All controller metrics on a private registry (several managers can share a process)."""

    def __init__(self) -> None:
        r = self.registry = CollectorRegistry()
        self.build_info = Gauge(
            f"{PREFIX}_build_info",
            "Always 1; the version label is the controller's (dyn-gitops-operator --version)",
            ["version"],
            registry=r,
        )
        self.build_info.labels(__version__).set(1)
        self.reconcile_total = Counter(
            f"{PREFIX}_reconcile_total",
            "Reconciles per reconciler and result",
            ["reconciler", "result"],
            registry=r,
        )
        self.reconcile_errors = Counter(
            f"{PREFIX}_reconcile_errors_total",
            "Reconcile errors per reconciler and type",
            ["reconciler", "error_type"],
            registry=r,
        )
        self.terminal_errors = Counter(
            f"{PREFIX}_terminal_reconcile_errors_total",
            "Reconciles stopped by a terminal API answer (422/400, 403): reported on the "
            "object, not retried until it changes",
            ["reconciler", "error_type"],
            registry=r,
        )
        self.reconcile_duration = Histogram(
            f"{PREFIX}_reconcile_duration_seconds",
            "Time spent in one reconciler",
            ["reconciler"],
            buckets=DURATION_BUCKETS,
            registry=r,
        )
        self.graph_reconcile_duration = Histogram(
            f"{PREFIX}_graph_reconcile_duration_seconds",
            "Time to reconcile one graph (all reconcilers)",
            buckets=DURATION_BUCKETS,
            registry=r,
        )
        self.dgds = Gauge(
            f"{PREFIX}_dgds", "DynamoGraphDeployments by status.state", ["state"], registry=r
        )
        self.leader = Gauge(f"{PREFIX}_leader", "1 while this replica is the leader", registry=r)
        self.scope_leases_held = Gauge(
            f"{PREFIX}_scope_leases_held", "Namespace-scope leases held by this replica", registry=r
        )
        self.namespaces_excluded = Gauge(
            f"{PREFIX}_namespaces_excluded",
            "Namespaces skipped because another operator holds a live scope lease",
            registry=r,
        )
        self.workqueue_depth = Gauge(f"{PREFIX}_workqueue_depth", "Keys waiting", registry=r)
        self.workqueue_retries = Counter(
            f"{PREFIX}_workqueue_retries_total", "Rate-limited requeues", registry=r
        )
        self.watch_events = Counter(
            f"{PREFIX}_watch_events_total",
            "Watch events received",
            ["resource", "type"],
            registry=r,
        )
        self.watch_relists = Counter(
            f"{PREFIX}_watch_relists_total",
            "Re-lists after an expired watch (410)",
            ["resource"],
            registry=r,
        )
        self.watch_errors = Counter(
            f"{PREFIX}_watch_errors_total",
            "Failed list or watch calls",
            ["resource", "error_type"],
            registry=r,
        )
        self.writes = Counter(
            f"{PREFIX}_writes_total", "Writes sent to the API server", ["kind", "verb"], registry=r
        )
        self.lora_requests = Counter(
            f"{PREFIX}_lora_requests_total",
            "LoRA load / unload calls to model workers, by result",
            ["operation", "result"],
            registry=r,
        )
        self.model_endpoints = Gauge(
            f"{PREFIX}_model_endpoints",
            "Workers of a DynamoModel's base model: total, and ready (adapter loaded)",
            ["namespace", "model", "state"],
            registry=r,
        )
        self.dynamo_models = Gauge(f"{PREFIX}_dynamo_models", "DynamoModels watched", registry=r)
        self.apiserver_reachable = Gauge(
            f"{PREFIX}_apiserver_reachable",
            "1 while the API server answers the controller's list, watch and lease calls",
            registry=r,
        )
        self.apiserver_failures = Counter(
            f"{PREFIX}_apiserver_failures_total",
            "List, watch and lease calls the API server did not answer (connection, 5xx)",
            registry=r,
        )
        #: the outage state the informers and the leader report to (one log line per change)
        self.apiserver = Reachability(self.apiserver_reachable, self.apiserver_failures)
        for op in LORA_OPERATIONS:
            for res in ("success", "failure"):
                self.lora_requests.labels(op, res)
        for rec in RECONCILERS + MODEL_RECONCILERS:
            self.reconcile_duration.labels(rec)
            for res in RESULTS:
                self.reconcile_total.labels(rec, res)
            for et in ERROR_TYPES:
                self.reconcile_errors.labels(rec, et)
        for rec in RECONCILERS:
            for et in TERMINAL_ERROR_TYPES:
                self.terminal_errors.labels(rec, et)
        for state in DGD_STATES:
            self.dgds.labels(state)

    def value(self, name: str, labels: dict[str, str] | None = None) -> float:
        """Current sample value (tests and the benchmark read metrics through this)."""
        v = self.registry.get_sample_value(name, labels or {})
        return float(v or 0.0)


class HealthServer:
    """/metrics, /healthz (threads alive) and /readyz (caches synced) on one port."""

    def __init__(
        self,
        address: str,
        metrics: Metrics,
        healthy: Callable[[], bool],
        ready: Callable[[], bool],
        not_ready: Callable[[], list[str]] = list,
    ) -> None:
        host, _, port = address.rpartition(":")

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                path = self.path.split("?", 1)[0]
                if path == "/metrics":
                    self._send(200, generate_latest(metrics.registry), CONTENT_TYPE_LATEST)
                elif path == "/healthz":
                    ok = healthy()
                    self._send(200 if ok else 500, b"ok\n" if ok else b"unhealthy\n")
                elif path == "/readyz":
                    ok = ready()
                    why = "" if ok else "".join(f"{line}\n" for line in not_ready())
                    self._send(200 if ok else 503, b"ok\n" if ok else f"not ready\n{why}".encode())
                else:
                    self._send(404, b"not found\n")

            def _send(self, code: int, body: bytes, ctype: str = "text/plain") -> None:
                self.send_response(code)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                pass  # probes every few seconds would flood the log

        self.server = ThreadingHTTPServer((host or "0.0.0.0", int(port)), Handler)
        self.server.daemon_threads = True
        self.port = int(self.server.server_address[1])
        self._thread = threading.Thread(target=self.server.serve_forever, name="http", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
