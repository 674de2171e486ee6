"""The controller's ceiling on replica counts read from Git, on the fake API server (the
real-server scenario: test_operator_scaling.py): a workload's desired-replicas or
seed-replicas annotation, a scaling adapter's or a DGD component's replicas above the
ceiling (setting max-replicas), negative or not an integer is not applied; the workload
keeps its replicas, the DGD reads failed with the reason, one log line per change, and
the key is not retried (no crash loop, no hot loop)."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest
from dyn_gitops_operator import counts
from dyn_gitops_operator import objects as o
from dyn_gitops_operator.resources import DEPLOYMENTS, DGDS, PODCLIQUES
from dyn_gitops_operator.settings import DEFAULT_MAX_REPLICAS, MAX_REPLICAS_ENV, OperatorSettings
from support.fakecluster import GROVE_KINDS, FakeCluster
from support.graphs import component_patch
from support.rendering import render

from dyn_gitops import keys
from dyn_gitops.settings import BY_NAME

SAMPLES = Path(__file__).resolve().parent.parent / "samples"
DESIRED = keys.ANN_DESIRED_REPLICAS
SETTING = f"(its setting max-replicas: --max-replicas, {MAX_REPLICAS_ENV})"
KEPT = "its replicas are left as they are"

Obj = dict[str, Any]


def ready(status: Obj) -> Obj:
    return next(c for c in status.get("conditions") or [] if c["type"] == "Ready")


def above(obj: str, where: str, found: str, ceiling: int = DEFAULT_MAX_REPLICAS) -> str:
    return (
        f"{obj}: {where} is {found}, more than the {ceiling} replicas the controller "
        f"applies {SETTING}; {KEPT}"
    )


def refused(c: FakeCluster, dgd: str) -> tuple[str, str, str, str]:
    st = c.status(dgd)
    cond = ready(st)
    return st["state"], cond["status"], cond["reason"], cond["message"]


def annotate(c: FakeCluster, name: str, value: str) -> None:
    """The GitOps tool applies a workload whose desired-replicas says ``value``."""
    c.gitops.patch(DEPLOYMENTS, c.ns, name, {"metadata": {"annotations": {DESIRED: value}}})


@pytest.fixture
def agg() -> tuple[FakeCluster, str]:
    """vllm-agg applied, sized (worker 2 from its annotation) and successful."""
    c = FakeCluster()
    c.apply(render(SAMPLES / "vllm-agg" / "input", c.ns))
    c.converge("vllm-agg")
    worker = next(n for n in c.deployments() if n.startswith("vllm-agg-vllmdecodeworker-"))
    c.set_status("vllm-agg-frontend")
    c.set_status(worker)
    c.converge("vllm-agg")
    assert (c.replicas(worker), c.status("vllm-agg")["state"]) == (2, "successful")
    return c, worker


# ------------------------------------------------------------------ the annotation
@pytest.mark.parametrize(
    ("value", "reason", "found"),
    [
        ("20000", counts.ABOVE_CEILING, "20000, more than the 10000 replicas"),
        (str(10**12), counts.ABOVE_CEILING, "1000000000000, more than"),
        ("9" * 5000, counts.ABOVE_CEILING, "999999999999... (5000 digits), more than"),
        ("-5", counts.INVALID, "-5, a negative count"),
        ("abc", counts.INVALID, "a text of 3 characters, not an integer"),
        ("2.5", counts.INVALID, "a text of 3 characters, not an integer"),
    ],
    ids=["20000", "10^12", "5000-digits", "negative", "text", "fraction"],
)
def test_a_desired_replicas_annotation_out_of_bounds_is_not_applied(
    agg: tuple[FakeCluster, str], value: str, reason: str, found: str
) -> None:
    """main: scaled to 20000 / 10^12 / 0 (a negative read as 0); 5000 digits, text and a
    fraction silently fell back to the DGD's replicas with nothing reported."""
    c, worker = agg
    annotate(c, worker, value)
    c.converge("vllm-agg")
    assert c.replicas(worker) == 2, f"Deployment scaled to {c.replicas(worker)}"
    state, status, got_reason, message = refused(c, "vllm-agg")
    assert (state, status, got_reason) == ("failed", "False", reason)
    assert message.startswith(
        f"Replicas not applied: Deployment {c.ns}/{worker}: annotation {DESIRED} is {found}"
    )
    assert message.endswith(KEPT) and len(message) < 400
    # a permanent input error: no requeue asked, nothing written again on the next passes
    before = c.writes()
    assert c.reconcile("vllm-agg") is None and c.reconcile("vllm-agg") is None
    assert c.writes() == before
    # Git fixes it: applied, and the graph reports on its workloads again
    annotate(c, worker, "3")
    c.converge("vllm-agg")
    assert c.replicas(worker) == 3
    assert ready(c.status("vllm-agg"))["reason"] == "some_resources_are_not_ready"


