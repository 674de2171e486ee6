"""Helpers for tests and the benchmark (like ``kopf.testing``): render, apply as GitOps
would, run the controller in-process, and play kube-controller-manager for Deployments.

The bare kube-apiserver used in tests runs no controllers, so Deployment status never
changes by itself: ``DeploymentSimulator`` writes it through the status subresource.
"""

from __future__ import annotations

import contextlib
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import yaml

from dyn_gitops_operator.errors import ApiError, ConflictError, NotFoundError
from dyn_gitops_operator.kube import DEPLOYMENTS, DGDS, DGDSAS, LWS, Kube, Resource
from dyn_gitops_operator.manager import Manager
from dyn_gitops_operator.settings import OperatorSettings

Obj = dict[str, Any]

#: the field manager GitOps writes with in tests (Argo CD's server-side apply name)
GITOPS_MANAGER = "argocd-controller"
#: the field manager of simulated Deployment status (what kube-controller-manager uses)
KCM_MANAGER = "kube-controller-manager"

KINDS: dict[str, Resource] = {"Deployment": DEPLOYMENTS, "DynamoGraphDeployment": DGDS,
                              "DynamoGraphDeploymentScalingAdapter": DGDSAS,
                              "LeaderWorkerSet": LWS}


def render(dgd_docs: list[Obj] | str | Path, namespace: str, **settings: Any) -> list[Obj]:
    """Render DGDs (dicts, or a sample directory) with the real renderer."""
    from dyn_gitops import settings as settings_mod
    from dyn_gitops.pipeline import render as render_pipeline
    from dyn_gitops.source import read_path

    flags = {k.replace("_", "-"): v for k, v in {"namespace": namespace, **settings}.items()}
    with tempfile.TemporaryDirectory() as tmp:
        if isinstance(dgd_docs, list):
            (Path(tmp) / "graph.yaml").write_text(yaml.safe_dump_all(dgd_docs))
            path = tmp
        else:
            path = str(dgd_docs)
        pre = settings_mod.resolve(flags=flags)
        src = read_path(path, max_file_bytes=pre.settings.max_file_bytes)
        resolved = settings_mod.resolve(file_values=src.settings_file, flags=flags)
        objs = render_pipeline(src, resolved.settings).objects
    out = []
    for obj in objs:
        obj = dict(obj)
        obj["metadata"] = {**obj["metadata"], "namespace": namespace}
        out.append(obj)
    return out


def gitops_apply(kube: Kube, objects: list[Obj],
                 kinds: tuple[str, ...] = ("Deployment", "DynamoGraphDeployment",
                                           "DynamoGraphDeploymentScalingAdapter")) -> None:
    """Server-side apply the rendered objects as the GitOps tool would (no pruning)."""
    gitops = Kube(kube.api, kube.timeout, field_manager=GITOPS_MANAGER)
    for obj in objects:
        if obj["kind"] in kinds:
            gitops.apply(KINDS[obj["kind"]], obj, force=True)


def deployment_status(dep: Obj, *, available: int | None = None, replicas: int | None = None,
                      updated: int | None = None, failed: str | None = None) -> Obj:
    """What kube-controller-manager would report; defaults: fully rolled out."""
    want = (dep.get("spec") or {}).get("replicas", 1)
    replicas = want if replicas is None else replicas
    available = replicas if available is None else available
    updated = replicas if updated is None else updated
    conds: list[Obj] = [{"type": "Available", "status": "True" if available >= want else "False",
                         "reason": "MinimumReplicasAvailable"}]
    if failed:
        conds.append({"type": "Progressing", "status": "False",
                      "reason": "ProgressDeadlineExceeded", "message": failed})
    else:
        conds.append({"type": "Progressing", "status": "True",
                      "reason": "NewReplicaSetAvailable"})
    return {"observedGeneration": dep["metadata"]["generation"], "replicas": replicas,
            "updatedReplicas": updated, "readyReplicas": available,
            "availableReplicas": available, "conditions": conds}


