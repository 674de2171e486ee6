"""The Dynamo operator's namespace-scope lease protocol (runtime spec 4.1 and 4.2).

* ``ScopeLeaseHolder`` (namespace mode): create and renew ``dynamo-operator-namespace-scope``
  in the watched namespace, so a cluster-wide Dynamo operator (or a cluster-wide dyn-gitops
  controller) leaves the namespace alone. A live lease held by someone else is never taken
  over: we wait for it to expire. After ``floor(duration / interval) - 1`` failed renewals
  in a row we stop acting, before the lease can expire under us. A clean shutdown does not
  delete the lease, which would let a cluster-wide Dynamo operator in until the successor
  acquires it: it renews it once more and marks it for hand-over, and the next dyn-gitops
  controller (any version) takes a marked lease over at once instead of waiting for expiry.
* ``ScopeExclusions`` (cluster mode): every live scope lease held by someone else excludes
  its namespace; the namespace is resumed when the lease expires or disappears.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from dyn_gitops_operator import __version__
from dyn_gitops_operator.errors import ApiError, ConflictError, NotFoundError
from dyn_gitops_operator.informer import Store
from dyn_gitops_operator.kubeapi import KubeApi
from dyn_gitops_operator.leases import expired, expires_at, holder, lease_body, micro_time
from dyn_gitops_operator.metrics import Metrics
from dyn_gitops_operator.resources import LEASES
from dyn_gitops_operator.settings import (
    SCOPE_HOLDER_PREFIX,
    SCOPE_LEASE_HANDOVER_ANNOTATION,
    SCOPE_LEASE_NAME,
    ScopeSettings,
)

log = logging.getLogger(__name__)

Obj = dict[str, Any]
Clock = Callable[[], datetime]


def _utc_now() -> datetime:
    return datetime.now(UTC)


def holder_identity(identity: str) -> str:
    """Versioned like the operator's ``namespace-restricted-operator-<version>``, plus a
    per-process suffix so a cleanup never deletes another holder's lease."""
    return f"{SCOPE_HOLDER_PREFIX}{__version__}-{identity}"


def handed_over(lease: Obj) -> bool:
    """A dyn-gitops scope lease its holder marked for hand-over on a clean shutdown."""
    annotations = (lease.get("metadata") or {}).get("annotations") or {}
    return annotations.get(SCOPE_LEASE_HANDOVER_ANNOTATION) == "true" and holder(lease).startswith(
        SCOPE_HOLDER_PREFIX
    )


