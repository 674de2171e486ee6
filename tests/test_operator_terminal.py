"""Terminal API answers (422 / 400 Invalid, 403 Forbidden) while reconciling a graph:
reported on the DGD (condition ``Stalled``, a Warning Event), not retried with backoff,
retried on the DGD's next change, cleared by the next pass that succeeds. Transient
answers (5xx, 429, 409, 401) keep the backoff. The whole controller on the fake API
server, whose writes a ``RefusingKube`` refuses; the real API server's own 403 is in
``test_operator_terminal_k8s.py``."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from dyn_gitops_operator.errors import ApiError, InvalidError
from dyn_gitops_operator.keywork import work_on
from dyn_gitops_operator.manager import Manager
from dyn_gitops_operator.metrics import Metrics
from dyn_gitops_operator.resources import DEPLOYMENTS, DGDS
from dyn_gitops_operator.testing import (
    GITOPS_MANAGER,
    KINDS,
    as_served,
    running,
    settings_for_tests,
    wait_for,
)
from dyn_gitops_operator.workqueue import WorkQueue
from support.refusing import RefusingKube
from support.rendering import render

SAMPLES = Path(__file__).resolve().parent.parent / "samples"
NS = "ns"
GRAPH = "vllm-agg"
#: a value the refused object carries, which the report must not repeat
SECRET = "hf_s3cr3tT0ken"
REFUSALS = {
    "invalid": (
        422,
        "Invalid",
        f'Deployment.apps "vllm-agg-frontend" is invalid: spec.template.metadata.annotations:'
        f' Invalid value: "{SECRET}": must be no more than 63 characters',
    ),
    "forbidden": (
        403,
        "Forbidden",
        'deployments.apps "vllm-agg-frontend" is forbidden: User "system:serviceaccount:ops:dg"'
        ' cannot patch resource "deployments" in API group "apps" in the namespace "ns"',
    ),
}
#: seconds without any change during which a refused graph must not be tried again (on
#: main the backoff retried it after 0.02, 0.04, 0.08 ... s: 7 times and more)
QUIET = 3.0


def cluster() -> RefusingKube:
    kube = RefusingKube()
    gitops = kube.as_manager(GITOPS_MANAGER)
    for obj in render(SAMPLES / GRAPH / "input", NS):
        if obj["kind"] in ("Deployment", "DynamoGraphDeployment"):
            gitops.apply(KINDS[obj["kind"]], as_served(obj))
    return kube


def passes(m: Manager, reconciler: str, error_type: str) -> int:
    """Passes of the graph that ``reconciler`` failed with ``error_type``."""
    return int(
        m.metrics.value(
            "dyn_gitops_controller_reconcile_errors_total",
            {"reconciler": reconciler, "error_type": error_type},
        )
    )


def stalled(kube: RefusingKube) -> dict[str, Any] | None:
    conds = (kube.get(DGDS, NS, GRAPH).get("status") or {}).get("conditions") or []
    return next((c for c in conds if c.get("type") == "Stalled"), None)


def warnings(kube: RefusingKube) -> list[dict[str, Any]]:
    from dyn_gitops_operator.resources import EVENTS

    return [e for e in kube.list(EVENTS, NS)[0] if e.get("type") == "Warning"]


def change_spec(kube: RefusingKube, value: str) -> None:
    kube.as_manager(GITOPS_MANAGER).patch(
        DGDS, NS, GRAPH, {"spec": {"env": [{"name": "CHANGED", "value": value}]}}
    )


def quiet_passes(m: Manager, error_type: str, before: int) -> int:
    """Failed passes after ``QUIET`` seconds without any change (no timing assertion: a
    slower machine can only retry less)."""
    time.sleep(QUIET)
    return passes(m, "apply", error_type) - before


@pytest.mark.parametrize("kind", sorted(REFUSALS))
def test_a_refused_write_is_reported_and_retried_only_when_the_dgd_changes(kind: str) -> None:
    status, reason, text = REFUSALS[kind]
    error_type = "validation" if status == 422 else "forbidden"
    kube = cluster()
    kube.refuse("apply", DEPLOYMENTS, status, reason, text)
    with running(settings_for_tests(NS), kube) as m:
        wait_for(lambda: passes(m, "apply", error_type) >= 1, what="the first refused pass")
        again = quiet_passes(m, error_type, 1)
        assert again == 0, f"retried {again} times in {QUIET:g} s without any change"
        # the condition and the event name the request and the server's answer, no value
        cond = wait_for(lambda: stalled(kube), what="the Stalled condition")
        assert (cond["status"], cond["reason"], cond["observedGeneration"]) == ("True", reason, 1)
        assert cond["message"].startswith(f"apply Deployment {NS}/vllm-agg-")
        assert f"{status} {reason}: " in cond["message"] and "vllm-agg-frontend" in cond["message"]
        assert SECRET not in cond["message"]
        (event,) = wait_for(lambda: warnings(kube), what="the Warning event")
        assert (event["reason"], event["message"]) == (reason, cond["message"])
        assert event["involvedObject"]["name"] == GRAPH
        assert event["involvedObject"]["uid"] == kube.get(DGDS, NS, GRAPH)["metadata"]["uid"]
        assert m.metrics.value(
            "dyn_gitops_controller_terminal_reconcile_errors_total",
            {"reconciler": "apply", "error_type": error_type},
        ) == passes(m, "apply", error_type)
        # the DGD changes: tried once more, reported for the new generation, not retried
        change_spec(kube, "1")
        wait_for(lambda: passes(m, "apply", error_type) >= 2, what="a pass after the change")
        wait_for(lambda: (stalled(kube) or {}).get("observedGeneration") == 2, what="gen 2")
        assert quiet_passes(m, error_type, 2) == 0
        assert len(warnings(kube)) == 2
        # allowed and changed again: the pass succeeds and the condition goes
        kube.allow("apply", DEPLOYMENTS)
        change_spec(kube, "2")
        wait_for(lambda: stalled(kube) is None, what="the Stalled condition cleared")
        ready = next(
            c for c in kube.get(DGDS, NS, GRAPH)["status"]["conditions"] if c["type"] == "Ready"
        )
        assert ready["observedGeneration"] == 3
        assert passes(m, "apply", error_type) == 2


@pytest.mark.parametrize(
    "refusal",
    [
        (500, "InternalError", "etcdserver: request timed out"),
        (503, "ServiceUnavailable", "the server is currently unable to handle the request"),
        (429, "TooManyRequests", "the server has received too many requests"),
        (409, "Conflict", 'Operation cannot be fulfilled on deployments.apps "x"'),
        (401, "Unauthorized", "Unauthorized"),
    ],
)
def test_transient_answers_keep_the_backoff(refusal: tuple[int, str, str]) -> None:
    kube = cluster()
    kube.refuse("apply", DEPLOYMENTS, *refusal)
    with running(settings_for_tests(NS), kube) as m:
        wait_for(
            lambda: sum(kube.attempts.values()) >= 3 * len(kube.list(DEPLOYMENTS, NS)[0]),
            what="retries with backoff",
        )
        assert stalled(kube) is None and not warnings(kube)
        assert (
            m.metrics.value(
                "dyn_gitops_controller_terminal_reconcile_errors_total",
                {"reconciler": "apply", "error_type": "forbidden"},
            )
            == 0
        )


def test_a_refused_status_is_logged_the_event_still_sent_and_not_retried() -> None:
    """The status write itself refused (the report cannot write its condition either)."""
    kube = cluster()
    kube.refuse("apply", DGDS, 422, "Invalid", 'status.state: Unsupported value: "x"', "status")
    with running(settings_for_tests(NS), kube) as m:
        (event,) = wait_for(lambda: warnings(kube), what="the Warning event")
        assert event["message"].startswith(f"apply/status DynamoGraphDeployment {NS}/{GRAPH}: ")
        before = passes(m, "status", "validation")
        assert before >= 1
        time.sleep(QUIET)
        assert passes(m, "status", "validation") == before
        assert len(warnings(kube)) == 1


def test_work_on_forgets_a_terminal_key_and_schedules_nothing() -> None:
    from dyn_gitops_operator.errors import TerminalError

    queue: WorkQueue[tuple[str, str]] = WorkQueue(backoff_base=0.001)
    key = (NS, GRAPH)
    queue.add_rate_limited(key)  # a retry count from earlier transient failures
    assert queue.get(timeout=5) == key

    def run(_: tuple[str, str]) -> float | None:
        raise TerminalError(InvalidError(422, "Invalid", "no"))

    outcome = work_on(
        key,
        queue,
        run,
        what="graph reconcile",
        acting=lambda: True,
        exclusions=None,
        metrics=Metrics(),
    )
    queue.done(key)
    assert outcome is not None and (outcome.result, outcome.error_type) == (
        "terminal",
        "validation",
    )
    assert queue.retries(key) == 0
    assert queue.get(timeout=0.5) is None  # nothing scheduled: a delay of 1 ms would be due


@pytest.mark.parametrize(
    ("status", "terminal"),
    [
        (400, True),
        (422, True),
        (403, True),
        (401, False),
        (404, False),
        (409, False),
        (410, False),
        (429, False),
        (500, False),
        (503, False),
        (0, False),
    ],
)
def test_which_answers_are_terminal(status: int, terminal: bool) -> None:
    from dyn_gitops_operator.errors import api_error

    assert api_error(status, "R", "m").terminal is terminal


def test_the_message_redacts_every_quoted_value_and_is_bounded() -> None:
    from dyn_gitops_operator.terminal import message, redact

    text = (
        'DynamoGraphDeployment.nvidia.com "g" is invalid: [spec.a: Invalid value: "tok\\"en": '
        'bad, spec.b: Unsupported value: "pw": supported values: "x", spec.c: Invalid value: '
        '12345: must be less, spec.d: Duplicate value: "dup", spec.e: Not found: "nf"]'
    )
    out = redact(text)
    for value in ('tok\\"en', '"pw"', "12345", '"dup"', '"nf"'):
        assert value not in out
    assert 'supported values: "x"' in out and out.count("<redacted>") == 5
    exc = ApiError(422, "Invalid", "x" * 5000)
    exc.call = "apply Deployment ns/d"
    assert len(message(exc)) == 1024 and message(exc).startswith("apply Deployment ns/d: 422")