class DeploymentSimulator:
    """Writes Deployment status like kube-controller-manager would.

    ``policy(deployment) -> status | None`` decides per Deployment (None: leave it);
    the default rolls every Deployment out fully and at once. Started as a thread it
    polls; ``step()`` does one pass.
    """

    def __init__(self, kube: Kube, namespace: str | None,
                 policy: Callable[[Obj], Obj | None] | None = None) -> None:
        self.kube = Kube(kube.api, kube.timeout, field_manager=KCM_MANAGER)
        self.namespace = namespace
        self.policy = policy or (lambda d: deployment_status(d))
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.writes = 0

    def set_status(self, name: str, namespace: str | None = None, **kw: Any) -> Obj:
        ns = namespace or self.namespace
        for _ in range(20):
            dep = self.kube.get(DEPLOYMENTS, ns, name)
            try:
                return self._write(dep, deployment_status(dep, **kw))
            except ConflictError:
                continue
        raise RuntimeError(f"could not write status of {name}")

    def _write(self, dep: Obj, status: Obj) -> Obj:
        meta = dep["metadata"]
        self.writes += 1
        return self.kube.request(
            "PUT", DEPLOYMENTS.path(meta["namespace"], meta["name"], "status"),
            [("fieldManager", KCM_MANAGER)], {**dep, "status": status})

    def step(self) -> int:
        """One pass over every Deployment; the number of status writes."""
        items, _ = self.kube.list(DEPLOYMENTS, self.namespace)
        n = 0
        for dep in items:
            status = self.policy(dep)
            if status is None or _same(dep.get("status") or {}, status):
                continue
            with contextlib.suppress(ConflictError, NotFoundError):
                self._write(dep, status)
                n += 1
        return n

    def start(self, interval: float = 0.2) -> None:
        def loop() -> None:
            while not self._stop.wait(interval):
                with contextlib.suppress(ApiError):
                    self.step()
        self._thread = threading.Thread(target=loop, name="kcm-sim", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)


def _same(current: Obj, wanted: Obj) -> bool:
    def strip(s: Obj) -> Obj:
        return {**s, "conditions": sorted((c["type"], c["status"], c.get("reason"))
                                          for c in s.get("conditions") or [])}
    return strip(current) == strip(wanted)


def settings_for_tests(namespace: str, **overrides: Any) -> OperatorSettings:
    """Namespace mode with short lease timings (tests run many controllers)."""
    from dyn_gitops_operator.settings import LeaderSettings, ScopeSettings

    base: dict[str, Any] = {
        "mode": "namespace", "namespace": namespace, "http_address": "", "workers": 2,
        "leader": LeaderSettings(lease_duration=4, renew_deadline=3, retry_period=0.5),
        "scope": ScopeSettings(lease_duration=6, renew_interval=2),
    }
    base.update(overrides)
    return OperatorSettings(**base)


@contextlib.contextmanager
def running(settings: OperatorSettings, kube: Kube, timeout: float = 30,
            **kw: Any) -> Iterator[Manager]:
    """An in-process controller that is acting when the block starts."""
    manager = Manager(settings, kube=kube, **kw)
    manager.start()
    try:
        wait_for(manager.acting, timeout, "controller never started acting")
        yield manager
    finally:
        manager.stop()
        manager.shutdown()


def wait_for(cond: Callable[[], Any], timeout: float = 20, what: str = "condition",
             interval: float = 0.05) -> Any:
    """Poll until ``cond()`` is truthy; return its value or fail with ``what``."""
    end = time.monotonic() + timeout
    last_exc: Exception | None = None
    while time.monotonic() < end:
        try:
            value = cond()
            if value:
                return value
        except (ApiError, KeyError, IndexError, TypeError) as exc:
            last_exc = exc
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}"
                         + (f" (last error: {last_exc})" if last_exc else ""))


CHART = Path(__file__).resolve().parents[2] / "charts" / "dyn-gitops"


def helm_template(helm: Path | str, *sets: str, namespace: str = "ops",
                  release: str = "dg", extra: list[str] | None = None) -> list[Obj]:
    """``helm template`` of the chart with ``--set`` pairs; the rendered objects."""
    import subprocess

    cmd = [str(helm), "template", release, str(CHART), "--namespace", namespace,
           *(extra or [])]
    for s in sets:
        cmd += ["--set", s]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return [d for d in yaml.safe_load_all(out) if d]
