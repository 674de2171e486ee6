"""Helpers for tests and the benchmark (like ``kopf.testing``): apply rendered objects as
GitOps would, run the controller in-process, and play kube-controller-manager for
Deployments. Rendering is the caller's business (the tests use ``tests/support/rendering``):
this package never imports the render pipeline.

The bare kube-apiserver used in tests runs no controllers, so Deployment status never
changes by itself: ``DeploymentSimulator`` writes it through the status subresource.
Likewise no Grove runs: ``grove_create`` creates the PodCliques / PodCliqueScalingGroups
Grove would create from a PodCliqueSet and ``grove_status`` writes their status.

Grove behaviours modelled (docs/grove-standin.md): ``pcs-children``, ``pclq-status``,
``pclq-observed-generation``, ``pcsg-status``.
"""

from __future__ import annotations

import contextlib
import subprocess
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Literal

import yaml

from dyn_gitops_operator.dgdview import as_v1beta1
from dyn_gitops_operator.errors import ApiError, ConflictError, NotFoundError
from dyn_gitops_operator.kube import (
    DEPLOYMENTS,
    DGDS,
    DGDSAS,
    LWS,
    PCSGS,
    PODCLIQUES,
    PODCLIQUESETS,
    Kube,
    Resource,
)
from dyn_gitops_operator.kubeapi import KubeApi
from dyn_gitops_operator.manager import Manager
from dyn_gitops_operator.settings import OperatorSettings

Obj = dict[str, Any]

#: the field manager GitOps writes with in tests (Argo CD's server-side apply name)
GITOPS_MANAGER = "argocd-controller"
#: the field manager of simulated Deployment status (what kube-controller-manager uses)
KCM_MANAGER = "kube-controller-manager"

#: the field manager of simulated Grove writes (Grove's controller name)
GROVE_MANAGER = "grove-operator"
#: the field manager of an autoscaler writing /scale
HPA_MANAGER = "horizontal-pod-autoscaler"

KINDS: dict[str, Resource] = {
    "Deployment": DEPLOYMENTS,
    "DynamoGraphDeployment": DGDS,
    "DynamoGraphDeploymentScalingAdapter": DGDSAS,
    "LeaderWorkerSet": LWS,
    "PodCliqueSet": PODCLIQUESETS,
}


def gitops_apply(
    kube: Kube,
    objects: list[Obj],
    kinds: tuple[str, ...] = (
        "Deployment",
        "DynamoGraphDeployment",
        "DynamoGraphDeploymentScalingAdapter",
    ),
) -> None:
    """Server-side apply the rendered objects as the GitOps tool would (no pruning)."""
    gitops = Kube(kube.api, kube.timeout, field_manager=GITOPS_MANAGER)
    for obj in objects:
        if obj["kind"] in kinds:
            gitops.apply(KINDS[obj["kind"]], as_served(obj), force=True)


def as_served(obj: Obj) -> Obj:
    """``obj`` in the version the controller's resources name: a v1alpha1 DGD (an old
    rendering, a hand-written test graph) converted to v1beta1 as the operator stores it."""
    if obj.get("kind") == DGDS.kind and DGDS.version == "v1beta1":
        return as_v1beta1(obj)
    return obj


def deployment_status(
    dep: Obj,
    *,
    available: int | None = None,
    replicas: int | None = None,
    updated: int | None = None,
    failed: str | None = None,
) -> Obj:
    """What kube-controller-manager would report; defaults: fully rolled out."""
    want = (dep.get("spec") or {}).get("replicas", 1)
    replicas = want if replicas is None else replicas
    available = replicas if available is None else available
    updated = replicas if updated is None else updated
    conds: list[Obj] = [
        {
            "type": "Available",
            "status": "True" if available >= want else "False",
            "reason": "MinimumReplicasAvailable",
        }
    ]
    if failed:
        conds.append(
            {
                "type": "Progressing",
                "status": "False",
                "reason": "ProgressDeadlineExceeded",
                "message": failed,
            }
        )
    else:
        conds.append({"type": "Progressing", "status": "True", "reason": "NewReplicaSetAvailable"})
    return {
        "observedGeneration": dep["metadata"]["generation"],
        "replicas": replicas,
        "updatedReplicas": updated,
        "readyReplicas": available,
        "availableReplicas": available,
        "conditions": conds,
    }


