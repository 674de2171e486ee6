"""Scope lease (namespace mode) and leader election against the real kube-apiserver.

Leader election runs two real controller processes (``python -m dyn_gitops_operator``)
and samples both /metrics endpoints all along: they must never both lead or both act.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from dyn_gitops_operator import FIELD_MANAGER
from dyn_gitops_operator.errors import NotFoundError
from dyn_gitops_operator.kube import DGDS, LEASES, Kube
from dyn_gitops_operator.leases import micro_time
from dyn_gitops_operator.settings import SCOPE_LEASE_NAME
from dyn_gitops_operator.testing import (
    DeploymentSimulator,
    gitops_apply,
    hpa_scale,
    render,
    running,
    settings_for_tests,
    wait_for,
)

pytestmark = pytest.mark.realk8s
SAMPLES = Path(__file__).resolve().parent.parent / "samples"


def foreign_lease(k: Kube, ns: str, duration: int, holder: str) -> dict[str, Any]:
    now = micro_time(datetime.now(UTC))
    return k.create(LEASES, {
        "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": SCOPE_LEASE_NAME, "namespace": ns},
        "spec": {"holderIdentity": holder, "leaseDurationSeconds": duration,
                 "acquireTime": now, "renewTime": now}})


def test_namespace_mode_holds_renews_and_releases_the_scope_lease(k: Kube,
                                                                   namespace: str) -> None:
    with running(settings_for_tests(namespace), k) as m:
        lease = k.get(LEASES, namespace, SCOPE_LEASE_NAME)
        spec = lease["spec"]
        assert spec["holderIdentity"].startswith("dyn-gitops-controller-0.1.0-")
        assert spec["leaseDurationSeconds"] == 6
        first = spec["renewTime"]
        wait_for(lambda: k.get(LEASES, namespace, SCOPE_LEASE_NAME)["spec"]["renewTime"]
                 > first, timeout=5, what="a renewal (interval 2 s)")
        assert m.metrics.value("dyn_gitops_controller_scope_leases_held") == 1
    with pytest.raises(NotFoundError):  # released on clean shutdown
        k.get(LEASES, namespace, SCOPE_LEASE_NAME)


def test_namespace_mode_waits_for_a_live_foreign_scope_lease(k: Kube, namespace: str) -> None:
    gitops_apply(k, render(SAMPLES / "vllm-agg" / "input", namespace))
    foreign_lease(k, namespace, 3, "namespace-restricted-operator-1.1.0")
    start = time.monotonic()
    from dyn_gitops_operator.manager import Manager

    m = Manager(settings_for_tests(namespace), kube=k)
    m.start()
    try:
        time.sleep(1.5)
        assert not m.acting()
        assert not k.get(DGDS, namespace, "vllm-agg").get("status")
        wait_for(m.acting, timeout=10, what="acting after the foreign lease expired")
        assert time.monotonic() - start >= 3
        lease = k.get(LEASES, namespace, SCOPE_LEASE_NAME)
        assert lease["spec"]["holderIdentity"].startswith("dyn-gitops-controller-")
        wait_for(lambda: k.get(DGDS, namespace, "vllm-agg").get("status"), what="status")
    finally:
        m.stop()
        m.shutdown()


# ------------------------------------------------------------------------------ leader election
class Replica:
    def __init__(self, kubeconfig: Path, namespace: str, name: str, log_dir: Path) -> None:
        from support.controlplane import free_port

        self.port = free_port()
        self.name = name
        self.log = open(log_dir / f"{name}.log", "wb")  # noqa: SIM115
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "dyn_gitops_operator", "--mode", "namespace",
             "--namespace", namespace, "--kubeconfig", str(kubeconfig),
             "--identity", name, "--http-address", f"127.0.0.1:{self.port}",
             "--leader-lease-duration", "3", "--leader-renew-deadline", "2",
             "--leader-retry-period", "0.3", "--scope-lease-duration", "3",
             "--scope-lease-renew-interval", "1", "--workers", "2"],
            stdout=self.log, stderr=subprocess.STDOUT, env=env)

    def metrics(self) -> dict[str, float] | None:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/metrics",
                                        timeout=3) as r:
                text = r.read().decode()
        except OSError:
            return None
        out: dict[str, float] = {}
        for line in text.splitlines():
            if line.startswith("dyn_gitops_controller_leader "):
                out["leader"] = float(line.split()[1])
            elif line.startswith("dyn_gitops_controller_reconcile_total{"):
                out["reconciles"] = out.get("reconciles", 0) + float(line.split()[1])
        return out

    def stop(self, sig: int = signal.SIGTERM) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            return self.proc.wait(20)
        finally:
            self.log.close()


def test_two_replicas_never_act_at_once(k: Kube, namespace: str, control_plane: Any,
                                        tmp_path: Path) -> None:
    objs = render(SAMPLES / "scaling-adapter" / "input", namespace)
    gitops_apply(k, objs)
    sim = DeploymentSimulator(k, namespace)
    sim.start(0.2)
    a = Replica(control_plane.kubeconfig, namespace, "replica-a", tmp_path)
    b = Replica(control_plane.kubeconfig, namespace, "replica-b", tmp_path)
    replicas = {"replica-a": a, "replica-b": b}
    samples: list[dict[str, dict[str, float] | None]] = []
    stop = threading.Event()

    def sample() -> None:
        while not stop.is_set():
            samples.append({r.name: r.metrics() for r in replicas.values()})
            time.sleep(0.05)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        leader = wait_for(lambda: next((r for r in replicas.values()
                                        if (r.metrics() or {}).get("leader") == 1), None),
                          timeout=30, what="a leader")
        follower = b if leader is a else a
        wait_for(lambda: k.get(DGDS, namespace, "sglang-disagg").get("status", {})
                 .get("state") == "successful", what="the leader reconciles")
        lease = k.get(LEASES, namespace, "dyn-gitops-controller")
        assert lease["spec"]["holderIdentity"] == leader.name
        # the follower is up (its /metrics answers) and has not reconciled anything
        follower_metrics = wait_for(follower.metrics, what="the follower's /metrics")
        assert follower_metrics["leader"] == 0 and follower_metrics.get("reconciles") == 0

        # the leader dies without a goodbye: the follower takes over once the leases expire
        killed_at = time.monotonic()
        leader.stop(signal.SIGKILL)
        wait_for(lambda: (follower.metrics() or {}).get("leader") == 1, timeout=20,
                 what="follower takes over")
        takeover = time.monotonic() - killed_at
        hpa_scale(k, namespace, "sglang-disagg-decode", 3)
        wait_for(lambda: k.get(DGDS, namespace, "sglang-disagg")["status"]["services"]
                 ["decode"]["replicas"] == 3, timeout=20, what="the new leader acts")
        assert takeover >= 2.0  # not before the old lease could have expired
        assert follower.stop(signal.SIGTERM) == 0
        lease = k.get(LEASES, namespace, "dyn-gitops-controller")
        assert lease["spec"]["holderIdentity"] == ""  # released on clean shutdown
        with pytest.raises(NotFoundError):
            k.get(LEASES, namespace, SCOPE_LEASE_NAME)
    finally:
        stop.set()
        sampler.join()
        sim.stop()
        for r in replicas.values():
            r.stop(signal.SIGKILL)
    both = [s for s in samples if all((m or {}).get("leader") == 1 for m in s.values())]
    assert not both, f"two leaders at once: {both[:3]}"
    acting = [s for s in samples if s["replica-a"] and s["replica-b"]
              and s["replica-a"].get("reconciles") and s["replica-b"].get("reconciles")]
    assert not acting, "both replicas reconciled while both were alive"
    assert len(samples) > 50
    dgd = k.get(DGDS, namespace, "sglang-disagg")
    assert {m["manager"] for m in dgd["metadata"]["managedFields"]
            if m.get("subresource") == "status"} == {FIELD_MANAGER}
