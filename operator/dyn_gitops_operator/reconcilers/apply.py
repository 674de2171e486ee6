"""The writer: sends the plan's writes, concurrently, then deletes old generations.

Reconcilers decide; this step writes. It is the only writer of Deployments, so each apply
carries every field the controller owns on that Deployment (see ``plan``) and the
resourceVersion the decision was based on: a decision made from a stale cache fails with
409 and is retried from fresh state instead of overwriting a newer object. The writes of
one pass touch different objects, so they go out in parallel (a reconcile then costs one
API round trip, not one per object).
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from dyn_gitops import keys
from dyn_gitops_operator import objects as o
from dyn_gitops_operator.errors import ControllerError, NotFoundError
from dyn_gitops_operator.graph import Graph
from dyn_gitops_operator.plan import DeploymentIntent, Plan
from dyn_gitops_operator.reconcilers.base import Context, Obj
from dyn_gitops_operator.resources import DEPLOYMENTS, LWS, Resource

_POOL = ThreadPoolExecutor(max_workers=8, thread_name_prefix="write")


def resource_of(workload: Obj) -> Resource:
    """A worker generation is a Deployment or (multinode) a LeaderWorkerSet."""
    return LWS if o.is_lws(workload) else DEPLOYMENTS


def apply_body(intent: DeploymentIntent) -> Obj:
    live = intent.live
    resource = resource_of(live)
    spec: Obj = {}
    if intent.replicas is not None:
        spec["replicas"] = intent.replicas
    if intent.restart_at is not None:
        stamp: Obj = {"metadata": {"annotations": {keys.ANN_RESTART_AT: intent.restart_at}}}
        if o.is_lws(live):
            # both pod templates (a set without a leader template uses the worker's for
            # its leaders); the LeaderWorkerSet rolls its groups on the template change
            tmpl: Obj = {"workerTemplate": stamp}
            if o.has_leader_template(live):
                tmpl["leaderTemplate"] = stamp
            spec["leaderWorkerTemplate"] = tmpl
        else:
            spec["template"] = stamp
    metadata: Obj = {
        "name": o.name(live),
        "namespace": o.meta(live).get("namespace"),
        "resourceVersion": o.meta(live).get("resourceVersion"),
    }
    if intent.owner is not None:
        metadata["ownerReferences"] = [intent.owner]
    return {
        "apiVersion": resource.api_version,
        "kind": resource.kind,
        "metadata": metadata,
        "spec": spec,
    }


def run_all(calls: list[Callable[[], object]]) -> None:
    """Run the calls concurrently; re-raise the first failure once all have finished."""
    if len(calls) == 1:
        calls[0]()
        return
    failures: list[BaseException] = []
    for fut in [_POOL.submit(c) for c in calls]:
        exc = fut.exception()
        if exc is not None:
            failures.append(exc)
    if failures:
        # a conflict or API error is retried by the queue; anything else is a bug
        raise next((f for f in failures if isinstance(f, ControllerError)), failures[0])


class ApplyReconciler:
    name = "apply"

    def reconcile(self, graph: Graph, plan: Plan, ctx: Context) -> None:
        deleting = {o.name(d) for d in plan.deletions}
        calls: list[Callable[[], object]] = [
            functools.partial(
                ctx.patch if w.merge else ctx.apply, w.resource, w.body, subresource=w.subresource
            )
            for w in plan.writes
        ]
        for dep_name, intent in sorted(plan.intents.items()):
            if dep_name in deleting or not intent.changed():
                continue
            if o.meta(intent.live).get("deletionTimestamp"):
                continue
            calls.append(functools.partial(ctx.apply, resource_of(intent.live), apply_body(intent)))
            # look again at once: the cache already holds our write, so its watch event
            # will not look like a change (and readiness may already be reported)
            plan.requeue(0.0)
            plan.wrote_deployments = True
        if calls:
            run_all(calls)
        for dep in plan.deletions:
            with contextlib.suppress(NotFoundError):  # already gone: the goal is reached
                ctx.delete(resource_of(dep), dep)
