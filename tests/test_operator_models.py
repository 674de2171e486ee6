"""DynamoModel (issue 15): the companion controller loads a LoRA adapter into every worker of
its base model, and unloads it when the model is deleted, against the realistic cluster
(real kube-apiserver, kube-controller-manager's EndpointSlice controller, scheduler, KWOK
pods) with every worker pod backed by a real HTTP server on its loopback pod IP
(``support/loraworkers.py``).

The inputs are the upstream example pair: ``lora-model.yaml`` (the DynamoModel, applied as
written) and ``agg_lora.yaml`` (rendered: its ``dynamo-model-<hash>`` headless Service and
the worker Service, both labelled with the base model's hash). The worker pods carry the
rendered worker's pod labels but run in a plain Deployment (the graph controller is not
under test here).
"""

from __future__ import annotations

import copy
import itertools
import time
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
import yaml
from dyn_gitops_operator.errors import NotFoundError
from dyn_gitops_operator.kube import Kube
from dyn_gitops_operator.resources import DEPLOYMENTS, DYNAMO_MODELS, Resource
from dyn_gitops_operator.settings import ModelSettings
from dyn_gitops_operator.testing import running, settings_for_tests, wait_for
from support.controlplane import free_port
from support.loraworkers import LoopbackWorkers
from support.paths import CONFORMANCE
from support.rendering import render

from dyn_gitops import keys

pytestmark = pytest.mark.realk8s

LORA_MODEL = "examples__backends__vllm__deploy__lora__lora-model.yaml"
AGG_LORA = "examples__backends__vllm__deploy__lora__agg_lora.yaml"
SERVICES = Resource("", "v1", "services", "Service")
WAIT = 120


def _example(name: str) -> Path:
    return Path(CONFORMANCE) / name


def model_settings(port: int, **kw: Any) -> ModelSettings:
    base: dict[str, Any] = {
        "port": port,
        "request_timeout": 2.0,
        "total_timeout": 6.0,
        "retry_base": 0.5,
        "retry_max": 4.0,
    }
    base.update(kw)
    return ModelSettings(**base)


class Setup:
    """The rendered Services, the worker Deployment and the DynamoModel of one test."""

    def __init__(self, k: Kube, namespace: str, render: Any) -> None:
        self.k = k
        self.ns = namespace
        objs = render(_example(AGG_LORA), runtime_version_admission="lenient")
        self.services = [
            o
            for o in objs
            if o["kind"] == "Service"
            and keys.LABEL_BASE_MODEL_HASH in (o["metadata"].get("labels") or {})
        ]
        (worker,) = [
            o
            for o in objs
            if o["kind"] == "Deployment"
            and keys.LABEL_BASE_MODEL_HASH in o["spec"]["template"]["metadata"]["labels"]
        ]
        self.pod_labels = dict(worker["spec"]["template"]["metadata"]["labels"])
        self.hash = self.pod_labels[keys.LABEL_BASE_MODEL_HASH]
        self.model = yaml.safe_load(_example(LORA_MODEL).read_text())
        self.name = self.model["metadata"]["name"]
        self.lora = self.model["spec"]["modelName"]

    @property
    def selector(self) -> str:
        return f"{keys.LABEL_BASE_MODEL_HASH}={self.hash}"

    def apply_services(self) -> None:
        for svc in self.services:
            obj = copy.deepcopy(svc)
            obj["metadata"]["namespace"] = self.ns
            self.k.create(SERVICES, obj)

    def apply_workers(self, replicas: int) -> None:
        self.k.create(
            DEPLOYMENTS,
            {
                "apiVersion": "apps/v1",
                "kind": "Deployment",
                "metadata": {"name": "lora-worker", "namespace": self.ns},
                "spec": {
                    "replicas": replicas,
                    "selector": {"matchLabels": {keys.LABEL_BASE_MODEL_HASH: self.hash}},
                    "template": {
                        "metadata": {"labels": self.pod_labels},
                        "spec": {
                            "terminationGracePeriodSeconds": 0,
                            "containers": [{"name": "main", "image": "vllm-runtime:1.5.1"}],
                        },
                    },
                },
            },
        )

    def scale(self, replicas: int) -> None:
        self.k.patch(DEPLOYMENTS, self.ns, "lora-worker", {"spec": {"replicas": replicas}})

    def apply_model(self) -> None:
        obj = copy.deepcopy(self.model)
        obj["metadata"]["namespace"] = self.ns
        self.k.create(DYNAMO_MODELS, obj)

    def get_model(self) -> dict[str, Any]:
        return self.k.get(DYNAMO_MODELS, self.ns, self.name)

    def status(self) -> dict[str, Any]:
        return self.get_model().get("status") or {}

    def condition(self, ctype: str) -> dict[str, Any]:
        conds = {c["type"]: c for c in self.status().get("conditions") or []}
        return conds.get(ctype) or {}

    def gone(self) -> bool:
        try:
            self.get_model()
        except NotFoundError:
            return True
        return False


