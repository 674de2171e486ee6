"""The rollout pains Dynamo users report (``../shared/spec/upstream-1.5.md`` section 2.1 and
2.3), each as a test on the realistic cluster: real ReplicaSets and pods (kube-controller-
manager, scheduler, KWOK), the new generation's pods held by a scheduling gate and released
one by one. Every ready pod is followed through a pod watch, so a gap of zero (or below the
floor) cannot slip between two polls.

Each scenario also runs against a baseline (``support.operator_replay``: the Dynamo 1.5
operator's documented rollout state machine or status in place of ours; or the behaviour a
fix replaced) and must fail there, for the pain: the check that observes the pain raises
``support.pain.Pain`` and the baseline is ``support.pain.baseline`` (a strict xfail raising
only ``Pain``), so a timeout, a set-up error or a dead watch fails the baseline instead of
satisfying it, and a baseline that stops showing its pain fails the suite.
"""

from __future__ import annotations

import functools
import time
from typing import Any

import pytest
from dyn_gitops_operator.kube import DEPLOYMENTS, DGDS, Kube
from dyn_gitops_operator.reconcilers import Reconciler, default_chain
from dyn_gitops_operator.reconcilers.rollout import RolloutReconciler
from dyn_gitops_operator.reconcilers.status import StatusReconciler
from dyn_gitops_operator.resources import PODCLIQUES
from dyn_gitops_operator.testing import (
    gitops_apply,
    grove_status,
    running,
    settings_for_tests,
    wait_for,
)
from support.cluster import gated, hold, is_ready, release
from support.cluster import pods as list_pods
from support.graphs import WORKER, worker_name
from support.graphs import rollout_graph as graph
from support.operator_replay import CURRENT, OperatorRolloutReplay, PrematureReadyStatus
from support.pain import baseline, check
from support.podwatch import ReadyPods
from support.rendering import render

#: how long a wait may take on a loaded 2-core machine (each ends as soon as its state is seen)
SLOW = 180
pytestmark = pytest.mark.realk8s

SELECTOR = f"nvidia.com/dynamo-component={WORKER}"
OURS = "dyn-gitops"
REPLAY = "operator-1.5-replay"
PREMATURE = "operator-premature-ready"
IMPLS = [OURS, pytest.param(REPLAY, marks=baseline("the operator's behaviour has the pain"))]


def chain(impl: str) -> list[Reconciler]:
    out = default_chain()
    if impl == REPLAY:
        out = [OperatorRolloutReplay() if isinstance(r, RolloutReconciler) else r for r in out]
    if impl == PREMATURE:
        out = [PrematureReadyStatus() if isinstance(r, StatusReconciler) else r for r in out]
    return out


def git(objs: list[dict[str, Any]], impl: str) -> list[dict[str, Any]]:
    """What Git holds. For the replay: the DGD as a user writes it for the operator, without
    the operator's ``current-worker-hash-v2`` annotation (the renderer emits it for parity;
    Git's value would override the replay's own state)."""
    if impl != REPLAY:
        return objs
    out = []
    for obj in objs:
        if obj["kind"] == "DynamoGraphDeployment":
            ann = dict(obj["metadata"].get("annotations") or {})
            ann.pop(CURRENT, None)
            obj = {**obj, "metadata": {**obj["metadata"], "annotations": ann}}
        out.append(obj)
    return out


def workers(k: Kube, ns: str) -> dict[str, dict[str, Any]]:
    items, _ = k.list(DEPLOYMENTS, ns, label_selector=SELECTOR)
    return {d["metadata"]["name"]: d for d in items}


def status(k: Kube, ns: str) -> dict[str, Any]:
    return dict(k.get(DGDS, ns, "roll").get("status") or {})


def spec(dep: dict[str, Any] | None) -> int:
    return -1 if dep is None else int(dep["spec"].get("replicas", 1))


def avail(dep: dict[str, Any] | None) -> int:
    return 0 if dep is None else int((dep.get("status") or {}).get("availableReplicas") or 0)


def settled(k: Kube, ns: str, name: str, desired: int) -> bool:
    deps = workers(k, ns)
    st = status(k, ns)
    return (
        list(deps) == [name]
        and avail(deps[name]) == desired
        and st.get("state") == "successful"
        and st.get("observedGeneration") == k.get(DGDS, ns, "roll")["metadata"]["generation"]
    )


