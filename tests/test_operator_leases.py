"""Scope lease (namespace mode) and leader election against the real kube-apiserver.

Leader election runs two real controller processes (``python -m dyn_gitops_operator``)
and samples both /metrics endpoints all along: they must never both lead or both act.
"""

from __future__ import annotations

import http.client
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from dyn_gitops_operator import FIELD_MANAGER
from dyn_gitops_operator.kube import DGDS, LEASES, Kube
from dyn_gitops_operator.leases import micro_time, parse_time
from dyn_gitops_operator.settings import (
    SCOPE_LEASE_HANDOVER_ANNOTATION,
    SCOPE_LEASE_NAME,
    OperatorSettings,
    ScopeSettings,
)
from dyn_gitops_operator.testing import (
    gitops_apply,
    hpa_scale,
    running,
    settings_for_tests,
    wait_for,
)
from support.rendering import render

pytestmark = pytest.mark.realk8s
SAMPLES = Path(__file__).resolve().parent.parent / "samples"
HANG_GUARD = 120.0  # seconds; only against a hang, never reached on a healthy run
LEASE_DURATION, RENEW_DEADLINE = 5.0, 3.0
#: a leader stops acting RENEW_DEADLINE after it started its last renewal; the next one
#: starts LEASE_DURATION after that renewal at the earliest: leaderships are this far apart
LEADERSHIP_GAP = LEASE_DURATION - RENEW_DEADLINE
#: observations of both replicas the sampler must collect per phase (not a time window)
OBSERVATIONS = 40


def foreign_lease(k: Kube, ns: str, duration: int, holder: str) -> dict[str, Any]:
    now = micro_time(datetime.now(UTC))
    return k.create(
        LEASES,
        {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": SCOPE_LEASE_NAME, "namespace": ns},
            "spec": {
                "holderIdentity": holder,
                "leaseDurationSeconds": duration,
                "acquireTime": now,
                "renewTime": now,
            },
        },
    )


def test_namespace_mode_holds_renews_and_releases_the_scope_lease(k: Kube, namespace: str) -> None:
    with running(settings_for_tests(namespace), k) as m:
        lease = k.get(LEASES, namespace, SCOPE_LEASE_NAME)
        spec = lease["spec"]
        assert spec["holderIdentity"].startswith("dyn-gitops-controller-0.1.0-")
        assert spec["leaseDurationSeconds"] == 6
        first = spec["renewTime"]
        wait_for(
            lambda: k.get(LEASES, namespace, SCOPE_LEASE_NAME)["spec"]["renewTime"] > first,
            timeout=HANG_GUARD,
            what="a renewal (interval 2 s)",
        )
        assert m.metrics.value("dyn_gitops_controller_scope_leases_held") == 1
        before = k.get(LEASES, namespace, SCOPE_LEASE_NAME)
    # a clean shutdown keeps the lease (a cluster-wide Dynamo operator stays out) and marks
    # it for hand-over, renewed once more
    lease = k.get(LEASES, namespace, SCOPE_LEASE_NAME)
    assert lease["metadata"]["annotations"][SCOPE_LEASE_HANDOVER_ANNOTATION] == "true"
    assert lease["spec"]["holderIdentity"] == spec["holderIdentity"]
    assert lease["spec"]["renewTime"] >= before["spec"]["renewTime"]


def test_a_successor_takes_a_handed_over_scope_lease_without_a_gap(k: Kube, namespace: str) -> None:
    """Hand-over on a clean shutdown: the successor (another process, e.g. the next pod of
    a rolling update) takes the marked lease at once; the lease never disappears and never
    expires, so a cluster-wide Dynamo operator is excluded throughout. The lease lasts an
    hour here: a successor that waited for expiry would time out."""

    def hour_lease() -> OperatorSettings:  # a new identity each call (another process)
        return settings_for_tests(
            namespace, scope=ScopeSettings(lease_duration=3600, renew_interval=2)
        )

    with running(hour_lease(), k):
        lease = k.get(LEASES, namespace, SCOPE_LEASE_NAME)
        first, uid = lease["spec"]["holderIdentity"], lease["metadata"]["uid"]
    seen: list[str] = []
    with running(hour_lease(), k, timeout=HANG_GUARD):
        lease = k.get(LEASES, namespace, SCOPE_LEASE_NAME)
        seen.append(lease["spec"]["holderIdentity"])
        assert SCOPE_LEASE_HANDOVER_ANNOTATION not in (lease["metadata"].get("annotations") or {})
        assert lease["metadata"]["uid"] == uid  # the same object: never deleted in between
    assert seen and seen[0] != first