def ready_pods(api: Any, namespace: str, selector: str) -> list[str]:
    from support.cluster import is_ready, pods

    return sorted(
        p.metadata.name
        for p in pods(api, namespace, selector)
        if is_ready(p) and not p.metadata.deletion_timestamp
    )


def fully_loaded(s: Setup, api: Any, n: int) -> bool:
    st = s.status()
    pods = ready_pods(api, s.ns, s.selector)
    return (
        len(pods) == n
        and st.get("totalEndpoints") == n
        and st.get("readyEndpoints") == n
        and sorted(e["podName"] for e in st.get("endpoints") or []) == pods
        and s.condition("EndpointsReady").get("status") == "True"
    )


@pytest.fixture
def setup(cluster_k: Kube, cluster_namespace: str, cluster_kube: Any) -> Setup:
    return Setup(cluster_k, cluster_namespace, render)


def _load_body(s: Setup) -> dict[str, Any]:
    return {"lora_name": s.lora, "source": {"uri": s.model["spec"]["source"]["uri"]}}


def test_loaded_on_every_ready_worker_then_on_new_and_replacement_pods(
    setup: Setup, cluster_k: Kube, cluster_kube: Any
) -> None:
    s, port = setup, free_port()
    s.apply_services()
    s.apply_workers(2)
    settings = settings_for_tests(s.ns, models=model_settings(port))
    with LoopbackWorkers(cluster_kube, s.ns, s.selector, port) as workers:
        s.apply_model()
        with running(settings, cluster_k) as mgr:
            wait_for(lambda: fully_loaded(s, cluster_kube, 2), WAIT, "adapter on both workers")
            model = s.get_model()
            assert keys.FINALIZER in model["metadata"]["finalizers"]
            assert s.condition("Ready")["status"] == "True"
            assert s.condition("ServicesFound")["status"] == "True"
            assert s.condition("ServicesFound")["message"] == "Found 2 service(s)"
            first = ready_pods(cluster_kube, s.ns, s.selector)
            for pod in first:
                w = workers.get(pod)
                assert w is not None
                posts = [r for r in w.calls("POST") if r.path == "/v1/loras"]
                assert posts and all(r.body == _load_body(s) for r in posts)
                address = f"http://{w.ip}:{port}"
                assert {"address": address, "podName": pod, "ready": True} in s.status()[
                    "endpoints"
                ]

            # a new pod gets the adapter
            s.scale(3)
            wait_for(lambda: fully_loaded(s, cluster_kube, 3), WAIT, "adapter on the new pod")
            (new,) = set(ready_pods(cluster_kube, s.ns, s.selector)) - set(first)
            assert workers.get(new) is not None and workers.get(new).calls("POST")  # type: ignore[union-attr]

            # a replaced pod: the replacement gets it too
            from kubernetes import client

            deleted_at = time.monotonic()
            client.CoreV1Api(cluster_kube).delete_namespaced_pod(first[0], s.ns)
            wait_for(
                lambda: (
                    first[0] not in ready_pods(cluster_kube, s.ns, s.selector)
                    and fully_loaded(s, cluster_kube, 3)
                ),
                WAIT,
                "adapter on the replacement pod",
            )
            (replacement,) = set(ready_pods(cluster_kube, s.ns, s.selector)) - {new, *first}
            # (KWOK may give it the deleted pod's IP: only what came after the deletion)
            w = wait_for(lambda: workers.get(replacement), WAIT, "the replacement's server")
            assert [r for r in w.calls("POST") if r.at > deleted_at]
            # a worker that loaded it is not called again while it stays ready
            assert len(workers.get(first[1]).calls("POST")) == 1  # type: ignore[union-attr]

            m = mgr.metrics
            labels = {"operation": "load", "result": "success"}
            assert m.value("dyn_gitops_controller_lora_requests_total", labels) >= 4
            ep = {"namespace": s.ns, "model": s.name}
            assert m.value("dyn_gitops_controller_model_endpoints", {**ep, "state": "ready"}) == 3
            assert m.value("dyn_gitops_controller_model_endpoints", {**ep, "state": "total"}) == 3