def test_the_exact_condition_names_object_annotation_value_ceiling_and_setting(
    agg: tuple[FakeCluster, str],
) -> None:
    c, worker = agg
    annotate(c, worker, "20000")
    c.converge("vllm-agg")
    assert refused(c, "vllm-agg") == (
        "failed",
        "False",
        "ReplicasAboveCeiling",
        "Replicas not applied: "
        + above(f"Deployment {c.ns}/{worker}", f"annotation {DESIRED}", "20000"),
    )


def test_the_ceiling_is_a_setting() -> None:
    """max-replicas 3: the sample's 2 is applied, 4 is not (main: no such setting)."""
    c = FakeCluster(max_replicas=3)
    c.apply(render(SAMPLES / "vllm-agg" / "input", c.ns))
    c.converge("vllm-agg")
    worker = next(n for n in c.deployments() if n.startswith("vllm-agg-vllmdecodeworker-"))
    assert c.replicas(worker) == 2
    annotate(c, worker, "4")
    c.converge("vllm-agg")
    assert c.replicas(worker) == 2, f"Deployment scaled to {c.replicas(worker)}"
    assert refused(c, "vllm-agg")[3] == "Replicas not applied: " + above(
        f"Deployment {c.ns}/{worker}", f"annotation {DESIRED}", "4", ceiling=3
    )


def test_a_refusal_is_logged_once_per_change(
    agg: tuple[FakeCluster, str], caplog: pytest.LogCaptureFixture
) -> None:
    """main: nothing logged (and 20000 applied)."""
    c, worker = agg

    def lines(level: int) -> list[str]:
        return [
            str(getattr(r, "error", r.getMessage()))
            for r in caplog.records
            if r.name == counts.__name__ and r.levelno == level
        ]

    caplog.set_level(logging.INFO, logger=counts.__name__)
    annotate(c, worker, "20000")
    for _ in range(3):  # the status write's event, a resync, another event: once
        c.converge("vllm-agg")
    assert lines(logging.WARNING) == [
        above(f"Deployment {c.ns}/{worker}", f"annotation {DESIRED}", "20000")
    ]
    annotate(c, worker, "30000")  # a new value: logged again
    c.converge("vllm-agg")
    c.converge("vllm-agg")
    assert len(lines(logging.WARNING)) == 2 and "30000" in lines(logging.WARNING)[1]
    annotate(c, worker, "2")
    c.converge("vllm-agg")
    c.converge("vllm-agg")
    assert len(lines(logging.WARNING)) == 2
    assert [r.getMessage() for r in caplog.records if r.levelno == logging.INFO] == [
        "replica counts accepted again"
    ]


# ------------------------------------------------------------------ scaling adapters
def test_an_adapter_above_the_ceiling_scales_nothing() -> None:
    """main: the decode worker and the frontend scaled to 20000, the adapter's status
    published 20000 (what an HPA reads as the current count)."""
    c = FakeCluster()
    c.apply(render(SAMPLES / "scaling-adapter" / "input", c.ns))
    c.converge("sglang-disagg")
    decode = next(n for n in c.deployments() if n.startswith("sglang-disagg-decode-"))
    assert (c.replicas(decode), c.replicas("sglang-disagg-frontend")) == (2, 1)
    c.hpa_scale("sglang-disagg-decode", 20000)
    c.hpa_scale("sglang-disagg-frontend", 20000)
    c.converge("sglang-disagg")
    assert c.replicas(decode) == 2, f"Deployment scaled to {c.replicas(decode)}"
    assert c.replicas("sglang-disagg-frontend") == 1
    assert c.adapter("sglang-disagg-decode")["status"]["replicas"] == 2
    kind = "DynamoGraphDeploymentScalingAdapter"
    assert refused(c, "sglang-disagg") == (
        "failed",
        "False",
        "ReplicasAboveCeiling",
        "Replicas not applied: "
        + "; ".join(
            above(f"{kind} {c.ns}/sglang-disagg-{svc}", "spec.replicas", "20000")
            for svc in ("decode", "frontend")
        ),
    )
    c.hpa_scale("sglang-disagg-decode", 4)
    c.hpa_scale("sglang-disagg-frontend", 3)
    c.converge("sglang-disagg")
    assert (c.replicas(decode), c.replicas("sglang-disagg-frontend")) == (4, 3)
    assert c.status("sglang-disagg")["state"] != "failed"