def settle(k: Kube, ns: str, name: str, desired: int, what: str, api: Any = None) -> None:
    """Wait for :func:`settled` (releasing held pods as they come when ``api`` is given)."""
    try:
        wait_for(
            lambda: (
                (api is None or release(api, ns, SELECTOR) is not None)
                and settled(k, ns, name, desired)
            ),
            120,
            what,
            interval=0.2,
        )
    except AssertionError as exc:
        raise AssertionError(f"{exc}: {sizes(k, ns)}, status {status(k, ns)}") from None


def held(objs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The rendered graph with its worker generation's pods held (Pending) until released."""
    name = worker_name(objs)
    return hold(objs, names=lambda n: n == name)


def sizes(k: Kube, ns: str) -> dict[str, tuple[int, int]]:
    """{worker Deployment: (spec, available)} (for failure messages)."""
    return {n: (spec(d), avail(d)) for n, d in workers(k, ns).items()}


def replace(k: Kube, ns: str, dgd: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """PUT Git's object with the live resourceVersion, nothing else (as ``kubectl replace``
    and helm's ``--force`` do; a custom resource refuses a PUT without one). Returns the
    object before and right after."""
    from dyn_gitops_operator.errors import ConflictError

    for _ in range(50):
        live = k.get(DGDS, ns, "roll")
        meta = {**dgd["metadata"], "namespace": ns}
        meta["resourceVersion"] = live["metadata"]["resourceVersion"]
        try:
            return live, k.update(DGDS, {**dgd, "metadata": meta})
        except ConflictError:
            continue  # the controller wrote the status meanwhile
    raise AssertionError("the DGD kept changing: no replace possible")


def midway(k: Kube, api: Any, ns: str, old: str, new: str) -> None:
    """A -> B with B's pods held: one B pod released and ready, the old generation drained
    to 2 of 4 (the floor is 3: 2 old + 1 new ready), B's other pods still Pending."""

    def one_released() -> bool:
        """Release one new pod unless one already is (a released pod can be replaced by
        a held one when the new generation is re-sized before it runs)."""
        mine = [p for p in list_pods(api, ns, SELECTOR) if p.metadata.name.startswith(new)]
        if mine and all(p.spec.scheduling_gates for p in mine):
            release(api, ns, SELECTOR, count=1, only=lambda n: n.startswith(new))
        return True

    wait_for(lambda: gated(api, ns, SELECTOR), SLOW, "a Pending pod of the new generation")
    try:
        wait_for(
            lambda: (
                one_released()
                and avail((d := workers(k, ns)).get(new)) == 1
                and spec(d.get(old)) == 2
            ),
            90,
            "one new pod ready, the old generation at 2",
        )
    except AssertionError as exc:
        from support.cluster import pods

        seen = [
            (p.metadata.name, p.status.phase, bool(p.spec.scheduling_gates), p.spec.node_name)
            for p in pods(api, ns, SELECTOR)
        ]
        raise AssertionError(f"{exc}: {sizes(k, ns)}, pods {seen}") from None


def no_pain(pods: ReadyPods, generation: str, floor: int) -> None:
    """The pains of a rollout seen through the pod watch: a pod of ``generation`` deleted
    while it served and the floor needed it (its deletion left fewer than ``floor`` ready),
    and, over the whole watch, fewer than ``floor`` ready workers."""
    for pod, left in pods.deleted_while_serving:
        check(
            not pod.startswith(generation + "-") or left >= floor,
            f"serving pod {pod} deleted while the floor needed it: {left} ready workers left "
            f"(floor {floor}); deleted while serving: {pods.deleted_while_serving}",
        )
    fewest = pods.fewest()
    check(fewest >= floor, f"{fewest} ready workers, below the floor of {floor}: {pods.history}")


def reverted(k: Kube, ns: str, old: str, new: str) -> str | None:
    """How the controller took the revert: ``deleted`` (B deleted at once), ``rolling``
    (A, current again, surges back)."""
    deps = workers(k, ns)
    if new not in deps:
        return "deleted"
    return "rolling" if spec(deps.get(old)) > 2 else None


@pytest.mark.parametrize("impl", IMPLS)
def test_git_revert_mid_rollout_never_deletes_serving_workers_or_breaks_the_floor(
    cluster_k: Kube, cluster_kube: Any, cluster_namespace: str, impl: str
) -> None:
    """ai-dynamo/dynamo#13620: generation A -> B, then back to A before B is ready. The
    operator takes the revert for a stuck rollout and deletes B's Deployment at once, its
    serving pod with it, whatever A serves. Ours drains B within the budget: B's serving pod
    goes only once A's pods serve in its place, and never below the floor counted on the
    pods Ready now (A's status, just scaled down and back up, can still report pods it
    lost). A's refill pods are held too (released only after the controller acted on the
    revert and, if it deleted B, B's pods are gone), so a gap cannot be hidden by A
    refilling faster than B's pods are deleted: deterministic for both."""
    k, api, ns = cluster_k, cluster_kube, cluster_namespace
    first = git(held(render([graph("img:1", 4)], ns)), impl)
    second = git(held(render([graph("img:2", 4)], ns)), impl)
    old, new = worker_name(first), worker_name(second)
    floor = 3  # desired 4 - maxUnavailable 1 (25 %)
    with running(settings_for_tests(ns), k, reconcilers=chain(impl)):
        gitops_apply(k, first)
        settle(k, ns, old, 4, "generation A serving 4", api)
        with ReadyPods(api, ns, SELECTOR) as pods:
            gitops_apply(k, second)
            midway(k, api, ns, old, new)
            gitops_apply(k, first)  # the revert: B never became ready
            how = wait_for(lambda: reverted(k, ns, old, new), SLOW, "the controller acting")
            if how == "deleted":  # B's pods go through the garbage collector
                wait_for(
                    lambda: not [n for n in pods.present() if n.startswith(new + "-")],
                    SLOW,
                    "generation B's pods gone (seen by the pod watch)",
                )
            time.sleep(3)  # no timing assertion: passes in which a drain of B would show
            no_pain(pods, new, floor)  # while A's refill is held
            settle(k, ns, old, 4, "back on generation A, B gone", api)
            wait_for(lambda: pods.count() == 4, 30, "the pod watch caught up")
            no_pain(pods, new, floor)


@pytest.mark.parametrize("impl", IMPLS)
def test_replacing_the_dgd_mid_rollout_loses_no_state_and_orphans_nothing(
    cluster_k: Kube, cluster_kube: Any, cluster_namespace: str, impl: str
) -> None:
    """ai-dynamo/dynamo#13495: the GitOps tool replaces the DGD (PUT of Git's object, as
    ``Replace=true`` / ``helm upgrade --force`` do) mid-rollout. Every annotation not in Git
    is gone; the status (a subresource) stays. The operator keeps its active generation in
    an annotation: it re-initialises from the desired hash and deletes the old generation at
    once. Our state is in Git (the worker-hash stamp), the status and the workloads."""
    k, api, ns = cluster_k, cluster_kube, cluster_namespace
    first = git(render([graph("img:1", 4)], ns), impl)
    second = git(held(render([graph("img:2", 4)], ns)), impl)
    old, new = worker_name(first), worker_name(second)
    with running(settings_for_tests(ns), k, reconcilers=chain(impl)):
        gitops_apply(k, first)
        wait_for(lambda: settled(k, ns, old, 4), 120, "generation A serving 4")
        with ReadyPods(api, ns, SELECTOR) as pods:
            gitops_apply(k, second)
            midway(k, api, ns, old, new)
            started = wait_for(
                lambda: status(k, ns).get("rollingUpdate", {}).get("startTime"),
                30,
                "rollout start reported",
            )
            dgd = next(o for o in second if o["kind"] == "DynamoGraphDeployment")
            live, after = replace(k, ns, dgd)
            assert after["metadata"]["uid"] == live["metadata"]["uid"]
            assert set(after["metadata"].get("annotations") or {}) == set(
                dgd["metadata"].get("annotations") or {}
            )
            time.sleep(3)  # no timing assertion: the controller acts on the replace meanwhile
            settle(k, ns, new, 4, "generation B serving 4 (pods released as they come)", api)
            wait_for(lambda: pods.count() == 4, 30, "the pod watch caught up")
            no_pain(pods, old, 3)
            ru = status(k, ns)["rollingUpdate"]
            check(
                ru["phase"] == "Completed" and ru["startTime"] == started,
                f"the rollout's state lost by the replace: {ru}, started {started}",
            )
            left = list(workers(k, ns))
            check(left == [new], f"worker generations orphaned: {left}")


@pytest.mark.parametrize("impl", IMPLS)
def test_one_worker_with_max_unavailable_one_never_has_zero_ready_pods(
    cluster_k: Kube, cluster_kube: Any, cluster_namespace: str, impl: str
) -> None:
    """ai-dynamo/dynamo#13622's settings (maxUnavailable 1, maxSurge 0) on a one-replica
    worker, component path. The operator's arithmetic drains the old pod before the new one
    may start: no ready worker until the new pod is ready (held here for a while)."""
    k, api, ns = cluster_k, cluster_kube, cluster_namespace
    first = git(render([graph("img:1", 1, "0", "1")], ns), impl)
    second = git(held(render([graph("img:2", 1, "0", "1")], ns)), impl)
    old, new = worker_name(first), worker_name(second)
    with running(settings_for_tests(ns), k, reconcilers=chain(impl)):
        gitops_apply(k, first)
        wait_for(lambda: settled(k, ns, old, 1), 120, "generation A serving 1")
        with ReadyPods(api, ns, SELECTOR) as pods:
            gitops_apply(k, second)
            wait_for(lambda: gated(api, ns, SELECTOR), SLOW, "the new pod, Pending")
            # the controller's next passes (a gap would open here)
            wait_for(lambda: spec(workers(k, ns).get(old)) in (0, 1), 30)
            wait_for(
                lambda: status(k, ns).get("rollingUpdate", {}).get("phase") == "InProgress", 30
            )
            time.sleep(3)  # no timing assertion: the window in which a gap would show
            settle(k, ns, new, 1, "generation B serving 1, A deleted", api)
            wait_for(lambda: pods.count() == 1, 30, "the pod watch caught up")
            no_pain(pods, old, 1)


# ------------------------------------------------------------------ Ready gating (#3567)
@pytest.mark.parametrize(
    "impl",
    [
        OURS,
        pytest.param(
            PREMATURE, marks=baseline("the operator's Ready counts the old generation's pods")
        ),
    ],
)
def test_dgd_is_not_ready_before_the_new_generation_serves(
    cluster_k: Kube, cluster_kube: Any, cluster_namespace: str, impl: str
) -> None:
    """ai-dynamo/dynamo#3567 on the component path: Git changes the worker's image; until
    the new generation's pods serve, the DGD reports its new generation pending (Argo CD
    Progressing, Flux not Ready). Every status the API server stored is followed through a
    DGD watch, over two windows: no new pod serving (its first pod held), then one of two.
    The baseline (``PrematureReadyStatus``, the operator's merged component status) counts
    the old generation's available pods and reports the new generation successful at once."""
    from support.objwatch import DgdStates

    k, api, ns = cluster_k, cluster_kube, cluster_namespace
    first = render([graph("img:1", 2)], ns)
    second = held(render([graph("img:2", 2)], ns))
    old, new = worker_name(first), worker_name(second)

    def window(serving: int, generation: int) -> bool:
        mine = [p for p in gated(api, ns, SELECTOR) if p.metadata.name.startswith(new + "-")]
        return bool(
            mine
            and avail(workers(k, ns).get(new)) == serving
            and status(k, ns).get("observedGeneration") == generation
        )

    with running(settings_for_tests(ns), k, reconcilers=chain(impl)):
        gitops_apply(k, first)
        wait_for(lambda: settled(k, ns, old, 2), 120, "generation A serving 2")
        with DgdStates(k, ns, "roll") as states:
            gitops_apply(k, second)
            generation = int(k.get(DGDS, ns, "roll")["metadata"]["generation"])
            for serving in (0, 1):
                wait_for(
                    functools.partial(window, serving, generation),
                    90,
                    f"{serving} of 2 new pods serving, one held, the new generation reported",
                )
                time.sleep(3)  # no timing assertion: passes in which a premature Ready shows
                seen = states.until(k.get(DGDS, ns, "roll"))
                claims = [r for r in seen if r.serving_claimed(generation)]
                check(
                    not claims,
                    f"generation {generation} reported served while {serving} of its 2 pods "
                    f"served: {claims[:1]}",
                )
                release(api, ns, SELECTOR, count=1, only=lambda n: n.startswith(new + "-"))
            settle(k, ns, new, 2, "generation B serving 2, A gone", api)
            final = states.until(k.get(DGDS, ns, "roll"))[-1]
            assert final.serving_claimed(generation), final


def test_grove_graph_is_not_ready_before_grove_processed_the_new_spec(
    k: Kube, namespace: str
) -> None:
    """ai-dynamo/dynamo#3567 on the Grove path (bare API server; Grove simulated: no Grove
    controller here). Git changes the worker's image: until Grove has observed the new
    PodCliqueSet generation, its PodCliques still describe the old spec, fully ready and
    updated, and the operator (and the controller before this change) reported the graph
    ready. Ready again only once Grove observed it and the PodCliques are ready."""
    from dyn_gitops_operator.kube import PCSGS
    from support.grove_graph import APPLIED, PCSG, pcs_observed, ready_grove_graph, with_restart

    ready_grove_graph(k, namespace)
    with running(settings_for_tests(namespace), k):
        wait_for(lambda: gstate(k, namespace) == "successful", 30, "successful before")
        docs = with_restart("unused")
        del docs[0]["spec"]["restart"]
        worker = docs[0]["spec"]["services"]["VllmDecodeWorker"]
        worker["extraPodSpec"]["mainContainer"]["image"] += "-2"
        changed = render(docs, namespace, grove=True)
        # the PodCliqueSet before the DGD (an earlier sync wave): the controller does not
        # watch PodCliqueSets, so it learns of the new one when the DGD changes
        gitops_apply(k, changed, kinds=("PodCliqueSet",))
        gitops_apply(k, changed, kinds=APPLIED)
        st = wait_for(
            lambda: (s := gstatus(k, namespace)).get("observedGeneration") == 2 and s,
            30,
            "the new DGD generation observed",
        )
        assert st["state"] == "pending", st
        cond = next(c for c in st["conditions"] if c["type"] == "Ready")
        assert cond["status"] == "False"
        assert cond["reason"] == "updating"
        assert "vllm-agg: vllm-agg: spec not yet processed: generation=2" in cond["message"]
        # Grove observes the PCS and starts rolling the worker's scaling group
        pcs_observed(k, namespace)
        grove_status(k, PCSGS, namespace, PCSG, updatedReplicas=0)
        wait_for(lambda: "updated=0" in gcond(k, namespace)["message"], 30, "Grove's rollout shown")
        assert gstate(k, namespace) == "pending"
        grove_status(k, PCSGS, namespace, PCSG)
        wait_for(lambda: gstate(k, namespace) == "successful", 30, "ready once rolled")


def gstatus(k: Kube, ns: str) -> dict[str, Any]:
    return dict(k.get(DGDS, ns, "vllm-agg").get("status") or {})


def gstate(k: Kube, ns: str) -> str:
    return str(gstatus(k, ns).get("state"))


def gcond(k: Kube, ns: str) -> dict[str, Any]:
    return next(c for c in gstatus(k, ns)["conditions"] if c["type"] == "Ready")


# ------------------------------------------------------------------ zero ready on Grove
PRUNE = "gitops-prune"


@pytest.mark.parametrize(
    "impl",
    [
        OURS,
        pytest.param(PRUNE, marks=baseline("a prune at the switch has the pain")),
    ],
)
def test_moving_to_grove_never_leaves_zero_ready_workers(
    cluster_k: Kube, cluster_kube: Any, cluster_namespace: str, impl: str
) -> None:
    """ai-dynamo/dynamo#13622's property on the Grove path: a DGD re-rendered for Grove
    (Git switches the graph's workload provider) keeps a ready worker at every moment. Its
    managed worker Deployment (Prune=false, so the GitOps tool keeps it) serves until the
    worker's PodClique is ready; only then is it drained and deleted. Every worker pod of
    both sides is real and followed through one pod watch: the Deployment's (ReplicaSet,
    scheduler, KWOK) and the PodClique's.

    Simulated, because no Grove operator runs here (its image is not built by the test
    binaries): the Grove stand-in creates the PodCliques (``testing.grove_create``) and the
    worker clique's pods (named ``<podclique>-<i>``, with the clique's labels, held Pending
    by a scheduling gate until the test releases them), and writes each PodClique's status
    from its pods (``readyReplicas`` = pods Ready now). No operator replay here: the
    Dynamo operator has no hand-over from DCDs to Grove to replay (a DGD's path is fixed
    by the operator's Grove setting); the gap it would show is Grove's own RollingRecreate
    of a one-replica clique, which the controller prevents under OnDelete only
    (``test_one_replica_grove_worker_update_never_has_zero_ready_pods``). The baseline
    that must fail instead
    (``gitops-prune``): the GitOps tool prunes the old worker Deployment at the switch,
    as Argo CD or Flux do with an object no longer in Git that is not marked
    ``Prune=false`` (the renderer marks managed workers so that this does not happen).
    The baseline runs the same steps; the only check it can fail for is the zero-ready
    pod watch (its Deployment's pods gone while the Grove pods are held)."""
    from dyn_gitops_operator.testing import grove_create
    from support.cluster import GATE, is_ready
    from support.grove_graph import apply_graph
    from support.paths import SAMPLES

    k, api, ns = cluster_k, cluster_kube, cluster_namespace
    worker_sel = "nvidia.com/dynamo-component=VllmDecodeWorker"
    component = render(SAMPLES / "vllm-agg" / "input", ns)
    gitops_apply(k, component)
    deployment = next(
        o["metadata"]["name"]
        for o in component
        if o["kind"] == "Deployment" and o["metadata"]["name"].startswith("vllm-agg-vllmdecode")
    )

    def state() -> str:
        return str((k.get(DGDS, ns, "vllm-agg").get("status") or {}).get("state"))

    with running(settings_for_tests(ns), k):
        wait_for(lambda: state() == "successful", 90, "component path serving")
        serving = int(k.get(DEPLOYMENTS, ns, deployment)["spec"]["replicas"])
        with ReadyPods(api, ns, worker_sel) as watch:
            assert watch.count() == serving >= 1
            pcs = apply_graph(k, ns, "vllm-agg", SAMPLES / "vllm-agg" / "input", grove=True)
            created = grove_create(k, pcs)
            if impl == PRUNE:  # the GitOps tool's prune; its pods go through the GC
                k.delete(DEPLOYMENTS, ns, deployment)
                wait_for(
                    lambda: not [n for n in watch.present() if n.startswith(deployment + "-")],
                    SLOW,
                    "the pruned Deployment's pods gone (seen by the pod watch)",
                )
            clique = next(n for n in created if n.endswith("-vllmdecodeworker"))
            spec = next(
                c for c in pcs["spec"]["template"]["cliques"] if c["name"] == "vllmdecodeworker"
            )
            from kubernetes import client

            core = client.CoreV1Api(api)
            for i in range(int(spec["spec"]["replicas"])):
                body: dict[str, Any] = {
                    "metadata": {
                        "name": f"{clique}-{i}",
                        "labels": {**spec["labels"], "grove.io/podclique": clique},
                    },
                    "spec": {
                        "schedulingGates": [{"name": GATE}],
                        "containers": [{"name": "main", "image": "img"}],
                    },
                }
                core.create_namespaced_pod(ns, body)  # type: ignore[arg-type]

            def grove_step() -> int:
                """The stand-in: each PodClique's status from its pods (the frontend's
                clique has none here: reported ready)."""
                ready = sum(
                    is_ready(p) and not p.metadata.deletion_timestamp
                    for p in list_pods(api, ns, f"grove.io/podclique={clique}")
                )
                for name, res in created.items():
                    if name == clique:
                        grove_status(k, res, ns, name, readyReplicas=ready)
                    else:
                        grove_status(k, res, ns, name)
                return ready

            grove_step()

            def grove_pending() -> bool:
                st = k.get(DGDS, ns, "vllm-agg").get("status") or {}
                ready = next(c for c in st.get("conditions") or [] if c["type"] == "Ready")
                return st.get("state") == "pending" and "VllmDecodeWorker" in ready["message"]

            try:
                wait_for(grove_pending, SLOW, "the Grove graph observed, its worker not ready")
            except AssertionError as exc:
                raise AssertionError(
                    f"{exc}: {k.get(DGDS, ns, 'vllm-agg').get('status')}"
                ) from None
            time.sleep(2)  # no timing assertion: passes in which a drain would show
            fewest = watch.fewest()
            check(fewest >= 1, f"zero ready workers at some point: {watch.history}")
            assert spec_of(k, ns, deployment) == serving  # still serving
            # Grove's pods come up one by one; the Deployment goes only once all are ready
            want = int(spec["spec"]["replicas"])
            for n in range(1, want + 1):
                assert release(api, ns, f"grove.io/podclique={clique}", count=1)
                wait_for(functools.partial(lambda m: grove_step() >= m, n), SLOW, f"{n} ready")
                if n < want:  # Grove not ready yet: the old worker keeps all its pods
                    time.sleep(1)
                    assert spec_of(k, ns, deployment) == serving
            wait_for(
                lambda: (
                    grove_step() >= 0
                    and deployment not in {d["metadata"]["name"] for d in workers_of(k, ns)}
                ),
                90,
                "the old worker drained and deleted once Grove serves",
            )
            wait_for(lambda: state() == "successful", SLOW, "successful on Grove")
            wait_for(lambda: watch.count() == int(spec["spec"]["replicas"]), 30, "watch caught up")
            fewest = watch.fewest()
            check(fewest >= 1, f"zero ready workers at some point: {watch.history}")


def spec_of(k: Kube, ns: str, name: str) -> int:
    """spec.replicas; -1 when the Deployment is gone."""
    from dyn_gitops_operator.errors import NotFoundError

    try:
        return int(k.get(DEPLOYMENTS, ns, name)["spec"]["replicas"])
    except NotFoundError:
        return -1


def workers_of(k: Kube, ns: str) -> list[dict[str, Any]]:
    return k.list(DEPLOYMENTS, ns, label_selector="nvidia.com/dynamo-component=VllmDecodeWorker")[0]


# ------------------------------------------------- zero ready on Grove: a one-replica clique
GROVE_WORKER = "nvidia.com/dynamo-component=VllmDecodeWorker"
WORKER_CLIQUE = "vllm-agg-0-vllmdecodeworker"


def one_worker_on_grove(
    ns: str, image: str, strategy: str | None, safe_rollout: bool = True
) -> list[dict[str, Any]]:
    """vllm-agg on Grove with one worker replica, ``nvidia.com/grove-update-strategy`` when
    ``strategy`` is given (else no annotation), and the setting grove-safe-rollout."""
    import yaml
    from support.paths import SAMPLES

    text = (SAMPLES / "vllm-agg" / "input" / "vllm-agg.yaml").read_text()
    docs = [d for d in yaml.safe_load_all(text) if d]
    if strategy is not None:
        docs[0]["metadata"]["annotations"] = {"nvidia.com/grove-update-strategy": strategy}
    else:
        assert not docs[0]["metadata"].get("annotations"), "the sample annotates the DGD"
    worker = docs[0]["spec"]["services"]["VllmDecodeWorker"]
    worker["replicas"] = 1
    worker["extraPodSpec"]["mainContainer"]["image"] = image
    return render(docs, ns, grove=True, grove_safe_rollout=safe_rollout)


PAIN = baseline("Grove's RollingRecreate has the pain")


@pytest.mark.parametrize(
    ("strategy", "safe_rollout", "rendered"),
    [
        pytest.param("OnDelete", True, "OnDelete", id="OnDelete"),
        pytest.param(None, True, "OnDelete", id="unannotated"),
        pytest.param(None, False, None, id="unannotated-safe-rollout-off", marks=PAIN),
        pytest.param("RollingRecreate", True, "RollingRecreate", id="RollingRecreate", marks=PAIN),
    ],
)
def test_one_replica_grove_worker_update_never_has_zero_ready_pods(
    cluster_k: Kube,
    cluster_kube: Any,
    cluster_namespace: str,
    strategy: str | None,
    safe_rollout: bool,
    rendered: str | None,
) -> None:
    """ai-dynamo/dynamo#13622 on Grove: Git changes the image of a one-replica worker
    clique. Under ``OnDelete`` the controller replaces the pod with a surge through the
    PodClique's /scale (one more pod, wait until the new-template pod is Ready, back to
    one: Grove's scale-in takes the old-template pod), so a worker pod is Ready at every
    moment (one pod watch over every worker pod); it ends with the new-template pod only,
    and the DGD is successful only once that pod serves (checked on every sample). The new
    pod is held Pending for a while. ``OnDelete`` comes from the DGD's
    ``nvidia.com/grove-update-strategy``, or, on a DGD without it, from the setting
    grove-safe-rollout (on by default): the platform engineer gets the safe rollout
    without annotating anything.

    Grove is the stand-in (``support.grove_standin``: real pods, Grove's RollingRecreate,
    OnDelete and scale-in order). ``RollingRecreate`` (Grove's default, the Dynamo
    operator's too: the setting off, or the annotation asking for it) must fail: Grove
    deletes the only, ready, old pod first (ready 1 >= minAvailable 1) and the replacement
    is held, so the watch sees zero ready pods; deterministic in the stand-in."""
    from support.grove_graph import APPLIED
    from support.grove_standin import TEMPLATE_HASH, GroveStandIn

    k, api, ns = cluster_k, cluster_kube, cluster_namespace
    first = one_worker_on_grove(ns, "img:1", strategy, safe_rollout)
    second = one_worker_on_grove(ns, "img:2", strategy, safe_rollout)
    for objs in (first, second):  # what the renderer chose, and what the controller reads
        pcs = next(o for o in objs if o["kind"] == "PodCliqueSet")
        assert (pcs["spec"].get("updateStrategy") or {}).get("type") == rendered
        dgd = next(o for o in objs if o["kind"] == "DynamoGraphDeployment")
        stamp = dgd["metadata"]["annotations"].get("dyn-gitops.io/grove-update-strategy")
        assert stamp == rendered
    stand_in = GroveStandIn(k, api, ns, "vllm-agg")

    def dgd_status() -> dict[str, Any]:
        dgd = k.get(DGDS, ns, "vllm-agg")
        st = dict(dgd.get("status") or {})
        st["current"] = st.get("observedGeneration") == dgd["metadata"]["generation"]
        return st

    def worker_pods() -> list[tuple[str, str, bool]]:
        return sorted(
            (p.metadata.name, (p.metadata.labels or {}).get(TEMPLATE_HASH, ""), is_ready(p))
            for p in list_pods(api, ns, GROVE_WORKER)
            if not p.metadata.deletion_timestamp
        )

    def wanted_hash() -> str:
        clique = k.get(PODCLIQUES, ns, WORKER_CLIQUE)
        return str(clique["status"]["updateProgress"]["podTemplateHash"])

    successes: list[list[tuple[str, str, bool]]] = []

    def probe() -> tuple[dict[str, Any], list[tuple[str, str, bool]]]:
        """One stand-in pass, then the DGD status, then the worker pods (read after the
        status: a pod that served when the status was read still does)."""
        stand_in.step()
        st = dgd_status()
        now = worker_pods()
        if st["current"] and st.get("state") == "successful":
            successes.append(now)
        return st, now

    with running(settings_for_tests(ns), k):
        gitops_apply(k, first, kinds=APPLIED)
        wait_for(
            lambda: (
                (s := probe())[0]["current"]
                and s[0].get("state") == "successful"
                and len(s[1]) == 1
            ),
            120,
            "one worker pod serving, graph successful",
            interval=0.3,
        )
        old_hash = worker_pods()[0][1]
        with ReadyPods(api, ns, GROVE_WORKER) as watch:
            assert watch.count() == 1
            stand_in.hold = True  # every pod Grove creates from now on starts Pending
            successes.clear()
            gitops_apply(k, second, kinds=APPLIED)
            wait_for(
                lambda: (
                    (s := probe())[0]["current"]
                    and any(h != old_hash and not ready for _, h, ready in s[1])
                ),
                90,
                "a new-template worker pod, held Pending",
                interval=0.3,
            )
            new_hash = wanted_hash()
            assert new_hash != old_hash
            end = time.monotonic() + 4  # no timing assertion: passes in which a gap shows
            while time.monotonic() < end:
                probe()
                time.sleep(0.2)
            check(not successes, f"successful before the new pod served: {successes}")
            stand_in.hold = False
            try:
                wait_for(
                    lambda: (
                        release(api, ns, GROVE_WORKER) is not None
                        and (s := probe())[0]["current"]
                        and s[0].get("state") == "successful"
                        and [(h, r) for _, h, r in s[1]] == [(new_hash, True)]
                    ),
                    120,
                    "only the new-template worker pod, serving; graph successful",
                    interval=0.3,
                )
            except AssertionError as exc:
                raise AssertionError(f"{exc}: {worker_pods()}, {dgd_status()}") from None
            wait_for(lambda: watch.count() == 1, 30, "the pod watch caught up")
            fewest = watch.fewest()
            check(fewest >= 1, f"zero ready workers at some point: {watch.history}")
            # the surge: old and new pod served side by side before the old one went
            assert max(n for _, _, n in watch.history) == 2, watch.history
        for seen in successes:  # successful only while the new pod alone serves
            check(
                [(h, r) for _, h, r in seen] == [(new_hash, True)],
                f"successful while not only the new pod served: {successes}",
            )
        assert int(k.get(PODCLIQUES, ns, WORKER_CLIQUE)["spec"]["replicas"]) == 1
