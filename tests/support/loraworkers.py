"""Worker pods backed by real HTTP servers: the LoRA management API of a Dynamo worker,
served on each pod's IP (the realistic cluster's pod IPs are loopback addresses, see
``support/cluster.py``) at the port the controller is told is the system port.

:class:`LoopbackWorkers` watches the pods of a selector and starts one server per pod IP
as soon as a pod has one (kept until the end: a replacement pod may get a freed IP); each
records every request (method, path, JSON body, arrival time) and answers by the mode of
the pod that has the IP: ``ok`` (200), ``fail`` (500 with a message) or ``hang`` (no answer
until the test ends).
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal

Mode = Literal["ok", "fail", "hang"]


@dataclass
class Request:
    method: str
    path: str
    body: Any
    at: float


@dataclass
class Worker:
    """The server on one pod IP; a pod replaced by one that gets the same IP shares it
    (``requests`` holds both pods' requests, each with its arrival time)."""

    ip: str
    server: ThreadingHTTPServer
    requests: list[Request] = field(default_factory=list)

    def calls(self, method: str) -> list[Request]:
        return [r for r in list(self.requests) if r.method == method]


class LoopbackWorkers:
    def __init__(self, api: Any, namespace: str, selector: str, port: int) -> None:
        self.api = api
        self.namespace = namespace
        self.selector = selector
        self.port = port
        self.modes: dict[str, Mode] = {}  # by pod name
        self.default: Mode = "ok"
        self.by_ip: dict[str, Worker] = {}
        #: the pod each IP belongs to now, and each pod's IP (from the latest look)
        self.pod_of: dict[str, str] = {}
        self.ip_of: dict[str, str] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="lora-workers", daemon=True)

    # ------------------------------------------------------------------ control
    def mode(self, pod: str) -> Mode:
        return self.modes.get(pod, self.default)

    def __enter__(self) -> LoopbackWorkers:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=10)
        with self._lock:
            workers = list(self.by_ip.values())
        for w in workers:
            w.server.shutdown()
            w.server.server_close()

    def get(self, pod: str) -> Worker | None:
        """The server on ``pod``'s IP."""
        with self._lock:
            ip = self.ip_of.get(pod)
            return self.by_ip.get(ip) if ip else None

    def all(self) -> list[Worker]:
        with self._lock:
            return list(self.by_ip.values())

    def add(self, pod: str, ip: str) -> None:
        """Serve ``pod`` on ``ip`` (pods written by hand, without a cluster to look at)."""
        with self._lock:
            self.pod_of[ip] = pod
            self.ip_of[pod] = ip
        self._serve(ip)

    # ------------------------------------------------------------------ serving
    def _run(self) -> None:
        from kubernetes import client

        core = client.CoreV1Api(self.api)
        while not self._stop.wait(0.2):
            try:
                pods: list[Any] = core.list_namespaced_pod(
                    self.namespace, label_selector=self.selector
                ).items
            except Exception:
                continue
            for pod in pods:
                ip = pod.status.pod_ip if pod.status else None
                if not ip or pod.metadata.deletion_timestamp:
                    continue
                name = str(pod.metadata.name)
                with self._lock:
                    self.pod_of[ip] = name
                    self.ip_of[name] = ip
                    served = ip in self.by_ip
                if not served:
                    try:
                        self._serve(ip)
                    except OSError:
                        continue  # not bindable yet: next round

    def _serve(self, ip: str) -> None:
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def _handle(self) -> None:
                n = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(n) if n else b""
                try:
                    body = json.loads(raw) if raw else None
                except ValueError:
                    body = raw.decode("utf-8", "replace")
                with owner._lock:
                    worker = owner.by_ip[ip]
                    pod = owner.pod_of.get(ip, "")
                worker.requests.append(Request(self.command, self.path, body, time.monotonic()))
                mode = owner.mode(pod)
                if mode == "hang":
                    owner._stop.wait(120)
                    return
                if mode == "fail":
                    self._send(500, {"error": f"adapter storage unreachable from {pod}"})
                    return
                self._send(200, {"status": "success"})

            def _send(self, code: int, obj: Any) -> None:
                data = json.dumps(obj).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_POST = _handle
            do_DELETE = _handle

            def log_message(self, format: str, *args: Any) -> None:
                pass

        server = ThreadingHTTPServer((ip, self.port), Handler)
        server.daemon_threads = True
        with self._lock:
            self.by_ip[ip] = Worker(ip, server)
        threading.Thread(target=server.serve_forever, name=f"worker-{ip}", daemon=True).start()


__all__ = ["LoopbackWorkers", "Mode", "Request", "Worker"]
