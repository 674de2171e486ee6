"""Leader election under faults (issue 29 point 5 b, c): a restarted process in the same pod
takes its own lease back at once (stable identity), and the renew deadline is enforced by a
timer while a lease call hangs (a stalled API server), with every write gated on it. And
(d, the unit part) an outage is one log line per change of state, not one per retry; the
real API server killed and restarted is in ``test_operator_apiserver_faults.py``.

Structural checks only: "at once" is the first attempt, "while blocked" is observed inside
``on_lost`` while the blocked call has not returned.
"""

from __future__ import annotations

import logging
import socket
import threading
from datetime import UTC, datetime
from typing import Any

import pytest
from dyn_gitops_operator.errors import TransientError
from dyn_gitops_operator.kube import DEPLOYMENTS, LEASES, Kube, Resource
from dyn_gitops_operator.leader import LeaderElector
from dyn_gitops_operator.leases import micro_time
from dyn_gitops_operator.metrics import Metrics
from dyn_gitops_operator.settings import LeaderSettings, OperatorSettings, default_identity
from dyn_gitops_operator.testing import wait_for

HANG_GUARD = 120.0  # seconds; only against a hang, never reached on a healthy run
#: an hour: a candidate that had to wait the lease out would time out instead
HOUR = 3600.0


def _elector(kube: Any, namespace: str, identity: str, s: LeaderSettings, **kw: Any) -> Any:
    return LeaderElector(kube, s, namespace, identity, Metrics(), kw.get("on_lost", lambda: None))


