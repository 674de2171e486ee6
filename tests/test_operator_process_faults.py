"""Faults injected with real processes, on a worker rollout A -> B of a rendered graph.

The cluster is the realistic one (etcd, kube-apiserver, kube-controller-manager, scheduler,
KWOK), started for this module alone since the tests kill its processes. The companion
controller runs as real ``python -m dyn_gitops_operator`` processes with leader election.
Generation B's pods are held Pending (a scheduling gate) and released by the test, so the
fault always lands mid-rollout: one B pod serving, A drained to 2 of 4.

Every scenario checks that the rollout completes (the DGD successful, its observedGeneration
current, only the target generation left), that the serving worker pods never fall below
the floor (desired 4 - maxUnavailable 1), counted through a watch that survives the fault
(support.faults: resumed from its resourceVersion, or re-listed with the gap counted
conservatively), and that nothing was lost or done twice (no generation created twice, one
ReplicaSet per Deployment, no ReplicaSet or pod left without its owner, every worker
Deployment owned by the DGD).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from dyn_gitops_operator.kube import DEPLOYMENTS, DGDS, LEASES, LWS, Kube
from dyn_gitops_operator.testing import gitops_apply
from support.cluster import gated, hold, realistic_cluster, release
from support.controlplane import install_crds
from support.faults import (
    KCM_FLAGS,
    Controller,
    Faults,
    Ledger,
    ReadyPods,
    controllers,
    until,
)
from support.graphs import WORKER, worker_name
from support.graphs import rollout_graph as graph
from support.rendering import render

pytestmark = [pytest.mark.realk8s, pytest.mark.faults]

DESIRED = 4
#: desired - maxUnavailable (25 % of 4, the default)
FLOOR = 3
SELECTOR = f"nvidia.com/dynamo-component={WORKER}"
#: generous: the machine is loaded and a fault costs a lease duration or a re-list
SETTLE = 240


@dataclass
class Env:
    faults: Faults
    api: Any
    k: Kube
    ns: str
    kubeconfig: Path
    logdir: Path


@pytest.fixture(scope="module")
def fault_cluster(cluster_binaries: tuple[dict[str, Path], Path]) -> Iterator[Any]:
    """Never the session's cluster: these tests kill its processes."""
    from support.thirdparty_crds import thirdparty_crds

    from dyn_gitops.crds import crds as dynamo_crds

    with realistic_cluster(*cluster_binaries, kcm_flags=KCM_FLAGS) as c:
        install_crds(c.client(), dynamo_crds() + thirdparty_crds())
        c.faults = Faults(c.plane)
        try:
            yield c
        finally:
            c.faults.close()


@pytest.fixture
def env(fault_cluster: Any, tmp_path: Path) -> Iterator[Env]:
    import uuid

    from kubernetes import client as k8s

    api = fault_cluster.client()
    ns = f"f-{uuid.uuid4().hex[:8]}"
    k8s.CoreV1Api(api).create_namespace({"metadata": {"name": ns}})
    yield Env(fault_cluster.faults, api, Kube(api), ns, fault_cluster.kubeconfig, tmp_path)
    until(lambda: k8s.CoreV1Api(api).delete_namespace(ns) or True, 120, "namespace deleted")


# ---------------------------------------------------------------------------- the rollout
def generation(env: Env, image: str) -> tuple[list[dict[str, Any]], str]:
    """The rendered graph with this generation's worker pods held; (objects, its name)."""
    objs = render([graph(image, DESIRED)], env.ns)
    name = worker_name(objs)
    return hold(objs, names=lambda n: n == name), name


def workers(env: Env) -> dict[str, dict[str, Any]]:
    return {
        d["metadata"]["name"]: d
        for d in env.k.list(DEPLOYMENTS, env.ns, label_selector=SELECTOR)[0]
    }


def spec(dep: dict[str, Any] | None) -> int:
    return -1 if dep is None else int(dep["spec"]["replicas"])


def avail(dep: dict[str, Any] | None) -> int:
    return -1 if dep is None else int((dep.get("status") or {}).get("availableReplicas") or 0)


def dgd(env: Env) -> dict[str, Any]:
    return env.k.get(DGDS, env.ns, "roll")


def settled(env: Env, name: str) -> bool:
    """Only ``name`` left, fully available, the DGD successful for its current spec."""
    deps, live = workers(env), dgd(env)
    st = live.get("status") or {}
    return (
        list(deps) == [name]
        and avail(deps[name]) == DESIRED
        and st.get("state") == "successful"
        and st.get("observedGeneration") == live["metadata"]["generation"]
        and st["components"][WORKER]["componentNames"] == [name]
    )


def settle(env: Env, name: str, what: str, ctls: list[Controller]) -> None:
    """Release held pods as they come until :func:`settled`."""
    until(
        lambda: release(env.api, env.ns, SELECTOR) is not None and settled(env, name),
        SETTLE,
        what,
        lambda: diagnosis(env, ctls),
    )


