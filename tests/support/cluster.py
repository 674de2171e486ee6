"""A realistic test cluster: etcd + kube-apiserver (``controlplane.py``) plus
kube-controller-manager, kube-scheduler and KWOK with fake GPU nodes.

Deployments get real ReplicaSets and pods; the scheduler places pods by their
``nvidia.com/gpu`` (and cpu/memory/pods) requests; KWOK plays the kubelet with the Stage
files ``tools/test-bins/build.sh`` writes from the pinned kwok module (``kwok-stages.yaml``
next to the binary): a scheduled pod becomes Running and Ready at once, a deleted pod is
removed. Pod IPs come from a loopback range (:data:`POD_CIDR`), so a test can serve HTTP
on a pod's address. Ways to keep pods from becoming (or staying) ready, all real:

* :func:`hold` / :func:`release`: a scheduling gate in the pod templates (the GitOps side
  applies it) keeps every new pod Pending (``SchedulingGated``) until the test releases it,
  one pod or all at once (the Deployment is then simply not available yet: pending);
* more GPUs than a node has (:data:`GPUS_PER_NODE`) or a node selector no node matches:
  the pods stay Pending (``FailedScheduling``);
* :func:`cap_pods`: a ResourceQuota on the namespace's pod count, so a ReplicaSet cannot
  create more pods (a lost pod is not replaced; the Deployment reports ``ReplicaFailure``);
* :func:`fail_pod`: KWOK's own chaos Stage turns a Running pod Failed (not Ready); its
  ReplicaSet replaces it unless :func:`cap_pods` forbids.

Everything started here is stopped in reverse order (KWOK, scheduler, kcm, then
kube-apiserver before etcd).
"""

from __future__ import annotations

import contextlib
import ssl
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from support.controlplane import ControlPlane, _stop, _tail, _wait, control_plane, free_port

#: binaries the cluster needs (``tools/test-bins/build.sh``)
BINARIES = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok")
#: the Stage file build.sh writes next to the kwok binary
STAGES_FILE = "kwok-stages.yaml"
#: fake nodes and what each advertises
NODES = 4
GPUS_PER_NODE = 8
NODE_CAPACITY = {
    "cpu": "64",
    "memory": "512Gi",
    "pods": "110",
    "nvidia.com/gpu": str(GPUS_PER_NODE),
    # the upstream vLLM workers request 2Gi of it (the operator's output is run as it is)
    "ephemeral-storage": "2Ti",
}
#: pod IPs: a loopback range (all of 127/8 reaches the host's loopback on Linux), node IP
POD_CIDR = "127.64.0.0/16"
NODE_IP = "127.63.0.1"
#: the annotation by which KWOK manages a node (only ours, never a real one)
KWOK_NODE_ANNOTATION = ("kwok.x-k8s.io/node", "fake")
#: the label of KWOK's chaos Stage ``pod-container-running-failed`` (from the kwok module)
FAIL_LABEL = "pod-container-running-failed.stage.kwok.x-k8s.io"
#: the ResourceQuota :func:`cap_pods` writes
QUOTA = "test-pod-cap"
#: the scheduling gate :func:`hold` puts in pod templates
GATE = "dyn-gitops.test/hold"
#: how often kube-controller-manager's HPA controller syncs each HorizontalPodAutoscaler
#: (upstream 15 s; free for the tests that create none: its work is per HPA)
HPA_SYNC_PERIOD = "2s"


@dataclass
class Cluster:
    """The running cluster; ``client()`` gives a fresh ApiClient (admin)."""

    plane: ControlPlane
    nodes: list[str]
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)
    started_in: float = 0.0

    @property
    def kubeconfig(self) -> Path:
        return self.plane.kubeconfig

    def client(self) -> Any:
        return self.plane.client()


def node(name: str) -> dict[str, Any]:
    """A fake GPU node KWOK manages (its status is KWOK's to keep Ready)."""
    key, value = KWOK_NODE_ANNOTATION
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "annotations": {key: value, "node.alpha.kubernetes.io/ttl": "0"},
            "labels": {
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "type": "kwok",
                "nvidia.com/gpu.present": "true",
            },
        },
        "spec": {},
        "status": {"allocatable": dict(NODE_CAPACITY), "capacity": dict(NODE_CAPACITY)},
    }


def _secure_healthz(port: int) -> str:
    return f"https://127.0.0.1:{port}/healthz"