# ---------------------------------------------------------------- (b) stable identity
def test_the_identity_in_a_pod_is_the_pod_name_across_restarts(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Two processes of one pod (a container restart) get one identity: the pod's name;
    outside a pod every process gets its own (the host name is shared by processes)."""
    from dyn_gitops_operator.__main__ import parser, settings_from

    monkeypatch.setenv("POD_NAME", "dg-dyn-gitops-7d9f-abcde")
    first = settings_from(parser().parse_args([])).identity
    second = settings_from(parser().parse_args([])).identity
    assert first == second == "dg-dyn-gitops-7d9f-abcde"
    assert settings_from(parser().parse_args(["--identity", "me"])).identity == "me"
    monkeypatch.delenv("POD_NAME")
    assert OperatorSettings().identity != OperatorSettings().identity
    assert default_identity({}).startswith(socket.gethostname() + "_")


@pytest.mark.realk8s
def test_a_restarted_process_takes_its_own_lease_back_at_first_attempt(
    k: Kube, namespace: str
) -> None:
    """A lease held by X and renewed just now, lasting an hour: a new elector with X (the
    same pod, its predecessor dead) leads at its first attempt; with Y it may not."""
    now = micro_time(datetime.now(UTC))
    k.create(
        LEASES,
        {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": "own", "namespace": namespace},
            "spec": {
                "holderIdentity": "pod-x",
                "leaseDurationSeconds": int(HOUR),
                "acquireTime": now,
                "renewTime": now,
                "leaseTransitions": 3,
            },
        },
    )
    s = LeaderSettings(lease_name="own", lease_duration=HOUR, renew_deadline=10, retry_period=1)
    assert not _elector(k, namespace, "pod-y", s)._try_acquire_or_renew()
    assert _elector(k, namespace, "pod-x", s)._try_acquire_or_renew()
    spec = k.get(LEASES, namespace, "own")["spec"]
    assert spec["holderIdentity"] == "pod-x"
    assert spec["leaseTransitions"] == 3  # a renewal of its own lease, not a take-over
    # and through the loop: leadership without waiting the hour out
    elector = _elector(k, namespace, "pod-x", s)
    elector.start()
    try:
        wait_for(elector.acquired.is_set, timeout=HANG_GUARD, what="own lease taken back")
        assert elector.is_leader()
    finally:
        elector.stop()


# ---------------------------------------------------------------- (c) renew deadline timer
class StallingLeases(Kube):
    """The real client, whose lease reads and writes block until ``release`` once
    ``armed`` (an API server that accepted the connection and never answers)."""

    def __init__(self, inner: Kube) -> None:
        super().__init__(inner.api, inner.timeout)
        self.armed = threading.Event()
        self.blocked = threading.Event()
        self.release = threading.Event()

    def _stall(self, res: Resource) -> None:
        if res is LEASES and self.armed.is_set():
            self.blocked.set()
            self.release.wait()

    def get(self, res: Resource, namespace: str | None, name: str) -> dict[str, Any]:
        self._stall(res)
        return super().get(res, namespace, name)

    def update(self, res: Resource, obj: dict[str, Any]) -> dict[str, Any]:
        self._stall(res)
        return super().update(res, obj)


@pytest.mark.realk8s
def test_the_renew_deadline_ends_leadership_while_a_lease_call_hangs(
    k: Kube, namespace: str
) -> None:
    """After one successful renewal every lease call hangs: ``on_lost`` runs (and
    ``is_leader`` is False) while the hung call still has not returned."""
    stall = StallingLeases(k)
    seen: dict[str, bool] = {}
    lost = threading.Event()

    def on_lost() -> None:
        seen["call_still_blocked"] = stall.blocked.is_set() and not stall.release.is_set()
        seen["leader"] = elector.is_leader()
        lost.set()

    s = LeaderSettings(lease_name="stall", lease_duration=4, renew_deadline=2, retry_period=0.2)
    elector = _elector(stall, namespace, "stalled", s, on_lost=on_lost)
    elector.start()
    try:
        wait_for(elector.acquired.is_set, timeout=HANG_GUARD, what="leadership")
        stall.armed.set()
        wait_for(lost.is_set, timeout=HANG_GUARD, what="on_lost while the lease call hangs")
        assert seen == {"call_still_blocked": True, "leader": False}
    finally:
        stall.release.set()
        elector.stop(release=False)
    assert not elector.is_leader()


def test_lease_calls_are_bounded_below_the_renew_deadline() -> None:
    """A get and an update of the lease together fit in the renew deadline, and the bound
    reaches the socket: a server that accepts and never answers times out the call."""
    from dyn_gitops_operator.kubeapi import CALL_TIMEOUT, call_timeout

    s = LeaderSettings()
    connect, read = s.call_timeout
    assert 2 * (connect + read) < s.renew_deadline
    seen: list[Any] = []

    class Recording(Kube):
        def get(self, res: Resource, namespace: str | None, name: str) -> dict[str, Any]:
            seen.append(CALL_TIMEOUT.get())
            raise TransientError(503, "ServiceUnavailable", "test")

    elector = _elector(Recording(None), "ns", "me", s)
    elector.start()
    try:
        wait_for(lambda: seen, timeout=HANG_GUARD, what="a lease call")
    finally:
        elector.stop(release=False)
    assert seen[0] == s.call_timeout

    from kubernetes import client as k8s

    with socket.socket() as silent:  # listens, never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        cfg = k8s.Configuration()
        cfg.host = f"http://127.0.0.1:{silent.getsockname()[1]}"
        kube = Kube(k8s.ApiClient(cfg), (HANG_GUARD, HANG_GUARD))
        with call_timeout((0.5, 0.5)), pytest.raises(TransientError, match=r"[Tt]imeout"):
            kube.get(LEASES, "ns", "l")


def test_no_write_is_sent_once_the_replica_stops_acting() -> None:
    """The leadership can end mid-reconcile: every write path checks it first."""
    from dyn_gitops_operator.errors import StandbyError
    from dyn_gitops_operator.fakekube import FakeKube
    from dyn_gitops_operator.keywork import work_on
    from dyn_gitops_operator.reconcilers.base import Context
    from dyn_gitops_operator.workqueue import WorkQueue

    kube = FakeKube()
    acting = [True]
    ctx = Context(
        kube=kube, metrics=Metrics(), remember=lambda r, o: None, acting=lambda: acting[0]
    )
    dep = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "d", "namespace": "ns"},
        "spec": {"replicas": 1},
    }

    def reconcile(key: Any) -> None:
        acting[0] = False  # lost between the worker's check and the write
        ctx.apply(DEPLOYMENTS, dep)

    queue: WorkQueue[Any] = WorkQueue()
    out = work_on(
        ("ns", "g"),
        queue,
        reconcile,
        what="t",
        acting=lambda: True,
        exclusions=None,
        metrics=ctx.metrics,
    )
    assert out is None  # a standby's wait, not an error retried with backoff
    with pytest.raises(StandbyError):
        ctx.delete(DEPLOYMENTS, dep)
    assert kube.list(DEPLOYMENTS, "ns")[0] == []


# ---------------------------------------------------------------- (d) outage log, unit
def test_connection_errors_are_one_line_per_state_change(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Unit: an informer whose list fails with connection errors: many failures counted,
    one line each way; a 403 or a 404 is an answer, not an outage."""
    from dyn_gitops_operator.errors import ForbiddenError, NotFoundError
    from dyn_gitops_operator.fakekube import FakeKube
    from dyn_gitops_operator.informer import Informer
    from dyn_gitops_operator.metrics import Metrics
    from dyn_gitops_operator.resources import DEPLOYMENTS

    class Unreachable(FakeKube):
        down = threading.Event()

        def list(self, res: Resource, namespace: str | None = None, **kw: Any) -> Any:
            if self.down.is_set():
                raise TransientError(0, "NewConnectionError", "Connection refused")
            return super().list(res, namespace, **kw)

    caplog.set_level(logging.INFO, logger="dyn_gitops_operator")
    metrics = Metrics()
    kube = Unreachable()
    kube.down.set()
    inf = Informer(kube, DEPLOYMENTS, namespace="ns", metrics=metrics)
    inf.start()
    try:
        failures = "dyn_gitops_controller_apiserver_failures_total"
        wait_for(lambda: metrics.value(failures) >= 3, HANG_GUARD, "failed lists")
        assert metrics.value("dyn_gitops_controller_apiserver_reachable") == 0
        kube.down.clear()
        wait_for(inf.synced.is_set, HANG_GUARD, "list once reachable")
        assert metrics.value("dyn_gitops_controller_apiserver_reachable") == 1
        for answer in (ForbiddenError(403, "Forbidden", "no"), NotFoundError(404, "", "")):
            metrics.apiserver.failed(answer, "test")
        assert metrics.value("dyn_gitops_controller_apiserver_reachable") == 1
    finally:
        inf.stop()
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("API server")]
    assert lines == ["API server unreachable", "API server reachable again"], lines