def diagnosis(env: Env, ctls: list[Controller]) -> str:
    try:
        sizes = {n: (spec(d), avail(d)) for n, d in workers(env).items()}
        st = dgd(env).get("status")
    except Exception as exc:
        sizes, st = {}, f"unreadable: {exc}"
    return f"workers {sizes}, status {st}\n" + "\n".join(c.text() for c in ctls)


def midway(env: Env, old: str, new: str, ctls: list[Controller]) -> None:
    """One B pod released and serving, A drained to 2 of 4, B's other pods Pending."""

    def one_released() -> bool:
        mine = [p for p in gated(env.api, env.ns, SELECTOR) if p.metadata.name.startswith(new)]
        if mine and not any(
            p.metadata.name.startswith(new) and not p.spec.scheduling_gates for p in _pods(env)
        ):
            release(env.api, env.ns, SELECTOR, count=1, only=lambda n: n.startswith(new))
        return True

    until(
        lambda: one_released() and avail((d := workers(env)).get(new)) == 1 and spec(d[old]) == 2,
        SETTLE,
        "one B pod serving, A drained to 2",
        lambda: diagnosis(env, ctls),
    )


def _pods(env: Env) -> list[Any]:
    from support.cluster import pods

    return pods(env.api, env.ns, SELECTOR)


def rollout(env: Env, ctls: list[Controller], fault: Callable[[str, str], str | None]) -> str:
    """A settled, then A -> B with ``fault(old, new)`` mid-rollout; returns the generation
    the fault expects to end on (B, or A after a revert) once settled, after every check."""
    first, old = generation(env, "img:1")
    second, new = generation(env, "img:2")
    assert old != new
    with Ledger(env.api, env.ns) as ledger:
        gitops_apply(env.k, first)
        settle(env, old, "generation A serving 4", ctls)
        with ReadyPods(env.api, env.ns, SELECTOR) as pods:
            gitops_apply(env.k, second)
            midway(env, old, new, ctls)
            target = fault(old, new) or new
            settle(env, target, f"the rollout to {target} completed", ctls)
            until(lambda: pods.count() == DESIRED, 60, "the pod watch caught up")
            pods.check()
        nothing_lost_or_twice(env, ledger, target)
    low = pods.low_points(FLOOR)
    assert not low, f"below the floor of {FLOOR} serving workers: {low}\n{pods.history}"
    return target


def nothing_lost_or_twice(env: Env, ledger: Ledger, target: str) -> None:
    from kubernetes import client

    ledger.check()
    assert not ledger.duplicates("roll-"), (
        f"a generation created twice: {ledger.duplicates('roll-')}"
    )
    twice = {d: rs for d, rs in ledger.replicasets_per_deployment().items() if len(rs) > 1}
    assert not twice, f"a Deployment's template rewritten (two ReplicaSets): {twice}"
    owner = dgd(env)["metadata"]["uid"]
    (dep,) = workers(env).values()
    assert owner in {r["uid"] for r in dep["metadata"].get("ownerReferences") or []}, dep

    apps, core = client.AppsV1Api(env.api), client.CoreV1Api(env.api)

    def orphans() -> list[str]:
        """ReplicaSets and worker pods whose controller is not a live object (the garbage
        collector removes a deleted generation's soon: waited for)."""
        deps = {d.metadata.uid for d in apps.list_namespaced_deployment(env.ns).items}
        rss = apps.list_namespaced_replica_set(env.ns).items
        out = [
            f"ReplicaSet {r.metadata.name}"
            for r in rss
            if not {o.uid for o in r.metadata.owner_references or [] if o.controller} & deps
        ]
        live_rs = {r.metadata.uid for r in rss}
        out += [
            f"Pod {p.metadata.name}"
            for p in core.list_namespaced_pod(env.ns, label_selector=SELECTOR).items
            if not {o.uid for o in p.metadata.owner_references or [] if o.controller} & live_rs
            or not p.metadata.name.startswith(target + "-")
        ]
        return out

    until(lambda: not orphans(), 120, "no orphaned ReplicaSet or pod", lambda: str(orphans()))


def lease(env: Env, ctls: list[Controller]) -> dict[str, Any]:
    return dict(env.k.get(LEASES, env.ns, ctls[0].lease)["spec"])


# ---------------------------------------------------------------------------- scenarios
def test_apiserver_restarted_mid_rollout(env: Env) -> None:
    with controllers(env.kubeconfig, env.ns, env.logdir) as ctls:
        rollout(env, ctls, lambda old, new: env.faults.restart_apiserver())


def test_etcd_restarted_mid_rollout(env: Env) -> None:
    with controllers(env.kubeconfig, env.ns, env.logdir) as ctls:
        rollout(env, ctls, lambda old, new: env.faults.restart_etcd())


def test_apiserver_stalled_mid_rollout(env: Env) -> None:
    with controllers(env.kubeconfig, env.ns, env.logdir) as ctls:
        rollout(env, ctls, lambda old, new: env.faults.stall_apiserver())