class DeploymentSimulator:
    """Writes Deployment status like kube-controller-manager would.

    ``policy(deployment) -> status | None`` decides per Deployment (None: leave it);
    the default rolls every Deployment out fully and at once. Started as a thread it
    polls; ``step()`` does one pass.
    """

    def __init__(
        self, kube: Kube, namespace: str | None, policy: Callable[[Obj], Obj | None] | None = None
    ) -> None:
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
            "PUT",
            DEPLOYMENTS.path(meta["namespace"], meta["name"], "status"),
            [("fieldManager", KCM_MANAGER)],
            {**dep, "status": status},
        )

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
        return {
            **s,
            "conditions": sorted(
                (c["type"], c["status"], c.get("reason")) for c in s.get("conditions") or []
            ),
        }

    return strip(current) == strip(wanted)


# ---------------------------------------------------------------------------------- Grove
def grove_children(pcs: Obj) -> list[tuple[Resource, Obj]]:
    """What Grove creates for PodCliqueSet replica 0, as far as the controller reads it: a
    PodClique ``<pcs>-0-<clique>`` per clique outside a scaling group, a
    PodCliqueScalingGroup ``<pcs>-0-<group>`` per scaling group (labels as Grove's
    ``GetDefaultLabelsForPodCliqueSetManagedResources``; replicas seeded from the
    template). The PCSGs' own PodCliques are left out."""
    meta, template = pcs["metadata"], pcs["spec"]["template"]
    name, ns = meta["name"], meta["namespace"]
    groups = template.get("podCliqueScalingGroups") or []
    grouped = {c for g in groups for c in g["cliqueNames"]}
    out: list[tuple[Resource, Obj]] = []

    def obj(
        res: Resource, child: str, component: str, labels: dict[str, str], spec: Obj
    ) -> tuple[Resource, Obj]:
        return res, {
            "apiVersion": res.api_version,
            "kind": res.kind,
            "metadata": {
                "name": f"{name}-0-{child}",
                "namespace": ns,
                "labels": {
                    **labels,
                    "app.kubernetes.io/managed-by": "grove-operator",
                    "app.kubernetes.io/part-of": name,
                    "app.kubernetes.io/component": component,
                    "grove.io/podcliqueset-replica-index": "0",
                },
            },
            "spec": spec,
        }

    for clique in template["cliques"]:
        if clique["name"] not in grouped:
            out.append(
                obj(
                    PODCLIQUES,
                    clique["name"],
                    "pcs-podclique",
                    clique.get("labels") or {},
                    dict(clique["spec"]),
                )
            )
    for group in groups:
        out.append(
            obj(
                PCSGS,
                group["name"],
                "pcs-podcliquescalinggroup",
                {},
                {
                    "replicas": group["replicas"],
                    "minAvailable": group.get("minAvailable", 1),
                    "cliqueNames": group["cliqueNames"],
                },
            )
        )
    return out


def grove_create(kube: Kube, pcs: Obj) -> dict[str, Resource]:
    """Create what Grove would for ``pcs`` (see ``grove_children``); name -> resource."""
    grove = Kube(kube.api, kube.timeout, field_manager=GROVE_MANAGER)
    out = {}
    for res, obj in grove_children(pcs):
        grove.create(res, obj)
        out[obj["metadata"]["name"]] = res
    return out


def grove_status(
    kube: Kube,
    res: Resource,
    namespace: str,
    name: str,
    *,
    observed: int | Literal["current"] | None = "current",
    **counts: int,
) -> Obj:
    """Write the status Grove would report. Defaults: fully ready and scheduled at the
    desired replicas (``readyReplicas`` for a PodClique, ``availableReplicas`` for a PCSG),
    the current generation observed; ``counts`` override (e.g. ``readyReplicas=1``);
    ``observed=None`` leaves ``observedGeneration`` out."""
    grove = Kube(kube.api, kube.timeout, field_manager=GROVE_MANAGER)
    for _ in range(20):
        obj = grove.get(res, namespace, name)
        want = int(obj["spec"].get("replicas") or 0)
        status: Obj = {"replicas": want, "updatedReplicas": want, "scheduledReplicas": want}
        status["availableReplicas" if res is PCSGS else "readyReplicas"] = want
        status.update(counts)
        if observed == "current":
            status["observedGeneration"] = obj["metadata"]["generation"]
        elif observed is not None:
            status["observedGeneration"] = observed
        try:
            return grove.request(
                "PUT",
                res.path(namespace, name, "status"),
                [("fieldManager", GROVE_MANAGER)],
                {**obj, "status": status},
            )
        except ConflictError:
            continue
    raise RuntimeError(f"could not write status of {res.kind} {name}")


