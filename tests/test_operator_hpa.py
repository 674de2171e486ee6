"""Replicas ownership with a real HPA (issue 29, point 6), on the realistic cluster.

kube-controller-manager's own HPA controller scales a worker through its scaling adapter's
``/scale``, from resource metrics that a metrics-server stand-in serves
(``support.metrics_standin``: ``metrics.k8s.io/v1beta1`` PodMetrics through a CRD, a load
shared by the worker's Running pods); beside it the Dynamo 1.5 Planner (replayed request for
request, ``support.replicas.planner_scale``) scales the graph's other worker, and Argo CD
or Flux re-syncs the rendered objects with the configuration we ship (``gitops_resync``:
Argo CD's ``ignoreDifferences`` on the adapter's replicas with ``RespectIgnoreDifferences``
and ``ApplyOutOfSyncOnly``, Flux's ``ssa: IfNotPresent``). Every
value of every replicas field is recorded through a watch (``support.fieldlog``), so a
value that was reset and restored between two reads still shows.

The ownership contract (docs/operator.md, *Replica ownership*): the HPA owns the adapter's
``spec.replicas`` once it scaled (Git only created it), the controller the Deployments'
``spec.replicas``, the Planner the DGD ``replicas`` of the worker without an adapter, Git the
DGD ``replicas`` of the worker with one. One autoscaler per service: the 1.5 Planner pointed
at the HPA's worker cannot reach its adapter (``/scale`` of the v1beta1 adapter is 404, our
CRD serves v1alpha1), falls back to patching the DGD, and that has no effect: the adapter
sizes the worker, and Git's value is back in the DGD at the next sync.
"""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from dyn_gitops_operator import FIELD_MANAGER
from dyn_gitops_operator.kube import DEPLOYMENTS, DGDS, DGDSAS, Kube
from dyn_gitops_operator.resources import Resource
from dyn_gitops_operator.testing import (
    gitops_apply,
    running,
    settings_for_tests,
)
from support.controlplane import install_crds
from support.fieldlog import FieldLog
from support.metrics_standin import POD_METRICS_CRD, PodMetricsStandIn
from support.pain import baseline, check
from support.rendering import render
from support.replicas import (
    PLANNER_MANAGER,
    component,
    component_key,
    gitops_resync,
    manager_of,
    owners,
    planner_scale,
)

from dyn_gitops import keys

pytestmark = pytest.mark.realk8s

Obj = dict[str, Any]
HPAS = Resource("autoscaling", "v2", "horizontalpodautoscalers", "HorizontalPodAutoscaler")
#: the field manager of kube-controller-manager's writes (its User-Agent up to the first "/")
KCM_MANAGER = "kube-controller-manager"
DGD = "hpa-graph"
ADAPTER = f"{DGD}-decode"
#: memory per replica the HPA aims at (an AverageValue target): a load of n * TARGET asks
#: for n replicas; divisible by 1..6, so every share is exact
TARGET = 60 * 2**20
#: Argo CD re-syncs, one per round; the Planner's decisions for its worker, one per round
RESYNCS = 5
#: a per-pod share just under the target: a load of n * NUDGE asks for n replicas from any
#: count of pods (from fewer, ceil(n * 58 / 60) = n; at n, within the HPA's 10 % tolerance),
#: and once the HPA reports it, it has run after everything before the change
NUDGE = 58 * 2**20
PLANNER = [2, 3, 2, 3, 2]
IMAGE = "nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.1.0"


def _worker(sub: str, adapter: bool) -> Obj:
    args = ["-m", "dynamo.vllm", "--model", "Qwen/Qwen3-0.6B"]
    service: Obj = {
        "componentType": "worker",
        "subComponentType": sub,
        "replicas": 1,
        "resources": {"limits": {"gpu": "1"}},
        "extraPodSpec": {
            "mainContainer": {
                "image": IMAGE,
                "command": ["python3"],
                "args": args + (["--is-prefill-worker"] if sub == "prefill" else []),
            }
        },
    }
    if adapter:
        service["scalingAdapter"] = {"enabled": True}
    return service


def graph() -> Obj:
    """A disaggregated graph with a Planner: decode behind a scaling adapter (the HPA's),
    prefill without one (the Planner's)."""
    main = {"image": IMAGE}
    return {
        "apiVersion": "nvidia.com/v1alpha1",
        "kind": "DynamoGraphDeployment",
        "metadata": {"name": DGD},
        "spec": {
            "services": {
                "Frontend": {
                    "componentType": "frontend",
                    "replicas": 1,
                    "extraPodSpec": {"mainContainer": main},
                },
                "Planner": {
                    "componentType": "planner",
                    "replicas": 1,
                    "extraPodSpec": {
                        "mainContainer": {**main, "command": ["python3", "-m", "planner_sla"]}
                    },
                },
                "decode": _worker("decode", adapter=True),
                "prefill": _worker("prefill", adapter=False),
            }
        },
    }


