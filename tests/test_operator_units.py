"""Pure pieces of the controller (no API server): rollout arithmetic, the work queue, the
informer's 410 handling, lease expiry."""

from __future__ import annotations

import random
import threading
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from dyn_gitops_operator import objects as o
from dyn_gitops_operator.errors import GoneError
from dyn_gitops_operator.informer import Informer
from dyn_gitops_operator.kube import DEPLOYMENTS
from dyn_gitops_operator.leases import expired, micro_time
from dyn_gitops_operator.metrics import Metrics
from dyn_gitops_operator.reconcilers.rollout import distribute, keep_floor, ready_now, size
from dyn_gitops_operator.workqueue import WorkQueue


def dep(strategy: dict[str, Any]) -> dict[str, Any]:
    return {"metadata": {"name": "d"}, "spec": {"strategy": strategy}}


@pytest.mark.parametrize(
    ("desired", "surge", "unav", "want"),
    [
        (4, None, None, (1, 1)),  # 25 % / 25 %
        (2, None, None, (1, 0)),  # surge rounds up, unavailable down
        (1, None, None, (1, 0)),
        (3, 0, 0, (1, 0)),  # both zero: surge becomes 1
        (10, "50%", "10%", (5, 1)),
        (4, 2, 1, (2, 1)),
    ],
)
def test_budget(desired: int, surge: Any, unav: Any, want: tuple[int, int]) -> None:
    ru = {k: v for k, v in (("maxSurge", surge), ("maxUnavailable", unav)) if v is not None}
    b = o.budget(dep({"type": "RollingUpdate", "rollingUpdate": ru}), desired)
    assert (b.max_surge, b.max_unavailable) == want


def test_distribute_keeps_newest_old_generations_first() -> None:
    olds = [
        {"metadata": {"name": n}, "spec": {"replicas": r}}
        for n, r in (("oldest", 2), ("middle", 2), ("newest", 2))
    ]
    assert distribute(olds, 3) == {"newest": 2, "middle": 1, "oldest": 0}


def _pod(gen: str, ready: bool, terminating: bool = False) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": f"{gen}-x", "labels": {"nvidia.com/selector": gen}}
    if terminating:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    cond = {"type": "Ready", "status": "True" if ready else "False"}
    return {"metadata": meta, "status": {"conditions": [cond]}}


def _gen(name: str, spec: int, available: int) -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "spec": {"replicas": spec, "selector": {"matchLabels": {"nvidia.com/selector": name}}},
        "status": {"availableReplicas": available},
    }


def test_the_floor_counts_pods_ready_now_not_a_stale_status() -> None:
    """The Git-revert case (#13620): A, just scaled 2 -> 4, still reports 3 available
    (its ReplicaSet's status lags); only 2 of its pods are Ready. B's one serving pod
    must stay: 2 + 1 = 3 is the floor."""
    a, b = _gen("a", 4, 3), _gen("b", 1, 1)
    pods = [_pod("a", True), _pod("a", True), _pod("a", False), _pod("a", True, True)]
    pods += [_pod("b", True)]
    ready = ready_now([a, b], pods)
    assert ready == {"a": 2, "b": 1}
    assert keep_floor([b], {"b": 0}, ready, 3) == {"b": 1}
    # once A serves 4, B may go
    pods += [_pod("a", True), _pod("a", True)]
    assert keep_floor([b], {"b": 0}, ready_now([a, b], pods), 3) == {"b": 0}
    # without pods to count: the status, never above the spec
    assert ready_now([_gen("a", 2, 3), b], None) == {"a": 2, "b": 1}


def test_the_floor_never_counts_pods_a_scale_down_is_about_to_remove() -> None:
    """A generation just scaled 4 -> 2 keeps its two surplus pods Ready until its
    ReplicaSet deletes them (a few moments, longer on a loaded machine: the Git-revert pain
    test saw it, 2 ready left under a floor of 3). Counting them let B's only serving pod go:
    A counts as its spec, 2, and 2 + 1 = 3 is the floor."""
    a, b = _gen("a", 2, 4), _gen("b", 2, 1)
    pods = [_pod("a", True) for _ in range(4)] + [_pod("b", True), _pod("b", False)]
    ready = ready_now([a, b], pods)
    assert ready == {"a": 2, "b": 1}
    assert keep_floor([b], {"b": 0}, ready, 3) == {"b": 1}


def test_the_floor_drains_the_oldest_first_and_keeps_unready_removals() -> None:
    olds = [_gen("old1", 2, 2), _gen("old2", 3, 1)]
    ready = {"old1": 2, "old2": 1, "new": 1}
    # floor 3 of 4 ready: one serving pod may go, the oldest generation's
    assert keep_floor(olds, {"old1": 0, "old2": 1}, ready, 3) == {"old1": 1, "old2": 1}
    # not-ready pods can always go (old2: 3 -> 1 keeps its one ready pod)
    assert keep_floor(olds, {"old1": 2, "old2": 1}, ready, 4) == {"old1": 2, "old2": 1}
    # below the floor already: no serving pod goes
    assert keep_floor(olds, {"old1": 0, "old2": 0}, ready, 9) == {"old1": 2, "old2": 1}