# ------------------------------------------------------------------ the DGD's replicas
def planner(c: FakeCluster, seed: str | None = None) -> dict[str, str]:
    """The Planner sample applied (its workers' Deployments carry Git's seed, or ``seed``);
    service -> worker Deployment."""
    objs = render(SAMPLES / "planner" / "input", c.ns)
    workers = {}
    for obj in objs:
        labels = obj["metadata"].get("labels") or {}
        if obj["kind"] == "Deployment" and keys.LABEL_WORKER_HASH in labels:
            workers[labels[keys.LABEL_COMPONENT]] = obj["metadata"]["name"]
            if seed is not None:
                obj["metadata"]["annotations"][keys.ANN_SEED_REPLICAS] = seed
    c.apply(objs)
    c.converge("vllm-disagg-planner")
    return workers


def test_a_seed_above_the_ceiling_is_not_written_into_the_dgd() -> None:
    """main: the controller wrote replicas 20000 into the DGD (and sized the workers)."""
    c = FakeCluster()
    workers = planner(c, seed="20000")
    comps = {x["name"]: x for x in c.dgd("vllm-disagg-planner")["spec"]["components"]}
    assert all("replicas" not in comps[s] for s in workers), "seed 20000 written into the DGD"
    assert all(c.replicas(name) == 1 for name in workers.values())
    message = refused(c, "vllm-disagg-planner")[3]
    for service, name in sorted(workers.items()):
        where = f"annotation {keys.ANN_SEED_REPLICAS}"
        assert above(f"Deployment {c.ns}/{name}", where, "20000") in message, service


def test_a_dgd_replicas_above_the_ceiling_is_not_applied() -> None:
    """The Planner (or Git) writes 20000 into the DGD; main: the worker scaled to 20000."""
    c = FakeCluster()
    workers = planner(c)
    decode = workers["VllmDecodeWorker"]
    assert c.replicas(decode) == 1
    dgd = c.dgd("vllm-disagg-planner")
    patch = component_patch(dgd, "VllmDecodeWorker", replicas=20000)
    c.gitops.patch(DGDS, c.ns, "vllm-disagg-planner", patch)
    c.converge("vllm-disagg-planner")
    assert c.replicas(decode) == 1, f"Deployment scaled to {c.replicas(decode)}"
    assert refused(c, "vllm-disagg-planner")[2:] == (
        "ReplicasAboveCeiling",
        "Replicas not applied: "
        + above(
            f"DynamoGraphDeployment {c.ns}/vllm-disagg-planner",
            "spec.components[VllmDecodeWorker].replicas",
            "20000",
        ),
    )


def test_a_count_the_controller_does_not_apply_is_not_refused() -> None:
    """Managed replicas off: Git sizes the worker (a runner may raise the renderer's
    max-replicas above the controller's); the DGD's count is only compared against, so the
    graph is not failed for it."""
    c = FakeCluster()
    c.apply(render(SAMPLES / "managed-replicas-off" / "input", c.ns))
    dgd = c.dgd("vllm-agg")
    patch = component_patch(dgd, "VllmDecodeWorker", replicas=20000)
    c.gitops.patch(DGDS, c.ns, "vllm-agg", patch)
    c.converge("vllm-agg")
    assert c.status("vllm-agg")["state"] == "pending"
    assert ready(c.status("vllm-agg"))["reason"] == "some_resources_are_not_ready"


def test_a_grove_clique_is_not_scaled_above_the_ceiling() -> None:
    """main: the PodClique scaled to 20000 through /scale."""
    c = FakeCluster()
    objs = render(SAMPLES / "scaling-adapter" / "input", c.ns, grove=True)
    c.apply(objs, kinds=GROVE_KINDS)
    (pcs,) = [x for x in objs if x["kind"] == "PodCliqueSet"]
    for name, res in c.grove_create(pcs).items():
        c.grove_status(res, name)
    c.converge("sglang-disagg")
    dgd = c.dgd("sglang-disagg")
    c.gitops.patch(DGDS, c.ns, "sglang-disagg", component_patch(dgd, "prefill", replicas=20000))
    c.converge("sglang-disagg")
    prefill = c.kube.get(PODCLIQUES, c.ns, "sglang-disagg-0-prefill")["spec"]["replicas"]
    assert prefill == 1, f"PodClique scaled to {prefill}"
    assert refused(c, "sglang-disagg")[2] == "ReplicasAboveCeiling"