def test_deleting_the_model_unloads_the_adapter_and_releases_the_finalizer(
    setup: Setup, cluster_k: Kube, cluster_kube: Any
) -> None:
    s, port = setup, free_port()
    s.apply_services()
    s.apply_workers(2)
    settings = settings_for_tests(s.ns, models=model_settings(port))
    with LoopbackWorkers(cluster_kube, s.ns, s.selector, port) as workers:
        s.apply_model()
        with running(settings, cluster_k) as mgr:
            wait_for(lambda: fully_loaded(s, cluster_kube, 2), WAIT, "adapter on both workers")
            pods = ready_pods(cluster_kube, s.ns, s.selector)
            cluster_k.delete(DYNAMO_MODELS, s.ns, s.name)
            wait_for(s.gone, WAIT, "the DynamoModel to be deleted (finalizer released)")
            for pod in pods:
                deletes = workers.get(pod).calls("DELETE")  # type: ignore[union-attr]
                assert [r.path for r in deletes] == [f"/v1/loras/{quote(s.lora, safe='')}"]
            labels = {"operation": "unload", "result": "success"}
            assert mgr.metrics.value("dyn_gitops_controller_lora_requests_total", labels) == 2
            ep = {"namespace": s.ns, "model": s.name, "state": "total"}
            assert (
                mgr.metrics.registry.get_sample_value("dyn_gitops_controller_model_endpoints", ep)
                is None
            )


def test_a_failing_worker_is_reported_and_retried_with_backoff_without_blocking_the_others(
    setup: Setup, cluster_k: Kube, cluster_kube: Any
) -> None:
    s, port = setup, free_port()
    s.apply_services()
    s.apply_workers(3)
    wait_for(lambda: len(ready_pods(cluster_kube, s.ns, s.selector)) == 3, WAIT, "3 pods")
    failing, hanging, healthy = ready_pods(cluster_kube, s.ns, s.selector)
    settings = settings_for_tests(s.ns, models=model_settings(port))
    with LoopbackWorkers(cluster_kube, s.ns, s.selector, port) as workers:
        workers.modes = {failing: "fail", hanging: "hang"}
        s.apply_model()
        with running(settings, cluster_k) as mgr:

            def reported() -> bool:
                st = s.status()
                ready = {e["podName"] for e in st.get("endpoints") or [] if e["ready"]}
                msg = s.condition("EndpointsReady").get("message", "")
                return (
                    ready == {healthy}
                    and st.get("totalEndpoints") == 3
                    and failing in msg
                    and "status 500" in msg
                    and hanging in msg
                )

            wait_for(reported, WAIT, "the healthy worker loaded, the two others reported")
            cond = s.condition("EndpointsReady")
            assert cond["status"] == "False" and cond["reason"] == "NotReady"
            assert s.condition("Ready")["status"] == "False"

            # retried with exponential backoff: each gap at least the scheduled delay
            wait_for(
                lambda: len(workers.get(failing).calls("POST")) >= 4,  # type: ignore[union-attr]
                WAIT,
                "retries of the failing worker",
            )
            times = [r.at for r in workers.get(failing).calls("POST")]  # type: ignore[union-attr]
            ms = settings.models
            for i, (a, b) in enumerate(itertools.pairwise(times)):
                floor = min(ms.retry_max, ms.retry_base * 2**i)
                assert b - a >= floor * 0.95, (i, b - a, floor)
            # the healthy worker was called once: nobody's retry re-calls it
            assert len(workers.get(healthy).calls("POST")) == 1  # type: ignore[union-attr]
            failures = {"operation": "load", "result": "failure"}
            assert mgr.metrics.value("dyn_gitops_controller_lora_requests_total", failures) >= 4

            # a new worker is loaded while the hanging one still hangs
            s.scale(4)
            wait_for(
                lambda: len([e for e in s.status().get("endpoints") or [] if e["ready"]]) == 2,
                WAIT,
                "the new worker loaded despite the hanging one",
            )

            # the failing and hanging workers recover: everything converges
            workers.modes = {}
            wait_for(lambda: fully_loaded(s, cluster_kube, 4), WAIT, "all four loaded")


