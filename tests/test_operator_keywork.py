"""What both controller loops do with a key around their reconcile
(``operator/dyn_gitops_operator/keywork.py``): standby keeps the key, an excluded namespace
drops it, an error retries with backoff and is logged at the level it deserves, success
forgets the failures and honours the wanted next look."""

from __future__ import annotations

import logging
from typing import Any, cast

import pytest
from dyn_gitops_operator.errors import ConflictError, ControllerError, NotFoundError
from dyn_gitops_operator.keywork import Outcome, work_on
from dyn_gitops_operator.metrics import Metrics
from dyn_gitops_operator.scope import ScopeExclusions
from dyn_gitops_operator.workqueue import WorkQueue

KEY = ("ns", "g")


class _Excluded:
    def __init__(self, *namespaces: str) -> None:
        self.namespaces = set(namespaces)

    def excluded(self, namespace: str) -> bool:
        return namespace in self.namespaces


def _work(queue: WorkQueue[Any], run: Any, *, acting: bool = True, excluded: str = "") -> Any:
    metrics = Metrics()
    exclusions = cast(ScopeExclusions, _Excluded(excluded)) if excluded else None
    outcome = work_on(
        KEY,
        queue,
        run,
        what="graph reconcile",
        acting=lambda: acting,
        exclusions=exclusions,
        metrics=metrics,
    )
    return outcome, metrics


def _retried(metrics: Metrics) -> float:
    name = "dyn_gitops_controller_workqueue_retries_total"
    return float(metrics.registry.get_sample_value(name) or 0)


def _fail(exc: Exception) -> Any:
    def run(key: Any) -> float | None:
        raise exc

    return run


def test_standby_keeps_the_key_without_running_it() -> None:
    queue: WorkQueue[Any] = WorkQueue()
    ran: list[Any] = []
    outcome, _ = _work(queue, ran.append, acting=False)
    assert (outcome, ran) == (None, [])
    assert queue.get(timeout=5) == KEY  # comes back for when this replica acts


def test_an_excluded_namespace_drops_the_key_and_its_failures() -> None:
    queue: WorkQueue[Any] = WorkQueue()
    queue.add_rate_limited(KEY)
    ran: list[Any] = []
    outcome, _ = _work(queue, ran.append, excluded="ns")
    assert (outcome, ran, queue.retries(KEY)) == (None, [], 0)


@pytest.mark.parametrize(
    ("exc", "outcome", "level", "traceback"),
    [
        (
            ConflictError(409, "Conflict", "stale"),
            Outcome("conflict", "conflict"),
            logging.INFO,
            False,
        ),
        (
            NotFoundError(404, "NotFound", "gone"),
            Outcome("error", "not_found"),
            logging.WARNING,
            False,
        ),
        (ControllerError("bad"), Outcome("error", "internal"), logging.WARNING, False),
        (KeyError("bug"), Outcome("error", "internal"), logging.ERROR, True),
    ],
)
def test_an_error_retries_with_backoff_logged_by_its_kind(
    caplog: pytest.LogCaptureFixture,
    exc: Exception,
    outcome: Outcome,
    level: int,
    traceback: bool,
) -> None:
    queue: WorkQueue[Any] = WorkQueue(backoff_base=0.01)
    with caplog.at_level(logging.INFO, logger="dyn_gitops_operator.keywork"):
        got, metrics = _work(queue, _fail(exc))
    assert got == outcome
    assert queue.retries(KEY) == 1 and _retried(metrics) == 1
    [record] = caplog.records
    assert (record.levelno, record.getMessage()) == (level, "graph reconcile failed, retrying")
    assert bool(record.exc_info) is traceback
    assert record.__dict__["object"] == "ns/g"
    assert queue.get(timeout=5) == KEY  # retried after the backoff


def test_success_forgets_failures_and_honours_the_next_look() -> None:
    queue: WorkQueue[Any] = WorkQueue()
    queue.add_rate_limited(KEY)
    assert queue.get(timeout=5) == KEY
    queue.done(KEY)
    outcome, metrics = _work(queue, lambda key: 0.05)
    assert outcome == Outcome("success")
    assert queue.retries(KEY) == 0 and _retried(metrics) == 0
    assert queue.get(timeout=5) == KEY  # the look it asked for
    queue.done(KEY)
    outcome, _ = _work(queue, lambda key: None)
    assert outcome == Outcome("success")
    assert queue.get(timeout=0.2) is None  # nothing more wanted