def hpa_scale(kube: Kube, namespace: str, adapter: str, replicas: int) -> None:
    """What an HPA does to a scaling adapter: a merge patch of its /scale subresource,
    under its own field manager."""
    hpa = Kube(kube.api, field_manager=HPA_MANAGER)
    hpa.request(
        "PATCH",
        DGDSAS.path(namespace, adapter, "scale"),
        [("fieldManager", HPA_MANAGER)],
        {"spec": {"replicas": replicas}},
        "application/merge-patch+json",
    )


def settings_for_tests(namespace: str, **overrides: Any) -> OperatorSettings:
    """Namespace mode with short lease timings (tests run many controllers)."""
    from dyn_gitops_operator.settings import LeaderSettings, ScopeSettings

    base: dict[str, Any] = {
        "mode": "namespace",
        "namespace": namespace,
        "http_address": "",
        "workers": 2,
        "leader": LeaderSettings(lease_duration=4, renew_deadline=3, retry_period=0.5),
        "scope": ScopeSettings(lease_duration=6, renew_interval=2),
    }
    base.update(overrides)
    return OperatorSettings(**base)


@contextlib.contextmanager
def running(
    settings: OperatorSettings, kube: KubeApi, timeout: float = 30, **kw: Any
) -> Iterator[Manager]:
    """An in-process controller that is acting when the block starts."""
    manager = Manager(settings, kube=kube, **kw)
    manager.start()
    try:
        wait_for(manager.acting, timeout, "controller never started acting")
        yield manager
    finally:
        manager.stop()
        manager.shutdown()


#: what :func:`wait_for` retries: a transient API answer, or a lookup of what is not there
#: yet (a missing key, an empty list); anything else is a bug in the condition or in the code
#: it calls and is raised at once
EXPECTED_MISSES: tuple[type[Exception], ...] = (ApiError, KeyError, IndexError)


def wait_for(
    cond: Callable[[], Any],
    timeout: float = 20,
    what: str | Callable[[], str] = "condition",
    interval: float = 0.05,
) -> Any:
    """Poll until ``cond()`` is truthy; return its value or fail with ``what`` (a callable
    is called only then, so a diagnosis shows the state at the timeout). Only
    :data:`EXPECTED_MISSES` are retried; the timeout reports the last one, with its type
    and where it was raised."""
    end = time.monotonic() + timeout
    last_exc: Exception | None = None
    while time.monotonic() < end:
        try:
            value = cond()
            if value:
                return value
        except EXPECTED_MISSES as exc:
            last_exc = exc
        time.sleep(interval)
    raise AssertionError(
        f"timed out after {timeout} s waiting for {what() if callable(what) else what}"
        + (f" (last error: {describe(last_exc)})" if last_exc else "")
    )


def describe(exc: BaseException) -> str:
    """``Type: message, raised at file:line in function`` (and the caller's frame in the
    condition when that is elsewhere)."""
    frames = traceback.extract_tb(exc.__traceback__)[1:]  # [0] is the caller's try
    where = ""
    if frames:
        raised, origin = frames[-1], frames[0]
        where = f", raised at {Path(raised.filename).name}:{raised.lineno} in {raised.name}"
        if origin is not raised:
            where += f" (from {Path(origin.filename).name}:{origin.lineno} in {origin.name})"
    return f"{type(exc).__name__}: {exc}{where}"


def helm_template(
    helm: Path | str,
    chart: Path | str,
    *sets: str,
    namespace: str = "ops",
    release: str = "dg",
    extra: list[str] | None = None,
) -> list[Obj]:
    """``helm template`` of ``chart`` (the repository's ``charts/dyn-gitops``) with
    ``--set`` pairs; the rendered objects."""
    cmd = [str(helm), "template", release, str(chart), "--namespace", namespace, *(extra or [])]
    for s in sets:
        cmd += ["--set", s]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return [d for d in yaml.safe_load_all(out) if d]