def test_a_controller_restart_midway_loses_nothing(
    setup: Setup, cluster_k: Kube, cluster_kube: Any
) -> None:
    s, port = setup, free_port()
    s.apply_services()
    s.apply_workers(2)
    wait_for(lambda: len(ready_pods(cluster_kube, s.ns, s.selector)) == 2, WAIT, "2 pods")
    failing, healthy = ready_pods(cluster_kube, s.ns, s.selector)
    settings = settings_for_tests(s.ns, models=model_settings(port))
    with LoopbackWorkers(cluster_kube, s.ns, s.selector, port) as workers:
        workers.modes = {failing: "fail"}
        s.apply_model()
        with running(settings, cluster_k):
            wait_for(
                lambda: (
                    s.status().get("readyEndpoints") == 1 and s.status().get("totalEndpoints") == 2
                ),
                WAIT,
                "one of two loaded",
            )
        # controller down: the failing worker recovers, a pod is added
        workers.modes = {}
        s.scale(3)
        wait_for(lambda: len(ready_pods(cluster_kube, s.ns, s.selector)) == 3, WAIT, "3 pods")
        with running(settings, cluster_k):
            wait_for(lambda: fully_loaded(s, cluster_kube, 3), WAIT, "all three after restart")
        # controller down again: the model is deleted; the finalizer holds it
        cluster_k.delete(DYNAMO_MODELS, s.ns, s.name)
        assert s.get_model()["metadata"].get("deletionTimestamp")
        pods = ready_pods(cluster_kube, s.ns, s.selector)
        with running(settings, cluster_k):
            wait_for(s.gone, WAIT, "deleted by the restarted controller")
        for pod in pods:
            assert workers.get(pod).calls("DELETE")  # type: ignore[union-attr]
        assert workers.get(healthy) is not None


def test_a_base_model_lists_its_workers_without_calling_them(
    setup: Setup, cluster_k: Kube, cluster_kube: Any
) -> None:
    s, port = setup, free_port()
    s.model["spec"] = {"modelName": "Qwen/Qwen3-0.6B", "baseModelName": "Qwen/Qwen3-0.6B"}
    s.apply_services()
    s.apply_workers(2)
    settings = settings_for_tests(s.ns, models=model_settings(port))
    with LoopbackWorkers(cluster_kube, s.ns, s.selector, port) as workers:
        s.apply_model()
        with running(settings, cluster_k):
            wait_for(
                lambda: (
                    s.status().get("totalEndpoints") == 2
                    and s.condition("EndpointsReady").get("reason") == "EndpointsDiscovered"
                ),
                WAIT,
                "the base model's workers listed",
            )
            assert s.status()["readyEndpoints"] == 0
            cluster_k.delete(DYNAMO_MODELS, s.ns, s.name)
            wait_for(s.gone, WAIT, "deleted")
        assert all(not w.requests for w in workers.all())