def test_a_live_foreign_lease_marked_for_hand_over_is_not_taken(k: Kube, namespace: str) -> None:
    """Only a dyn-gitops holder's mark counts: a Dynamo operator's live lease with the
    annotation is still waited for."""
    from dyn_gitops_operator.manager import Manager

    foreign_lease(k, namespace, 3600, "namespace-restricted-operator-1.5.1")
    lease = k.get(LEASES, namespace, SCOPE_LEASE_NAME)
    lease["metadata"].setdefault("annotations", {})[SCOPE_LEASE_HANDOVER_ANNOTATION] = "true"
    k.update(LEASES, lease)
    m = Manager(settings_for_tests(namespace), kube=k)
    m.start()
    try:
        time.sleep(2)  # several acquire attempts (retry 1 s); none may succeed
        assert not m.acting()
        held = k.get(LEASES, namespace, SCOPE_LEASE_NAME)["spec"]["holderIdentity"]
        assert held == "namespace-restricted-operator-1.5.1"
    finally:
        m.stop()
        m.shutdown()


def test_namespace_mode_waits_for_a_live_foreign_scope_lease(k: Kube, namespace: str) -> None:
    gitops_apply(k, render(SAMPLES / "vllm-agg" / "input", namespace))
    duration = 4
    start = time.monotonic()
    foreign_lease(k, namespace, duration, "namespace-restricted-operator-1.1.0")
    from dyn_gitops_operator.manager import Manager

    m = Manager(settings_for_tests(namespace), kube=k)
    m.start()
    try:
        # poll while the foreign lease is certainly live (its renewTime was taken after
        # ``start``): the manager must neither act nor write; a loaded machine only makes
        # this window shorter, never the checks wrong
        while True:
            acting = m.acting()
            status = k.get(DGDS, namespace, "vllm-agg").get("status")
            if time.monotonic() - start >= duration:
                break
            assert not acting and not status, "acted while a live foreign lease held the scope"
            time.sleep(0.1)
        wait_for(m.acting, timeout=HANG_GUARD, what="acting after the foreign lease expired")
        assert time.monotonic() - start >= duration
        lease = k.get(LEASES, namespace, SCOPE_LEASE_NAME)
        assert lease["spec"]["holderIdentity"].startswith("dyn-gitops-controller-")
        wait_for(
            lambda: k.get(DGDS, namespace, "vllm-agg").get("status"),
            timeout=HANG_GUARD,
            what="status",
        )
    finally:
        m.stop()
        m.shutdown()


# ------------------------------------------------------------------------------ leader election


@dataclass(frozen=True)
class Read:
    """One /metrics read: monotonic time before and after it, and what it said (None:
    no answer, e.g. a dead process or a transient error)."""

    start: float
    end: float
    metrics: dict[str, float] | None


@dataclass(frozen=True)
class Observation:
    """Both replicas read at (nearly) the same moment."""

    reads: dict[str, Read]

    def conclusive(self) -> bool:
        """Both answered within a window shorter than the gap between two leaderships, so
        two reads of ``leader 1`` here mean two leaders at once, not a handover."""
        if any(r.metrics is None for r in self.reads.values()):
            return False
        span = max(r.end for r in self.reads.values()) - min(r.start for r in self.reads.values())
        return span < LEADERSHIP_GAP

    def value(self, name: str, key: str) -> float | None:
        m = self.reads[name].metrics
        return None if m is None else m.get(key, 0.0)


