"""A graph reconcile stopped by a terminal API answer (422 / 400 Invalid, 403 Forbidden):
reported on the DGD and not retried until the DGD (or one of its objects) changes.

controller-runtime's ``reconcile.TerminalError`` (pkg/internal/controller/controller.go:
a terminal error is counted and logged, and the request is not re-added with backoff; the
next event adds it again), kopf's ``PermanentError``. Ours also tells the DGD's readers:

* the condition ``Stalled`` (kstatus' meaning: the reconcile cannot progress until
  something changes; Flux and ``kstatus`` read it as Failed), status True, reason
  ``Invalid`` or ``Forbidden``, the message naming the request (verb, kind, object) and
  the server's answer, values quoted in it redacted; removed by the status reconciler at
  the next pass that succeeds;
* a ``Warning`` Event on the DGD with the same reason and message (``kubectl describe``).

A retry of the same request would get the same answer: the work queue forgets the key
(``keywork``); the DGD's next spec / metadata change, an owned workload's change, or the
periodic resync brings it back.
"""

from __future__ import annotations

import logging
import uuid

from dyn_gitops_operator import FIELD_MANAGER
from dyn_gitops_operator import objects as o
from dyn_gitops_operator.errors import ApiError, redact
from dyn_gitops_operator.graph import Graph
from dyn_gitops_operator.reconcilers.base import Context, Obj, timestamp
from dyn_gitops_operator.reconcilers.status import STALLED, without_stalled, write_status
from dyn_gitops_operator.resources import DGDS, EVENTS

log = logging.getLogger(__name__)

#: condition / event reason per error type
REASONS = {"validation": "Invalid", "forbidden": "Forbidden"}
#: the longest message written (an Event's note is limited to 1 kB)
MESSAGE_MAX = 1024


def message(exc: ApiError) -> str:
    """``<verb> <Kind> <ns>/<name>: <status> <reason>: <server's message>``, bounded."""
    text = str(exc)  # one line, values redacted (errors.ApiError)
    if exc.call:
        text = f"{exc.call}: {text}"
    return text if len(text) <= MESSAGE_MAX else text[: MESSAGE_MAX - 3] + "..."


def condition(graph: Graph, exc: ApiError, ctx: Context) -> Obj:
    old: Obj = next(
        (c for c in graph.status.get("conditions") or [] if c.get("type") == STALLED), {}
    )
    since = old.get("lastTransitionTime") if old.get("status") == "True" else None
    return {
        "type": STALLED,
        "status": "True",
        "reason": REASONS.get(exc.error_type, "Invalid"),
        "message": message(exc),
        "observedGeneration": o.meta(graph.dgd or {}).get("generation"),
        "lastTransitionTime": since or timestamp(ctx.now()),
    }


def report(graph: Graph, exc: ApiError, ctx: Context) -> None:
    """The condition on the DGD's status, then the Event. A conflict or transient failure
    of the status write propagates (the key is retried, the report with it); a terminal
    one (the status itself refused) is logged, the Event still sent."""
    if graph.dgd is None:
        return  # workloads without their DGD: nothing to report on (logged by keywork)
    cond = condition(graph, exc, ctx)
    prev = graph.status.get("conditions") or []
    if [c for c in prev if c.get("type") == STALLED] != [cond]:
        try:
            _write_condition(graph, cond, ctx)
        except ApiError as err:
            if not err.terminal:
                raise
            log.warning(
                "cannot report a terminal error on the status",
                extra={"object": "/".join(graph.key), "error": str(err)},
            )
    _event(graph, cond, ctx)


def _write_condition(graph: Graph, cond: Obj, ctx: Context) -> None:
    # the whole status as it is, the Stalled condition replaced
    kept = without_stalled(graph.status.get("conditions") or [])
    write_status(graph, {**graph.status, "conditions": [*kept, cond]}, ctx)


def _event(graph: Graph, cond: Obj, ctx: Context) -> None:
    """A core/v1 Warning Event on the DGD (best effort: a refused Event is logged)."""
    meta = o.meta(graph.dgd or {})
    now = timestamp(ctx.now())
    event: Obj = {
        "apiVersion": EVENTS.api_version,
        "kind": EVENTS.kind,
        "metadata": {
            "name": f"{graph.name[:200]}.{uuid.uuid4().hex[:16]}",
            "namespace": graph.namespace,
        },
        "involvedObject": {
            "apiVersion": DGDS.api_version,
            "kind": DGDS.kind,
            "name": graph.name,
            "namespace": graph.namespace,
            "uid": meta.get("uid"),
            "resourceVersion": meta.get("resourceVersion"),
        },
        "type": "Warning",
        "reason": cond["reason"],
        "message": cond["message"],
        "source": {"component": FIELD_MANAGER},
        "reportingComponent": FIELD_MANAGER,
        "firstTimestamp": now,
        "lastTimestamp": now,
        "count": 1,
    }
    try:
        ctx.kube.create(EVENTS, event)
        ctx.metrics.writes.labels(EVENTS.kind, "create").inc()
    except ApiError as err:
        log.warning(
            "cannot record an event",
            extra={"object": "/".join(graph.key), "error": str(err)},
        )


__all__ = ["MESSAGE_MAX", "REASONS", "message", "redact", "report"]