def hpa(namespace: str) -> Obj:
    """The user's HPA (in Git beside the DGD), on the adapter; upstream's default behaviour
    (scale-down stabilized over 5 minutes, so a passing dip never scales down)."""
    return {
        "apiVersion": HPAS.api_version,
        "kind": HPAS.kind,
        "metadata": {"name": ADAPTER, "namespace": namespace},
        "spec": {
            "scaleTargetRef": {
                "apiVersion": DGDSAS.api_version,
                "kind": DGDSAS.kind,
                "name": ADAPTER,
            },
            "minReplicas": 1,
            "maxReplicas": 8,
            "metrics": [
                {
                    "type": "Resource",
                    "resource": {
                        "name": "memory",
                        "target": {"type": "AverageValue", "averageValue": str(TARGET)},
                    },
                }
            ],
        },
    }


@dataclass
class Scene:
    k: Kube
    namespace: str
    tool: str
    objs: list[Obj]
    metrics: PodMetricsStandIn
    adapter: FieldLog
    decode: FieldLog
    prefill: FieldLog
    hpa: FieldLog


def _worker_name(objs: list[Obj], service: str) -> str:
    (name,) = [
        o["metadata"]["name"]
        for o in objs
        if o["kind"] == "Deployment"
        and o["metadata"]["labels"].get(keys.LABEL_COMPONENT) == service
    ]
    return str(name)


@contextlib.contextmanager
def scene(k: Kube, namespace: str, tool: str = "argocd") -> Iterator[Scene]:
    """The graph synced by ``tool`` (Argo CD or Flux), its HPA, the controller, the metrics
    stand-in (a load of 3 replicas) and a field log of every replicas field, until the HPA
    scaled to 3."""
    install_crds(k.api, [POD_METRICS_CRD])
    objs = render(graph(), namespace)
    gitops_resync(k, objs, tool)
    Kube(k.api, k.timeout, field_manager=manager_of(tool)).apply(HPAS, hpa(namespace))
    decode, prefill = _worker_name(objs, "decode"), _worker_name(objs, "prefill")
    selector = f"{keys.LABEL_COMPONENT}=decode,{keys.LABEL_GRAPH_NAME}={DGD}"
    side = _own_pool(k)  # the watches and the stand-in do not take the controller's connections
    with contextlib.ExitStack() as stack:
        enter = stack.enter_context
        enter(running(settings_for_tests(namespace), k))
        s = Scene(
            k,
            namespace,
            tool,
            objs,
            enter(PodMetricsStandIn(side, namespace, selector, 3 * TARGET)),
            enter(FieldLog(side, DGDSAS, namespace, ADAPTER)),
            enter(FieldLog(side, DEPLOYMENTS, namespace, decode)),
            enter(FieldLog(side, DEPLOYMENTS, namespace, prefill)),
            enter(FieldLog(side, HPAS, namespace, ADAPTER, read=hpa_state)),
        )
        settle(s, 3, TARGET)
        yield s
        for log in (s.adapter, s.decode, s.prefill, s.hpa):
            log.check()
        s.metrics.check()


def _own_pool(k: Kube) -> Kube:
    """A client on the same cluster with a connection pool of its own."""
    import copy

    from kubernetes.client import ApiClient

    config = copy.copy(k.api.configuration)
    config.connection_pool_maxsize = 16
    return Kube(ApiClient(config), k.timeout)


def hpa_state(obj: Obj) -> tuple[Any, ...]:
    """What the HPA last decided (from, to), the per-pod average it read (bytes) and its
    conditions' reasons."""
    from kubernetes.utils import parse_quantity

    st = obj.get("status") or {}
    metrics = st.get("currentMetrics") or [{}]
    avg = ((metrics[0].get("resource") or {}).get("current") or {}).get("averageValue")
    return (
        st.get("currentReplicas"),
        st.get("desiredReplicas"),
        None if avg is None else int(parse_quantity(avg)),
        tuple(sorted(f"{c['type']}={c.get('reason')}" for c in st.get("conditions") or [])),
    )


def settle(s: Scene, replicas: int, per_pod: int) -> None:
    """Wait until the HPA, run after everything before this call, holds ``replicas`` from a
    per-pod average of ``per_pod`` bytes, and the worker's pods are all available."""
    s.hpa.wait_until(
        lambda h: hpa_state(h)[:3] == (replicas, replicas, per_pod),
        f"the HPA at {replicas} from {per_pod} bytes a pod",
    )
    s.decode.wait_until(
        lambda d: (
            d["spec"].get("replicas") == replicas
            and (d.get("status") or {}).get("availableReplicas") == replicas
        ),
        f"decode at {replicas}, all available",
    )