def test_leader_killed_mid_rollout_standby_takes_over(env: Env) -> None:
    with controllers(env.kubeconfig, env.ns, env.logdir, ("ctl-0", "ctl-1")) as ctls:
        leader, standby = ctls
        until(lambda: standby.metrics(), 120, "the standby serving /metrics", standby.text)
        before: dict[str, Any] = {}

        def kill_leader(old: str, new: str) -> None:
            assert leader.leading() and not standby.leading()
            before.update(lease(env, ctls), standby_writes=standby.writes())
            leader.kill()
            before["killed"] = time.time()

        rollout(env, ctls, kill_leader)
        after = lease(env, ctls)
        assert before["standby_writes"] == 0, "the standby wrote while the leader led"
        assert standby.leading() and standby.writes() > 0
        assert after["leaseTransitions"] == before["leaseTransitions"] + 1, (before, after)
        assert after["holderIdentity"] != before["holderIdentity"]
        (took,) = [r for r in standby.records() if r["msg"] == "became leader"]
        # the standby led (so wrote) only after the leader's last write: its death
        assert took["ts"] > before["killed"], (took, before)


def test_git_revert_mid_rollout_with_controller_restart(env: Env) -> None:
    with controllers(env.kubeconfig, env.ns, env.logdir) as ctls:
        first, _ = generation(env, "img:1")

        def revert_and_restart(old: str, new: str) -> str:
            ctls[0].kill()
            gitops_apply(env.k, first)  # git revert: generation A again
            ctls[0].start()
            return old

        assert rollout(env, ctls, revert_and_restart) == worker_name(first)


# ---------------------------------------------------------------------------- the weaknesses
def test_restarted_process_takes_its_own_lease_back(env: Env) -> None:
    """A pod's controller restarted (SIGKILL, same pod name): it holds the lease again
    under the same identity, with no transition (so without waiting the lease out)."""
    with controllers(env.kubeconfig, env.ns, env.logdir) as ctls:
        held = lease(env, ctls)
        ctls[0].kill()
        ctls[0].start()
        until(ctls[0].leading, 120, "the restarted process leading", ctls[0].text)
        again = lease(env, ctls)
        assert again["holderIdentity"] == held["holderIdentity"], (held, again)
        assert again["leaseTransitions"] == held["leaseTransitions"], (held, again)


def test_process_started_during_apiserver_outage_watches_leaderworkersets(env: Env) -> None:
    """The controller restarted while kube-apiserver is down (its pod restarted during the
    outage) must watch LeaderWorkerSets once the API server is back: an LWS status change
    makes the multinode graph successful."""
    with controllers(env.kubeconfig, env.ns, env.logdir) as ctls:
        ctl = ctls[0]
        with env.faults.apiserver_down():
            ctl.kill()
            ctl.start()
            until(
                lambda: any(
                    k.startswith("dyn_gitops_controller_watch_errors_total{") for k in ctl.metrics()
                ),
                120,
                "the restarted process failing to reach the API server",
                ctl.text,
            )
        until(ctl.leading, 120, "the restarted process leading", ctl.text)
        objs = render([multinode("img:1")], env.ns, lws=True)
        gitops_apply(env.k, objs, kinds=("Deployment", "DynamoGraphDeployment", "LeaderWorkerSet"))
        until(
            lambda: lws_ready(env) and (dgd(env).get("status") or {}).get("state") == "successful",
            SETTLE,
            "the multinode graph successful once its LeaderWorkerSet is ready",
            lambda: (
                diagnosis(env, ctls)
                + f"\nLWS series: {[k for k in ctl.metrics() if 'leaderworkersets' in k]}"
            ),
        )


def multinode(image: str) -> dict[str, Any]:
    g = graph(image, 1)
    worker = g["spec"]["services"][WORKER]
    worker["multinode"] = {"nodeCount": 2}
    worker["extraPodSpec"]["mainContainer"]["args"] = ["--model", "m"]
    return g


def lws_ready(env: Env) -> bool:
    """The LeaderWorkerSet controller's part (none runs here): every set reports its groups
    ready, once."""
    for lws in env.k.list(LWS, env.ns, label_selector=SELECTOR)[0]:
        n = int(lws["spec"].get("replicas", 1))
        status = {
            "replicas": n,
            "readyReplicas": n,
            "updatedReplicas": n,
            "conditions": [{"type": "Available", "status": "True"}],
        }
        if lws.get("status") != status:
            env.k.request(
                "PUT", LWS.path(env.ns, lws["metadata"]["name"]), None, {**lws, "status": status}
            )
    return True


def test_etcd_outage_is_logged_while_it_lasts(env: Env) -> None:
    """etcd down: the leader's lease renewals (and reads) fail or hang behind a live
    kube-apiserver; the controller says so in its log while the outage lasts."""
    with controllers(env.kubeconfig, env.ns, env.logdir) as ctls:
        start = time.time()
        env.faults.restart_etcd(down=15)
        end = time.time()
        until(ctls[0].leading, 120, "leading again after the outage", ctls[0].text)
        during = [
            r
            for r in ctls[0].records()
            if start <= r["ts"] <= end and r["level"] in ("warning", "error")
        ]
        assert during, f"no warning in the log during the etcd outage:\n{ctls[0].text()}"
