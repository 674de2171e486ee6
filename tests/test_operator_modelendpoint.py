"""The LoRA management client and endpoint discovery of the DynamoModel controller, against
real HTTP servers on loopback (no cluster: the cluster tests are in
``test_operator_models.py``)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from dyn_gitops_operator.modelendpoint import LoraClient, extract_candidates


class Server:
    """Answers ``code`` after ``delay`` seconds; records requests and the most in flight."""

    def __init__(
        self, code: int = 200, delay: float = 0.0, host: str = "127.0.0.1", port: int = 0
    ) -> None:
        self.code, self.delay = code, delay
        self.requests: list[tuple[str, str, Any]] = []
        #: (arrival, answer) monotonic times of every request
        self.spans: list[tuple[float, float]] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self.lock = threading.Lock()
        self.release = threading.Event()
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def _handle(self) -> None:
                n = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(n) if n else b""
                with owner.lock:
                    owner.requests.append(
                        (self.command, self.path, json.loads(raw) if raw else None)
                    )
                    owner.in_flight += 1
                    owner.max_in_flight = max(owner.max_in_flight, owner.in_flight)
                arrived = time.monotonic()
                try:
                    if owner.delay:
                        owner.release.wait(owner.delay)
                    body = b'{"error": "no such adapter source"}'
                    self.send_response(owner.code)
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                finally:
                    with owner.lock:
                        owner.in_flight -= 1
                        owner.spans.append((arrived, time.monotonic()))

            do_POST = _handle
            do_DELETE = _handle

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer((host, port), Handler)
        self.httpd.daemon_threads = True
        self.address = f"http://{host}:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.release.set()
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def server() -> Iterator[Server]:
    s = Server()
    yield s
    s.close()


def test_load_and_unload_send_the_operators_paths_and_body(server: Server) -> None:
    c = LoraClient(5, 10, 10)
    c.load(server.address, "codelion/Qwen3-0.6B-lora", "s3://my-loras/x")
    c.unload(server.address, "codelion/Qwen3-0.6B-lora")
    assert server.requests == [
        (
            "POST",
            "/v1/loras",
            {"lora_name": "codelion/Qwen3-0.6B-lora", "source": {"uri": "s3://my-loras/x"}},
        ),
        ("DELETE", "/v1/loras/codelion%2FQwen3-0.6B-lora", None),
    ]


def test_a_non_2xx_answer_is_an_error_with_the_status_and_body() -> None:
    s = Server(code=500)
    try:
        out = LoraClient(5, 10, 10).run_all(
            [s.address], lambda a: LoraClient(5, 10, 10).load(a, "m", "s3://b/p")
        )
    finally:
        s.close()
    (err,) = out.values()
    assert err is not None and "status 500" in err and "no such adapter source" in err


def test_no_answer_fails_at_the_total_timeout_without_holding_the_others() -> None:
    slow, fast = Server(delay=60), Server()
    c = LoraClient(request_timeout=30, total_timeout=1.0, concurrency=10)
    try:
        start = time.monotonic()
        out = c.run_all([slow.address, fast.address], lambda a: c.load(a, "m", "s3://b/p"))
        took = time.monotonic() - start
    finally:
        slow.close()
        fast.close()
    assert out[fast.address] is None
    assert out[slow.address] is not None and "total timeout" in out[slow.address]
    assert took < 30  # the request timeout was never waited for


def test_a_refused_connection_is_an_error() -> None:
    s = Server()
    address = s.address
    s.close()
    c = LoraClient(2, 5, 10)
    out = c.run_all([address], lambda a: c.load(a, "m", "s3://b/p"))
    assert out[address] is not None and "POST" in out[address]


def test_calls_run_in_parallel_bounded_by_the_concurrency() -> None:
    servers = [Server(delay=0.3) for _ in range(6)]
    c = LoraClient(5, 30, concurrency=2)
    seen = threading.Lock()
    active = [0, 0]

    def call(address: str) -> None:
        with seen:
            active[0] += 1
            active[1] = max(active[1], active[0])
        try:
            c.load(address, "m", "s3://b/p")
        finally:
            with seen:
                active[0] -= 1

    try:
        out = c.run_all([s.address for s in servers], call)
    finally:
        for s in servers:
            s.close()
    assert all(v is None for v in out.values())
    assert active[1] == 2


def _pod(
    name: str,
    ip: str | None,
    ready: bool,
    *,
    deleting: bool = False,
    phase: str = "Running",
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "uid": f"uid-{name}"}
    if deleting:
        meta["deletionTimestamp"] = "2026-11-26T10:00:00Z"
    return {
        "metadata": meta,
        "status": {
            "phase": phase,
            "podIP": ip,
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        },
    }


def test_candidates_are_the_worker_pods_with_an_address() -> None:
    pods = [
        _pod("w-b", "10.0.0.2", True),
        _pod("w-a", "10.0.0.1", False),
        _pod("w-c", "10.0.0.3", True, deleting=True),  # terminating
        _pod("w-e", None, False),  # no address yet
        _pod("w-f", "10.0.0.6", False, phase="Failed"),
        _pod("w-d", "fd00::5", True),
    ]
    assert [
        (c.pod_name, c.address, c.ready, c.pod_key) for c in extract_candidates(pods, 9090)
    ] == [
        ("w-a", "http://10.0.0.1:9090", False, "uid-w-a"),
        ("w-b", "http://10.0.0.2:9090", True, "uid-w-b"),
        ("w-d", "http://[fd00::5]:9090", True, "uid-w-d"),
    ]


def test_model_metrics_exist_from_the_start() -> None:
    from dyn_gitops_operator.metrics import Metrics

    m = Metrics()
    for op in ("load", "unload"):
        for result in ("success", "failure"):
            labels = {"operation": op, "result": result}
            assert (
                m.registry.get_sample_value("dyn_gitops_controller_lora_requests_total", labels)
                == 0
            )
    labels = {"reconciler": "dynamo_model", "result": "error"}
    assert m.registry.get_sample_value("dyn_gitops_controller_reconcile_total", labels) == 0


class _StatusSink:
    """The API side of a pass, recorded (the HTTP side is real: the servers above)."""

    def __init__(self) -> None:
        self.patches: list[dict[str, Any]] = []

    def patch(self, res: Any, ns: Any, name: str, body: Any, *, subresource: Any = None) -> Any:
        self.patches.append(body)
        return body


def test_loads_run_in_parallel_bounded_per_model_and_never_hold_the_pass() -> None:
    """Five workers (one loopback IP each) that answer only when released, at most two
    loads in flight: the pass returns without an answer, a second pass starts nothing
    more, and once released every answer re-enqueues the model until all five are loaded,
    never more than two at a time."""
    from dyn_gitops_operator.metrics import Metrics
    from dyn_gitops_operator.reconcilers.base import Context
    from dyn_gitops_operator.reconcilers.model import ModelReconciler
    from dyn_gitops_operator.settings import ModelSettings
    from dyn_gitops_operator.testing import wait_for
    from support.controlplane import free_port

    port = free_port()
    servers = [Server(delay=60, host=f"127.0.0.{30 + i}", port=port) for i in range(5)]
    rec = ModelReconciler(ModelSettings(concurrency=2, request_timeout=90, port=port), Metrics())
    answered = threading.Semaphore(0)
    rec.notify = lambda key: answered.release()
    sink = _StatusSink()
    ctx = Context(kube=sink, metrics=rec.metrics, remember=lambda r, o: None)  # type: ignore[arg-type]
    key = ("ns", "m")
    model = {
        "metadata": {"name": "m", "namespace": "ns", "generation": 1, "finalizers": []},
        "spec": {
            "modelName": "a",
            "baseModelName": "b",
            "modelType": "lora",
            "source": {"uri": "s3://x/y"},
        },
    }
    pods = [
        {
            "metadata": {"name": f"w-{i}", "uid": f"u{i}"},
            "status": {
                "podIP": f"127.0.0.{30 + i}",
                "conditions": [{"type": "Ready", "status": "True"}],
            },
        }
        for i in range(5)
    ]
    try:
        rec.reconcile(key, model, pods, set(), ctx)  # returns while the workers hold
        assert sink.patches[-1]["status"]["readyEndpoints"] == 0
        wait_for(lambda: sum(len(s.requests) for s in servers) == 2, 30, "two loads arrive")
        rec.reconcile(key, model, pods, set(), ctx)
        assert len(rec.memory.inflight[key]) == 2  # nothing more started
        for s in servers:
            s.release.set()
        for _ in range(5):
            assert answered.acquire(timeout=30)
            rec.reconcile(key, model, pods, set(), ctx)
        assert sink.patches[-1]["status"]["readyEndpoints"] == 5
        assert sum(len(s.requests) for s in servers) == 5  # each worker called once
        spans = [t for s in servers for t in s.spans]
        assert max(sum(1 for a, b in spans if a <= t < b) for t, _ in spans) == 2
    finally:
        rec.close()
        for s in servers:
            s.close()


# ---------------------------------------------------------------------- trickling workers
#: how long a test waits for what must end at a short deadline (never reached when it
#: works: the deadlines below are 1 s; on main a trickling call never ended)
GUARD = 30.0


def test_a_trickling_answer_fails_at_the_call_deadline() -> None:
    """One byte every 0.2 s, forever: a per-read timeout never fires; the call deadline
    does, and the connection is closed."""
    from dyn_gitops_operator.modelendpoint import EndpointError
    from dyn_gitops_operator.testing import wait_for
    from support.trickle import TrickleServer

    with TrickleServer(["127.0.0.1"]) as t:
        c = LoraClient(request_timeout=1.0, total_timeout=GUARD, concurrency=1)
        out: list[str | None] = []

        def call() -> None:
            try:
                c.load(t.address, "m", "s3://b/p")
                out.append(None)
            except EndpointError as exc:
                out.append(str(exc))

        th = threading.Thread(target=call, daemon=True)
        th.start()
        th.join(GUARD)
        assert not th.is_alive(), f"the call still runs after {GUARD:g} s (deadline 1 s)"
        assert out and out[0] is not None and "call deadline of 1 s" in out[0], out
        wait_for(lambda: t.held == 0, what="the trickled connection closed")
        assert not t.released.is_set()  # the server still trickles: the client gave up


def test_trickling_unloads_end_at_their_deadline_and_leave_no_thread() -> None:
    """Twelve trickling unloads, four at a time: each ends at its deadline, at most four
    threads run them, and every thread is gone afterwards (on main the batch gave up at
    its total timeout and left its threads trickling)."""
    from dyn_gitops_operator.testing import wait_for
    from support.trickle import TrickleServer

    with TrickleServer(["127.0.0.1"]) as t:
        c = LoraClient(request_timeout=1.0, total_timeout=GUARD, concurrency=4)
        baseline = threading.active_count()
        peak = [0]

        def unload(address: str) -> None:
            peak[0] = max(peak[0], threading.active_count() - baseline)
            c.unload(address, "m")

        out = c.run_all([f"{t.address}/w{i}" for i in range(12)], unload)
        wait_for(
            lambda: threading.active_count() <= baseline,
            GUARD,
            lambda: f"threads back to {baseline} (now {threading.active_count()})",
        )
        assert all(e is not None and "call deadline of 1 s" in e for e in out.values()), out
        assert 1 <= peak[0] <= 4
        assert t.accepted == 12 and not t.released.is_set()


def _lora(namespace: str, name: str, base: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": namespace, "generation": 1, "finalizers": []},
        "spec": {
            "modelName": f"{name}-adapter",
            "baseModelName": base,
            "modelType": "lora",
            "source": {"uri": "s3://x/y"},
        },
    }


def _workers(ips: list[str]) -> list[dict[str, Any]]:
    return [
        {
            "metadata": {"name": f"w-{ip}", "uid": ip},
            "status": {"podIP": ip, "conditions": [{"type": "Ready", "status": "True"}]},
        }
        for ip in ips
    ]


def test_one_namespaces_trickling_workers_leave_room_for_another_namespaces_load() -> None:
    """Two DynamoModels of team-a, 20 workers that trickle (far from their deadline), on a
    controller-wide pool of 20: team-b's load completes while team-a's calls are still
    held (on main they took all 20 slots and team-b waited for them)."""
    from dyn_gitops_operator.metrics import Metrics
    from dyn_gitops_operator.reconcilers.base import Context
    from dyn_gitops_operator.reconcilers.model import ModelReconciler
    from dyn_gitops_operator.settings import ModelSettings
    from dyn_gitops_operator.testing import wait_for
    from support.controlplane import free_port
    from support.trickle import TrickleServer

    port = free_port()
    slow = [f"127.0.0.{100 + i}" for i in range(20)]
    settings = ModelSettings(port=port, request_timeout=600)
    assert settings.concurrency * settings.workers == 20  # the pool team-a could fill
    fast = Server(host="127.0.0.120", port=port)
    with TrickleServer(slow, port=port) as t:
        rec = ModelReconciler(settings, Metrics())
        answered: set[tuple[str, str]] = set()
        rec.notify = answered.add
        ctx = Context(kube=_StatusSink(), metrics=rec.metrics, remember=lambda r, o: None)  # type: ignore[arg-type]
        try:
            for n in range(2):
                key = ("team-a", f"m{n}")
                pods = _workers(slow[10 * n : 10 * n + 10])
                rec.reconcile(key, _lora(*key, f"base-{n}"), pods, set(), ctx)
            wait_for(lambda: t.held >= 10, GUARD, "team-a's workers trickling")
            key = ("team-b", "m")
            rec.reconcile(key, _lora(*key, "base-b"), _workers(["127.0.0.120"]), set(), ctx)
            wait_for(
                lambda: key in answered,
                GUARD,
                lambda: f"team-b's load ({t.held} trickling calls of team-a hold the pool)",
            )
            assert not t.released.is_set() and t.held >= 10  # still held meanwhile
            assert fast.requests and rec.memory.loaded[key]
            assert t.held <= settings.concurrency * settings.workers // 2
        finally:
            rec.close()
            fast.close()


def test_the_pool_caps_each_group_and_keeps_no_idle_thread() -> None:
    from dyn_gitops_operator.fairpool import FairPool
    from dyn_gitops_operator.testing import wait_for

    pool = FairPool(4, 2, name="pool-caps-test")  # a name no other pool of the process has

    def pool_threads() -> int:  # only this pool's: other tests' threads may come and go
        return sum(1 for t in threading.enumerate() if t.name == pool.name)

    gate = threading.Event()
    started: list[str] = []
    lock = threading.Lock()

    def call(name: str) -> None:
        with lock:
            started.append(name)
        gate.wait(GUARD)

    for i in range(4):
        pool.submit("a", lambda i=i: call(f"a{i}"))  # type: ignore[misc]
    pool.submit("b", lambda: call("b0"))
    wait_for(lambda: len(started) == 3, GUARD, lambda: f"three started ({started})")
    assert sorted(started) == ["a0", "a1", "b0"] and pool.waiting() == 2
    assert pool_threads() == 3
    gate.set()
    wait_for(lambda: len(started) == 5 and pool.running() == 0, GUARD, "all calls done")
    wait_for(lambda: pool_threads() == 0, GUARD, "no thread left")