def report(s: Scene) -> None:
    """Every value recorded (``pytest -s`` shows them)."""
    for log in (s.adapter, s.decode, s.prefill, s.hpa):
        print(f"{log.what}: {log.values}")


def increasing(values: list[Any]) -> bool:
    return all(a < b for a, b in itertools.pairwise(values))


def check_owners(s: Scene) -> None:
    """One owner per replicas field, the contract's."""
    k, ns = s.k, s.namespace
    adapter = k.get(DGDSAS, ns, ADAPTER)
    assert owners(adapter, "f:spec", "f:replicas") == {KCM_MANAGER}, adapter["metadata"]
    (entry,) = [
        m
        for m in adapter["metadata"]["managedFields"]
        if "f:replicas" in (m.get("fieldsV1") or {}).get("f:spec", {})
    ]
    assert (entry["operation"], entry.get("subresource")) == ("Update", "scale")
    for log in (s.decode, s.prefill):
        dep = k.get(DEPLOYMENTS, ns, log.name)
        assert owners(dep, "f:spec", "f:replicas") == {FIELD_MANAGER}, log.name
    dgd = k.get(DGDS, ns, DGD)
    for service, owner in (("prefill", PLANNER_MANAGER), ("decode", manager_of(s.tool))):
        path = ("f:spec", "f:components", component_key(service), "f:replicas")
        assert owners(dgd, *path) == {owner}, service
    assert component(dgd, "decode")["replicas"] == 1  # Git's


@pytest.mark.parametrize("tool", ["argocd", "flux"])
def test_a_real_hpa_owns_the_adapter_beside_the_planner_and_resyncs(
    cluster_k: Kube, cluster_namespace: str, tool: str
) -> None:
    """The HPA scales decode to 3, then (more load) to 5; meanwhile the Planner scales
    prefill five times (and once, misdirected, decode through the DGD) and Argo CD re-syncs
    (or Flux) after each decision. Decode's adapter and Deployment only ever increase (1, 3, ..., 5:
    no value comes back after a re-sync), prefill's Deployment takes exactly the Planner's
    values, and after every re-sync each replicas field has the one owner the contract
    names."""
    with scene(cluster_k, cluster_namespace, tool) as s:
        for round_, prefill_n in enumerate(PLANNER[:RESYNCS]):
            if round_ == 2:
                s.metrics.set_load(5 * TARGET)
            planner_scale(s.k.api, s.namespace, DGD, "prefill", prefill_n)
            if round_ == 1:  # the 1.5 Planner on the HPA's worker: a DGD patch, no effect
                planner_scale(s.k.api, s.namespace, DGD, "decode", 2)
                dgd = s.k.get(DGDS, s.namespace, DGD)
                assert component(dgd, "decode")["replicas"] == 2  # until the re-sync
                path = ("f:spec", "f:components", component_key("decode"), "f:replicas")
                assert owners(dgd, *path) == {PLANNER_MANAGER}
            s.prefill.wait_until(
                lambda d, n=prefill_n: d["spec"].get("replicas") == n,  # type: ignore[misc]
                f"prefill at the Planner's {prefill_n}",
            )
            gitops_resync(s.k, s.objs, tool)
            check_owners(s)
        settle(s, 5, TARGET)
        # once the HPA reports a nudged load, it has run after the last re-sync and kept 5
        s.metrics.set_load(5 * NUDGE)
        settle(s, 5, NUDGE)
        check_owners(s)
        report(s)
        for log in (s.adapter, s.decode):
            assert log.values[0] == 1 and 3 in log.values and log.values[-1] == 5, log.values
            assert increasing(log.values), f"{log.what} went back: {log.values}"
        assert s.prefill.values == [1, *PLANNER[:RESYNCS]], s.prefill.values


@baseline(
    "a re-sync that applies the adapter's replicas from Git (Argo CD without the "
    "ignoreDifferences we ship, Flux without ssa: IfNotPresent) resets the HPA's count on "
    "every sync and the HPA takes it back: the worker oscillates (kedacore/keda#5572)"
)
def test_baseline_a_resync_of_the_adapters_replicas_fights_the_hpa(
    cluster_k: Kube, cluster_namespace: str
) -> None:
    """The same graph and HPA, one re-sync that applies every rendered object as it is
    (``testing.gitops_apply``, forced): the adapter's ``spec.replicas`` goes back to Git's
    1, the Deployment follows, and the HPA scales it up again."""
    with scene(cluster_k, cluster_namespace) as s:
        gitops_apply(s.k, s.objs)
        s.metrics.set_load(3 * NUDGE)
        settle(s, 3, NUDGE)
        report(s)
        check(
            increasing(s.adapter.values) and increasing(s.decode.values),
            f"the worker went back and forth after one re-sync: {s.decode.values} "
            f"(adapter {s.adapter.values})",
        )
