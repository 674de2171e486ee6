"""Companion-controller benchmark against a real kube-apiserver (not a timed test).

    python bench/operator_converge.py [--graphs 1000] [--kcm instant|process] [--workers N]

Setup (not timed): a private etcd + kube-apiserver (tools/test-bins), our CRDs, and N
DynamoGraphDeployments of 4 services each (Frontend, Planner, a decode worker behind a
scaling adapter, a prefill worker), rendered by dyn-gitops and server-side applied as Argo
CD would: N DGDs, N DGDSAs, 4N Deployments, spread over 10 namespaces.

Timed: start the controller (its own process, cluster mode, leader election on) and wait
until every DGD reports ``state: successful`` with all 4 services, its observedGeneration,
and every DGDSA publishes its scale status. Reported: time to converge, graph-reconcile
p50 / p95 (exact, recorded in the controller process), writes, and the controller's peak
RSS. Targets (issue 5): converge <= 60 s, p95 <= 50 ms, RSS <= 250 MB.

Deployment status (no kube-controller-manager runs):
  instant  status is pre-written as the Deployment controller would report it once the
           controller has set spec.replicas (observedGeneration one ahead for the Deployments
           whose replicas change): only the companion controller works during the timing.
  process  a separate process watches Deployments and writes status after each change, as
           kube-controller-manager would; it competes for the same 2 CPUs.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))  # support.controlplane

IMAGE = "nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.1.0"


def graph(i: int) -> dict[str, Any]:
    def main(**kw: Any) -> dict[str, Any]:
        return {"mainContainer": {"image": IMAGE, **kw}}

    worker_args = ["-m", "dynamo.vllm", "--model", f"Qwen/Qwen3-0.6B-{i}"]
    return {
        "apiVersion": "nvidia.com/v1alpha1",
        "kind": "DynamoGraphDeployment",
        "metadata": {"name": f"g{i:04d}"},
        "spec": {
            "services": {
                "Frontend": {"componentType": "frontend", "replicas": 1, "extraPodSpec": main()},
                "Planner": {
                    "componentType": "planner",
                    "replicas": 1,
                    "extraPodSpec": main(command=["python3", "-m", "planner_sla"]),
                },
                "VllmDecodeWorker": {
                    "componentType": "worker",
                    "subComponentType": "decode",
                    "replicas": 2,
                    "scalingAdapter": {"enabled": True},
                    "resources": {"limits": {"gpu": "1"}},
                    "extraPodSpec": main(command=["python3"], args=worker_args),
                },
                "VllmPrefillWorker": {
                    "componentType": "worker",
                    "subComponentType": "prefill",
                    "replicas": 1,
                    "resources": {"limits": {"gpu": "1"}},
                    "extraPodSpec": main(command=["python3"], args=worker_args),
                },
            }
        },
    }


def ready_status(dep: dict[str, Any], replicas: int, generation: int) -> dict[str, Any]:
    return {
        "observedGeneration": generation,
        "replicas": replicas,
        "updatedReplicas": replicas,
        "readyReplicas": replicas,
        "availableReplicas": replicas,
        "conditions": [
            {"type": "Available", "status": "True", "reason": "MinimumReplicasAvailable"},
            {"type": "Progressing", "status": "True", "reason": "NewReplicaSetAvailable"},
        ],
    }


def setup(kubeconfig: Path, graphs: int, kcm: str) -> list[str]:
    from dyn_gitops_operator.kube import DEPLOYMENTS, Kube, make_api_client
    from dyn_gitops_operator.testing import GITOPS_MANAGER, KINDS, as_served
    from support.rendering import render

    k = Kube(make_api_client(str(kubeconfig), 32))
    gitops = Kube(k.api, field_manager=GITOPS_MANAGER)
    namespaces = [f"bench-{n}" for n in range(10)]
    for ns in namespaces:
        k.request("POST", "/api/v1/namespaces", body={"metadata": {"name": ns}})
    t0 = time.monotonic()
    objs: list[dict[str, Any]] = []
    per_ns = (graphs + len(namespaces) - 1) // len(namespaces)
    for n, ns in enumerate(namespaces):
        batch = [graph(i) for i in range(n * per_ns, min(graphs, (n + 1) * per_ns))]
        if batch:
            objs += [o for o in render(batch, ns) if o["kind"] in KINDS]
    print(f"rendered {len(objs)} objects in {time.monotonic() - t0:.1f} s", flush=True)

    def put(obj: dict[str, Any]) -> None:
        live = gitops.apply(KINDS[obj["kind"]], as_served(obj), force=True)
        if obj["kind"] != "Deployment" or kcm != "instant":
            return
        # what kube-controller-manager reports once the companion controller sized it
        ann = obj["metadata"].get("annotations") or {}
        managed = ann.get("dyn-gitops.io/managed-replicas") == "true"
        spec = obj["spec"].get("replicas")
        want = (
            spec
            if spec is not None
            else (
                int(ann["dyn-gitops.io/desired-replicas"])
                if "dyn-gitops.io/desired-replicas" in ann
                # the prefill worker, Planner-scaled through the DGD: Git's seed
                else int(ann["dyn-gitops.io/seed-replicas"])
                if "dyn-gitops.io/seed-replicas" in ann
                else 2
                if managed
                else 1
            )
        )  # the decode worker: its adapter says 2
        gen = live["metadata"]["generation"] + (1 if want != live["spec"]["replicas"] else 0)
        k.request(
            "PUT",
            DEPLOYMENTS.path(live["metadata"]["namespace"], live["metadata"]["name"], "status"),
            [("fieldManager", "kube-controller-manager")],
            {**live, "status": ready_status(live, want, gen)},
        )

    t0 = time.monotonic()
    with ThreadPoolExecutor(16) as pool:
        list(pool.map(put, objs))
    print(f"applied {len(objs)} objects in {time.monotonic() - t0:.1f} s", flush=True)
    return namespaces


def api_write_latency(kubeconfig: Path, n: int = 200) -> tuple[float, float]:
    """Baseline: p50 / p95 ms of one sequential server-side apply on this machine now."""
    from dyn_gitops_operator.kube import Kube, Resource, make_api_client

    k = Kube(make_api_client(str(kubeconfig)))
    cms = Resource("", "v1", "configmaps", "ConfigMap")
    xs = []
    for i in range(n):
        start = time.perf_counter()
        k.apply(
            cms,
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": "latency-probe", "namespace": "bench-0"},
                "data": {"i": str(i)},
            },
        )
        xs.append((time.perf_counter() - start) * 1000)
    return round(statistics.median(xs), 1), round(percentile(xs, 0.95), 1)


def kcm_process(kubeconfig: str) -> None:
    """Child: a Deployment controller stand-in (all Deployments, every namespace)."""
    from dyn_gitops_operator.kube import DEPLOYMENTS, Kube, make_api_client
    from dyn_gitops_operator.testing import KCM_MANAGER

    k = Kube(make_api_client(kubeconfig, 16), field_manager=KCM_MANAGER)
    _, rv = k.list(DEPLOYMENTS, None, transform=lambda o: {})
    pool = ThreadPoolExecutor(8)

    def write(dep: dict[str, Any]) -> None:
        st = dep.get("status") or {}
        want = dep["spec"]["replicas"]
        gen = dep["metadata"]["generation"]
        if st.get("observedGeneration") == gen and st.get("availableReplicas") == want:
            return
        with contextlib.suppress(Exception):  # a newer version comes through the watch
            k.request(
                "PUT",
                DEPLOYMENTS.path(dep["metadata"]["namespace"], dep["metadata"]["name"], "status"),
                [("fieldManager", KCM_MANAGER)],
                {**dep, "status": ready_status(dep, want, gen)},
            )

    items, _ = k.list(DEPLOYMENTS, None)
    for dep in items:
        pool.submit(write, dep)
    while True:
        try:
            for ev in k.watch(DEPLOYMENTS, None, rv):
                rv = ev["object"]["metadata"].get("resourceVersion", rv)
                if ev["type"] in ("ADDED", "MODIFIED"):
                    pool.submit(write, ev["object"])
        except Exception:
            time.sleep(0.2)


def controller_process(kubeconfig: str, out: str, workers: int) -> None:
    """Child: the real controller (cluster mode), with every graph reconcile timed."""
    from dyn_gitops_operator.manager import Manager
    from dyn_gitops_operator.metrics import RECONCILERS
    from dyn_gitops_operator.settings import OperatorSettings

    manager = Manager(OperatorSettings(kubeconfig=kubeconfig, workers=workers, http_address=""))
    durations: list[float] = []
    first: list[float] = []
    inner = manager.reconcile
    # BENCH_PROFILE=<file>: cProfile of the graph reconciles (one profiler per worker
    # thread, merged into <file> at the end; slows the controller down: profiling only)
    profile_to = os.environ.get("BENCH_PROFILE")
    local = threading.local()
    profilers: list[Any] = []

    def timed(key: tuple[str, str]) -> float | None:
        prof = None
        if profile_to:
            prof = getattr(local, "prof", None)
            if prof is None:
                import cProfile

                prof = local.prof = cProfile.Profile()
                profilers.append(prof)
            prof.enable()
        start = time.perf_counter()
        if not first:
            first.append(time.monotonic())
        try:
            return inner(key)
        finally:
            durations.append(time.perf_counter() - start)
            if prof is not None:
                prof.disable()

    manager.reconcile = timed  # type: ignore[method-assign]

    def finish(*_: Any) -> None:
        manager.stop()

    signal.signal(signal.SIGTERM, finish)
    started = time.monotonic()
    manager.run()
    if profile_to and profilers:
        import pstats

        pstats.Stats(*profilers).dump_stats(profile_to)
    m = manager.metrics
    usage = resource.getrusage(resource.RUSAGE_SELF)
    Path(out).write_text(
        json.dumps(
            {
                "durations": durations,
                "first_reconcile_after_s": round(first[0] - started, 2) if first else None,
                "cpu_s": round(usage.ru_utime + usage.ru_stime, 1),
                "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                "writes": {
                    f"{kind} {verb}": m.value(
                        "dyn_gitops_controller_writes_total", {"kind": kind, "verb": verb}
                    )
                    for kind, verb in (
                        ("Deployment", "apply"),
                        ("DynamoGraphDeployment", "apply/status"),
                        ("DynamoGraphDeploymentScalingAdapter", "apply/status"),
                    )
                },
                "per_reconciler_mean_ms": {
                    r: round(
                        1000
                        * m.value(
                            "dyn_gitops_controller_reconcile_duration_seconds_sum",
                            {"reconciler": r},
                        )
                        / max(
                            1.0,
                            m.value(
                                "dyn_gitops_controller_reconcile_duration_seconds_count",
                                {"reconciler": r},
                            ),
                        ),
                        2,
                    )
                    for r in RECONCILERS
                },
                "conflicts": sum(
                    m.value(
                        "dyn_gitops_controller_reconcile_errors_total",
                        {"reconciler": r, "error_type": "conflict"},
                    )
                    for r in RECONCILERS
                ),
            }
        )
    )


class Tracker:
    """Watches DGDs and DGDSAs (cheaper for the API server than polling lists)."""

    def __init__(self, k: Any) -> None:
        from dyn_gitops_operator.informer import Informer
        from dyn_gitops_operator.kube import DGDS, DGDSAS
        from dyn_gitops_operator.metrics import Metrics

        def dgd_ok(d: dict[str, Any]) -> dict[str, Any]:
            st = d.get("status") or {}
            ok = (
                st.get("state") == "successful"
                and len(st.get("components") or {}) == 4
                and st.get("observedGeneration") == d["metadata"]["generation"]
            )
            return {"metadata": d["metadata"] | {"managedFields": None}, "ok": ok}

        def adapter_ok(a: dict[str, Any]) -> dict[str, Any]:
            st = a.get("status") or {}
            ok = st.get("replicas") == a["spec"]["replicas"] and bool(st.get("selector"))
            return {"metadata": a["metadata"] | {"managedFields": None}, "ok": ok}

        self.informers = [
            Informer(k, DGDS, namespace=None, metrics=Metrics(), trim=dgd_ok),
            Informer(k, DGDSAS, namespace=None, metrics=Metrics(), trim=adapter_ok),
        ]
        for inf in self.informers:
            inf.start()
            inf.synced.wait(60)

    def counts(self) -> tuple[int, int]:
        dgds, adapters = (sum(1 for o in inf.store.items() if o["ok"]) for inf in self.informers)
        return dgds, adapters

    def stop(self) -> None:
        for inf in self.informers:
            inf.stop()


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--graphs", type=int, default=1000)
    p.add_argument("--kcm", choices=("instant", "process"), default="instant")
    from dyn_gitops_operator.settings import OperatorSettings

    # the controller's own default (one place), unless measuring another value
    p.add_argument("--workers", type=int, default=OperatorSettings().workers)
    p.add_argument("--timeout", type=float, default=300)
    p.add_argument("--child", choices=("kcm", "controller"), help=argparse.SUPPRESS)
    p.add_argument("--kubeconfig", help=argparse.SUPPRESS)
    p.add_argument("--out", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child == "kcm":
        kcm_process(args.kubeconfig)
        return 0
    if args.child == "controller":
        controller_process(args.kubeconfig, args.out, args.workers)
        return 0

    from dyn_gitops_operator.kube import Kube, make_api_client
    from support.controlplane import control_plane, find_binary, install_crds

    from dyn_gitops.crds import crds as dynamo_crds

    etcd, apiserver = find_binary("etcd"), find_binary("kube-apiserver")
    if etcd is None or apiserver is None:
        print("etcd / kube-apiserver not built: bash tools/test-bins/build.sh", file=sys.stderr)
        return 2
    with control_plane(etcd, apiserver) as cp, tempfile.TemporaryDirectory() as tmp:
        install_crds(cp.client(), dynamo_crds())
        setup(cp.kubeconfig, args.graphs, args.kcm)
        baseline = api_write_latency(cp.kubeconfig)
        tracker = Tracker(Kube(make_api_client(str(cp.kubeconfig))))
        me = [sys.executable, __file__, "--kubeconfig", str(cp.kubeconfig)]
        kcm = subprocess.Popen([*me, "--child", "kcm"]) if args.kcm == "process" else None
        out = Path(tmp) / "controller.json"
        start = time.monotonic()
        ctrl = subprocess.Popen(
            [*me, "--child", "controller", "--out", str(out), "--workers", str(args.workers)],
            stderr=open(Path(tmp) / "controller.log", "wb"),  # noqa: SIM115
        )
        converge_s = None
        try:
            while time.monotonic() - start < args.timeout:
                ok, ok_a = tracker.counts()
                if ok == args.graphs and ok_a == args.graphs:
                    converge_s = time.monotonic() - start
                    break
                time.sleep(0.1)
        finally:
            tracker.stop()
            ctrl.send_signal(signal.SIGTERM)
            ctrl.wait(60)
            if kcm is not None:
                kcm.kill()
                kcm.wait()
        res = json.loads(out.read_text())
        d_ms = [x * 1000 for x in res["durations"]]
        report = {
            "graphs": args.graphs,
            "services_per_graph": 4,
            "kcm": args.kcm,
            "workers": args.workers,
            "converge_s": None if converge_s is None else round(converge_s, 1),
            "reconciles": len(d_ms),
            "reconcile_p50_ms": round(statistics.median(d_ms), 1),
            "reconcile_p95_ms": round(percentile(d_ms, 0.95), 1),
            "reconcile_max_ms": round(max(d_ms), 1),
            "controller_peak_rss_mb": round(res["peak_rss_mb"], 1),
            "per_reconciler_mean_ms": res["per_reconciler_mean_ms"],
            "controller_cpu_s": res["cpu_s"],
            "first_reconcile_after_s": res["first_reconcile_after_s"],
            "writes": res["writes"],
            "conflicts": res["conflicts"],
            "cpus": os.cpu_count(),
            "baseline_single_apply_p50_p95_ms": baseline,
            "load_average_1m": round(os.getloadavg()[0], 1),
        }
        print(json.dumps(report, indent=2))
        if converge_s is None:
            k = Kube(make_api_client(str(cp.kubeconfig)))
            from dyn_gitops_operator.kube import DGDS, DGDSAS

            for res in (DGDS, DGDSAS):
                items = k.list(res, None)[0][:1]
                for item in items:
                    print(
                        f"a {res.kind}: generation {item['metadata'].get('generation')}, "
                        f"spec.replicas {item['spec'].get('replicas')}, status "
                        + json.dumps(item.get("status"))[:1500],
                        file=sys.stderr,
                    )
            print(
                f"did not converge in {args.timeout} s; last controller log lines:", file=sys.stderr
            )
            print(
                "\n".join((Path(tmp) / "controller.log").read_text().splitlines()[-20:]),
                file=sys.stderr,
            )
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