@contextlib.contextmanager
def realistic_cluster(
    bins: dict[str, Path], stages: Path, kcm_flags: tuple[str, ...] = ()
) -> Iterator[Cluster]:
    """Start the whole cluster; yields once every component is healthy and the nodes are
    Ready (``Cluster.started_in``: seconds since the start, etcd included). ``kcm_flags``:
    more kube-controller-manager flags."""
    t0 = time.monotonic()
    with control_plane(bins["etcd"], bins["kube-apiserver"]) as cp:
        d = cp.dir
        kc = str(cp.kubeconfig)
        procs: list[subprocess.Popen[bytes]] = []
        log = d / "cluster.log"
        unverified = ssl._create_unverified_context()  # loopback health probes only
        try:
            with open(log, "wb") as logf:

                def start(*args: str) -> subprocess.Popen[bytes]:
                    p = subprocess.Popen(
                        list(args), stdout=logf, stderr=subprocess.STDOUT, start_new_session=True
                    )
                    procs.append(p)
                    return p

                common = [
                    f"--kubeconfig={kc}",
                    f"--authentication-kubeconfig={kc}",
                    f"--authorization-kubeconfig={kc}",
                    "--leader-elect=false",
                    "--bind-address=127.0.0.1",
                ]
                kcm_port, sched_port = free_port(), free_port()
                start(
                    str(bins["kube-controller-manager"]),
                    *common,
                    f"--secure-port={kcm_port}",
                    f"--cert-dir={d / 'kcm-certs'}",
                    f"--service-account-private-key-file={d / 'sa.key'}",
                    f"--root-ca-file={d / 'certs' / 'apiserver.crt'}",
                    "--controllers=*",
                    "--concurrent-deployment-syncs=5",
                    "--concurrent-replicaset-syncs=5",
                    f"--horizontal-pod-autoscaler-sync-period={HPA_SYNC_PERIOD}",
                    *kcm_flags,
                )
                start(
                    str(bins["kube-scheduler"]),
                    *common,
                    f"--secure-port={sched_port}",
                    f"--cert-dir={d / 'sched-certs'}",
                )
                key, value = KWOK_NODE_ANNOTATION
                start(
                    str(bins["kwok"]),
                    f"--kubeconfig={kc}",
                    f"--config={stages}",
                    "--manage-all-nodes=false",
                    f"--manage-nodes-with-annotation-selector={key}={value}",
                    f"--cidr={POD_CIDR}",
                    f"--node-ip={NODE_IP}",
                    "--node-lease-duration-seconds=40",
                    f"--server-address=127.0.0.1:{free_port()}",
                )
                everything = [cp.etcd, cp.apiserver, *procs]
                for port in (kcm_port, sched_port):
                    _wait(
                        _secure_healthz(port),
                        lambda s, b: s == 200,
                        120,
                        everything,
                        log,
                        ctx=unverified,
                    )
                names = [f"kwok-gpu-{i}" for i in range(NODES)]
                api = cp.client()
                _create_nodes(api, names)
                _wait_nodes_ready(api, names, 120, everything, log)
                cluster = Cluster(cp, names, procs, time.monotonic() - t0)
                yield cluster
        finally:
            for p in reversed(procs):
                _stop(p)


def _create_nodes(api: Any, names: list[str]) -> None:
    from kubernetes import client

    core = client.CoreV1Api(api)
    for name in names:
        core.create_node(node(name))


def _wait_nodes_ready(
    api: Any, names: list[str], timeout: float, procs: list[subprocess.Popen[bytes]], log: Path
) -> None:
    from kubernetes import client

    core = client.CoreV1Api(api)
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        for p in procs:
            if p.poll() is not None:
                raise RuntimeError(f"{p.args[0]} exited with {p.returncode}:\n{_tail(log)}")
        ready = set()
        for n in core.list_node().items:
            if any(c.type == "Ready" and c.status == "True" for c in n.status.conditions or []):
                ready.add(n.metadata.name)
        if ready >= set(names):
            return
        time.sleep(0.2)
    raise TimeoutError(f"fake nodes not Ready after {timeout} s:\n{_tail(log)}")


# ------------------------------------------------------------------------ test-side helpers
def hold(
    objs: list[dict[str, Any]], names: Callable[[str], bool] | None = None
) -> list[dict[str, Any]]:
    """Copies of ``objs`` whose Deployments and LeaderWorkerSets (those ``names(name)``
    accepts, default all) create their pods with the :data:`GATE` scheduling gate: Pending
    until released."""
    import copy

    out = copy.deepcopy(objs)
    for obj in out:
        if names is not None and not names(obj["metadata"]["name"]):
            continue
        if obj["kind"] == "Deployment":
            templates = [obj["spec"]["template"]]
        elif obj["kind"] == "LeaderWorkerSet":
            lwt = obj["spec"]["leaderWorkerTemplate"]
            templates = [lwt[t] for t in ("leaderTemplate", "workerTemplate") if t in lwt]
        else:
            continue
        for template in templates:
            template["spec"]["schedulingGates"] = [{"name": GATE}]
    return out