@pytest.mark.parametrize("seed", range(40))
def test_rollout_arithmetic_respects_budget_and_terminates(seed: int) -> None:
    """Random desired/budgets and a random Deployment controller: the budget holds at
    every step and the rollout always finishes."""
    rnd = random.Random(seed)
    desired = rnd.randint(1, 12)
    budget = o.Budget(rnd.randint(0, 3), rnd.randint(0, 3))
    if budget.max_surge == 0 and budget.max_unavailable == 0:
        budget = o.Budget(1, 0)
    old_spec, old_avail, new_spec, new_avail = desired, desired, 1, 0
    for _ in range(500):
        s = size(
            desired,
            budget,
            old_spec=old_spec,
            old_available=old_avail,
            new_spec=new_spec,
            new_available=new_avail,
        )
        old_spec, new_spec = s.old, s.new
        old_avail = min(old_avail, old_spec)  # scale-down kills available pods
        assert old_spec + new_spec <= desired + budget.max_surge
        assert old_avail + new_avail >= desired - budget.max_unavailable
        new_avail = min(new_spec, new_avail + rnd.randint(0, 2))  # pods come up slowly
        if old_spec == 0 and new_avail == desired:
            return
    pytest.fail(f"no progress: desired={desired} budget={budget}")


def test_queue_deduplicates_and_requeues_keys_added_while_processing() -> None:
    q: WorkQueue[str] = WorkQueue()
    q.add("a")
    q.add("a")
    q.add("b")
    assert len(q) == 2
    assert q.get(0) == "a"
    q.add("a")  # while "a" is processed: not handed out twice ...
    assert q.get(0) == "b"
    assert q.get(0.01) is None
    q.done("a")  # ... but queued again when done
    assert q.get(0) == "a"


def test_queue_backoff_doubles_and_forget_resets() -> None:
    q: WorkQueue[str] = WorkQueue(backoff_base=0.01, backoff_max=0.05)
    delays = [q.add_rate_limited("k") for _ in range(5)]
    assert delays[:3] == [0.01, 0.02, 0.04] and delays[3:] == [0.05, 0.05]
    q.forget("k")
    assert q.backoff("k") == 0.01
    time.sleep(0.1)  # all five delayed adds are due (the longest was 0.05 s) ...
    assert q.get(5) == "k"  # ... and collapse into one key
    q.done("k")
    assert q.get(0) is None


def test_queue_add_after_waits() -> None:
    q: WorkQueue[str] = WorkQueue()
    start = time.monotonic()
    q.add_after("late", 0.15)
    q.add("now")
    assert q.get(0) == "now"
    assert q.get(30) == "late"  # 30 s: a hang guard only
    assert time.monotonic() - start >= 0.15  # never handed out before its delay


class FakeKube:
    """list/watch script: the first watch answers 410, the re-list shows a deletion."""

    def __init__(self) -> None:
        self.lists = [
            ([self.obj("a", "1"), self.obj("b", "2")], "10"),
            ([self.obj("a", "1")], "20"),
        ]
        self.watches = 0
        self.watch_rvs: list[str] = []
        self.done = threading.Event()
        self.closed = threading.Event()

    def shutdown(self) -> None:
        """The informer's stop() ends the open watch through this (a response's method)."""
        self.closed.set()

    @staticmethod
    def obj(name: str, rv: str) -> dict[str, Any]:
        return {"metadata": {"name": name, "namespace": "ns", "resourceVersion": rv}}

    def list(self, *a: Any, **kw: Any) -> tuple[list[dict[str, Any]], str]:
        return self.lists.pop(0)

    def watch(self, res: Any, ns: Any, rv: str, **kw: Any) -> Any:
        self.watches += 1
        self.watch_rvs.append(rv)
        if self.watches == 1:
            raise GoneError(410, "Expired", "too old resource version")
        kw["on_open"](self)
        yield {"type": "ADDED", "object": self.obj("c", "21")}
        self.done.set()
        self.closed.wait(10)


def test_informer_relists_after_410_and_reports_deletions() -> None:
    fake = FakeKube()
    metrics = Metrics()
    inf = Informer(fake, DEPLOYMENTS, namespace=None, metrics=metrics)  # type: ignore[arg-type]
    events: list[tuple[str | None, str | None]] = []
    inf.add_handler(
        lambda old, new: events.append(
            (old and old["metadata"]["name"], new and new["metadata"]["name"])
        )
    )
    inf.start()
    assert fake.done.wait(5)
    inf.stop()
    assert fake.watch_rvs == ["10", "20"]  # resumed from the fresh list's version
    assert events == [(None, "a"), (None, "b"), ("b", None), (None, "c")]
    assert sorted(obj["metadata"]["name"] for obj in inf.store.items()) == ["a", "c"]
    assert (
        metrics.value("dyn_gitops_controller_watch_relists_total", {"resource": "deployments"}) == 1
    )


def test_lease_expiry() -> None:
    now = datetime.now(UTC)
    lease = {
        "spec": {"renewTime": micro_time(now - timedelta(seconds=5)), "leaseDurationSeconds": 10}
    }
    assert not expired(lease, now)
    assert expired(lease, now + timedelta(seconds=6))
    assert expired({"spec": {"leaseDurationSeconds": 10}}, now)  # no renewTime: expired


def test_stdlib_operator_is_not_shadowed() -> None:
    import operator

    assert hasattr(operator, "itemgetter")


def test_stamped_worker_hash_wins_over_recomputing() -> None:
    from dyn_gitops_operator.graph import HashCache

    dgd = {
        "metadata": {
            "name": "g",
            "uid": "u",
            "generation": 1,
            "annotations": {"dyn-gitops.io/worker-hash": "abcd1234"},
        },
        "spec": {"services": {"w": {"componentType": "worker"}}},
    }
    assert HashCache().get(dgd) == "abcd1234"
    del dgd["metadata"]["annotations"]
    assert HashCache().get(dgd) not in (None, "abcd1234")
