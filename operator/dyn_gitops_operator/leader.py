"""Leader election on a coordination.k8s.io Lease (client-go ``leaderelection`` semantics).

Safety argument: a follower takes over only after it has seen the lease record unchanged
for ``lease_duration`` on its own clock, and a leader stops acting once ``renew_deadline``
(< lease_duration) has passed since it *started* its last successful renewal, on its own
clock (counting from the reply instead would let a slow reply stretch the leadership past
the moment the follower may take over). So two replicas never act at once, and leaderships
are at least ``lease_duration - renew_deadline`` apart, whatever the clock skew between
them, as long as both clocks run at the same rate. Updates use resourceVersion
preconditions: two candidates cannot both win the same round.

The renew deadline is enforced by a watchdog thread, not by the loop: a lease call that
hangs (a stalled API server) would otherwise keep the loop, and the leadership, past the
deadline. The watchdog wakes at ``_renewed_at + renew_deadline`` (a renewal moves it
forward), and if no renewal moved it, the leadership ends there and ``on_lost`` runs, while
the call may still hang. Each lease call is also bounded (``LeaderSettings.call_timeout``).

Identity: in a pod it is the pod's name (``settings.default_identity``), so a process
restarted in the same pod finds the lease held by its own identity and renews it at once
instead of waiting ``lease_duration``. That is safe because the only other process that
ever used this identity is its predecessor in the same container, and the kubelet starts
a container again only after the previous one has exited: the predecessor acts no more.
Two pods never share a name while both exist (a Deployment's pod names are unique), and
outside a pod the identity carries a random part. Running two controllers with one
``--identity`` by hand defeats the election: don't.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from dyn_gitops_operator.errors import ApiError, ConflictError, NotFoundError
from dyn_gitops_operator.kubeapi import KubeApi, call_timeout
from dyn_gitops_operator.leases import holder, lease_body, micro_time
from dyn_gitops_operator.metrics import Metrics
from dyn_gitops_operator.resources import LEASES
from dyn_gitops_operator.settings import LeaderSettings

log = logging.getLogger(__name__)

Obj = dict[str, Any]


class LeaderElector:
    def __init__(
        self,
        kube: KubeApi,
        settings: LeaderSettings,
        namespace: str,
        identity: str,
        metrics: Metrics,
        on_lost: Callable[[], None],
    ) -> None:
        self.kube = kube
        self.s = settings
        self.namespace = namespace
        self.identity = identity
        self.metrics = metrics
        self.on_lost = on_lost
        self._observed: tuple[str, str] | None = None  # (holder, renewTime) last seen
        self._observed_at = 0.0  # monotonic time it last changed
        self._renewed_at = 0.0  # monotonic time our last successful renewal was started
        self._leader = False
        self._lock = threading.Lock()  # _leader and _renewed_at, between loop and watchdog
        self._stop = threading.Event()
        self.acquired = threading.Event()
        self._thread: threading.Thread | None = None
        # read at scrape time, so /metrics never reports a leadership that has lapsed
        metrics.leader.set_function(lambda: 1.0 if self.is_leader() else 0.0)

    # ------------------------------------------------------------------ public
    def is_leader(self) -> bool:
        """True only while the last renewal is younger than the renew deadline."""
        return self._leader and time.monotonic() - self._renewed_at < self.s.renew_deadline

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="leader-election", daemon=True)
        self._thread.start()

    def stop(self, release: bool = True) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=self.s.retry_period + 5)
        with self._lock:  # stop acting before handing over
            was_leader, self._leader = self._leader, False
        if release and was_leader:
            self._release()

    # ------------------------------------------------------------------ loop
    def _run(self) -> None:
        while not self._stop.is_set():
            started = time.monotonic()
            try:
                with call_timeout(self.s.call_timeout):
                    ok = self._try_acquire_or_renew()
                self.metrics.apiserver.ok()
            except ApiError as exc:
                self.metrics.apiserver.failed(exc, "leader lease")
                log.warning("leader lease update failed", extra={"error": str(exc)})
                ok = False
            with self._lock:
                if self._stop.is_set():
                    return  # stopping or lost: never (re)gain leadership after that
                became = ok and not self._leader
                if ok:
                    self._renewed_at, self._leader = started, True
                late = self._leader and time.monotonic() - self._renewed_at >= self.s.renew_deadline
            if became:
                log.info(
                    "became leader", extra={"identity": self.identity, "lease": self.s.lease_name}
                )
                threading.Thread(target=self._watchdog, name="leader-deadline", daemon=True).start()
                self.acquired.set()
            if late:
                self._lose()
                return
            self._stop.wait(self.s.retry_period)

    def _watchdog(self) -> None:
        """The renew deadline as a timer: fires at ``_renewed_at + renew_deadline`` unless a
        renewal moved it, however long the loop's lease call hangs."""
        while not self._stop.is_set():
            with self._lock:
                left = self._renewed_at + self.s.renew_deadline - time.monotonic()
            if left <= 0:
                self._lose()
                return
            self._stop.wait(left)

    def _lose(self) -> None:
        """Stop acting at once and tell the owner (once, from whichever thread sees it)."""
        with self._lock:
            if not self._leader:
                return
            self._leader = False
            self._stop.set()  # the loop must not renew after this, whatever its call returns
        log.error("lost leadership", extra={"identity": self.identity})
        self.on_lost()

    def _try_acquire_or_renew(self) -> bool:
        now = micro_time(datetime.now(UTC))
        try:
            lease = self.kube.get(LEASES, self.namespace, self.s.lease_name)
        except NotFoundError:
            fresh: Obj = {
                "holderIdentity": self.identity,
                "acquireTime": now,
                "renewTime": now,
                "leaseDurationSeconds": int(self.s.lease_duration),
                "leaseTransitions": 0,
            }
            try:
                self.kube.create(LEASES, lease_body(self.namespace, self.s.lease_name, fresh))
            except ConflictError:
                return False  # somebody else created it first
            return True
        spec: Obj = dict(lease.get("spec") or {})
        record = (holder(lease), str(spec.get("renewTime") or ""))
        if record != self._observed:
            self._observed, self._observed_at = record, time.monotonic()
        current = holder(lease)
        if (
            current
            and current != self.identity
            and time.monotonic() - self._observed_at < self.s.lease_duration
        ):
            return False  # held by someone who renewed recently enough
        if current != self.identity:
            spec["acquireTime"] = now
            spec["leaseTransitions"] = int(spec.get("leaseTransitions") or 0) + 1
        spec.update(
            {
                "holderIdentity": self.identity,
                "renewTime": now,
                "leaseDurationSeconds": int(self.s.lease_duration),
            }
        )
        try:
            self._write(lease, spec)
        except ConflictError:
            return False
        return True

    def _write(self, lease: Obj, spec: Obj) -> None:
        """PUT ``spec`` on the lease as read (ConflictError if it changed since)."""
        rv = lease["metadata"]["resourceVersion"]
        body = lease_body(self.namespace, self.s.lease_name, spec, resource_version=rv)
        self.kube.update(LEASES, body)

    def _release(self) -> None:
        """Hand over at once on a clean shutdown: empty holder, 1 s duration (client-go)."""
        try:
            with call_timeout(self.s.call_timeout):
                self._hand_over()
        except ApiError as exc:
            log.warning("could not release the leader lease", extra={"error": str(exc)})

    def _hand_over(self) -> None:
        lease = self.kube.get(LEASES, self.namespace, self.s.lease_name)
        if holder(lease) != self.identity:
            return
        spec = dict(lease.get("spec") or {})
        spec.update(
            {
                "holderIdentity": "",
                "leaseDurationSeconds": 1,
                "renewTime": micro_time(datetime.now(UTC)),
            }
        )
        self._write(lease, spec)
        log.info("released leadership", extra={"identity": self.identity})