def gated(api: Any, namespace: str, selector: str = "") -> list[Any]:
    """The pods still held by :data:`GATE`, oldest first."""
    held = [
        p
        for p in pods(api, namespace, selector)
        if any(g.name == GATE for g in p.spec.scheduling_gates or [])
        and not p.metadata.deletion_timestamp
    ]
    return sorted(held, key=lambda p: (p.metadata.creation_timestamp, p.metadata.name))


def release(
    api: Any,
    namespace: str,
    selector: str = "",
    count: int | None = None,
    only: Callable[[str], bool] | None = None,
) -> list[str]:
    """Remove the gate from ``count`` held pods (oldest first; default all; ``only(pod
    name)`` filters): the scheduler places them and KWOK makes them Ready. Their names."""
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    core = client.CoreV1Api(api)
    done = []
    held = [p for p in gated(api, namespace, selector) if only is None or only(p.metadata.name)]
    for pod in held[:count]:
        try:
            core.patch_namespaced_pod(
                pod.metadata.name,
                namespace,
                {"spec": {"schedulingGates": None}},
                _content_type="application/merge-patch+json",
            )
            done.append(pod.metadata.name)
        except ApiException as exc:
            if exc.status != 404:  # deleted meanwhile (scaled down)
                raise
    return done


def rolled_out(api: Any, namespace: str, deployment: str) -> bool:
    """The Deployment's current template is fully rolled out and available."""
    from kubernetes import client

    d = client.AppsV1Api(api).read_namespaced_deployment(deployment, namespace)
    st, want = d.status, d.spec.replicas
    return bool(
        (st.observed_generation or 0) >= (d.metadata.generation or 0)
        and (st.updated_replicas or 0) == want
        and (st.available_replicas or 0) == want
        and (st.replicas or 0) == want
    )


def release_deployment(api: Any, namespace: str, deployment: str, timeout: float = 90) -> None:
    """Release the held pods of one Deployment, as they come, until it is rolled out (a
    rolling update creates its new pods a few at a time)."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        release(api, namespace, only=lambda pod: pod.startswith(deployment + "-"))
        if rolled_out(api, namespace, deployment):
            return
        time.sleep(0.1)
    raise TimeoutError(f"Deployment {deployment} in {namespace} not rolled out after {timeout} s")


def cap_pods(api: Any, namespace: str, pods: int) -> None:
    """Allow at most ``pods`` non-terminal pods in ``namespace`` (a ResourceQuota: the
    ReplicaSet controller's creations beyond it are refused by the API server)."""
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    core = client.CoreV1Api(api)
    body = {"metadata": {"name": QUOTA}, "spec": {"hard": {"pods": str(pods)}}}
    try:
        core.create_namespaced_resource_quota(namespace, body)
    except ApiException as exc:
        if exc.status != 409:
            raise
        core.patch_namespaced_resource_quota(QUOTA, namespace, body)
    # quota admission refuses creations only once the quota controller computed its usage
    end = time.monotonic() + 60
    while time.monotonic() < end:
        q = core.read_namespaced_resource_quota(QUOTA, namespace)
        if (q.status.hard or {}).get("pods") == str(pods) and "pods" in (q.status.used or {}):
            return
        time.sleep(0.1)
    raise TimeoutError(f"ResourceQuota {QUOTA} in {namespace} never got its usage")


def uncap_pods(api: Any, namespace: str) -> None:
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    try:
        client.CoreV1Api(api).delete_namespaced_resource_quota(QUOTA, namespace)
    except ApiException as exc:
        if exc.status != 404:
            raise


def fail_pod(api: Any, namespace: str, name: str) -> None:
    """KWOK's chaos Stage makes the pod's container fail: the pod turns Failed, not Ready."""
    from kubernetes import client

    delays = {f"{FAIL_LABEL}/{k}": "0s" for k in ("delay", "jitter-delay")}  # not 1-2 s
    client.CoreV1Api(api).patch_namespaced_pod(
        name, namespace, {"metadata": {"labels": {FAIL_LABEL: "true"}, "annotations": delays}}
    )


def pods(api: Any, namespace: str, selector: str = "") -> list[Any]:
    from kubernetes import client

    return list(client.CoreV1Api(api).list_namespaced_pod(namespace, label_selector=selector).items)


def is_ready(pod: Any) -> bool:
    return any(c.type == "Ready" and c.status == "True" for c in pod.status.conditions or [])
