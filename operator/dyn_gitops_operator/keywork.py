"""One key taken from a work queue, worked on: what both loops (the graph controller loop
and the DynamoModel loop) do around their own reconcile, so that standby, scope
exclusion, retries with backoff and their logs behave the same in both."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from dyn_gitops_operator.errors import ConflictError, ControllerError, StandbyError
from dyn_gitops_operator.informer import Key
from dyn_gitops_operator.metrics import Metrics
from dyn_gitops_operator.scope import ScopeExclusions
from dyn_gitops_operator.workqueue import WorkQueue

log = logging.getLogger(__name__)

#: how long a key waits while this replica is not the one acting (standby)
STANDBY_RETRY_SECONDS = 1.0


@dataclass(frozen=True)
class Outcome:
    result: Literal["success", "conflict", "error"]
    #: the ControllerError's type, "conflict", or "internal" (a bug: logged with traceback)
    error_type: str | None = None


def work_on(
    key: Key,
    queue: WorkQueue[Key],
    run: Callable[[Key], float | None],
    *,
    what: str,
    acting: Callable[[], bool],
    exclusions: ScopeExclusions | None,
    metrics: Metrics,
) -> Outcome | None:
    """Run ``run(key)`` (seconds until it wants another look, or None) and settle the key:
    forgotten on success (re-added after the wanted delay), retried with backoff on an
    error. None when it was not run: this replica is on standby (the key is kept for
    later) or the key's namespace is excluded (``ScopeExclusions.refresh`` resumes it)."""
    if not acting():
        queue.add_after(key, STANDBY_RETRY_SECONDS)
        return None
    if exclusions is not None and exclusions.excluded(key[0]):
        queue.forget(key)
        return None
    rid = uuid.uuid4().hex[:8]
    try:
        requeue_after = run(key)
    except StandbyError:  # the leadership ended mid-reconcile: wait as a standby does
        queue.add_after(key, STANDBY_RETRY_SECONDS)
        return None
    except Exception as exc:
        delay = queue.add_rate_limited(key)
        metrics.workqueue_retries.inc()
        known = isinstance(exc, ControllerError)
        if isinstance(exc, ConflictError):  # another writer won: routine
            level, outcome = logging.INFO, Outcome("conflict", exc.error_type)
        elif isinstance(exc, ControllerError):
            level, outcome = logging.WARNING, Outcome("error", exc.error_type)
        else:
            level, outcome = logging.ERROR, Outcome("error", "internal")
        log.log(
            level,
            "%s failed, retrying",
            what,
            exc_info=not known,
            extra={"object": "/".join(key), "reconcile_id": rid, "delay": delay, "error": str(exc)},
        )
        return outcome
    queue.forget(key)
    if requeue_after is not None:
        queue.add_after(key, requeue_after)
    return Outcome("success")


__all__ = ["STANDBY_RETRY_SECONDS", "Outcome", "work_on"]