def test_garbage_in_a_dgd_is_no_crash_loop_and_other_graphs_are_served() -> None:
    """A DGD component's replicas that is not an integer (the fake API server has no
    schema; a foreign writer or a future CRD might) and a 5,000-digit nodeCount. main: the
    snapshot raised ValueError (int() of the text), the key retried with backoff forever."""
    c = FakeCluster()
    workers = planner(c)
    c.apply(render(SAMPLES / "vllm-agg" / "input", c.ns))
    dgd = c.dgd("vllm-disagg-planner")
    patch = component_patch(
        dgd, "VllmDecodeWorker", replicas="abc", multinode={"nodeCount": "9" * 5000}
    )
    c.gitops.patch(DGDS, c.ns, "vllm-disagg-planner", patch)
    c.sync()
    for key in ((c.ns, "vllm-disagg-planner"), (c.ns, "vllm-agg")):
        c.loop.process(key)
        assert c.loop.queue.retries(key) == 0, f"{key} retried with backoff"
    assert c.replicas(workers["VllmDecodeWorker"]) == 1
    assert refused(c, "vllm-disagg-planner")[2:] == (
        "InvalidReplicas",
        "Replicas not applied: DynamoGraphDeployment "
        f"{c.ns}/vllm-disagg-planner: spec.components[VllmDecodeWorker].replicas is a text of "
        f"3 characters, not an integer; {KEPT}",
    )
    agg_worker = next(n for n in c.deployments() if n.startswith("vllm-agg-vllmdecodeworker-"))
    assert c.replicas(agg_worker) == 2  # the other graph is served


# ------------------------------------------------------------------ units
@pytest.mark.parametrize(
    ("value", "want"),
    [
        (0, 0),
        ("0", 0),
        ("007", 7),
        (10, 10),
        (11, ("ReplicasAboveCeiling", "11")),
        ("11", ("ReplicasAboveCeiling", "11")),
        ("0" * 5000 + "9", 9),  # leading zeros do not count as digits
        ("1" * 4301, ("ReplicasAboveCeiling", "111111111111... (4301 digits)")),
        pytest.param(10**5000, ("ReplicasAboveCeiling", "a number of 16610 bits"), id="10^5000"),
        (-1, ("InvalidReplicas", "-1, a negative count")),
        ("-" + "1" * 5000, ("InvalidReplicas", "-111111111111... (5000 digits), a negative count")),
        ("+5", ("InvalidReplicas", "a text of 2 characters, not an integer")),
        (" 5", ("InvalidReplicas", "a text of 2 characters, not an integer")),
        ("\uff15", ("InvalidReplicas", "a text of 1 characters, not an integer")),
        (True, ("InvalidReplicas", "a bool, not an integer")),
        (2.0, ("InvalidReplicas", "a float, not an integer")),
        (None, ("InvalidReplicas", "a NoneType, not an integer")),
    ],
)
def test_check(value: Any, want: int | tuple[str, str]) -> None:
    assert counts.check(value, 10) == want


def test_many_refusals_make_one_bounded_message() -> None:
    items = [
        counts.Refusal(f"Deployment ns/w{i:02}", "spec.replicas", "-1", "x", 5) for i in range(25)
    ]
    reason, message = counts.condition(items)
    assert reason == "x" and message.endswith("; and 15 more") and "w10" not in message


@pytest.mark.parametrize("percent", ["1e999%", "nan%", "-inf%", "9" * 400 + "%"])
def test_a_non_finite_rolling_update_percentage_reads_as_the_default(percent: str) -> None:
    """A LeaderWorkerSet's budget comes from the DGD's annotations; main: OverflowError /
    ValueError from math.ceil, the key retried with backoff forever."""
    lws = {"kind": o.LWS_KIND, "spec": {}}
    ann = {keys.ANN_MAX_SURGE: percent, keys.ANN_MAX_UNAVAILABLE: percent}
    assert o.budget(lws, 4, ann) == o.budget(lws, 4, {})


def test_the_default_ceiling_is_the_renderers_max_replicas() -> None:
    assert OperatorSettings(identity="x").max_replicas == BY_NAME["max-replicas"].default


def test_the_ceiling_from_flag_and_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    from dyn_gitops_operator.__main__ import main, parser, settings_from

    def ceiling(*args: str) -> int:
        return settings_from(parser().parse_args(list(args))).max_replicas

    monkeypatch.delenv(MAX_REPLICAS_ENV, raising=False)
    assert ceiling() == DEFAULT_MAX_REPLICAS
    monkeypatch.setenv(MAX_REPLICAS_ENV, "500")
    assert ceiling() == 500
    assert ceiling("--max-replicas", "7") == 7  # the flag wins
    for bad in ("0", "-1", "abc", "9" * 5000, str(2**31)):
        monkeypatch.setenv(MAX_REPLICAS_ENV, bad)
        assert main([]) == 2, bad
    monkeypatch.delenv(MAX_REPLICAS_ENV)
    assert main(["--max-replicas", "0"]) == 2