def read_metrics(port: int) -> dict[str, float] | None:
    """The leader gauge and the reconcile count, or None on any failure to read them
    (refused, reset, truncated reply, half-written line: all transient or a dead process,
    never a reason to stop sampling)."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
            text = r.read().decode()
        out: dict[str, float] = {}
        for line in text.splitlines():
            if line.startswith("dyn_gitops_controller_leader "):
                out["leader"] = float(line.split()[1])
            elif line.startswith("dyn_gitops_controller_reconcile_total{"):
                out["reconciles"] = out.get("reconciles", 0) + float(line.split()[1])
    except (OSError, http.client.HTTPException, ValueError, IndexError):
        return None
    return out if "leader" in out else None


def test_a_truncated_metrics_reply_is_a_missed_sample_not_a_crash() -> None:
    """What killed the sampler on a loaded machine: http.client.IncompleteRead."""
    import socket

    with socket.socket() as srv:
        srv.bind(("127.0.0.1", 0))
        srv.listen(1)

        def truncate() -> None:
            conn, _ = srv.accept()
            with conn:
                conn.recv(65536)
                conn.sendall(
                    b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n"
                    b"dyn_gitops_controller_leader 1.0\n"
                )  # then hang up

        t = threading.Thread(target=truncate, daemon=True)
        t.start()
        assert read_metrics(srv.getsockname()[1]) is None
        t.join(HANG_GUARD)


class Replica:
    def __init__(self, kubeconfig: Path, namespace: str, name: str, log_dir: Path) -> None:
        from support.controlplane import free_port

        self.port = free_port()
        self.name = name
        self.log = open(log_dir / f"{name}.log", "wb")  # noqa: SIM115
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "dyn_gitops_operator",
                "--mode",
                "namespace",
                "--namespace",
                namespace,
                "--kubeconfig",
                str(kubeconfig),
                "--identity",
                name,
                "--http-address",
                f"127.0.0.1:{self.port}",
                "--leader-lease-duration",
                str(LEASE_DURATION),
                "--leader-renew-deadline",
                str(RENEW_DEADLINE),
                "--leader-retry-period",
                "0.3",
                "--scope-lease-duration",
                "3",
                "--scope-lease-renew-interval",
                "1",
                "--workers",
                "2",
            ],
            stdout=self.log,
            stderr=subprocess.STDOUT,
            env=env,
        )

    def metrics(self) -> dict[str, float] | None:
        return read_metrics(self.port)

    def read(self) -> Read:
        start = time.monotonic()
        got = self.metrics()
        return Read(start, time.monotonic(), got)

    def stop(self, sig: int = signal.SIGTERM) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            return self.proc.wait(60)
        finally:
            self.log.close()


class Sampler:
    """Reads both replicas at once, again and again, until stopped. Survives anything a
    single read can raise; the test waits for a number of observations, not for time."""

    def __init__(self, replicas: dict[str, Replica]) -> None:
        self.replicas = replicas
        self.observations: list[Observation] = []
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._pool = ThreadPoolExecutor(max_workers=len(replicas))
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                futures = {n: self._pool.submit(r.read) for n, r in self.replicas.items()}
                self.observations.append(Observation({n: f.result() for n, f in futures.items()}))
            except Exception as exc:  # keep sampling: one bad read proves nothing
                self.errors.append(repr(exc))
            self._stop.wait(0.05)

    def conclusive_since(self, index: int) -> int:
        return sum(o.conclusive() for o in self.observations[index:])

    def wait_for_observations(self, since: int, what: str) -> None:
        wait_for(
            lambda: self.conclusive_since(since) >= OBSERVATIONS,
            timeout=HANG_GUARD,
            what=f"{OBSERVATIONS} observations of both replicas {what}",
        )

    def __enter__(self) -> Sampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(HANG_GUARD)
        self._pool.shutdown(wait=True)


def test_two_replicas_never_act_at_once(
    cluster_k: Kube, cluster_namespace: str, cluster: Any, tmp_path: Path
) -> None:
    """On the realistic cluster: the workloads' pods really become Ready."""
    k, namespace = cluster_k, cluster_namespace
    objs = render(SAMPLES / "scaling-adapter" / "input", namespace)
    gitops_apply(k, objs)
    a = Replica(cluster.kubeconfig, namespace, "replica-a", tmp_path)
    b = Replica(cluster.kubeconfig, namespace, "replica-b", tmp_path)
    replicas = {"replica-a": a, "replica-b": b}
    sampler = Sampler(replicas)
    try:
        with sampler:
            leader = wait_for(
                lambda: next(
                    (r for r in replicas.values() if (r.metrics() or {}).get("leader") == 1), None
                ),
                timeout=HANG_GUARD,
                what="a leader",
            )
            follower = b if leader is a else a
            wait_for(
                lambda: (
                    k.get(DGDS, namespace, "sglang-disagg").get("status", {}).get("state")
                    == "successful"
                ),
                timeout=HANG_GUARD,
                what="the leader reconciles",
            )
            lease = k.get(LEASES, namespace, "dyn-gitops-controller")
            assert lease["spec"]["holderIdentity"] == leader.name
            # both alive, observed together many times: the follower never acts
            sampler.wait_for_observations(0, "while both are alive")
            follower_metrics = wait_for(
                follower.metrics, timeout=HANG_GUARD, what="the follower's /metrics"
            )
            assert follower_metrics["leader"] == 0
            assert follower_metrics.get("reconciles", 0) == 0

            # the leader dies without a goodbye: the follower takes over once the lease
            # record it last saw is LEASE_DURATION old, never earlier
            last_renewal = parse_time(
                k.get(LEASES, namespace, "dyn-gitops-controller")["spec"]["renewTime"]
            )
            assert last_renewal is not None
            leader.stop(signal.SIGKILL)
            wait_for(
                lambda: (follower.metrics() or {}).get("leader") == 1,
                timeout=HANG_GUARD,
                what="follower takes over",
            )
            took_over = datetime.now(UTC)
            assert took_over >= last_renewal + timedelta(seconds=LEASE_DURATION)
            after_takeover = len(sampler.observations)
            hpa_scale(k, namespace, "sglang-disagg-decode", 3)
            wait_for(
                lambda: (
                    k.get(DGDS, namespace, "sglang-disagg")["status"]["components"]["decode"][
                        "replicas"
                    ]
                    == 3
                ),
                timeout=HANG_GUARD,
                what="the new leader acts",
            )
            # the dead replica does not answer: wait for observations of the survivor
            wait_for(
                lambda: (
                    sum(
                        o.reads[follower.name].metrics is not None
                        for o in sampler.observations[after_takeover:]
                    )
                    >= OBSERVATIONS
                ),
                timeout=HANG_GUARD,
                what=f"{OBSERVATIONS} observations of the new leader",
            )
        assert follower.stop(signal.SIGTERM) == 0
        lease = k.get(LEASES, namespace, "dyn-gitops-controller")
        assert lease["spec"]["holderIdentity"] == ""  # released on clean shutdown
        scope = k.get(LEASES, namespace, SCOPE_LEASE_NAME)  # kept, marked for hand-over
        assert scope["metadata"]["annotations"][SCOPE_LEASE_HANDOVER_ANNOTATION] == "true"
    finally:
        for r in replicas.values():
            r.stop(signal.SIGKILL)
    observations = sampler.observations
    both = [
        o
        for o in observations
        if o.conclusive() and o.value(a.name, "leader") == 1 and o.value(b.name, "leader") == 1
    ]
    assert not both, f"two leaders at once: {both[:3]}"
    # a process that ever reconciled was the leader then; it leads until it dies (SIGKILL),
    # so both answering with reconciles means the follower acted while the leader lived
    acting = [
        o for o in observations if o.value(a.name, "reconciles") and o.value(b.name, "reconciles")
    ]
    assert not acting, f"both replicas reconciled while both were alive: {acting[:3]}"
    assert sum(o.value(follower.name, "leader") == 1 for o in observations) > 0
    dgd = k.get(DGDS, namespace, "sglang-disagg")
    assert {
        m["manager"] for m in dgd["metadata"]["managedFields"] if m.get("subresource") == "status"
    } == {FIELD_MANAGER}