class ScopeLeaseHolder:
    def __init__(
        self,
        kube: KubeApi,
        settings: ScopeSettings,
        namespace: str,
        identity: str,
        metrics: Metrics,
        on_lost: Callable[[], None],
        clock: Clock = _utc_now,
    ) -> None:
        self.kube = kube
        self.s = settings
        self.namespace = namespace
        self.identity = holder_identity(identity)
        self.metrics = metrics
        self.on_lost = on_lost
        self.clock = clock
        self.max_failures = max(1, int(settings.lease_duration // settings.renew_interval) - 1)
        self.held = False
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def acquire(self, stop: threading.Event, retry: float = 1.0) -> bool:
        """Block until the lease is ours (True) or ``stop`` is set (False)."""
        warned = False
        while not stop.is_set():
            try:
                if self._try_acquire():
                    self._set_held(True)
                    return True
                if not warned:
                    log.warning(
                        "scope lease held by someone else, waiting for it to expire",
                        extra={"namespace": self.namespace},
                    )
                    warned = True
            except ApiError as exc:
                log.warning("scope lease acquire failed", extra={"error": str(exc)})
            stop.wait(retry)
        return False

    def start_renewing(self) -> None:
        self._thread = threading.Thread(target=self._renew_loop, name="scope-lease", daemon=True)
        self._thread.start()

    def stop(self, release: bool = True) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        if release and self.held:
            self._release()
        self._set_held(False)

    # ------------------------------------------------------------------ internals
    def _spec(self, now: str, acquire: str | None) -> Obj:
        return {
            "holderIdentity": self.identity,
            "leaseDurationSeconds": self.s.lease_duration,
            "acquireTime": acquire or now,
            "renewTime": now,
        }

    def _try_acquire(self) -> bool:
        now = micro_time(self.clock())
        try:
            lease = self.kube.get(LEASES, self.namespace, SCOPE_LEASE_NAME)
        except NotFoundError:
            try:
                self.kube.create(
                    LEASES, lease_body(self.namespace, SCOPE_LEASE_NAME, self._spec(now, None))
                )
            except ConflictError:
                return False
            return True
        current = holder(lease)
        if (
            current
            and current != self.identity
            and not expired(lease, self.clock())
            and not handed_over(lease)
        ):
            return False
        acquire = (lease.get("spec") or {}).get("acquireTime") if current == self.identity else None
        try:
            self.kube.update(
                LEASES,
                lease_body(
                    self.namespace,
                    SCOPE_LEASE_NAME,
                    self._spec(now, acquire),
                    resource_version=lease["metadata"]["resourceVersion"],
                ),
            )
        except ConflictError:
            return False
        return True

    def _renew(self) -> None:
        """get -> update (create when missing: self-healing), as the operator renews."""
        now = micro_time(self.clock())
        try:
            lease = self.kube.get(LEASES, self.namespace, SCOPE_LEASE_NAME)
        except NotFoundError:
            self.kube.create(
                LEASES, lease_body(self.namespace, SCOPE_LEASE_NAME, self._spec(now, None))
            )
            return
        if holder(lease) not in ("", self.identity) and not expired(lease, self.clock()):
            raise ConflictError(409, "Taken", f"scope lease now held by {holder(lease)}")
        acquire = (lease.get("spec") or {}).get("acquireTime")
        self.kube.update(
            LEASES,
            lease_body(
                self.namespace,
                SCOPE_LEASE_NAME,
                self._spec(now, acquire),
                resource_version=lease["metadata"]["resourceVersion"],
            ),
        )

    def _renew_loop(self) -> None:
        failures = 0
        while not self._stop.wait(self.s.renew_interval):
            try:
                self._renew()
                failures = 0
            except ApiError as exc:
                failures += 1
                log.warning(
                    "scope lease renewal failed",
                    extra={"error": str(exc), "failures": failures, "budget": self.max_failures},
                )
                if failures >= self.max_failures:
                    log.error(
                        "scope lease lost: stopping before it can expire",
                        extra={"namespace": self.namespace},
                    )
                    self._set_held(False)
                    self.on_lost()
                    return

    def _release(self) -> None:
        """Renew once more and mark for hand-over (never delete: see the module docstring)."""
        try:
            lease = self.kube.get(LEASES, self.namespace, SCOPE_LEASE_NAME)
            if holder(lease) != self.identity:
                return
            meta = lease["metadata"]
            self.kube.update(
                LEASES,
                lease_body(
                    self.namespace,
                    SCOPE_LEASE_NAME,
                    self._spec(
                        micro_time(self.clock()), (lease.get("spec") or {}).get("acquireTime")
                    ),
                    resource_version=meta.get("resourceVersion"),
                    annotations={
                        **(meta.get("annotations") or {}),
                        SCOPE_LEASE_HANDOVER_ANNOTATION: "true",
                    },
                ),
            )
            log.info("scope lease marked for hand-over", extra={"namespace": self.namespace})
        except ApiError as exc:
            log.warning("could not mark the scope lease for hand-over", extra={"error": str(exc)})

    def _set_held(self, held: bool) -> None:
        self.held = held
        self.metrics.scope_leases_held.set(1 if held else 0)


class ScopeExclusions:
    """Namespaces another operator claims, fed by a Lease informer (cluster mode)."""

    def __init__(
        self,
        store: Store,
        metrics: Metrics,
        own_identity: str,
        on_resume: Callable[[str], None],
        clock: Clock = _utc_now,
    ) -> None:
        self.store = store
        self.metrics = metrics
        self.own = holder_identity(own_identity)
        self.on_resume = on_resume
        self.clock = clock
        self._lock = threading.Lock()
        self._excluded: set[str] = set()

    def excluded(self, namespace: str) -> bool:
        lease = self.store.get((namespace, SCOPE_LEASE_NAME))
        return lease is not None and self._claims(lease)

    def _claims(self, lease: Obj) -> bool:
        who = holder(lease)
        return bool(who) and who != self.own and not expired(lease, self.clock())

    def on_event(self, old: Obj | None, new: Obj | None) -> None:
        self.refresh()

    def refresh(self) -> None:
        """Recompute the set; resume namespaces that left it (also called on a timer)."""
        now_excluded = {
            l_["metadata"].get("namespace") or "" for l_ in self.store.items() if self._claims(l_)
        }
        with self._lock:
            resumed = self._excluded - now_excluded
            added = now_excluded - self._excluded
            self._excluded = now_excluded
        self.metrics.namespaces_excluded.set(len(now_excluded))
        for ns in sorted(added):
            log.info(
                "excluding namespace: another operator holds its scope lease",
                extra={"namespace": ns},
            )
        for ns in sorted(resumed):
            log.info(
                "resuming namespace: its scope lease expired or was released",
                extra={"namespace": ns},
            )
            self.on_resume(ns)

    def next_expiry(self) -> float | None:
        """Seconds until the earliest live foreign lease expires (for the timer)."""
        times = [
            t for l_ in self.store.items() if self._claims(l_) and (t := expires_at(l_)) is not None
        ]
        if not times:
            return None
        return max(0.0, (min(times) - self.clock()).total_seconds())