def test_no_workers_is_reported(setup: Setup, cluster_k: Kube) -> None:
    s = setup
    settings = settings_for_tests(s.ns, models=model_settings(free_port()))
    s.apply_model()
    with running(settings, cluster_k):
        wait_for(
            lambda: s.condition("EndpointsReady").get("reason") == "NoEndpoints",
            WAIT,
            "no endpoints reported",
        )
        assert s.condition("ServicesFound")["reason"] == "NoServicesFound"
        assert f"dynamo-model-{s.hash}" in s.condition("EndpointsReady")["message"]
        assert s.status()["totalEndpoints"] == 0


# --- on the bare API server (no kube-controller-manager, no KWOK): pods written by hand
PODS = Resource("", "v1", "pods", "Pod")


def test_hand_written_pods_on_a_bare_api_server(k: Kube, namespace: str) -> None:
    """Load and unload with worker pods whose status is written by hand (as a kubelet
    would): two pods on loopback addresses of their own, one not ready at first."""
    port = free_port()
    h = "fb68f5a6"  # the hash of Qwen/Qwen3-0.6B
    ips = {"w-0": "127.0.0.11", "w-1": "127.0.0.12"}
    workers = LoopbackWorkers(None, namespace, "", port)
    for pod, ip in ips.items():
        workers.add(pod, ip)
        k.create(
            PODS,
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "name": pod,
                    "namespace": namespace,
                    "labels": {keys.LABEL_BASE_MODEL_HASH: h},
                },
                "spec": {"containers": [{"name": "main", "image": "vllm-runtime:1.5.1"}]},
            },
        )

    def set_ready(pod: str, ready: bool) -> None:
        k.patch(
            PODS,
            namespace,
            pod,
            {
                "status": {
                    "phase": "Running",
                    "podIP": ips[pod],
                    "podIPs": [{"ip": ips[pod]}],
                    "conditions": [
                        {"type": "Ready", "status": "True" if ready else "False"},
                    ],
                }
            },
            subresource="status",
        )

    set_ready("w-0", True)
    set_ready("w-1", False)
    model = yaml.safe_load(_example(LORA_MODEL).read_text())
    model["metadata"]["namespace"] = namespace
    name = model["metadata"]["name"]

    def status() -> dict[str, Any]:
        return k.get(DYNAMO_MODELS, namespace, name).get("status") or {}

    k.create(DYNAMO_MODELS, model)
    try:
        with running(settings_for_tests(namespace, models=model_settings(port)), k) as mgr:
            wait_for(lambda: status().get("readyEndpoints") == 1, WAIT, "the ready pod loaded")
            assert status()["totalEndpoints"] == 2
            assert workers.get("w-1").requests == []  # type: ignore[union-attr]
            set_ready("w-1", True)
            wait_for(lambda: status().get("readyEndpoints") == 2, WAIT, "both loaded")
            # a worker that restarts (not ready, then ready again) gets it again
            set_ready("w-0", False)
            wait_for(lambda: status().get("readyEndpoints") == 1, WAIT, "w-0 not loaded")
            set_ready("w-0", True)
            wait_for(lambda: status().get("readyEndpoints") == 2, WAIT, "w-0 loaded again")
            assert len(workers.get("w-0").calls("POST")) == 2  # type: ignore[union-attr]
            k.delete(DYNAMO_MODELS, namespace, name)

            def gone() -> bool:
                try:
                    k.get(DYNAMO_MODELS, namespace, name)
                except NotFoundError:
                    return True
                return False

            wait_for(gone, WAIT, "deleted")
            labels = {"operation": "unload", "result": "success"}
            assert mgr.metrics.value("dyn_gitops_controller_lora_requests_total", labels) == 2
        for pod in ips:
            assert workers.get(pod).calls("DELETE")  # type: ignore[union-attr]
    finally:
        workers.__exit__()