class SlowReplies(Kube):
    """The real API client, whose lease updates answer ``delay`` seconds late once armed
    (the update is applied at once; only the reply is late, as on a loaded machine)."""

    def __init__(self, inner: Kube) -> None:
        super().__init__(inner.api, inner.timeout)
        self.delay = 0.0
        self.slow_replies = 0

    def update(self, res: Any, obj: dict[str, Any]) -> dict[str, Any]:
        out = super().update(res, obj)
        if self.delay:
            time.sleep(self.delay)
            self.slow_replies += 1
        return out


def test_a_late_renewal_reply_does_not_stretch_leadership(k: Kube, namespace: str) -> None:
    """The follower may take over LEASE_DURATION after the renewal reached the API server;
    the leader must stop RENEW_DEADLINE after it *sent* it, however late the reply."""
    from dyn_gitops_operator.leader import LeaderElector
    from dyn_gitops_operator.metrics import Metrics
    from dyn_gitops_operator.settings import LeaderSettings

    slow = SlowReplies(k)
    metrics = Metrics()
    elector = LeaderElector(
        slow,
        LeaderSettings(lease_name="slow", lease_duration=4, renew_deadline=2, retry_period=0.2),
        namespace,
        "slow-leader",
        metrics,
        on_lost=lambda: None,
    )
    elector.start()
    try:
        wait_for(elector.acquired.is_set, timeout=HANG_GUARD, what="leadership")
        slow.delay = 2.5  # > renew deadline: every renewal from now on answers too late
        wait_for(lambda: slow.slow_replies >= 1, timeout=HANG_GUARD, what="a late reply")
        # the renewal succeeded, but it was sent more than RENEW_DEADLINE ago when its
        # reply came (the deadline's timer ended the leadership meanwhile): the late reply
        # does not bring it back, the leader is not acting, and /metrics says so
        assert not elector.is_leader()
        assert scrape(metrics, "dyn_gitops_controller_leader") == 0
    finally:
        slow.delay = 0
        elector.stop()
    assert scrape(metrics, "dyn_gitops_controller_leader") == 0


def scrape(metrics: Any, name: str) -> float:
    from prometheus_client import generate_latest

    for line in generate_latest(metrics.registry).decode().splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    raise AssertionError(f"{name} not exported")
