"""Optional APIs (LeaderWorkerSets, PodCliques, PodCliqueScalingGroups, DynamoModels): which
are served, re-checked for the life of the process.

A check ends in one of four states: *served* (watched from then on), *not served* (404: the
CRD is not installed), *forbidden* (401/403: RBAC) or *unknown* (any other error: a 503, a
timeout, a connection refused while the API server restarts). Only *unknown* is a doubt: it
is re-checked with back-off, and the controller is not ready while any API is unknown. A
not-served or forbidden API is re-checked every ``recheck`` seconds, so a CRD installed (or
a permission granted) later is picked up.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from enum import Enum

from dyn_gitops_operator.errors import ApiError, ForbiddenError, NotFoundError
from dyn_gitops_operator.kubeapi import KubeApi
from dyn_gitops_operator.resources import Resource

log = logging.getLogger(__name__)


class ApiState(Enum):
    SERVED = "served"
    NOT_SERVED = "not served"
    FORBIDDEN = "forbidden"
    UNKNOWN = "unknown"


def probe(kube: KubeApi, res: Resource, namespace: str | None) -> tuple[ApiState, str]:
    """The API's state and why (the error's text; empty when served)."""
    try:
        kube.check_listable(res, namespace)
    except NotFoundError as exc:
        return ApiState.NOT_SERVED, str(exc)
    except ForbiddenError as exc:
        return ApiState.FORBIDDEN, str(exc)
    except ApiError as exc:
        return ApiState.UNKNOWN, str(exc)
    return ApiState.SERVED, ""


@dataclass
class _Api:
    res: Resource
    state: ApiState | None = None
    failures: int = 0  # unknown answers in a row (the back-off's exponent)
    due: float = 0.0  # monotonic time of the next check


class OptionalApis:
    """Checks each API once (``check_all``, at start-up), then re-checks in a thread
    (``start``) until ``stopped``. ``on_served(res)`` is called once per API, the first time
    it is found served (from the thread after start-up)."""

    def __init__(
        self,
        kube: KubeApi,
        namespace: str | None,
        resources: Iterable[Resource],
        on_served: Callable[[Resource], None],
        *,
        recheck: float,
        retry_base: float,
        retry_max: float,
        stopped: threading.Event,
    ) -> None:
        self.kube = kube
        self.namespace = namespace
        self.on_served = on_served
        self.recheck = recheck
        self.retry_base = retry_base
        self.retry_max = retry_max
        self.stopped = stopped
        self._apis = [_Api(res) for res in resources]
        self._lock = threading.Lock()

    def unknown(self) -> list[str]:
        """The APIs whose state is not known yet (``plural.group``), for /readyz."""
        with self._lock:
            return [_name(a.res) for a in self._apis if a.state in (None, ApiState.UNKNOWN)]

    def state(self, res: Resource) -> ApiState | None:
        with self._lock:
            return next((a.state for a in self._apis if a.res is res), None)

    def check_all(self) -> None:
        for api in self._apis:
            self._check(api)

    def start(self) -> None:
        threading.Thread(target=self._run, name="optional-apis", daemon=True).start()

    def _run(self) -> None:
        while True:
            with self._lock:
                pending = [a for a in self._apis if a.state is not ApiState.SERVED]
            if not pending:
                return  # every API watched: nothing left to look at
            wait = min(a.due for a in pending) - time.monotonic()
            if self.stopped.wait(max(0.0, wait)):
                return
            now = time.monotonic()
            for api in pending:
                if api.due <= now and not self.stopped.is_set():
                    self._check(api)

    def _check(self, api: _Api) -> None:
        state, why = probe(self.kube, api.res, self.namespace)
        with self._lock:
            before, api.state = api.state, state
            api.failures = api.failures + 1 if state is ApiState.UNKNOWN else 0
            delay = self.recheck
            if state is ApiState.UNKNOWN:
                delay = min(self.retry_max, self.retry_base * 2 ** (api.failures - 1))
            api.due = time.monotonic() + delay
        extra = {"resource": _name(api.res), "state": state.value, "reason": why}
        if state is ApiState.UNKNOWN:
            if before is not ApiState.UNKNOWN:  # one line per change, not per retry
                log.warning("optional API state unknown, re-checking", extra=extra)
        elif state is not before:
            level = logging.WARNING if state is ApiState.FORBIDDEN else logging.INFO
            log.log(level, "optional API checked", extra=extra)
        if state is ApiState.SERVED:
            self.on_served(api.res)


def _name(res: Resource) -> str:
    return f"{res.plural}.{res.group}" if res.group else res.plural


__all__ = ["ApiState", "OptionalApis", "probe"]
