"""Whether the API server answers, as the informers' and the leader's calls see it.

An outage (a connection error, a timeout or a 5xx) is logged once when it starts and once
when it ends, with its length, not once per retry; the ``apiserver_reachable`` gauge follows
the state and ``apiserver_failures_total`` counts every failed call.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from dyn_gitops_operator.errors import ApiError, TransientError

log = logging.getLogger(__name__)


def is_outage(exc: ApiError) -> bool:
    """No answer (status 0: connection refused or reset, timeout) or a server error; a 429
    is the server answering (busy), a 4xx is about the request."""
    return isinstance(exc, TransientError) and (exc.status == 0 or exc.status >= 500)


class Reachability:
    def __init__(self, gauge: Any, failures: Any, clock: Callable[[], float] = time.monotonic):
        self._gauge = gauge
        self._failures = failures
        self._clock = clock
        self._lock = threading.Lock()
        self._down_since: float | None = None
        gauge.set(1)

    @property
    def reachable(self) -> bool:
        return self._down_since is None

    def failed(self, exc: ApiError, via: str) -> None:
        """A call failed; the first outage failure after a success is logged."""
        if not is_outage(exc):
            return
        self._failures.inc()
        with self._lock:
            if self._down_since is not None:
                return
            self._down_since = self._clock()
        self._gauge.set(0)
        log.warning("API server unreachable", extra={"via": via, "error": str(exc)})

    def ok(self) -> None:
        """A call got an answer; the first one after an outage is logged."""
        if self._down_since is None:  # the common case, without the lock
            return
        with self._lock:
            since, self._down_since = self._down_since, None
        if since is None:
            return
        self._gauge.set(1)
        log.warning(
            "API server reachable again",
            extra={"outage_seconds": round(self._clock() - since, 1)},
        )


__all__ = ["Reachability", "is_outage"]
