"""The realistic test cluster itself (tests/support/cluster.py): real controllers, a real
scheduler and KWOK's fake GPU nodes, and each way a test can keep pods from being ready."""

from __future__ import annotations

import http.server
import ipaddress
import threading
import urllib.request
from typing import Any

import pytest
from dyn_gitops_operator.testing import wait_for
from kubernetes import client as k8s
from support.cluster import (
    GPUS_PER_NODE,
    NODE_CAPACITY,
    POD_CIDR,
    cap_pods,
    fail_pod,
    gated,
    hold,
    is_ready,
    pods,
    release,
    uncap_pods,
)

pytestmark = pytest.mark.realk8s


def deployment(name: str, replicas: int, gpus: int) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {
                    "containers": [
                        {
                            "name": "main",
                            "image": "example.invalid/worker:1",
                            "resources": {"limits": {"nvidia.com/gpu": str(gpus)}},
                        }
                    ]
                },
            },
        },
    }


def available(api: Any, ns: str, name: str) -> int:
    st = k8s.AppsV1Api(api).read_namespaced_deployment_status(name, ns).status
    return int(st.available_replicas or 0)


def test_nodes_advertise_gpus(cluster: Any, cluster_kube: Any) -> None:
    nodes = k8s.CoreV1Api(cluster_kube).list_node().items
    ours = [n for n in nodes if n.metadata.name in cluster.nodes]
    assert len(ours) == len(cluster.nodes) >= 2
    for n in ours:
        assert n.status.allocatable["nvidia.com/gpu"] == str(GPUS_PER_NODE)
        assert n.status.allocatable["pods"] == NODE_CAPACITY["pods"]
        assert is_ready(n)


def test_deployment_gets_replicaset_and_ready_pods_on_loopback_ips(
    cluster_kube: Any, cluster_namespace: str
) -> None:
    ns = cluster_namespace
    k8s.AppsV1Api(cluster_kube).create_namespaced_deployment(ns, deployment("web", 3, 2))
    wait_for(lambda: available(cluster_kube, ns, "web") == 3, 60, "3 available replicas")
    rs = k8s.AppsV1Api(cluster_kube).list_namespaced_replica_set(ns).items
    assert len(rs) == 1 and rs[0].metadata.owner_references[0].name == "web"
    ps = pods(cluster_kube, ns, "app=web")
    assert len(ps) == 3 and all(is_ready(p) and p.status.phase == "Running" for p in ps)
    cidr = ipaddress.ip_network(POD_CIDR)
    ips = {p.status.pod_ip for p in ps}
    assert len(ips) == 3 and all(ipaddress.ip_address(ip) in cidr for ip in ips)

    # a test can serve HTTP on a pod's address
    ip = sorted(ips)[0]

    class Health(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.end_headers()
            self.wfile.write(b"ok")

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer((ip, 0), Health)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://{ip}:{server.server_address[1]}/health"
        with urllib.request.urlopen(url, timeout=10) as r:
            assert r.read() == b"ok"
    finally:
        server.shutdown()
        server.server_close()


def test_more_gpus_than_a_node_has_stay_pending(cluster_kube: Any, cluster_namespace: str) -> None:
    ns = cluster_namespace
    apps = k8s.AppsV1Api(cluster_kube)
    apps.create_namespaced_deployment(ns, deployment("big", 1, GPUS_PER_NODE + 1))

    def unschedulable() -> bool:
        ev = k8s.CoreV1Api(cluster_kube).list_namespaced_event(ns).items
        return any(e.reason == "FailedScheduling" and "nvidia.com/gpu" in e.message for e in ev)

    wait_for(unschedulable, 60, "FailedScheduling for nvidia.com/gpu")
    ps = pods(cluster_kube, ns, "app=big")
    assert len(ps) == 1 and ps[0].status.phase == "Pending" and not is_ready(ps[0])
    assert available(cluster_kube, ns, "big") == 0


def test_a_failed_pod_is_not_replaced_under_a_pod_cap(
    cluster_kube: Any, cluster_namespace: str
) -> None:
    ns = cluster_namespace
    k8s.AppsV1Api(cluster_kube).create_namespaced_deployment(ns, deployment("w", 2, 1))
    wait_for(lambda: available(cluster_kube, ns, "w") == 2, 60, "2 available")
    cap_pods(cluster_kube, ns, 1)
    victim = pods(cluster_kube, ns, "app=w")[0].metadata.name
    fail_pod(cluster_kube, ns, victim)
    wait_for(lambda: available(cluster_kube, ns, "w") == 1, 60, "one pod lost")

    def failed_or_gone() -> bool:
        ps = {p.metadata.name: p for p in pods(cluster_kube, ns, "app=w")}
        return victim not in ps or ps[victim].status.phase == "Failed"

    wait_for(failed_or_gone, 60, "the victim failed")
    for _ in range(10):  # the ReplicaSet cannot replace it: the quota refuses
        assert available(cluster_kube, ns, "w") == 1
        assert sum(is_ready(p) for p in pods(cluster_kube, ns, "app=w")) == 1
    uncap_pods(cluster_kube, ns)
    wait_for(lambda: available(cluster_kube, ns, "w") == 2, 60, "replaced once uncapped")


def test_held_pods_stay_pending_until_released_one_by_one(
    cluster_kube: Any, cluster_namespace: str
) -> None:
    ns = cluster_namespace
    (dep,) = hold([deployment("h", 2, 1)])
    k8s.AppsV1Api(cluster_kube).create_namespaced_deployment(ns, dep)
    wait_for(lambda: len(gated(cluster_kube, ns, "app=h")) == 2, 60, "2 held pods")
    for _ in range(5):
        assert available(cluster_kube, ns, "h") == 0
    assert all(p.status.phase == "Pending" for p in pods(cluster_kube, ns, "app=h"))
    assert len(release(cluster_kube, ns, "app=h", count=1)) == 1
    wait_for(lambda: available(cluster_kube, ns, "h") == 1, 60, "one released pod available")
    assert len(gated(cluster_kube, ns, "app=h")) == 1
    release(cluster_kube, ns)
    wait_for(lambda: available(cluster_kube, ns, "h") == 2, 60, "all available")
